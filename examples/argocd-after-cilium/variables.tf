variable "kubeconfig_path" {
  type        = string
  description = "Path to the cluster's kubeconfig (e.g. written from `talos_cluster_kubeconfig.this.kubeconfig_raw`)."
}

variable "argocd_domain" {
  type    = string
  default = "argocd.example.com"
}
