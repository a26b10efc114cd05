terraform {
  required_providers {
    talosboot = {
      source  = "talosboot/talosboot" # registry.opentofu.org / registry.terraform.io
      version = "~> 0.2"
    }
  }
}

# Wire the Talos provider's kubeconfig straight in. The ephemeral one (siderolabs/talos 0.11+,
# OpenTofu 1.11+ / Terraform 1.10+) is in no state or plan file: it is opened again on every run.
# It may be unknown at the first plan: talosboot only connects when an operation needs the cluster.
provider "talosboot" {
  kubeconfig_raw = ephemeral.talos_cluster_kubeconfig.this.kubeconfig_raw
}

# Or the managed resource's, which keeps the kubeconfig in state:
# provider "talosboot" {
#   kubeconfig_raw = talos_cluster_kubeconfig.this.kubeconfig_raw
# }

# Or a kubeconfig file (KUBE_CONFIG_PATH works too):
# provider "talosboot" {
#   config_path    = "~/.kube/talos"
#   config_context = "admin@prod"
# }

# Or the endpoint and credentials one by one:
# provider "talosboot" {
#   host                   = ephemeral.talos_cluster_kubeconfig.this.kubernetes_client_configuration.host
#   cluster_ca_certificate = base64decode(ephemeral.talos_cluster_kubeconfig.this.kubernetes_client_configuration.ca_certificate)
#   client_certificate     = base64decode(ephemeral.talos_cluster_kubeconfig.this.kubernetes_client_configuration.client_certificate)
#   client_key             = base64decode(ephemeral.talos_cluster_kubeconfig.this.kubernetes_client_configuration.client_key)
# }
