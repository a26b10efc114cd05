# The Talos part of the root: machine secrets, the control-plane and worker configurations (no CNI,
# kube-proxy disabled: Cilium is both), bootstrap, the wait for the nodes, and the ephemeral
# kubeconfig that main.tf wires into the talosboot provider block.

variable "cluster_name" {
  type    = string
  default = "staging"
}

variable "controlplane_nodes" {
  type        = list(string)
  default     = ["10.0.0.10"]
  description = "Addresses of the control-plane nodes (Talos API on port 50000). The first one is bootstrapped."
}

variable "worker_nodes" {
  type    = list(string)
  default = ["10.0.0.20"]
}

variable "cluster_endpoint" {
  type        = string
  default     = "https://10.0.0.10:6443"
  description = "The Kubernetes API endpoint (a control-plane address or a load balancer)."
}

locals {
  # Every node: no CNI and no kube-proxy; Cilium (talosboot_cilium) is the CNI and the Service dataplane.
  # KubePrism (localhost:7445) is on by default since Talos 1.6.
  # These are the v1alpha1 fields (Talos 1.13 and earlier; Talos 1.14 still reads them, deprecated).
  # On Talos 1.14+ the same settings are documents of their own, as a multi-document patch:
  #   patch_common = <<-EOT
  #     apiVersion: v1alpha1
  #     kind: KubeFlannelCNIConfig
  #     $patch: delete
  #     ---
  #     apiVersion: v1alpha1
  #     kind: KubeProxyConfig
  #     enabled: false
  #   EOT
  # (KubePrism there is the generated `KubePrismConfig` document: keep it; removing it disables KubePrism.)
  patch_common = yamlencode({
    cluster = {
      network = { cni = { name = "none" } }
      proxy   = { disabled = true }
    }
  })
}

resource "talos_machine_secrets" "this" {}

data "talos_machine_configuration" "controlplane" {
  cluster_name     = var.cluster_name
  cluster_endpoint = var.cluster_endpoint
  machine_type     = "controlplane"
  machine_secrets  = talos_machine_secrets.this.machine_secrets
  config_patches   = [local.patch_common]
}

data "talos_machine_configuration" "worker" {
  cluster_name     = var.cluster_name
  cluster_endpoint = var.cluster_endpoint
  machine_type     = "worker"
  machine_secrets  = talos_machine_secrets.this.machine_secrets
  config_patches   = [local.patch_common]
}

resource "talos_machine_configuration_apply" "controlplane" {
  for_each                    = toset(var.controlplane_nodes)
  client_configuration        = talos_machine_secrets.this.client_configuration
  machine_configuration_input = data.talos_machine_configuration.controlplane.machine_configuration
  node                        = each.value
}

resource "talos_machine_configuration_apply" "worker" {
  for_each                    = toset(var.worker_nodes)
  client_configuration        = talos_machine_secrets.this.client_configuration
  machine_configuration_input = data.talos_machine_configuration.worker.machine_configuration
  node                        = each.value
  endpoint                    = var.controlplane_nodes[0] # workers are reached through a control plane
}

resource "talos_machine_bootstrap" "this" {
  client_configuration = talos_machine_secrets.this.client_configuration
  node                 = var.controlplane_nodes[0]
  depends_on           = [talos_machine_configuration_apply.controlplane]
}

# The wait before the API is used: Talos reports the nodes booted, etcd healthy and the kubelets
# running. The Kubernetes checks are skipped, since no node is Ready before Cilium runs; the API
# server may still be starting, which talosboot rides out by retrying transient API errors.
data "talos_cluster_health" "booted" {
  client_configuration   = talos_machine_secrets.this.client_configuration
  control_plane_nodes    = var.controlplane_nodes
  worker_nodes           = var.worker_nodes
  endpoints              = var.controlplane_nodes
  skip_kubernetes_checks = true
  depends_on             = [talos_machine_bootstrap.this, talos_machine_configuration_apply.worker]
}

# The admin kubeconfig, made from the machine secrets on every run and never stored in state or
# plan files (an ephemeral resource, siderolabs/talos 0.11+; Terraform 1.10+ / OpenTofu 1.11+). It
# is opened after the nodes are booted (depends_on), so the first plan has it unknown: talosboot
# connects lazily, so that plan works with the provider settings still unknown.
ephemeral "talos_cluster_kubeconfig" "this" {
  cluster_name    = var.cluster_name
  endpoint        = var.cluster_endpoint
  machine_secrets = talos_machine_secrets.this.machine_secrets
  depends_on      = [data.talos_cluster_health.booted]
}
