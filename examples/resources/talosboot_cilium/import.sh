# A Cilium release installed before (by helm_release, the Helm CLI or a bootstrap Job):
# <namespace>/<release name>
terraform import talosboot_cilium.this kube-system/cilium
