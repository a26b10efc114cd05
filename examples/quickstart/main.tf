# Quickstart: a fresh Talos cluster (API up, no CNI) to Cilium and Flux running, from one `tofu apply`.
# scripts/demo runs this against the embedded Talos cluster (or a real one: TALOSBOOT_KUBECONFIG).
terraform {
  # Ephemeral variables and write-only attributes (the deploy key below): OpenTofu 1.11+ or
  # Terraform 1.11+.
  required_version = ">= 1.11"

  required_providers {
    talosboot = {
      source  = "talosboot/talosboot"
      version = "~> 0.2"
    }
  }
}

variable "kubeconfig_path" {
  type        = string
  description = "Path to the cluster's kubeconfig (e.g. written by `talosctl -n <control-plane IP> kubeconfig kubeconfig`)."
}

# Your repository's deploy key: an SSH key pair whose public half you add to the repository
# (GitHub: Settings, Deploy keys; read access is enough), and whose private half you give at apply
# time, e.g. `export TF_VAR_deploy_key="$(cat ~/.ssh/flux-deploy-key)"` or from your secret store.
# Ephemeral: it is in no state or plan file. scripts/demo makes a fresh pair and serves the
# repository itself.
variable "deploy_key" {
  type        = string
  description = "The SSH private key Flux pulls the Git repository with (OpenSSH format)."
  sensitive   = true
  ephemeral   = true
}

variable "known_hosts" {
  type        = string
  description = "`known_hosts` line of the Git host (GitHub's published key by default)."
  default     = "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
}

provider "talosboot" {
  config_path = var.kubeconfig_path
}

# Installed by a one-shot bootstrap Job on the host network against KubePrism (localhost:7445),
# with the Talos values (no SYS_MODULE, cgroup auto-mount off, kube-proxy replacement) under ours.
resource "talosboot_cilium" "this" {
  version = "1.20.2"

  values = [yamlencode({
    hubble = { relay = { enabled = true } }
  })]
}

# Then the Flux Operator and the FluxInstance, after which Flux owns the cluster from Git. The deploy
# key is write-only: never in state or plan files; the state keeps a salted hash, and a deleted or
# edited Secret shows up as drift on the next plan.
resource "talosboot_flux_bootstrap" "flux" {
  revision = 1

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
          path       = "kubernetes/clusters/demo"
          pullSecret = "flux-system"
        }
      }
    })
    operator_chart = { version = "0.59.0" } # Flux 2.9 needs chart 0.53.0 or later
  }

  managed_resources = {
    secrets_yaml = yamlencode({
      apiVersion = "v1"
      kind       = "Secret"
      metadata   = { name = "flux-system", namespace = "flux-system" }
      stringData = {
        identity    = var.deploy_key
        known_hosts = var.known_hosts
      }
    })
  }

  depends_on = [talosboot_cilium.this] # the operator's pods need the pod network
}

# The release record, read natively: handy in `check` blocks and for other roots.
data "talosboot_helm_release" "cni" {
  name       = "cilium"
  namespace  = "kube-system"
  depends_on = [talosboot_cilium.this]
}

check "cilium_deployed" {
  assert {
    condition     = data.talosboot_helm_release.cni.status == "deployed"
    error_message = "The Cilium release is not deployed."
  }
}

output "flux" {
  description = "What the Flux bootstrap found drifted at the last refresh (empty: nothing)."
  value = {
    namespace = talosboot_flux_bootstrap.flux.namespace
    drift     = talosboot_flux_bootstrap.flux.drift
  }
}

output "cilium" {
  description = "Cilium as the cluster reports it."
  value = {
    status      = talosboot_cilium.this.status
    revision    = talosboot_cilium.this.revision
    app_version = talosboot_cilium.this.app_version
    agents      = talosboot_cilium.this.agents
    nodes_ready = talosboot_cilium.this.nodes_ready
  }
}
