# The same for a cluster that runs kube-proxy (Talos' default): no kube-proxy replacement, and no
# `k8sServiceHost`/`k8sServicePort` (kube-proxy routes the `kubernetes` Service the agents use).
resource "helm_release" "cilium" {
  name       = "cilium"
  namespace  = "kube-system"
  repository = "https://helm.cilium.io"
  chart      = "cilium"
  version    = "1.20.2"

  values = [yamlencode(provider::talosboot::cilium_talos_values_with_kube_proxy())]
}
