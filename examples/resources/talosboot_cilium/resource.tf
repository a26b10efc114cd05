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

  # Destroying the CNI cuts the network of every pod on the cluster, GitOps controllers included,
  # and a `destroy` of this root, or a replacement, would do it. With `keep`, destroy only forgets
  # the release: Cilium keeps running and can be handed over to GitOps or imported again. The
  # default, `uninstall`, suits throw-away clusters.
  deletion_policy = "keep"
}
