# Argo CD right after Cilium: the chart is installed by a bootstrap Job on the host
# network, and `wait` means its Deployments and StatefulSets are rolled out.
resource "talosboot_helm_release" "argocd" {
  name             = "argocd"
  repository       = "https://argoproj.github.io/argo-helm"
  chart            = "argo-cd"
  version          = "9.4.15"
  namespace        = "argocd"
  create_namespace = true

  values = [yamlencode({
    global  = { domain = "argocd.example.com" }
    configs = { params = { "server.insecure" = true } }
  })]

  depends_on = [talosboot_cilium.this]
}
