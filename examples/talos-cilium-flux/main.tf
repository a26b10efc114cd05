# The bootstrap of a Talos cluster (no CNI, kube-proxy disabled, see talos.tf): Cilium first, because
# it is the CNI and the Service dataplane, then the Flux Operator and the FluxInstance, after which
# Flux owns the cluster from Git. Both run their installers pre-CNI: host network and KubePrism.

# The kubeconfig of the cluster talos.tf creates: ephemeral (in no state or plan file), unknown at
# the first plan.
provider "talosboot" {
  kubeconfig_raw = ephemeral.talos_cluster_kubeconfig.this.kubeconfig_raw
}

locals {
  kubeprism = "localhost:7445" # Talos KubePrism: on every node, before any CNI, outside the Service CIDR

  # Secrets the bootstrap keeps in sync (server-side apply) until it is removed. The GitHub deploy
  # key is the sync source's pull secret; the Gitea key stays as `flux-system` while Gitea is a
  # rollback target (null: not rendered, so the next apply deletes the Secret).
  github_secret = yamlencode({
    apiVersion = "v1"
    kind       = "Secret"
    metadata   = { name = "flux-github", namespace = "flux-system" }
    stringData = {
      identity    = var.github_deploy_key
      known_hosts = var.flux_known_hosts
    }
  })
  gitea_secret = var.gitea_rollback_key == null ? [] : [yamlencode({
    apiVersion = "v1"
    kind       = "Secret"
    metadata   = { name = "flux-system", namespace = "flux-system" }
    stringData = {
      identity    = var.gitea_rollback_key
      known_hosts = var.gitea_known_hosts
    }
  })]
}

resource "talosboot_cilium" "this" {
  version      = "1.20.2"
  api_endpoint = local.kubeprism
  values       = [file("${path.module}/cilium/values.yaml")]
  timeout      = "15m"
}

resource "talosboot_flux_bootstrap" "flux" {
  revision = 1

  gitops_resources = {
    instance_yaml = file("${path.module}/flux/flux-instance.yaml")
    operator_chart = {
      version     = "0.59.0" # installs Flux 2.9 (0.53.0 or later)
      values_yaml = file("${path.module}/flux/flux-operator-values.yaml")
    }
  }

  # Write-only: never stored in state or plan files.
  managed_resources = {
    secrets_yaml = join("\n---\n", concat([local.github_secret], local.gitea_secret))
    runtime_info = {
      data = { CLUSTER_NAME = var.environment }
    }
  }

  # Set here, where Git reconciliation cannot revert it.
  sync = {
    url         = var.flux_source_url
    ref         = var.flux_source_ref
    path        = "kubernetes/clusters/${var.environment}"
    pull_secret = "flux-github"
  }
  suspend_applications = var.suspend_applications

  # Unset `job`: the Talos defaults (host network, KubePrism) apply.
  timeout = "15m"

  # The operator's pods need the pod network: Cilium must be ready first.
  depends_on = [talosboot_cilium.this]
}

output "cilium" {
  value = {
    status      = talosboot_cilium.this.status
    app_version = talosboot_cilium.this.app_version
    nodes_ready = talosboot_cilium.this.nodes_ready
  }
}

output "flux" {
  value = {
    namespace = talosboot_flux_bootstrap.flux.namespace
    drift     = talosboot_flux_bootstrap.flux.drift
  }
}
