//! `job`: the bootstrap pod of every resource that runs a pre-CNI Job (`talosboot_cilium`,
//! `talosboot_helm_release`, `talosboot_flux_bootstrap`), in one shape and decided in one place:
//! the schema ([`attribute`]), the model it decodes into ([`JobInput`], its choices as enums) and
//! its checks without I/O, the defaults the plan shows ([`plan_defaults`]), the settings the engine
//! runs with ([`resolve`]), the pre-CNI rule ([`pre_cni_needs`]), and the upgrade of a 0.1.0 state
//! written with either resource's old shape ([`upgrade_state`]).
//!
//! The resources differ only in one rule, their [`Flavor`]: the chart resources always start from
//! the Talos defaults (host network, their `api_endpoint`) and a `job` changes only what it sets;
//! the Flux bootstrap keeps the flux-operator-bootstrap module's rule, so that a module's `job`
//! block means the same there: a `job` is taken as written (`host_network = false`, no KubePrism
//! environment). Either way the plan shows the `host_network` that will run.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use crate::cluster::endpoint::{ApiEndpoint, KUBEPRISM};
use crate::cluster::engine::{JobSettings, rbac::RbacPolicy};
use crate::cluster::helm::install::{DEFAULT_HELM_IMAGE, HELM3_IMAGE};
use crate::framework::{Attribute, Diagnostics, Nesting, Schema, UpgradeRequest, UpgradeResponse};
use crate::resources::choice::{JobApplyMethod, PullPolicy};
use crate::values::{AttributePath, Type, Value};

/// The attribute's name on every resource.
pub const JOB: &str = "job";

/// The fields of a Kubernetes toleration, as the Job spec takes them.
const TOLERATION_FIELDS: &[&str] = &["key", "operator", "value", "effect", "tolerationSeconds"];

/// The one rule in which the resources differ (see the module header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// `talosboot_cilium`, `talosboot_helm_release`: the Talos defaults, `job` on top.
    Chart,
    /// `talosboot_flux_bootstrap`: unset, the Talos defaults; set, as written (the module's rule).
    Module,
}

impl Flavor {
    /// `host_network` when a configured `job` leaves it out.
    pub fn host_network_default(self) -> bool {
        match self {
            Flavor::Chart => true,
            // The module's default: a module `job` block that leaves it out runs off the host
            // network there, and must here too for a drop-in migration.
            Flavor::Module => false,
        }
    }
}

/// What the provider decides for every Job unless a resource's `job` says otherwise; carried in
/// the provider data ([`crate::resources::ProviderData`]), so a provider-wide default is set in one
/// place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobDefaults {
    /// The installer image.
    pub image: String,
}

impl Default for JobDefaults {
    fn default() -> Self {
        JobDefaults {
            image: DEFAULT_HELM_IMAGE.to_owned(),
        }
    }
}

/// `job.image`, as the module writes it.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
pub struct Image {
    pub repository: Option<String>,
    pub pull_policy: Option<PullPolicy>,
}

/// The `job` input. `tolerations` and `affinity` are Kubernetes objects as written (the module
/// passes them through); they are checked at validate.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
pub struct JobInput {
    pub image: Option<Image>,
    pub node_selector: Option<BTreeMap<String, String>>,
    pub tolerations: Option<Json>,
    pub affinity: Option<Json>,
    pub annotations: Option<BTreeMap<String, String>>,
    pub apply_method: Option<JobApplyMethod>,
    pub host_network: Option<bool>,
    pub env: Option<BTreeMap<String, String>>,
}

impl JobInput {
    /// The installer image: the configured one, else the provider's default.
    pub fn image(job: Option<&JobInput>, defaults: &JobDefaults) -> String {
        job.and_then(|j| j.image.as_ref())
            .and_then(|i| i.repository.clone())
            .unwrap_or_else(|| defaults.image.clone())
    }

    /// The engine's apply-method choice (absent: `auto`).
    pub fn apply_method(job: Option<&JobInput>) -> crate::cluster::helm::major::ApplyMethodChoice {
        job.and_then(|j| j.apply_method.as_ref())
            .map(JobApplyMethod::choice)
            .unwrap_or_default()
    }

