# A release is imported by `<namespace>/<name>`.
tofu import talosboot_helm_release.argocd argocd/argocd
# With `cluster` (a fleet) and a provider block that connects nowhere, the import stores the ID
# only; the next plan reads the release through `cluster`, an error when it is not there.
