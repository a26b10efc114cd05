# Cilium installed by hashicorp/helm's helm_release on a Talos cluster without kube-proxy
# (`cluster.proxy.disabled: true`, or Talos 1.14+ `KubeProxyConfig` `enabled: false`): the Talos
# values, KubePrism as the API endpoint, your own settings merged on top.
resource "helm_release" "cilium" {
  name       = "cilium"
  namespace  = "kube-system"
  repository = "https://helm.cilium.io"
  chart      = "cilium"
  version    = "1.20.2"

  values = [yamlencode(merge(
    provider::talosboot::cilium_talos_values("localhost:7445"),
    { hubble = { relay = { enabled = true } } },
  ))]
}
