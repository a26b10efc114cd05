import {
  to = talosboot_helm_release.argocd
  identity = {
    namespace = "argocd"
    name      = "argocd"
  }
}
