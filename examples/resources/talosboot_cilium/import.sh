# A Cilium release installed before (by helm_release, the Helm CLI or a bootstrap Job):
# <namespace>/<release name>
terraform import talosboot_cilium.this kube-system/cilium
# With `cluster` (a fleet) and a provider block that connects nowhere, the import stores the ID
# only; the next plan reads the release through `cluster`, an error when it is not there.
