//! The schema of `talosboot_helm_release`: hashicorp/helm's `helm_release` arguments where the
//! meaning matches, each with its default, requires-replace and "changes on upgrade" declared.

use crate::cluster::endpoint::KUBEPRISM;
use crate::framework::{Attribute, Block, Nesting, Schema};
use crate::resources::choice::DeletionPolicy;
use crate::resources::connection;
use crate::resources::job::{self, Flavor};
use crate::resources::rbac::{self, Rbac};
use crate::resources::release::common::ReleaseMetadata;
use crate::resources::release::inputs::{
    METADATA_DOC, set_item, set_wo_attribute, values_wo_attributes,
};
use crate::values::{Type, Value};

pub const TYPE_NAME: &str = "talosboot_helm_release";

/// The schema: `helm_release`'s arguments where they mean the same, with their defaults and
/// what an upgrade changes declared on them.
pub fn schema() -> Schema {
    let opt = |name, ty, doc| Attribute::optional(name, ty, doc);
    let oc = |name, ty, doc| Attribute::optional_computed(name, ty, doc);
    let comp = |name, ty, doc| Attribute::computed(name, ty, doc);
    Schema::new(
        job::SCHEMA_VERSION,
        Block::new(
            "Installs a Helm chart the pre-CNI-safe way: `helm upgrade --install` runs in a one-shot bootstrap Job on the host network against the API endpoint outside the Service CIDR (Talos KubePrism), readiness is judged natively from the release manifest, and a failed install is kept in state (tainted) instead of lost. A drop-in for hashicorp/helm's `helm_release` where the arguments mean the same.",
            vec![
                comp("id", Type::String, "`<namespace>/<name>`."),
                Attribute::required("name", Type::String, "Release name. Changing it replaces the release.").requires_replace(),
                oc("namespace", Type::String, "Release namespace. Default `default`. Changing it replaces the release.").requires_replace().default("default"),
                Attribute::required("chart", Type::String, "Chart name in `repository`, a full `oci://` reference, or a local chart directory (`./charts/app`, `/srv/charts/app`: read at plan for its digest (`chart_sha256`: an edit inside it plans an upgrade), packaged at apply and shipped to the bootstrap Job in its ConfigMap, so at most about 1 MiB packaged).").updates(),
                opt("repository", Type::String, "Chart repository URL (`https://...`) or OCI registry path (`oci://...`).").updates(),
                oc("version", Type::String, "Chart version. When unset, the repository's latest at install time; the state then records the installed version.").updates(),
                opt("values", Type::list(Type::String), "Values documents (YAML), merged in order; later ones win.").updates(),
                opt("set", Type::Dynamic, "Single values, applied after `values`, as `helm --set`.").nested(Nesting::List, set_item(false)).updates(),
                opt("set_sensitive", Type::Dynamic, "Like `set`, for secrets: hidden in plan output, never logged, passed to the installer through a Secret; the values are stored in state as configured (as with `helm_release`: keep the state encrypted), while `values_sha256` is a salted hash.").nested(Nesting::List, set_item(true)).sensitive().updates(),
                oc("create_namespace", Type::Bool, "Create the release namespace if it is missing. Default `false`.").default(false).updates(),
                set_wo_attribute(),
                values_wo_attributes()[0].clone(),
                values_wo_attributes()[1].clone(),
                connection::cluster_attribute(),
                connection::identity_attribute(),
                oc("timeout", Type::String, "How long the whole operation may take: seconds (`300`, as `helm_release`) or a Go duration (`10m`, `1h30m`). Default `300`.").default("300"),
                oc("wait", Type::Bool, "Wait until the workloads of the release manifest (Deployments, DaemonSets, StatefulSets, Jobs) are rolled out. Default `true`.").default(true),
                oc("atomic", Type::Bool, "`helm --atomic`: a failed install is uninstalled, a failed upgrade rolled back. Default `false`.").default(false),
                oc("max_history", Type::Number, "Revisions Helm keeps. Default `10`.").default(Value::int(10)),
                opt("description", Type::String, "Description recorded with the revision."),
                oc("api_endpoint", Type::String, &format!("API endpoint of the bootstrap pod, outside the Service CIDR, `HOST:PORT` (or `https://HOST:PORT` as a kubeconfig writes it; any other scheme is refused). Default `{KUBEPRISM}` (Talos KubePrism).")).default(KUBEPRISM).updates(),
                oc("adopt_existing", Type::Bool, "Take objects that exist without Helm's ownership metadata under the release in place (`helm --take-ownership`). On Talos 1.13+ it also takes them out of Talos' bootstrap-manifest inventory (ConfigMap `kube-system/talos-bootstrap-manifests-inventory`) and removes Talos' `config.k8s.io/owning-inventory` annotation, so `talosctl upgrade-k8s` does not prune them once their inline manifest leaves the machine config. Default `false`.").default(false),
                job::attribute(Flavor::Chart),
                rbac::attribute().default(Rbac::ClusterAdmin.as_str()),
                oc("deletion_policy", Type::String, "`uninstall` (default) or `keep` (destroy only forgets the release).").default(DeletionPolicy::Uninstall.as_str()),
                comp("status", Type::String, "Status of the current revision: `deployed`, `failed`, `pending-install`, ...").changed_by_update(),
                comp("revision", Type::Number, "Current revision.").changed_by_update(),
                comp("chart_version", Type::String, "Chart version of the current revision.").changed_by_update(),
                comp("app_version", Type::String, "App version of the current revision.").changed_by_update(),
                comp("metadata", ReleaseMetadata::value_type(), METADATA_DOC).changed_by_update(),
                comp("values_sha256", Type::String, "Salted hash of the release's values (`hmac-sha256:` + hex)."),
                comp("chart_sha256", Type::String, "For a local chart directory: SHA-256 of its files, read at plan, so an edit inside it plans an upgrade without a version bump. Null for charts from a repository."),
                comp("ready", Type::Bool, "Whether every workload of the release manifest is rolled out.").changed_by_update(),
            ],
        ),
    )
}
