//! The schema of `talosboot_cilium`. Attribute names follow `helm_release` (hashicorp/helm v3)
//! where the meaning matches, so a root moves over with few edits.

use super::model::{
    DEFAULT_CHART, DEFAULT_NAME, DEFAULT_NAMESPACE, DEFAULT_REPOSITORY, DEFAULT_TIMEOUT,
};
use crate::cluster::endpoint::KUBEPRISM;
use crate::framework::{Attribute, Block, Nesting, Schema};
use crate::resources::choice::DeletionPolicy;
use crate::resources::job::{self, Flavor};
use crate::resources::rbac::{self, Rbac};
use crate::resources::release::common::ReleaseMetadata;
use crate::resources::release::inputs::{METADATA_DOC, set_item, set_wo_attribute};
use crate::values::Type;

pub const TYPE_NAME: &str = "talosboot_cilium";

/// The schema, with each input's default, requires-replace and "changes on upgrade" declared.
pub fn schema() -> Schema {
    Schema::new(
        job::SCHEMA_VERSION,
        Block::new(
            "Installs and manages Cilium on a Talos cluster before any CNI exists: the Helm chart runs in a one-shot bootstrap Job on the host network against KubePrism, with the Talos values by default, and is judged ready the way `cilium status --wait` judges it. Plans need no reachable cluster. Drift (values or version changed in the cluster, a failed or stuck release, a deleted release) shows as a planned update; a failed apply leaves a state that says what is true.\n\n**Readiness.** With `wait` (the default) the apply waits for exactly the components the release's manifest contains in its namespace, each judged by its rollout as `cilium status --wait` judges it, and then for every node:\n\n| component | kind | present | ready when |\n|---|---|---|---|\n| `cilium` (agent) | DaemonSet | always | at its current generation, updated, ready and available on every node it is scheduled on |\n| `cilium-envoy` | DaemonSet | chart 1.16+ by default (`envoy.enabled`, `l7Proxy`) | like the agent |\n| `cilium-operator` | Deployment | always (`operator.replicas`, default 2, one per node) | at its current generation, every replica updated, ready and available |\n| `hubble-relay` | Deployment | `hubble.relay.enabled` | like the operator |\n| `hubble-ui` | Deployment | `hubble.ui.enabled` | like the operator |\n| `clustermesh-apiserver` | Deployment | `clustermesh.useAPIServer` | like the operator |\n| nodes | | always | every node `Ready` without the `node.kubernetes.io/not-ready` taint |\n\nA component that fails in a way that will not fix itself (an image that cannot be pulled, a refused capability, a known crash) fails the apply at once, naming it; otherwise the apply fails at `timeout` with the components that are not rolled out. Every refresh reads the same components (into `components`): a deployed release with one that is not rolled out is a warning naming it (not drift an upgrade would fix).\n\n**kube-proxy.** Talos runs kube-proxy unless the machine config disables it (`cluster.proxy.disabled: true` on Talos 1.13 and earlier, a `KubeProxyConfig` document with `enabled: false` on 1.14+). `kube_proxy_replacement` chooses the Talos values for each case, and is checked against the cluster at plan (when it is reachable) and at apply before any Job runs: DaemonSet `kube-system/kube-proxy` with the replacement on is a warning (both would handle Services); no kube-proxy with the replacement off is an error (no Service IP would ever route).",
            vec![
                Attribute::computed("id", Type::String, "`<namespace>/<name>`."),
                Attribute::optional_computed("name", Type::String, "Release name. Default `cilium`. Changing it replaces the release.").requires_replace().default(DEFAULT_NAME),
                Attribute::optional_computed("namespace", Type::String, "Release namespace. Default `kube-system`. Changing it replaces the release.").requires_replace().default(DEFAULT_NAMESPACE),
                Attribute::required("version", Type::String, "Chart version, e.g. `1.20.2`. Required: a floating version would change Cilium with the image.").updates(),
                Attribute::optional_computed("repository", Type::String, "Chart repository URL or OCI registry path. Default `https://helm.cilium.io`.").default(DEFAULT_REPOSITORY).updates(),
                Attribute::optional_computed("chart", Type::String, "Chart name in the repository. Default `cilium`.").default(DEFAULT_CHART).updates(),
                Attribute::optional("values", Type::list(Type::String), "Values documents (YAML), merged in order over the Talos defaults; later ones win. The user always wins over `talos_defaults`.").updates(),
                Attribute::optional("set", Type::Dynamic, "Single values, applied after `values`, as `helm --set`.").nested(Nesting::List, set_item(false)).updates(),
                Attribute::optional("set_sensitive", Type::Dynamic, "Like `set`, for secrets: hidden in plan output, never logged, passed to the installer through a Secret; the values are stored in state as configured (as with `helm_release`: keep the state encrypted), while `values_sha256` is a salted hash.").nested(Nesting::List, set_item(true)).sensitive().updates(),
                set_wo_attribute(),
                Attribute::optional_computed("timeout", Type::String, "How long the whole operation may take: a Go duration (`10m`, `1h30m`) or seconds (`600`, as `helm_release`). Default `10m`. The bootstrap Job's deadline is what is left of it.").default(DEFAULT_TIMEOUT),
                Attribute::optional_computed("wait", Type::Bool, "Wait until Cilium is ready as `cilium status --wait` means it (every DaemonSet and Deployment of the release's manifest rolled out at its current generation: see Readiness above) and every node lost the `not-ready` taint. Default `true`.").default(true),
                Attribute::optional_computed("talos_defaults", Type::Bool, "Merge the Talos values under the user's: `ipam.mode=kubernetes`, `cgroup.autoMount.enabled=false`, `cgroup.hostRoot=/sys/fs/cgroup`, the capability lists `securityContext.capabilities.ciliumAgent` (`CHOWN,KILL,NET_ADMIN,NET_RAW,IPC_LOCK,SYS_ADMIN,SYS_RESOURCE,DAC_OVERRIDE,FOWNER,SETGID,SETUID`) and `cleanCiliumState` (`NET_ADMIN,SYS_ADMIN,SYS_RESOURCE`) without `SYS_MODULE`, and, as `kube_proxy_replacement` says, either `kubeProxyReplacement=true` with `k8sServiceHost`/`k8sServicePort` from `api_endpoint` or `kubeProxyReplacement=false`. Default `true`.").default(true).updates(),
                Attribute::optional_computed("kube_proxy_replacement", Type::Bool, "Whether Cilium replaces kube-proxy, choosing the variant of Talos' Cilium guide (with `talos_defaults`). `true` (default) for clusters with kube-proxy disabled (`cluster.proxy.disabled: true`, or `KubeProxyConfig` `enabled: false` on Talos 1.14+): `kubeProxyReplacement=true`, and the agents reach the API at `api_endpoint` (`k8sServiceHost`/`k8sServicePort`). `false` for clusters that run kube-proxy (Talos' default): `kubeProxyReplacement=false` and no `k8sServiceHost`/`k8sServicePort`, since kube-proxy routes the `kubernetes` Service the agents use. Checked against DaemonSet `kube-system/kube-proxy` at plan (when the cluster is reachable) and before any Job runs: kube-proxy with `true` is a warning, no kube-proxy with `false` an error.").default(true).updates(),
                Attribute::optional_computed("api_endpoint", Type::String, &format!("API endpoint outside the Service CIDR, `HOST:PORT` (or `https://HOST:PORT` as a kubeconfig writes it), used by the bootstrap pod and (with `talos_defaults` and `kube_proxy_replacement`) by the Cilium agents. Default `{KUBEPRISM}` (Talos KubePrism); elsewhere a control-plane or load-balancer address.")).default(KUBEPRISM).updates(),
                Attribute::optional_computed("adopt_existing", Type::Bool, "Take a Cilium that was installed without Helm (Talos inline manifests, or `kubectl apply` of `helm template` output) under the release in place: no object is deleted or recreated. On Talos 1.13+ it also takes the adopted objects out of Talos' bootstrap-manifest inventory (ConfigMap `kube-system/talos-bootstrap-manifests-inventory`) and removes Talos' `config.k8s.io/owning-inventory` annotation from them, so that `talosctl upgrade-k8s` does not prune Cilium once the inline manifest leaves the machine config (the plan warns first, the apply lists each entry). Default `false`.").default(false),
                rbac::attribute().default(Rbac::ClusterAdmin.as_str()),
                job::attribute(Flavor::Chart),
                Attribute::optional_computed("deletion_policy", Type::String, "`uninstall` (default): destroy uninstalls the release. `keep`: destroy only forgets it and leaves Cilium running (for handing Cilium over to GitOps).").default(DeletionPolicy::Uninstall.as_str()),
                Attribute::computed("status", Type::String, "Status of the current release revision: `deployed`, `failed`, `pending-install`, ... or `missing`.").changed_by_update(),
                Attribute::computed("revision", Type::Number, "Current release revision.").changed_by_update(),
                Attribute::computed("chart_version", Type::String, "Chart version of the current revision.").changed_by_update(),
                Attribute::computed("app_version", Type::String, "Cilium version of the current revision.").changed_by_update(),
                Attribute::computed("metadata", ReleaseMetadata::value_type(), METADATA_DOC).changed_by_update(),
                Attribute::computed("values_sha256", Type::String, "Salted hash of the release's values (`hmac-sha256:` + hex): changes when the values in the cluster differ from the configuration."),
                Attribute::computed("agents", Type::object([("ready", Type::Number), ("desired", Type::Number)]), "Cilium agents: `ready` and `desired` (one per node).").changed_by_update(),
                Attribute::computed("components", Type::map(Type::object([("kind", Type::String), ("desired", Type::Number), ("ready", Type::Number), ("rolled_out", Type::Bool)])), "Every component of the release (the DaemonSets and Deployments its manifest contains in the release namespace, see Readiness above), by name, as the last apply or refresh saw it: `kind`, `desired` (DaemonSets: the nodes it is scheduled on; Deployments: the replicas asked for), `ready`, and `rolled_out` (at its current generation, every pod updated, ready and available, as `cilium status --wait` judges it). A missing one has `desired = 0` and `rolled_out = false`.").changed_by_update(),
                Attribute::computed("nodes_ready", Type::Bool, "Whether every node is Ready without the `not-ready` taint.").changed_by_update(),
            ],
        ),
    )
}
