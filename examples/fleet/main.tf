# A fleet in one root: one talosboot provider, Cilium then a Flux bootstrap on every cluster of a
# map, each instance connected through its own write-only `cluster` attribute from the Talos
# provider's ephemeral kubeconfig. Works on OpenTofu 1.11+ and Terraform 1.11+ (no provider `for_each` needed).
# See docs/guides/fleet.md for what refresh, plan and destroy do with such resources.
terraform {
  # Ephemeral resources and write-only attributes: OpenTofu 1.11+ or Terraform 1.11+.
  required_version = ">= 1.11.0"

  required_providers {
    talos = {
      source  = "siderolabs/talos"
      version = "~> 0.11"
    }
    talosboot = {
      source  = "talosboot/talosboot"
      version = "~> 0.2"
    }
  }
}

variable "clusters" {
  type = map(object({
    endpoint = string # the Kubernetes API, e.g. https://10.0.0.10:6443
  }))
  default = {
    prod-eu = { endpoint = "https://10.0.0.10:6443" }
    staging = { endpoint = "https://10.1.0.10:6443" }
    edge-01 = { endpoint = "https://10.2.0.10:6443" }
  }
}

# Each cluster's Git deploy key (OpenSSH private key), e.g. from a vault's ephemeral resource:
# ephemeral, so it reaches only write-only attributes and is in no state or plan file.
variable "deploy_keys" {
  type      = map(string)
  sensitive = true
  ephemeral = true
}

# The Git host's `known_hosts` line (`ssh-keyscan github.com`).
variable "known_hosts" {
  type = string
}

# Each cluster's machine secrets (in the real root beside its machine configurations and bootstrap).
resource "talos_machine_secrets" "this" {
  for_each = var.clusters
}

# The admin kubeconfig of each cluster, made on every run and never stored in state or plan files.
ephemeral "talos_cluster_kubeconfig" "this" {
  for_each        = var.clusters
  cluster_name    = each.key
  endpoint        = each.value.endpoint
  machine_secrets = talos_machine_secrets.this[each.key].machine_secrets
}

# The provider block connects nowhere itself; every resource names its own cluster.
provider "talosboot" {
  api_retry_timeout = "2m" # clusters created in this run may still be starting
}

resource "talosboot_cilium" "this" {
  for_each = var.clusters
  version  = "1.20.2"

  # Write-only: the kubeconfig is in no state or plan file. State keeps `cluster_identity` (the
  # API server URL and a salted CA hash): another cluster here plans a replacement.
  cluster = {
    kubeconfig_raw = ephemeral.talos_cluster_kubeconfig.this[each.key].kubeconfig_raw
  }

  values = [yamlencode({
    cluster = { name = each.key }
  })]

  # A destroy receives no configuration (so no write-only `cluster`): keep the CNI running when
  # the resource goes, instead of needing the provider block to point at each cluster.
  deletion_policy = "keep"
}

# Flux on every cluster after its CNI, each cluster from its own path of one repository.
resource "talosboot_flux_bootstrap" "this" {
  for_each   = var.clusters
  depends_on = [talosboot_cilium.this]
  revision   = 1

  gitops_resources = {
    instance_yaml = yamlencode({
      apiVersion = "fluxcd.controlplane.io/v1"
      kind       = "FluxInstance"
      metadata   = { name = "flux", namespace = "flux-system" }
      spec = {
        distribution = { version = "2.9.x", registry = "ghcr.io/fluxcd" }
        components   = ["source-controller", "kustomize-controller", "helm-controller"]
        sync = {
          kind       = "GitRepository"
          url        = "ssh://git@github.com/example/infra.git" # your repository
          ref        = "refs/heads/main"
          path       = "kubernetes/clusters/${each.key}"
          pullSecret = "flux-system"
        }
      }
    })
    operator_chart = { version = "0.59.0" } # Flux 2.9 needs chart 0.53.0 or later
  }

  # Write-only: the deploy key is in no state or plan file.
  managed_resources = {
    secrets_yaml = yamlencode({
      apiVersion = "v1"
      kind       = "Secret"
      metadata   = { name = "flux-system", namespace = "flux-system" }
      stringData = {
        identity    = var.deploy_keys[each.key]
        known_hosts = var.known_hosts
      }
    })
  }

  # Refresh cannot reach this cluster (it has no configuration): `plan` reads it and shows drift.
  # A destroy keeps Flux running (`deletion_policy = "keep"`, the default).
  cluster = {
    kubeconfig_raw = ephemeral.talos_cluster_kubeconfig.this[each.key].kubeconfig_raw
  }
}

output "api_servers" {
  value = { for k, c in talosboot_cilium.this : k => c.cluster_identity.api_server }
}

output "flux_drift" {
  description = "What drifted on each cluster since the last apply (empty after an apply)."
  value       = { for k, f in talosboot_flux_bootstrap.this : k => f.drift }
}
