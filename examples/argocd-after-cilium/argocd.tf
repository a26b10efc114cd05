# Argo CD, the last piece of day 1, with hashicorp/helm (3.x). `talosboot_cilium` returns only once
# the agents and the operator are rolled out and every node is Ready, so `depends_on` is enough:
# no Argo CD pod is scheduled before the pod network exists.

provider "helm" {
  kubernetes = {
    config_path = var.kubeconfig_path
  }
}

resource "helm_release" "argocd" {
  name             = "argocd"
  repository       = "https://argoproj.github.io/argo-helm"
  chart            = "argo-cd"
  version          = "9.4.15"
  namespace        = "argocd"
  create_namespace = true

  values = [yamlencode({
    global = { domain = var.argocd_domain }
    configs = {
      params = { "server.insecure" = true } # TLS terminates at the ingress
    }
  })]

  depends_on = [talosboot_cilium.this]
}
