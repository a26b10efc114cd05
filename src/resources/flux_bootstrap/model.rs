//! The plain structs config and state decode into (field names are the module's variable names),
//! the defaults the module documents, and validation without I/O, with attribute paths.

use serde::Deserialize;
use serde_json::Value as Json;
use std::collections::BTreeMap;

use crate::cluster::flux::distribution;
use crate::cluster::flux::manifest::{Manifest, parse_documents, parse_documents_substituted};
use crate::framework::model::Maybe;
use crate::framework::{Diagnostic, Diagnostics};
use crate::resources::choice::DeletionPolicy;
pub use crate::resources::duration::parse_timeout;
use crate::resources::job::JobInput;
use crate::resources::names::check_namespace;
use crate::resources::rbac::Rbac;
use crate::values::{AttributePath, Value};

pub const DEFAULT_BOOTSTRAP_NAMESPACE: &str = "flux-operator-bootstrap";
pub const DEFAULT_OPERATOR_REPOSITORY: &str = "ghcr.io/controlplaneio-fluxcd/charts/flux-operator";
pub const DEFAULT_TIMEOUT: &str = "10m";
pub const INSTANCE_API_VERSION: &str = "fluxcd.controlplane.io/v1";
pub const INSTANCE_NAME: &str = "flux";

#[derive(Debug, Default, Deserialize)]
pub struct Config {
    #[serde(default)]
    pub gitops_resources: GitopsResources,
    pub managed_resources: Option<ManagedResources>,
    pub bootstrap_namespace: Option<String>,
    #[serde(default)]
    pub common_metadata: Metadata,
    /// The one `job` shape of every resource, with the module's rule ([`Flavor::Module`](crate::resources::job::Flavor)).
    pub job: Option<JobInput>,
    pub timeout: Option<String>,
    pub debug_on_failure: Option<bool>,
    pub deletion_policy: Option<DeletionPolicy>,
    pub rbac: Option<Rbac>,
    pub sync: Option<Sync>,
    pub suspend_applications: Option<bool>,
    /// Set by the caller when an input of the runtime variables (`managed_resources`, `sync`,
    /// `suspend_applications`) is not known yet (validate and plan): placeholders are then left
    /// as written and not judged. Not an attribute.
    #[serde(skip)]
    pub unknown_variables: bool,
}

/// Whether an input of the runtime variables is unknown in this configuration (see
/// [`Config::unknown_variables`]).
pub fn has_unknown_variables(config: &Value) -> bool {
    ["managed_resources", "sync", "suspend_applications"]
        .iter()
        .any(|a| config.attr(a).is_some_and(|v| !v.is_wholly_known()))
}

#[derive(Debug, Default, Deserialize)]
pub struct GitopsResources {
    #[serde(default)]
    pub instance_yaml: Maybe<String>,
    #[serde(default)]
    pub prerequisites: Prerequisites,
    #[serde(default)]
    pub operator_chart: OperatorChart,
}

#[derive(Debug, Default, Deserialize)]
pub struct Prerequisites {
    #[serde(default)]
    pub yamls: Vec<Option<String>>,
    #[serde(default)]
    pub charts: Vec<Chart>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Chart {
    pub name: Option<String>,
    pub repository: Option<String>,
    pub namespace: Option<String>,
    pub version: Option<String>,
    pub create_namespace: Option<bool>,
    pub values_yaml: Option<String>,
    pub flux_adoption_check: Option<AdoptionCheck>,
}

#[derive(Debug, Default, Deserialize)]
pub struct AdoptionCheck {
    pub resource: Option<String>,
    pub api_group: Option<String>,
    pub name: Option<String>,
    pub namespace: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct OperatorChart {
    pub repository: Option<String>,
    pub version: Option<String>,
    pub values_yaml: Option<String>,
}

/// Write-only: never in state, plan or logs (no `Debug` of values).
#[derive(Default, Deserialize)]
pub struct ManagedResources {
    pub secrets_yaml: Option<String>,
    pub runtime_info: Option<RuntimeInfo>,
}

impl std::fmt::Debug for ManagedResources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ManagedResources(..)")
    }
}

