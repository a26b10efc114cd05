variable "environment" {
  type        = string
  default     = "staging"
  description = "Which cluster this is: Flux bootstraps from `kubernetes/clusters/<environment>`."

  validation {
    condition     = contains(["staging", "prod"], var.environment)
    error_message = "environment is `staging` or `prod`."
  }
}

variable "flux_source_url" {
  type        = string
  default     = "ssh://git@github.com/example/infra.git"
  description = "Git source Flux bootstraps from. A rebuild during a GitHub outage points it at the read-only Git backup (e.g. `ssh://git@backup.example.internal/srv/git/infra.git`) and applies."
}

variable "flux_known_hosts" {
  type        = string
  default     = "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
  description = "`known_hosts` lines of the Git hosts the source may point at (GitHub's published key by default). For a rebuild from the backup, add the backup host's line: source-controller refuses a host whose key is not listed."
}

variable "flux_source_ref" {
  type    = string
  default = "refs/heads/main"
}

variable "suspend_applications" {
  type        = bool
  default     = false
  description = "Start a rebuild with the applications suspended (their Kustomizations read `FLUX_SUSPEND_APPLICATIONS` from `flux-runtime-info`)."
}

# The keys come from the secret store at apply time and never reach state or plan files: ephemeral
# variables feed the write-only `managed_resources` (e.g. `TF_VAR_github_deploy_key`, or an
# ephemeral resource of the secret store's provider).
variable "github_deploy_key" {
  type        = string
  ephemeral   = true
  sensitive   = true
  description = "Private SSH deploy key of the GitHub repository (read-only)."
}

variable "gitea_rollback_key" {
  type        = string
  ephemeral   = true
  sensitive   = true
  default     = null
  description = "The old Gitea deploy key, kept as Secret `flux-system` so Flux can roll back to Gitea. Leave it unset (null) to retire it: the next apply deletes the Secret."
}

variable "gitea_known_hosts" {
  type        = string
  default     = "gitea.example.internal ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeHostKeyForTheExampleOnlyReplaceMe0000"
  description = "known_hosts line of the Gitea server."
}
