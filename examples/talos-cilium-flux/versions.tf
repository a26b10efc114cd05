terraform {
  # Write-only `managed_resources` fed from ephemeral variables: OpenTofu 1.11+ or Terraform 1.11+.
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