    /// Every check without I/O, on `job`'s attribute paths; unknown values (decoded as absent)
    /// are skipped.
    pub fn validate(&self, d: &mut Diagnostics) {
        let at = || AttributePath::attr(JOB);
        if let Some(JobApplyMethod::Other(m)) = &self.apply_method {
            d.error_at(
                at().then_attr("apply_method"),
                "Invalid apply method",
                format!(
                    "{m:?}: use `auto`, `csa` (client-side apply) or `ssa` (server-side apply)."
                ),
            );
        }
        let pull = self.image.as_ref().and_then(|i| i.pull_policy.as_ref());
        if let Some(PullPolicy::Other(p)) = pull {
            d.error_at(
                at().then_attr("image").then_attr("pull_policy"),
                "Invalid pull policy",
                format!("{p:?}: use `Always`, `IfNotPresent` or `Never`."),
            );
        }
        match self.tolerations.as_ref().filter(|t| !t.is_null()) {
            Some(Json::Array(items)) => {
                for (i, t) in items.iter().enumerate() {
                    if let Some(problem) = toleration_problem(t) {
                        d.error_at(
                            at().then_attr("tolerations").then_index(i as i64),
                            "Invalid toleration",
                            problem,
                        );
                    }
                }
            }
            Some(_) => d.error_at(
                at().then_attr("tolerations"),
                "Invalid tolerations",
                "`tolerations` must be a list of Kubernetes tolerations, e.g. `[{ key = \"dedicated\", operator = \"Exists\", effect = \"NoSchedule\" }]`.",
            ),
            None => {}
        }
        match self.affinity.as_ref().filter(|a| !a.is_null()) {
            Some(Json::Object(fields)) => {
                if let Some(other) = fields
                    .keys()
                    .find(|k| !AFFINITY_FIELDS.contains(&k.as_str()))
                {
                    d.error_at(
                        at().then_attr("affinity"),
                        "Invalid affinity",
                        format!("{other:?} is not a field of a Kubernetes affinity: use `nodeAffinity`, `podAffinity` or `podAntiAffinity`."),
                    );
                }
            }
            Some(_) => d.error_at(
                at().then_attr("affinity"),
                "Invalid affinity",
                "`affinity` must be a Kubernetes affinity object, e.g. `{ nodeAffinity = { ... } }`.",
            ),
            None => {}
        }
    }
}

