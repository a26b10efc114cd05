# The import ID is the FluxInstance's namespace.
terraform import talosboot_flux_bootstrap.flux_operator_bootstrap flux-system
# With `cluster` (a fleet) and a provider block that connects nowhere, the import stores the
# namespace only; the next plan checks the FluxInstance through `cluster`, an error when it is
# not there.
