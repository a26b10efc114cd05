terraform {
  required_providers {
    talosboot = {
      source  = "talosboot/talosboot"
      version = "~> 0.2"
    }
    # Argo CD (argocd.tf) stays a hashicorp/helm release, as in the root this layer comes from.
    helm = {
      source  = "hashicorp/helm"
      version = "~> 3.1"
    }
  }
}
