import {
  to = talosboot_cilium.this
  identity = {
    namespace = "kube-system"
    name      = "cilium"
  }
}
