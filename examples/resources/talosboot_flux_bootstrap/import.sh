# The import ID is the FluxInstance's namespace.
terraform import talosboot_flux_bootstrap.flux_operator_bootstrap flux-system
