# Quickstart: point talosboot at a Talos cluster and read the state of its CNI release.
# scripts/demo runs this against the simulated Talos cluster.
terraform {
  required_providers {
    talosboot = {
      source  = "talosboot/talosboot"
      version = "0.1.0"
    }
  }
}

variable "kubeconfig_path" {
  type        = string
  description = "Path to the cluster's kubeconfig (e.g. `tofu output -raw talos_kubeconfig > kubeconfig`)."
}

variable "release_name" {
  type    = string
  default = "cilium"
}

provider "talosboot" {
  config_path = var.kubeconfig_path
}

data "talosboot_helm_release" "cni" {
  name      = var.release_name
  namespace = "kube-system"
}

output "cni_release" {
  description = "What the cluster's Helm record says about the CNI release."
  value = {
    exists        = data.talosboot_helm_release.cni.exists
    status        = data.talosboot_helm_release.cni.status
    revision      = data.talosboot_helm_release.cni.revision
    chart_version = data.talosboot_helm_release.cni.chart_version
    values_sha256 = data.talosboot_helm_release.cni.values_sha256
  }
}
