# Was: module "flux_operator_bootstrap" { source = "controlplaneio-fluxcd/flux-operator-bootstrap/kubernetes" ... }
# Same arguments; on Talos the pre-CNI `job` settings (host network, KubePrism) are the defaults.

# The deploy key comes from the secret store at apply time, through an ephemeral variable
# (`TF_VAR_flux_deploy_key=$(bw get notes flux-deploy-key)`), or from an ephemeral resource of the
# store's provider: an ephemeral value is in no state or plan file. A `data` source would put the
# key into state, whatever the attribute it feeds.
variable "flux_deploy_key" {
  type        = string
  description = "The SSH private key Flux pulls the Git repository with (its public half is a deploy key of the repository)."
  sensitive   = true
  ephemeral   = true
}

resource "talosboot_flux_bootstrap" "flux_operator_bootstrap" {
  revision = 1

  gitops_resources = {
    instance_yaml = file("${path.module}/flux/clusters/staging/flux-system/flux-instance.yaml")
    operator_chart = {
      version     = "0.59.0"
      values_yaml = file("${path.module}/flux/clusters/staging/flux-system/flux-operator-values.yaml")
    }
  }

  # Write-only (OpenTofu/Terraform 1.11+): never stored in state or plan files, so it may take
  # the ephemeral key.
  managed_resources = {
    secrets_yaml = yamlencode({
      apiVersion = "v1"
      kind       = "Secret"
      metadata   = { name = "flux-system" }
      stringData = {
        identity    = var.flux_deploy_key
        known_hosts = "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
      }
    })
    runtime_info = {
      data = { CLUSTER_NAME = "staging" }
    }
  }

  # Per-cluster Git source, set where Git reconciliation cannot revert it. For a rebuild during a
  # GitHub outage, point `url` at the read-only backup and apply.
  sync = {
    url  = "ssh://git@github.com/example/infra.git"
    ref  = "refs/heads/main"
    path = "kubernetes/clusters/staging" # prod: "kubernetes/clusters/prod"
  }

  # A rebuild starts with the applications suspended: their Kustomizations say
  # `suspend: ${FLUX_SUSPEND_APPLICATIONS:=false}`, substituted by the root Kustomization (the
  # FluxInstance's `kustomize.patches` adds postBuild.substituteFrom flux-runtime-info to it).
  suspend_applications = false

  timeout         = "15m"
  deletion_policy = "keep" # destroy leaves Flux running

  depends_on = [talosboot_cilium.this] # the operator needs the pod network
}
