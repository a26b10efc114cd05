# The Kubernetes layer of a Talos root whose Cilium was first an inline manifest of the Talos machine
# config and moves under a Helm release owned by OpenTofu. `adopt_existing` takes the running objects over in
# place (no `helm template | kubectl annotate/label` beforehand, no object recreated); afterwards,
# remove Cilium from `cluster.inlineManifests` (Talos 1.14: the `KubeInlineManifestConfig` document) so
# Talos does not apply it again. On Talos 1.13+ the apply also takes Cilium out of Talos' manifest
# inventory, which `talosctl upgrade-k8s` prunes: check that
# `kubectl -n kube-system get configmap talos-bootstrap-manifests-inventory -o yaml` lists no Cilium
# object before removing the manifest (see the guide "Migrating Cilium").

provider "talosboot" {
  config_path = var.kubeconfig_path
}

resource "talosboot_cilium" "this" {
  version        = "1.16.3" # the version the inline manifest runs: adopt first, upgrade later
  adopt_existing = true

  # The Talos settings such a root already carries. `talos_defaults = true` (the default) sets exactly
  # these (plus KubePrism as k8sServiceHost/Port and kube-proxy replacement); keeping them is harmless,
  # since your values always win over the defaults.
  values = [yamlencode({
    cgroup = {
      autoMount = { enabled = false }
      hostRoot  = "/sys/fs/cgroup"
    }
    securityContext = {
      capabilities = {
        ciliumAgent = ["CHOWN", "KILL", "NET_ADMIN", "NET_RAW", "IPC_LOCK",
          "SYS_ADMIN", "SYS_RESOURCE", "DAC_OVERRIDE", "FOWNER",
        "SETGID", "SETUID"]
        cleanCiliumState = ["NET_ADMIN", "SYS_ADMIN", "SYS_RESOURCE"]
      }
    }
  })]
}

# The release as Helm records it, for other roots and for a check that warns when it is not deployed.
data "talosboot_helm_release" "cilium" {
  name       = "cilium"
  namespace  = "kube-system"
  depends_on = [talosboot_cilium.this]
}

check "cilium_deployed" {
  assert {
    condition     = data.talosboot_helm_release.cilium.status == "deployed"
    error_message = "Cilium is ${coalesce(data.talosboot_helm_release.cilium.status, "absent")}, not deployed."
  }
}
