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

# Another cluster than the provider's, through its kubeconfig file on disk (a read's `cluster`
# takes no credential: see the fleet guide).
data "talosboot_helm_release" "staging_cilium" {
  name      = "cilium"
  namespace = "kube-system"

  cluster {
    config_path    = "${path.root}/kubeconfigs/staging.yaml"
    config_context = "admin@staging"
  }
}