#[derive(Default, Deserialize)]
pub struct RuntimeInfo {
    #[serde(default)]
    pub data: BTreeMap<String, String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Metadata {
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize, Clone)]
pub struct Sync {
    pub kind: Option<String>,
    pub url: Option<String>,
    pub r#ref: Option<String>,
    pub path: Option<String>,
    pub pull_secret: Option<String>,
}

/// The computed attributes that plan, apply and import write: `id` and `namespace` (the
/// FluxInstance's namespace), `drift` (empty: what an apply leaves), and, when given, the salted
/// `managed_resources_hash`.
pub fn set_computed(state: &mut Value, namespace: Value, managed_resources_hash: Option<Value>) {
    let Some(attrs) = state.attrs_mut() else {
        return;
    };
    attrs.insert("id".into(), namespace.clone());
    attrs.insert("namespace".into(), namespace);
    attrs.insert("drift".into(), Value::List(Vec::new()));
    if let Some(hash) = managed_resources_hash {
        attrs.insert("managed_resources_hash".into(), hash);
    }
}

/// The FluxInstance manifest of `instance_yaml`, validated (one document, the operator's kind,
/// named `flux`, with a namespace). Errors are `(attribute path, message)`.
#[cfg(test)]
pub fn parse_instance(text: &str) -> Result<Manifest, String> {
    parse_instance_with(text, None)
}

/// [`parse_instance`] of `instance_yaml` with the runtime variables substituted as the module does
/// ([`parse_documents_substituted`]); `None`: nothing is substituted.
pub fn parse_instance_with(
    text: &str,
    vars: Option<&BTreeMap<String, String>>,
) -> Result<Manifest, String> {
    let docs = match vars {
        Some(vars) => parse_documents_substituted(text, vars, INSTANCE_YAML),
        None => parse_documents(text, INSTANCE_YAML),
    }
    .map_err(|e| e.to_string())?;
    let instance = one_instance(docs)?;
    check_identity(&instance, false)?;
    Ok(instance)
}

const INSTANCE_YAML: &str = "gitops_resources.instance_yaml";

/// The one FluxInstance of the documents.
fn one_instance(mut docs: Vec<Manifest>) -> Result<Manifest, String> {
    if docs.len() != 1 {
        return Err(format!(
            "{INSTANCE_YAML} must hold exactly one FluxInstance, found {} documents",
            docs.len()
        ));
    }
    let instance = docs.remove(0);
    if instance.api_version() != INSTANCE_API_VERSION || instance.kind() != "FluxInstance" {
        return Err(format!(
            "{INSTANCE_YAML} must be a `{INSTANCE_API_VERSION}` FluxInstance, not `{}` {}",
            instance.api_version(),
            instance.kind()
        ));
    }
    Ok(instance)
}

/// A name and namespace the Flux Operator reconciles: it watches only the FluxInstance named
/// `flux` in its runtime namespace, the namespace it is installed in, which talosboot makes the
/// FluxInstance's own. With `unresolved` (runtime variables not known yet) a name that is still a
/// `${...}` placeholder is not judged.
fn check_identity(instance: &Manifest, unresolved: bool) -> Result<(), String> {
    let name = instance.name();
    if name != INSTANCE_NAME && !(unresolved && name.contains("${")) {
        return Err(format!(
            "the FluxInstance must be named `{INSTANCE_NAME}`, not {name:?}: the Flux Operator reconciles only the FluxInstance named `{INSTANCE_NAME}` in its own namespace (its CRD refuses any other name). Set `metadata.name: {INSTANCE_NAME}`"
        ));
    }
    if instance.namespace().is_empty() {
        return Err("the FluxInstance needs `metadata.namespace`: the namespace Flux runs in (e.g. `flux-system`). talosboot installs the Flux Operator there, and the operator reconciles only the FluxInstance in its own namespace".into());
    }
    Ok(())
}

