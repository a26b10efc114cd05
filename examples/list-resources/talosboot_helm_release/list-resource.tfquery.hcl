# In a file ending in .tfquery.hcl, beside a root that configures the provider (Terraform 1.14+):
#   terraform query                                  lists the releases and their identities
#   terraform query -generate-config-out=adopt.tf    writes a resource and an import block per release
# Releases of the Cilium chart are listed by `list "talosboot_cilium"` instead.
list "talosboot_helm_release" "releases" {
  provider = talosboot
  # Every namespace when `config` (or its `namespace`) is left out.
  config {
    namespace = "apps"
  }
}
