# Releases of the Cilium chart are listed here (not by talosboot_helm_release's list), and the
# generated blocks are talosboot_cilium blocks. Terraform 1.14+.
list "talosboot_cilium" "cni" {
  provider = talosboot
  config {
    namespace = "kube-system"
  }
}