impl Config {
    /// The FluxInstance as plan and validation can judge it: with the runtime variables
    /// substituted when they are all known (as apply will), else as written, leaving a name or
    /// namespace that is still a placeholder (or a template that is YAML only once substituted)
    /// to apply. `Ok(None)`: nothing can be judged before apply.
    pub fn instance_at_plan(&self, text: &str) -> Result<Option<Manifest>, String> {
        let vars = super::inputs::runtime_variables(self).filter(|_| !self.unknown_variables);
        if let Some(vars) = &vars {
            if let Ok(docs) = parse_documents_substituted(text, vars, INSTANCE_YAML) {
                let instance = one_instance(docs)?;
                check_identity(&instance, false)?;
                return Ok(Some(instance));
            }
        }
        let templated = text.contains("${");
        match parse_documents(text, INSTANCE_YAML) {
            Ok(docs) => {
                let instance = one_instance(docs)?;
                check_identity(&instance, templated)?;
                Ok(Some(instance))
            }
            Err(_) if templated => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    /// The FluxInstance's namespace as apply will resolve it; `None` while it is not known (a
    /// placeholder whose variables are unknown, or an invalid `instance_yaml`).
    pub fn planned_namespace(&self) -> Option<String> {
        let text = self.gitops_resources.instance_yaml.known()?;
        let instance = self.instance_at_plan(text).ok()??;
        let ns = instance.namespace();
        (!ns.is_empty() && !ns.contains('$')).then(|| ns.to_owned())
    }
}

/// The managed Secrets of `secrets_yaml`: only `v1` Secrets, in the FluxInstance's namespace (or
/// none, which means that namespace). Never echoes content.
pub fn parse_secrets(text: &str, namespace: &str) -> Result<Vec<Manifest>, String> {
    let what = "managed_resources.secrets_yaml";
    let mut docs = parse_documents(text, what).map_err(|e| e.to_string())?;
    for (i, doc) in docs.iter_mut().enumerate() {
        if doc.kind() != "Secret" || doc.api_version() != "v1" {
            return Err(format!(
                "document {} of {what} is a {} (`{}`): only `v1` Secrets may be managed",
                i + 1,
                doc.kind(),
                doc.api_version()
            ));
        }
        if !doc.namespace().is_empty() && doc.namespace() != namespace {
            return Err(format!(
                "Secret {:?} is in namespace {:?}: managed Secrets live in the FluxInstance's namespace {namespace:?} (leave metadata.namespace out, or set it to that)",
                doc.name(),
                doc.namespace()
            ));
        }
        doc.set_namespace(namespace);
    }
    Ok(docs)
}

/// An OCI chart path as the module takes it (`ghcr.io/org/charts/name`, `oci://` optional), as a
/// full `oci://` reference.
pub fn oci_reference(repository: &str) -> Result<String, String> {
    let path = repository.strip_prefix("oci://").unwrap_or(repository);
    if path.contains("://") || path.is_empty() || !path.contains('/') || path.contains(' ') {
        return Err(format!(
            "{repository:?} is not an OCI chart path like `ghcr.io/controlplaneio-fluxcd/charts/flux-operator` (classic HTTP chart repositories are not supported, as in the module)"
        ));
    }
    Ok(format!("oci://{}", path.trim_end_matches('/')))
}

fn one_of(
    diagnostics: &mut Diagnostics,
    path: AttributePath,
    value: Option<&str>,
    allowed: &[&str],
) {
    if let Some(v) = value.filter(|v| !allowed.contains(v)) {
        diagnostics.error_at(
            path,
            "Invalid value",
            format!("{v:?} is not one of {}.", allowed.join(", ")),
        );
    }
}

impl Config {
    /// Every check that needs no cluster; unknown values are skipped.
    pub fn validate(&self, diagnostics: &mut Diagnostics) {
        let gitops = AttributePath::attr("gitops_resources");
        let instance = match self.gitops_resources.instance_yaml.known() {
            Some(text) => self.instance_at_plan(text).unwrap_or_else(|message| {
                diagnostics.error_at(
                    gitops.clone().then_attr("instance_yaml"),
                    "Invalid FluxInstance",
                    message,
                );
                None
            }),
            None => None,
        };
        let namespace = instance
            .as_ref()
            .map(|m| m.namespace().to_owned())
            .filter(|ns| !ns.contains('$'));
        if let Some(instance) = &instance {
            self.validate_operator_version(instance, diagnostics, &gitops);
            self.validate_required_spec(instance, diagnostics, &gitops);
        }
        if let Some(ns) = &namespace {
            self.validate_operator_values(ns, diagnostics, &gitops);
        }
        self.validate_prerequisites(diagnostics, &gitops);
        if let Some(repo) = &self.gitops_resources.operator_chart.repository {
            if let Err(message) = oci_reference(repo) {
                let path = gitops.then_attr("operator_chart").then_attr("repository");
                diagnostics.error_at(path, "Invalid chart repository", message);
            }
        }
        self.validate_managed(diagnostics, namespace.as_deref());
        self.validate_settings(diagnostics, namespace.as_deref());
    }

    /// An operator chart that cannot install the Flux `spec.distribution.version` asks for
    /// ([`distribution::check`]): the FluxInstance would never become Ready.
    fn validate_operator_version(
        &self,
        instance: &Manifest,
        diagnostics: &mut Diagnostics,
        gitops: &AttributePath,
    ) {
        let Some(chart) = self.gitops_resources.operator_chart.version.as_deref() else {
            return;
        };
        let Some(range) = instance
            .object
            .pointer("/spec/distribution/version")
            .and_then(|v| v.as_str())
        else {
            return;
        };
        let Some(too_old) = distribution::check(range, chart) else {
            return;
        };
        let minimum = match too_old.minimum_chart {
            Some(v) => format!("Use operator chart {v} or later."),
            None => format!(
                "No operator chart up to {} embeds it: use a newer chart, or a range it covers.",
                distribution::LAST_KNOWN_OPERATOR
            ),
        };
        diagnostics.error_at(
            gitops.clone().then_attr("operator_chart").then_attr("version"),
            "Flux Operator chart too old for the FluxInstance",
            format!(
                "The FluxInstance asks for Flux {range:?} (`spec.distribution.version`), but operator chart {chart} can install Flux up to {} only (an operator installs the Flux versions embedded in its image): the FluxInstance would stay not Ready (`BuildFailed`, \"no match found for semver\"). {minimum}",
                too_old.newest_flux
            ),
        );
    }

    /// Fields the FluxInstance CRD requires (`spec.distribution.version` and `registry`; with a
    /// sync, its `kind`, `url`, `ref` and `path`, after the `sync` argument is merged): the API
    /// would refuse the FluxInstance at apply, after the operator's install.
    fn validate_required_spec(
        &self,
        instance: &Manifest,
        diagnostics: &mut Diagnostics,
        gitops: &AttributePath,
    ) {
        let mut merged = instance.clone();
        if let Some(sync) = &self.sync {
            super::inputs::apply_sync(&mut merged, sync);
        }
        let present = |pointer: &str| {
            merged
                .object
                .pointer(pointer)
                .and_then(Json::as_str)
                .is_some_and(|v| !v.is_empty())
        };
        let missing: Vec<&str> = ["version", "registry"]
            .into_iter()
            .filter(|f| !present(&format!("/spec/distribution/{f}")))
            .collect();
        if !missing.is_empty() {
            diagnostics.push(
                Diagnostic::warning(
                    "Incomplete FluxInstance",
                    format!(
                        "The FluxInstance CRD requires `spec.distribution.{}`: the API will refuse the FluxInstance at apply, after the operator's install. Set e.g. `version: \"2.9.x\"` and `registry: ghcr.io/fluxcd`.",
                        missing.join("` and `spec.distribution.")
                    ),
                )
                .at(gitops.clone().then_attr("instance_yaml")),
            );
        }
        if merged.object.pointer("/spec/sync").is_none() {
            return;
        }
        let fields = [
            ("kind", "kind"),
            ("url", "url"),
            ("ref", "ref"),
            ("path", "path"),
        ];
        let missing: Vec<(&str, &str)> = fields
            .into_iter()
            .filter(|(f, _)| !present(&format!("/spec/sync/{f}")))
            .collect();
        if missing.is_empty() {
            return;
        }
        let names: Vec<String> = missing
            .iter()
            .map(|(f, _)| format!("`spec.sync.{f}`"))
            .collect();
        let (path, fix) = match &self.sync {
            Some(_) => (
                AttributePath::attr("sync"),
                format!(
                    "set {} in `sync` (or in `instance_yaml`)",
                    missing
                        .iter()
                        .map(|(_, a)| format!("`{a}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            None => (
                gitops.clone().then_attr("instance_yaml"),
                "set them in `instance_yaml`, or in the `sync` argument".to_owned(),
            ),
        };
        diagnostics.push(
            Diagnostic::warning(
                "Incomplete FluxInstance sync",
                format!(
                    "The FluxInstance CRD requires {} (e.g. `ref: refs/heads/main`): the API will refuse the FluxInstance at apply, after the operator's install. Fix: {fix}.",
                    names.join(", ")
                ),
            )
            .at(path),
        );
    }

    /// Operator chart values with which the operator would never reconcile this FluxInstance:
    /// a `RUNTIME_NAMESPACE` in `extraEnvs` other than the FluxInstance's namespace (the operator
    /// watches only the FluxInstance `flux` in that namespace), or the web-server-only mode.
    /// Values with placeholders are judged at apply.
    fn validate_operator_values(
        &self,
        namespace: &str,
        diagnostics: &mut Diagnostics,
        gitops: &AttributePath,
    ) {
        let Some(text) = self.gitops_resources.operator_chart.values_yaml.as_deref() else {
            return;
        };
        let Ok(values) = serde_saphyr::from_str::<Json>(text) else {
            return;
        };
        let path = gitops
            .clone()
            .then_attr("operator_chart")
            .then_attr("values_yaml");
        if let Some(problem) = operator_values_problem(&values, namespace) {
            diagnostics.error_at(
                path,
                "The Flux Operator would never reconcile the FluxInstance",
                problem,
            );
        }
    }

    fn validate_prerequisites(&self, diagnostics: &mut Diagnostics, gitops: &AttributePath) {
        let prereqs = gitops.clone().then_attr("prerequisites");
        // Placeholders are substituted over the text (a template may be YAML only afterwards):
        // with the variables known, check the result; without them (write-only inputs can be
        // unknown here) a template with placeholders is checked at apply.
        let vars = super::inputs::runtime_variables(self);
        for (i, yaml) in self.gitops_resources.prerequisites.yamls.iter().enumerate() {
            let what = format!("gitops_resources.prerequisites.yamls[{i}]");
            let Some(yaml) = yaml.as_deref() else {
                continue;
            };
            let parsed = match &vars {
                Some(vars) => parse_documents_substituted(yaml, vars, &what),
                None => parse_documents(yaml, &what),
            };
            if let Err(e) = parsed.map(|_| ()) {
                if vars.is_some() || !yaml.contains("${") {
                    let path = prereqs.clone().then_attr("yamls").then_index(i as i64);
                    diagnostics.error_at(path, "Invalid prerequisite manifest", e.to_string());
                }
            }
        }
        for (i, chart) in self
            .gitops_resources
            .prerequisites
            .charts
            .iter()
            .enumerate()
        {
            let path = prereqs.clone().then_attr("charts").then_index(i as i64);
            if let Some(Err(message)) = chart.repository.as_deref().map(oci_reference) {
                diagnostics.error_at(
                    path.clone().then_attr("repository"),
                    "Invalid chart repository",
                    message,
                );
            }
            if let Some(ns) = chart.namespace.as_deref() {
                check_namespace(ns, path.then_attr("namespace"), diagnostics);
            }
        }
    }

    fn validate_managed(&self, diagnostics: &mut Diagnostics, namespace: Option<&str>) {
        let Some(managed) = &self.managed_resources else {
            return;
        };
        let path = AttributePath::attr("managed_resources");
        if let (Some(text), Some(ns)) = (&managed.secrets_yaml, namespace) {
            if let Err(message) = parse_secrets(text, ns) {
                diagnostics.error_at(
                    path.clone().then_attr("secrets_yaml"),
                    "Invalid managed Secrets",
                    message,
                );
            }
        }
        if let Some(info) = &managed.runtime_info {
            for key in info.data.keys().filter(|k| !is_config_key(k)) {
                diagnostics.error_at(
                    path.clone()
                        .then_attr("runtime_info")
                        .then_attr("data")
                        .then_key(key.as_str()),
                    "Invalid runtime variable name",
                    format!(
                        "{key:?} cannot be a ConfigMap key: use letters, digits, `-`, `_` and `.`."
                    ),
                );
            }
        }
    }

    fn validate_settings(&self, diagnostics: &mut Diagnostics, namespace: Option<&str>) {
        if let Some(t) = &self.timeout {
            match parse_timeout(t) {
                Ok(d) if d.is_zero() => diagnostics.error_at(
                    AttributePath::attr("timeout"),
                    "Invalid timeout",
                    "`timeout` must be longer than zero.",
                ),
                Ok(_) => {}
                Err(message) => {
                    diagnostics.error_at(AttributePath::attr("timeout"), "Invalid timeout", message)
                }
            }
        }
        if let Some(ns) = &self.bootstrap_namespace {
            let path = AttributePath::attr("bootstrap_namespace");
            if check_namespace(ns, path.clone(), diagnostics) && Some(ns.as_str()) == namespace {
                diagnostics.error_at(path, "Bootstrap namespace is the FluxInstance's namespace", format!("The bootstrap namespace gets the `privileged` Pod Security level for its host-network Job; {ns:?} is where Flux runs. Use a namespace of its own (default `{DEFAULT_BOOTSTRAP_NAMESPACE}`)."));
            }
        }
        crate::resources::rbac::validate(
            self.rbac.as_ref(),
            AttributePath::attr("rbac"),
            diagnostics,
        );
        if let Some(DeletionPolicy::Other(p)) = &self.deletion_policy {
            diagnostics.error_at(
                AttributePath::attr("deletion_policy"),
                "Invalid deletion policy",
                // `keep` first: the bootstrap's default, unlike the chart resources'.
                format!("{p:?}: use `keep` or `uninstall`."),
            );
        }
        if let Some(sync) = &self.sync {
            let kinds = ["GitRepository", "OCIRepository", "Bucket"];
            one_of(
                diagnostics,
                AttributePath::attr("sync").then_attr("kind"),
                sync.kind.as_deref(),
                &kinds,
            );
        }
        if let Some(job) = &self.job {
            job.validate(diagnostics);
        }
    }
}

/// Why operator chart `values` keep the operator from ever reconciling the FluxInstance in
/// `namespace`, if they do.
fn operator_values_problem(values: &Json, namespace: &str) -> Option<String> {
    let envs = values.get("extraEnvs").and_then(Json::as_array);
    // The last entry of a name wins in a container's environment.
    let runtime = envs
        .into_iter()
        .flatten()
        .rev()
        .find(|e| e.get("name").and_then(Json::as_str) == Some("RUNTIME_NAMESPACE"));
    if let Some(env) = runtime {
        let value = env.get("value").and_then(Json::as_str);
        if value != Some(namespace) && !value.is_some_and(|v| v.contains('$')) {
            let set = match value {
                Some(v) => format!("to {v:?}"),
                None => "from elsewhere (`valueFrom`)".to_owned(),
            };
            return Some(format!(
                "`extraEnvs` sets RUNTIME_NAMESPACE {set}: the Flux Operator reconciles only the FluxInstance `flux` in its RUNTIME_NAMESPACE, so it would never reconcile this one in {namespace:?}. Remove that entry: the chart sets RUNTIME_NAMESPACE to the release namespace, which talosboot makes the FluxInstance's namespace."
            ));
        }
    }
    let server_only = values.pointer("/web/serverOnly").and_then(Json::as_bool) == Some(true)
        || values
            .get("extraArgs")
            .and_then(Json::as_array)
            .is_some_and(|a| a.iter().any(|v| v.as_str() == Some("--web-server-only")));
    if server_only {
        return Some("The values run the operator as its web UI only (`web.serverOnly: true` or `--web-server-only`): it would reconcile no FluxInstance. Remove that setting for the operator this resource installs.".to_owned());
    }
    None
}

fn is_config_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 253
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests;
