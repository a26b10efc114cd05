# Quickstart: a fresh Talos cluster (API up, no CNI) to Cilium running, from one `tofu apply`.
# scripts/demo runs this against the simulated Talos cluster (or a real one: TALOSBOOT_KUBECONFIG).
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

provider "talosboot" {
  config_path = var.kubeconfig_path
}

# Installed by a one-shot bootstrap Job on the host network against KubePrism (localhost:7445),
# with the Talos values (no SYS_MODULE, cgroup auto-mount off, kube-proxy replacement) under ours.
resource "talosboot_cilium" "this" {
  version = "1.18.4"

  values = [yamlencode({
    hubble = { relay = { enabled = true } }
  })]
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
