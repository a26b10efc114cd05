data "talosboot_helm_release" "cilium" {
  name      = "cilium"
  namespace = "kube-system"
}

# Fail the apply early when the CNI release is stuck (e.g. pending-install after a killed run).
resource "null_resource" "after_cni" {
  lifecycle {
    precondition {
      condition     = data.talosboot_helm_release.cilium.status == "deployed"
      error_message = "Cilium is ${coalesce(data.talosboot_helm_release.cilium.status, "absent")}, not deployed."
    }
  }
}
