//! Inputs every Helm-release resource shares, in schema and model: `set`/`set_sensitive` entries
//! (`helm_release`'s `{name, value, type}`) and the bootstrap pod's `job` settings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cluster::endpoint::ApiEndpoint;
use crate::cluster::engine::JobSettings;
use crate::cluster::helm::install::{DEFAULT_HELM_IMAGE, HELM3_IMAGE};
use crate::cluster::helm::major::ApplyMethodChoice;
use crate::framework::{Attribute, Nesting};
use crate::values::Type;

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
pub struct Toleration {
    pub key: Option<String>,
    pub operator: Option<String>,
    pub value: Option<String>,
    pub effect: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
pub struct JobInput {
    pub image: Option<String>,
    pub pull_policy: Option<String>,
    pub node_selector: Option<BTreeMap<String, String>>,
    pub tolerations: Option<Vec<Toleration>>,
    pub env: Option<BTreeMap<String, String>>,
    pub annotations: Option<BTreeMap<String, String>>,
    /// `auto` (absent), `csa` or `ssa`: see [`ApplyMethodChoice`].
    pub apply_method: Option<String>,
}

impl JobInput {
    /// The apply method asked for; absent or not one of the three (refused at validate) is `auto`.
    pub fn apply_method(job: Option<&JobInput>) -> ApplyMethodChoice {
        job.and_then(|j| j.apply_method.as_deref())
            .and_then(ApplyMethodChoice::parse)
            .unwrap_or_default()
    }
}

/// The bootstrap pod: the Talos defaults (host network, `endpoint`) plus the user's `job`.
pub fn job_settings(job: Option<&JobInput>, endpoint: ApiEndpoint) -> JobSettings {
    let job = job.cloned().unwrap_or_default();
    let mut settings = JobSettings::talos(job.image.as_deref().unwrap_or(DEFAULT_HELM_IMAGE));
    settings.api_endpoint = Some(endpoint);
    settings.pull_policy = job.pull_policy;
    settings.node_selector = job.node_selector.unwrap_or_default();
    settings.tolerations = job
        .tolerations
        .iter()
        .flatten()
        .map(|t| serde_json::to_value(t).unwrap_or_default())
        .map(|mut t| {
            if let Some(o) = t.as_object_mut() {
                o.retain(|_, v| !v.is_null());
            }
            t
        })
        .collect();
    settings.env = job.env.unwrap_or_default();
    settings.annotations = job.annotations.unwrap_or_default();
    settings
}

/// The attributes of one `set` / `set_sensitive` entry.
pub fn set_item(sensitive: bool) -> Vec<Attribute> {
    let value = Attribute::required("value", Type::String, "The value.");
    vec![
        Attribute::required(
            "name",
            Type::String,
            "Dotted path of the value, e.g. `hubble.relay.enabled` (escape literal dots as `\\\\.`).",
        ),
        if sensitive { value.sensitive() } else { value },
        Attribute::optional(
            "type",
            Type::String,
            "`auto` (default: `true`, `12`, `null` and `{a,b}` lists are typed as in `helm --set`) or `string` (always a string, as `--set-string`).",
        ),
    ]
}

/// The attributes of `job`.
pub fn job_attributes() -> Vec<Attribute> {
    vec![
        Attribute::optional("image", Type::String, &format!("Installer image, with Helm 4, or Helm 3.17+ (supported until Helm 3's security fixes end, 2027-02-10), in it. Default `{DEFAULT_HELM_IMAGE}`; `{HELM3_IMAGE}` is the last Helm 3 default. The Job asks the binary for its major (`helm version`), so digests and mirrors need no version in the tag; point it at a mirror when the nodes cannot reach Docker Hub.")),
        Attribute::optional("pull_policy", Type::String, "`IfNotPresent`, `Always` or `Never`."),
        Attribute::optional("node_selector", Type::map(Type::String), "Node labels the bootstrap pod must run on."),
        Attribute::optional("tolerations", Type::Dynamic, "Extra Kubernetes tolerations (list of objects with `key`, `operator`, `value`, `effect`), beside the engine's own for `not-ready` and control-plane nodes.").nested(
            Nesting::List,
            vec![
                Attribute::optional("key", Type::String, "Taint key."),
                Attribute::optional("operator", Type::String, "`Exists` or `Equal`."),
                Attribute::optional("value", Type::String, "Taint value."),
                Attribute::optional("effect", Type::String, "`NoSchedule`, `PreferNoSchedule` or `NoExecute`."),
            ],
        ),
        Attribute::optional("env", Type::map(Type::String), "Extra environment variables of the installer (e.g. `HTTPS_PROXY`). They win over talosboot's own, `KUBERNETES_SERVICE_HOST`/`PORT` included."),
        Attribute::optional("annotations", Type::map(Type::String), "Annotations of the bootstrap pod (e.g. for admission policies)."),
        Attribute::optional("apply_method", Type::String, "How the installer applies the chart's objects, as Helm 4 records it on each revision (`apply_method`). `auto` (default): Helm 4 installs by server-side apply (field manager `helm`) and upgrades as the release's newest record says (`--server-side=auto`); a Helm 3 image applies client-side, and is refused when the newest record says `ssa` (Helm 3 would switch the release to client-side apply for good; the plan warns when the image's tag names Helm 3). `csa`: client-side apply (`--server-side=false`), also the deliberate way to let a Helm 3 image upgrade a release Helm 4 applied server-side. `ssa`: server-side apply (`--server-side=true`; refused with a Helm 3 image). Takes effect at the next install or upgrade; changing it alone upgrades nothing."),
    ]
}

/// `set_wo`: like `set_sensitive`, write-only (OpenTofu/Terraform 1.11+): never stored in state or
/// plan files. Its values count in `values_sha256`, so changing one plans an update.
pub fn set_wo_attribute() -> Attribute {
    // The client wants write-only on the leaf that holds the secret: `value`.
    let items = set_item(true)
        .into_iter()
        .map(|a| if a.name == "value" { a.write_only() } else { a })
        .collect();
    Attribute::optional(
        "set_wo",
        Type::Dynamic,
        "Like `set_sensitive`, with a write-only `value` (OpenTofu/Terraform 1.11+): the values reach the installer through a Secret and are never stored in state or plan files (names are). They count in `values_sha256` (salted), so changing one plans an update; older clients are refused with a message.",
    )
    .nested(Nesting::List, items)
}

/// The description of the computed `metadata` object (type: [`super::common::ReleaseMetadata`]).
pub const METADATA_DOC: &str = "hashicorp/helm's `metadata` output for the current revision, so references such as `helm_release.x.metadata.app_version` keep working after a `moved` (with the new address): `name`, `revision`, `namespace`, `chart`, `version` (the chart version), `app_version`, `first_deployed` and `last_deployed` (Unix seconds), `notes`. Unlike `helm_release`, without `values` (they can hold secrets; `values_sha256` stands for them).";
