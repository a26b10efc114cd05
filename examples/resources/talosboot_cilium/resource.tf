# Cilium on a fresh Talos cluster (no CNI yet): the chart is installed by a bootstrap Job on the host
# network over KubePrism, with the Talos values, and applied once the cluster's API is up.
resource "talosboot_cilium" "this" {
  version = "1.20.2"

  # The Talos values for a cluster with kube-proxy disabled (the default; Talos 1.14+:
  # `KubeProxyConfig` `enabled: false`, earlier: `cluster.proxy.disabled: true`); `false` on a
  # cluster that runs kube-proxy (Talos' own default). Checked against the cluster at plan.
  kube_proxy_replacement = true

  values = [yamlencode({
    hubble = { relay = { enabled = true } }
  })]

  set = [{
    name  = "operator.replicas"
    value = "1"
  }]
}