/// What is wrong with one toleration, if anything.
fn toleration_problem(t: &Json) -> Option<String> {
    let Some(fields) = t.as_object() else {
        return Some("A toleration is an object with `key`, `operator`, `value`, `effect` and `tolerationSeconds`.".into());
    };
    if let Some(other) = fields
        .keys()
        .find(|k| !TOLERATION_FIELDS.contains(&k.as_str()))
    {
        return Some(format!(
            "{other:?} is not a field of a Kubernetes toleration: use {}.",
            TOLERATION_FIELDS
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(op) = fields
        .get("operator")
        .and_then(Json::as_str)
        .filter(|op| !matches!(*op, "Exists" | "Equal"))
    {
        return Some(format!("operator {op:?}: use `Exists` or `Equal`."));
    }
    // The API server refuses any other effect (an empty one matches every effect).
    match fields.get("effect").and_then(Json::as_str) {
        Some("" | "NoSchedule" | "PreferNoSchedule" | "NoExecute") | None => None,
        Some(effect) => Some(format!(
            "effect {effect:?}: use `NoSchedule`, `PreferNoSchedule` or `NoExecute` (or leave it out to match every effect)."
        )),
    }
}

/// The fields of a Kubernetes `Affinity`: a misspelt one would be dropped by the API server
/// without a word, and the pod scheduled anywhere.
const AFFINITY_FIELDS: &[&str] = &["nodeAffinity", "podAffinity", "podAntiAffinity"];

/// The settings the engine runs the bootstrap pod with: the provider's `defaults`, the Talos
/// defaults (host network, `endpoint`) as `flavor` keeps them, and the user's `job`. What the run
/// may do (`rbac`) is the caller's: cluster-admin here.
pub fn resolve(
    job: Option<&JobInput>,
    defaults: &JobDefaults,
    flavor: Flavor,
    endpoint: &ApiEndpoint,
) -> JobSettings {
    let host_network = match (flavor, job) {
        (Flavor::Module, None) => true,
        (_, job) => job
            .and_then(|j| j.host_network)
            .unwrap_or(flavor.host_network_default()),
    };
    // The endpoint is passed as KUBERNETES_SERVICE_HOST/PORT. A loopback one (KubePrism) is the
    // node's: only a host-network pod reaches it.
    let loopback = endpoint.host == "localhost" || endpoint.host.starts_with("127.");
    let api_endpoint = match flavor {
        Flavor::Chart => host_network || !loopback,
        Flavor::Module => job.is_none(),
    };
    let job_ref = job;
    let job = job.cloned().unwrap_or_default();
    JobSettings {
        image: JobInput::image(job_ref, defaults),
        pull_policy: job
            .image
            .and_then(|i| i.pull_policy)
            .map(|p| p.as_str().to_owned()),
        host_network,
        api_endpoint: api_endpoint.then(|| endpoint.clone()),
        node_selector: job.node_selector.unwrap_or_default(),
        tolerations: job
            .tolerations
            .as_ref()
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default(),
        affinity: job
            .affinity
            .filter(|a| a.as_object().is_some_and(|o| !o.is_empty())),
        env: job.env.unwrap_or_default(),
        annotations: job.annotations.unwrap_or_default(),
        rbac: RbacPolicy::ClusterAdmin,
    }
}

/// The Talos default endpoint (KubePrism), for resources without an `api_endpoint` input.
pub fn kubeprism() -> ApiEndpoint {
    ApiEndpoint::parse(KUBEPRISM).expect("the KubePrism endpoint parses")
}

/// What a bootstrap Job with these settings needs that does not exist before the CNI: the pod
/// network (not on the host network), or the `kubernetes` Service IP (no API endpoint outside it:
/// neither talosboot's endpoint nor a `KUBERNETES_SERVICE_HOST` in `env`). `None`: it runs before
/// any CNI.
pub fn pre_cni_needs(job: &JobSettings) -> Option<&'static str> {
    let endpoint = job.api_endpoint.is_some() || job.env.contains_key("KUBERNETES_SERVICE_HOST");
    match (job.host_network, endpoint) {
        (false, false) => Some("the pod network and the `kubernetes` Service IP"),
        (false, true) => Some("the pod network"),
        (true, false) => Some("the `kubernetes` Service IP"),
        (true, true) => None,
    }
}

/// Plans the defaults of a configured `job` that depend on other inputs, so the plan shows what
/// will run: `host_network` ([`Flavor::host_network_default`]) and `apply_method` (`auto`). Always
/// from the configuration: a `job` removed from it plans `null` (the Talos defaults).
pub fn plan_defaults(planned: &mut Value, config: &Value, flavor: Flavor) {
    let mut job = config.attr(JOB).cloned().unwrap_or(Value::Null);
    if let Some(attrs) = job.attrs_mut() {
        for (name, default) in [
            ("host_network", Value::Bool(flavor.host_network_default())),
            ("apply_method", Value::from(JobApplyMethod::Auto.as_str())),
        ] {
            let slot = attrs.entry(name.to_owned()).or_insert(Value::Null);
            if slot.is_null() {
                *slot = default;
            }
        }
    }
    if let Some(attrs) = planned.attrs_mut() {
        attrs.insert(JOB.to_owned(), job);
    }
}

/// `state` (encoded from a model) with the `job` of `from` (the planned state at apply, the
/// prior state at refresh): the model's JSON round trip does not keep the types of the dynamic
/// `tolerations` and `affinity` (a list from a typed variable would come back a tuple), and
/// nothing in the cluster changes `job`.
pub fn keep(mut state: Value, from: &Value) -> Value {
    if let (Some(attrs), Some(job)) = (state.attrs_mut(), from.attr(JOB)) {
        attrs.insert(JOB.to_owned(), job.clone());
    }
    state
}

/// The `job` attribute of `flavor`'s resources. A change of it reruns the Flux bootstrap's chart
/// installs (declared, as the module's Job reruns); on a chart resource it takes effect at the
/// next install or upgrade.
#[rustfmt::skip] // one attribute a line
pub fn attribute(flavor: Flavor) -> Attribute {
    let doc = match flavor {
        Flavor::Chart => "The bootstrap pod that runs the installer (the same shape on every talosboot resource). When unset, the Talos defaults apply: host network, `api_endpoint` as the installer's API endpoint, the provider's installer image. Each attribute changes only what it sets.",
        Flavor::Module => "The pre-CNI bootstrap Job that installs the charts (the same shape on every talosboot resource). When unset, the Talos defaults apply: host network and the KubePrism API endpoint `localhost:7445`. When set, it is taken as written, as in the flux-operator-bootstrap module (kept so a module's `job` block means the same here): `host_network` defaults to `false`, which the plan shows, and the KubePrism environment is not added (set `host_network = true` and `env` `KUBERNETES_SERVICE_HOST`/`PORT` for a pre-CNI run). Such a Job needs the pod network (or the Service IP): on a cluster without a CNI yet (every node NotReady with the CNI message) the plan warns with that fix when the cluster is reachable, and the apply stops before the Job with the diagnosis instead of waiting for `timeout`.",
    };
    let host_network = match flavor {
        Flavor::Chart => "Run the pod on the node's host network, the only network before a CNI exists. Default `true` (planned). With `false` the pod needs the pod network, and a loopback `api_endpoint` (KubePrism `localhost:7445`, the node's) is not passed to it.",
        Flavor::Module => "Run on the host network (needed before a CNI exists). Default `false` when `job` is set: the module's default, kept for a drop-in migration, and shown in the plan; with `job` unset the Talos defaults run on the host network.",
    };
    let attribute = Attribute::optional(JOB, Type::Dynamic, doc).nested(
        Nesting::Single,
        vec![
            Attribute::optional("image", Type::Dynamic, "The installer image, as the module writes it.").nested(
                Nesting::Single,
                vec![
                    Attribute::optional("repository", Type::String, &format!("Image reference, tag included, with Helm 4, or Helm 3.17+ (supported until Helm 3's security fixes end, 2027-02-10), in it. Default `{DEFAULT_HELM_IMAGE}` (the provider's); `{HELM3_IMAGE}` is the last Helm 3 default. The Job asks the binary for its major (`helm version`), so digests and mirrors need no version in the tag; point it at a mirror when the nodes cannot reach Docker Hub.")),
                    Attribute::optional("pull_policy", Type::String, "`Always`, `IfNotPresent` or `Never`."),
                ],
            ),
            Attribute::optional("node_selector", Type::map(Type::String), "Node labels the bootstrap pod must run on."),
            Attribute::optional("tolerations", Type::Dynamic, "Kubernetes tolerations (objects with `key`, `operator`, `value`, `effect`, `tolerationSeconds`), beside the engine's own for `not-ready` and control-plane nodes."),
            Attribute::optional("affinity", Type::Dynamic, "Kubernetes affinity of the pod (`nodeAffinity`, `podAffinity`, `podAntiAffinity`)."),
            Attribute::optional("annotations", Type::map(Type::String), "Annotations of the bootstrap pod (e.g. for admission policies)."),
            Attribute::optional_computed("apply_method", Type::String, "How the installer applies the charts' objects, as Helm 4 records it on each revision (`apply_method`). `auto` (default, planned): Helm 4 installs by server-side apply (field manager `helm`) and upgrades as the release's newest record says (`--server-side=auto`); a Helm 3 image applies client-side, and is refused when the newest record says `ssa` (Helm 3 would switch the release to client-side apply for good; the plan warns when the image's tag names Helm 3). `csa`: client-side apply (`--server-side=false`), also the deliberate way to let a Helm 3 image upgrade a release Helm 4 applied server-side. `ssa`: server-side apply (`--server-side=true`; refused with a Helm 3 image). Takes effect at the next install or upgrade."),
            Attribute::optional_computed("host_network", Type::Bool, host_network),
            Attribute::optional("env", Type::map(Type::String), "Extra environment variables of the installer (e.g. `HTTPS_PROXY`). They win over talosboot's own: `KUBERNETES_SERVICE_HOST`/`PORT` point the installer at an API endpoint outside the Service CIDR."),
        ],
    );
    match flavor {
        Flavor::Chart => attribute,
        Flavor::Module => attribute.updates(),
    }
}

/// The schema version every resource with a `job` is at since the one `job` shape (0.1.0 states
/// are version 0).
pub const SCHEMA_VERSION: i64 = 1;

/// UpgradeResourceState for a resource with a `job`: a version-0 state (0.1.0) has its `job`
/// rewritten into the one shape ([`upgrade_v0`]), then is decoded at the current version.
pub fn upgrade_state(
    schema: &Schema,
    type_name: &str,
    req: UpgradeRequest,
    flavor: Flavor,
) -> UpgradeResponse {
    use crate::framework::dispatcher::upgrade_same_version;
    if req.version != 0 || schema.version == 0 {
        return upgrade_same_version(schema, type_name, req);
    }
    let upgraded = serde_json::from_slice::<Json>(&req.raw_json)
        .map_err(|e| e.to_string())
        .and_then(|mut state| {
            upgrade_v0(&mut state, flavor)?;
            serde_json::to_vec(&state).map_err(|e| e.to_string())
        });
    match upgraded {
        Ok(raw_json) => upgrade_same_version(
            schema,
            type_name,
            UpgradeRequest {
                version: schema.version,
                raw_json,
            },
        ),
        Err(e) => {
            let mut diagnostics = Diagnostics::new();
            diagnostics.error(
                "Stored state could not be upgraded",
                format!("The version-0 state of this {type_name} could not be read: {e}."),
            );
            UpgradeResponse::from(diagnostics)
        }
    }
}

/// Rewrites the `job` of a 0.1.0 state (stored JSON) into the one shape, with the defaults the
/// plan now shows ([`plan_defaults`]), so the first plan after the upgrade is empty. The chart
/// resources had `image` and `pull_policy` as strings and `tolerations` as typed objects; the Flux
/// bootstrap had no `node_selector`, `annotations` or `apply_method`.
///
/// # Errors
/// A `job` that is not an object.
pub fn upgrade_v0(state: &mut Json, flavor: Flavor) -> Result<(), String> {
    let Some(job) = state.get_mut(JOB).filter(|j| !j.is_null()) else {
        return Ok(());
    };
    let job = job
        .as_object_mut()
        .ok_or("`job` is not an object in the stored state")?;
    if flavor == Flavor::Chart {
        let image = job.remove("image").unwrap_or(Json::Null);
        let pull_policy = job.remove("pull_policy").unwrap_or(Json::Null);
        let image = match (image.is_null(), pull_policy.is_null()) {
            (true, true) => Json::Null,
            _ => json!({"repository": image, "pull_policy": pull_policy}),
        };
        job.insert("image".into(), image);
        if let Some(t) = job.get_mut("tolerations").filter(|t| !t.is_null()) {
            *t = dynamic_tolerations(t);
        }
    }
    for (name, default) in [
        ("host_network", Json::Bool(flavor.host_network_default())),
        ("apply_method", Json::from(JobApplyMethod::Auto.as_str())),
    ] {
        let slot = job.entry(name).or_insert(Json::Null);
        if slot.is_null() {
            *slot = default;
        }
    }
    Ok(())
}

/// The chart resources' typed tolerations (string fields, unset ones null) as the dynamic value
/// the same HCL now gives: a tuple of objects with only the fields that were set.
fn dynamic_tolerations(typed: &Json) -> Json {
    let items: Vec<Json> = typed
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let fields = t.as_object().into_iter().flatten();
            Json::Object(
                fields
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )
        })
        .collect();
    let types: Vec<Json> = items
        .iter()
        .map(|t| {
            let fields = t.as_object().into_iter().flatten();
            json!([
                "object",
                fields
                    .map(|(k, _)| (k.clone(), json!("string")))
                    .collect::<serde_json::Map<_, _>>()
            ])
        })
        .collect();
    json!({"value": items, "type": ["tuple", types]})
}

#[cfg(test)]
mod tests;
