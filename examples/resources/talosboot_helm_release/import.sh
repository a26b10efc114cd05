# A release is imported by `<namespace>/<name>`.
tofu import talosboot_helm_release.argocd argocd/argocd
