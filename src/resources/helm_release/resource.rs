//! Resource `talosboot_helm_release`: any chart, installed by the pre-CNI bootstrap engine (a Job on
//! the host network against KubePrism), as a drop-in for hashicorp/helm's `helm_release` v3 where
//! the arguments mean the same. Readiness (`wait`) is judged natively from the release manifest:
//! its Deployments, DaemonSets, StatefulSets and Jobs rolled out, and a diagnostic that names the
//! workload and pod that is not ready and why. Everything else is the shared Helm-release lifecycle.
//!
//! Not supported (and why): `repository_username`/`repository_password`/`repository_*_file`,
//! `verify`/`keyring` (credentials and keys would have to reach the Job: use an OCI mirror the
//! nodes can pull from), `postrender` (runs a local binary), `set_list` (use `values`),
//! `reuse_values`/`reset_values` (values are always exactly the configuration: that is what makes
//! drift visible), `force_update`, `recreate_pods`, `cleanup_on_fail`, `replace`, `lint`,
//! `dependency_update`, `skip_crds`, `render_subchart_notes`, `disable_*` hooks and webhooks. Local
//! chart directories are packaged at apply and shipped to the Job (at most about 1 MiB packaged).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use crate::cluster::bootstrap::{ApiEndpoint, BootstrapNamespace, JobSettings, KUBEPRISM};
use crate::cluster::helm_install::ChartInstall;
use crate::cluster::helm_release::HelmRelease;
use crate::cluster::helm_values::{SetValue, merged, values_parts};
use crate::cluster::readiness::{Kind, WorkloadRef};
use crate::framework::model::{Unknowns, decode};
use crate::framework::{
    Attribute, Block, Diagnostics, MoveRequest, Nesting, PlanRequest, PlanResponse, Schema,
};
use crate::resources::duration::parse_go_duration;
use crate::resources::private::Private;
use crate::resources::release::inputs::{
    CommonInputs, JobInput, job_attributes, job_settings, set_item, validate_common,
};
use crate::resources::release::moved::read_helm_state;
use crate::resources::release::plan::{PlanSpec, plan};
use crate::resources::release::resource::{ReleaseModel, ReleaseResource};
use crate::resources::release::{Observed, Readiness, Release, ReleaseFields, WorkloadSource};
use crate::values::{AttributePath, Type, Value};

pub const TYPE_NAME: &str = "talosboot_helm_release";

/// The `talosboot_helm_release` resource.
pub type HelmReleaseResource = ReleaseResource<ChartRelease>;

const UPGRADE_INPUTS: &[&str] = &[
    "chart",
    "repository",
    "version",
    "values",
    "set",
    "set_sensitive",
    "api_endpoint",
    "create_namespace",
];
const AFTER_UPGRADE: &[&str] = &[
    "status",
    "revision",
    "chart_version",
    "app_version",
    "ready",
];

/// Configuration, plan and state share one shape.
#[derive(Clone, Deserialize, Serialize, PartialEq, Default)]
pub struct ChartRelease {
    pub id: Option<String>,
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub chart: Option<String>,
    pub repository: Option<String>,
    pub version: Option<String>,
    pub values: Option<Vec<String>>,
    pub set: Option<Vec<SetValue>>,
    pub set_sensitive: Option<Vec<SetValue>>,
    pub set_wo: Option<Vec<SetValue>>,
    pub create_namespace: Option<bool>,
    pub timeout: Option<String>,
    pub wait: Option<bool>,
    pub atomic: Option<bool>,
    pub max_history: Option<i64>,
    pub description: Option<String>,
    pub api_endpoint: Option<String>,
    pub adopt_existing: Option<bool>,
    pub job: Option<JobInput>,
    pub rbac: Option<String>,
    pub deletion_policy: Option<String>,
    pub status: Option<String>,
    pub revision: Option<i64>,
    pub chart_version: Option<String>,
    pub app_version: Option<String>,
    pub values_sha256: Option<String>,
    pub chart_sha256: Option<String>,
    pub ready: Option<bool>,
}

/// Never prints values: they can hold secrets.
impl std::fmt::Debug for ChartRelease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChartRelease")
            .field("id", &self.id)
            .field("chart", &self.chart)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

/// `helm_release` takes a number of seconds (`timeout = 300`); a Go duration works too.
fn parse_timeout(t: &str) -> Result<Duration, String> {
    match t.trim().parse::<u64>() {
        Ok(secs) => Ok(Duration::from_secs(secs)),
        Err(_) => parse_go_duration(t),
    }
}

fn schema() -> Schema {
    let opt = |name, ty, doc| Attribute::optional(name, ty, doc);
    let oc = |name, ty, doc| Attribute::optional_computed(name, ty, doc);
    let comp = |name, ty, doc| Attribute::computed(name, ty, doc);
    Schema::new(
        0,
        Block::new(
            "Installs a Helm chart the pre-CNI-safe way: `helm upgrade --install` runs in a one-shot bootstrap Job on the host network against the API endpoint outside the Service CIDR (Talos KubePrism), readiness is judged natively from the release manifest, and a failed install is kept in state (tainted) instead of lost. A drop-in for hashicorp/helm's `helm_release` where the arguments mean the same.",
            vec![
                comp("id", Type::String, "`<namespace>/<name>`."),
                Attribute::required("name", Type::String, "Release name. Changing it replaces the release.").requires_replace(),
                oc("namespace", Type::String, "Release namespace. Default `default`. Changing it replaces the release.").requires_replace(),
                Attribute::required("chart", Type::String, "Chart name in `repository`, a full `oci://` reference, or a local chart directory (`./charts/app`, `/srv/charts/app`: read at plan for its digest (`chart_sha256`: an edit inside it plans an upgrade), packaged at apply and shipped to the bootstrap Job in its ConfigMap, so at most about 1 MiB packaged)."),
                opt("repository", Type::String, "Chart repository URL (`https://...`) or OCI registry path (`oci://...`)."),
                oc("version", Type::String, "Chart version. When unset, the repository's latest at install time; the state then records the installed version."),
                opt("values", Type::list(Type::String), "Values documents (YAML), merged in order; later ones win."),
                opt("set", Type::Dynamic, "Single values, applied after `values`, as `helm --set`.").nested(Nesting::List, set_item(false)),
                opt("set_sensitive", Type::Dynamic, "Like `set`, for secrets: hidden in plan output, never logged, passed to the installer through a Secret; the values are stored in state as configured (as with `helm_release`: keep the state encrypted), while `values_sha256` is a salted hash.").nested(Nesting::List, set_item(true)).sensitive(),
                oc("create_namespace", Type::Bool, "Create the release namespace if it is missing. Default `false`."),
                crate::resources::release::inputs::set_wo_attribute(),
                oc("timeout", Type::String, "How long the whole operation may take: seconds (`300`, as `helm_release`) or a Go duration (`10m`, `1h30m`). Default `300`."),
                oc("wait", Type::Bool, "Wait until the workloads of the release manifest (Deployments, DaemonSets, StatefulSets, Jobs) are rolled out. Default `true`."),
                oc("atomic", Type::Bool, "`helm --atomic`: a failed install is uninstalled, a failed upgrade rolled back. Default `false`."),
                oc("max_history", Type::Number, "Revisions Helm keeps. Default `10`."),
                opt("description", Type::String, "Description recorded with the revision."),
                oc("api_endpoint", Type::String, &format!("API endpoint of the bootstrap pod, outside the Service CIDR, `HOST:PORT`. Default `{KUBEPRISM}` (Talos KubePrism).")),
                oc("adopt_existing", Type::Bool, "Take objects that exist without Helm's ownership metadata under the release in place (`helm --take-ownership`). Default `false`."),
                opt("job", Type::Dynamic, "The bootstrap pod: image, placement and environment.").nested(Nesting::Single, job_attributes()),
                crate::resources::rbac::attribute(),
                oc("deletion_policy", Type::String, "`uninstall` (default) or `keep` (destroy only forgets the release)."),
                comp("status", Type::String, "Status of the current revision: `deployed`, `failed`, `pending-install`, ..."),
                comp("revision", Type::Number, "Current revision."),
                comp("chart_version", Type::String, "Chart version of the current revision."),
                comp("app_version", Type::String, "App version of the current revision."),
                comp("values_sha256", Type::String, "Salted hash of the release's values (`hmac-sha256:` + hex)."),
                comp("chart_sha256", Type::String, "For a local chart directory: SHA-256 of its files, read at plan, so an edit inside it plans an upgrade without a version bump. Null for charts from a repository."),
                comp("ready", Type::Bool, "Whether every workload of the release manifest is rolled out."),
            ],
        ),
    )
}

impl ChartRelease {
    fn ns(&self) -> &str {
        self.namespace.as_deref().unwrap_or("default")
    }
    fn endpoint(&self) -> ApiEndpoint {
        ApiEndpoint::parse(self.api_endpoint.as_deref().unwrap_or(KUBEPRISM))
            .or_else(|_| ApiEndpoint::parse(KUBEPRISM))
            .expect("the default endpoint parses")
    }
    fn values_parts(&self) -> Result<(Json, Json), String> {
        values_parts(
            json!({}),
            self.values.as_deref(),
            self.set.as_deref(),
            self.set_sensitive
                .iter()
                .flatten()
                .chain(self.set_wo.iter().flatten()),
        )
    }
}

/// `chart` names a local chart directory when it is a path (`./charts/app`, `/srv/charts/app`).
fn local_chart(chart: &str) -> Option<&std::path::Path> {
    let path = std::path::Path::new(chart);
    (chart.starts_with("./") || chart.starts_with("../") || chart.starts_with('/')).then_some(path)
}

/// SHA-256 of a local chart directory's files (relative paths and contents, in path order): what
/// packaging ships, so a template edited without a version bump still plans an upgrade.
fn chart_digest(dir: &std::path::Path) -> Result<String, String> {
    use sha2::{Digest, Sha256};
    let mut files: Vec<(String, std::path::PathBuf)> = walk(dir)?
        .into_iter()
        .map(|e| {
            let path = e.path();
            let relative = path
                .strip_prefix(dir)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            (relative, path)
        })
        .collect();
    files.sort();
    let mut hasher = Sha256::new();
    for (relative, path) in files {
        let content = std::fs::read(&path)
            .map_err(|e| format!("local chart {}: {}", path.display(), e.kind()))?;
        hasher.update(relative.as_bytes());
        hasher.update([0]);
        hasher.update((content.len() as u64).to_be_bytes());
        hasher.update(&content);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Plans `chart_sha256`: the digest of a local chart directory as it is now (unknown while `chart`
/// is), and an upgrade when it differs from the one in state. A directory that cannot be read is
/// an error at plan, on `chart`.
fn plan_chart_digest(resp: &mut PlanResponse, prior: Option<&Value>) {
    let digest = match resp.planned_state.attr("chart") {
        Some(Value::String(chart)) => match local_chart(chart) {
            Some(dir) => match chart_digest(dir) {
                Ok(d) => Value::from(d),
                Err(message) => {
                    resp.diagnostics.error_at(
                        AttributePath::attr("chart"),
                        "Local chart cannot be read",
                        format!("{message}. A local chart is read at plan (its digest) and packaged at apply: check the path (relative paths start at the root module's directory; `${{path.module}}/charts/app` is safer)."),
                    );
                    return;
                }
            },
            None => Value::Null,
        },
        Some(Value::Null) => Value::Null,
        _ => Value::unknown(),
    };
    let changed = prior.is_some_and(|p| !digest.is_unknown() && p != &digest);
    if let Some(attrs) = resp.planned_state.attrs_mut() {
        attrs.insert("chart_sha256".into(), digest);
    }
    if changed {
        crate::framework::plan::mark_unknown(&mut resp.planned_state, AFTER_UPGRADE);
    }
}

/// The largest local chart shipped to the Job (the ConfigMap it travels in holds 1 MiB).
const MAX_LOCAL_CHART: u64 = 8 * 1024 * 1024;

/// Packages a local chart directory as Helm does (`<name>/...` in a gzipped tar), read at apply;
/// returns the chart's name (from `Chart.yaml`) and the archive.
fn package_chart(dir: &std::path::Path) -> Result<(String, Vec<u8>), String> {
    let chart_yaml = std::fs::read_to_string(dir.join("Chart.yaml")).map_err(|e| {
        format!(
            "local chart {}: cannot read Chart.yaml ({})",
            dir.display(),
            e.kind()
        )
    })?;
    let meta: Json = serde_saphyr::from_str(&chart_yaml).map_err(|_| {
        format!(
            "local chart {}: Chart.yaml is not valid YAML",
            dir.display()
        )
    })?;
    let name = meta
        .get("name")
        .and_then(Json::as_str)
        .filter(|n| !n.is_empty() && !n.contains('/'))
        .ok_or_else(|| format!("local chart {}: Chart.yaml has no `name`", dir.display()))?
        .to_owned();
    let mut total = 0u64;
    for entry in walk(dir)? {
        total += entry.metadata().map(|m| m.len()).unwrap_or(0);
    }
    if total > MAX_LOCAL_CHART {
        return Err(format!(
            "local chart {} is {} KiB: too large to ship to the bootstrap Job; publish it to an OCI registry or a chart repository",
            dir.display(),
            total / 1024
        ));
    }
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    tar.append_dir_all(&name, dir).map_err(|e| {
        format!(
            "local chart {}: cannot package it ({})",
            dir.display(),
            e.kind()
        )
    })?;
    let gz = tar
        .into_inner()
        .map_err(|e| format!("cannot package the chart ({})", e.kind()))?;
    let archive = gz
        .finish()
        .map_err(|e| format!("cannot package the chart ({})", e.kind()))?;
    Ok((name, archive))
}

fn walk(dir: &std::path::Path) -> Result<Vec<std::fs::DirEntry>, String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d)
            .map_err(|e| format!("local chart {}: {}", d.display(), e.kind()))?;
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            } else {
                out.push(entry);
            }
        }
    }
    Ok(out)
}

impl Release for ChartRelease {
    fn label(&self) -> String {
        let version = self
            .version
            .as_deref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        format!(
            "chart {}{version} ({})",
            self.chart.clone().unwrap_or_default(),
            self.id()
        )
    }
    fn id(&self) -> String {
        format!("{}/{}", self.ns(), self.name.clone().unwrap_or_default())
    }
    fn release_name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }
    fn release_namespace(&self) -> &str {
        self.ns()
    }
    fn timeout(&self) -> Duration {
        self.timeout
            .as_deref()
            .and_then(|t| parse_timeout(t).ok())
            .unwrap_or(Duration::from_secs(300))
    }
    fn wait(&self) -> bool {
        self.wait.unwrap_or(true)
    }
    fn keep_on_destroy(&self) -> bool {
        self.deletion_policy.as_deref() == Some("keep")
    }
    fn chart_install(&self) -> Result<ChartInstall, String> {
        let (plain, sensitive) = self.values_parts()?;
        let empty = sensitive.as_object().is_some_and(|o| o.is_empty());
        let chart = self.chart.clone().unwrap_or_default();
        let (chart, archive) = match local_chart(&chart) {
            Some(dir) => {
                let (name, archive) = package_chart(dir)?;
                (format!("{name}.tgz"), Some(archive))
            }
            None => (chart, None),
        };
        Ok(ChartInstall {
            release: self.release_name().into(),
            namespace: self.ns().into(),
            repository: if archive.is_some() {
                None
            } else {
                self.repository.clone()
            },
            chart,
            version: self.version.clone().unwrap_or_default(),
            values_yaml: vec![plain.to_string()],
            sensitive_values_yaml: if empty {
                Vec::new()
            } else {
                vec![sensitive.to_string()]
            },
            create_namespace: self.create_namespace.unwrap_or(false),
            take_ownership: self.adopt_existing.unwrap_or(false),
            description: self.description.clone(),
            atomic: self.atomic.unwrap_or(false),
            history_max: self.max_history.and_then(|n| u32::try_from(n).ok()),
            chart_archive: archive,
        })
    }
    fn job_settings(&self) -> JobSettings {
        JobSettings {
            rbac: crate::resources::rbac::policy(self.rbac.as_deref()),
            ..job_settings(self.job.as_ref(), self.endpoint())
        }
    }
    fn bootstrap_namespace(&self) -> BootstrapNamespace {
        // kube-system is exempt from Pod Security on Talos and always exists.
        BootstrapNamespace::named("kube-system")
    }
    fn readiness(&self, release: Option<&HelmRelease>) -> Readiness {
        let ns = self.ns().to_owned();
        let workloads = release
            .map(|r| r.workloads.as_slice())
            .unwrap_or_default()
            .iter()
            .filter(|w| w.namespace.as_deref().is_none_or(|n| n == ns))
            .filter_map(|w| {
                Some(WorkloadRef {
                    kind: Kind::of(&w.kind)?,
                    namespace: ns.clone(),
                    name: w.name.clone(),
                })
            })
            .collect();
        Readiness {
            workloads,
            pods: format!("app.kubernetes.io/instance={}", self.release_name()),
            nodes: false,
        }
    }
    fn workload_source(&self) -> WorkloadSource {
        WorkloadSource::Manifest
    }
    fn status(&self) -> Option<&str> {
        self.status.as_deref()
    }
    fn revision(&self) -> Option<i64> {
        self.revision
    }
    fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }
    fn values_sha256(&self) -> Option<&str> {
        self.values_sha256.as_deref()
    }
    fn content_digest(&self) -> Option<&str> {
        self.chart_sha256.as_deref()
    }
    fn record(&mut self, f: &ReleaseFields, o: &Observed) {
        self.status = Some(f.status.clone());
        self.revision = Some(f.revision);
        self.chart_version = Some(f.chart_version.clone());
        self.app_version = Some(f.app_version.clone());
        self.values_sha256 = Some(f.values_sha256.clone());
        self.version = Some(f.version.clone());
        self.ready = Some(o.unhealthy().is_empty());
    }
}

impl ReleaseModel for ChartRelease {
    const TYPE_NAME: &'static str = TYPE_NAME;

    fn schema() -> Schema {
        schema()
    }
    fn validate(&self, d: &mut Diagnostics) {
        validate_common(
            &CommonInputs {
                name: self.name.as_deref(),
                namespace: self.namespace.as_deref(),
                api_endpoint: self.api_endpoint.as_deref(),
                deletion_policy: self.deletion_policy.as_deref(),
                repository: self.repository.as_deref(),
                values: self.values.as_deref(),
                set: self.set.as_deref(),
                set_sensitive: self.set_sensitive.as_deref(),
                job: self.job.as_ref(),
            },
            d,
        );
        crate::resources::rbac::validate(self.rbac.as_deref(), AttributePath::attr("rbac"), d);
        if let Some(t) = &self.timeout {
            if let Err(e) = parse_timeout(t) {
                d.error_at(
                    AttributePath::attr("timeout"),
                    "Invalid timeout",
                    format!("{e}, or a number of seconds as `helm_release` takes it (`300`)"),
                );
            }
        }
        if self.chart.as_deref() == Some("") {
            d.error_at(
                AttributePath::attr("chart"),
                "Empty chart",
                "`chart` names the chart to install.",
            );
        }
        if let Some(n) = self.max_history {
            if n < 0 {
                d.error_at(
                    AttributePath::attr("max_history"),
                    "Invalid max_history",
                    "`max_history` must be 0 or more.",
                );
            }
        }
    }
    fn plan(req: PlanRequest) -> PlanResponse {
        let merged = |planned: &Value| {
            decode::<ChartRelease>(planned, Unknowns::AsNull)
                .ok()
                .and_then(|c| c.merged_values().ok())
        };
        let spec = PlanSpec {
            defaults: vec![
                ("namespace", Value::from("default")),
                ("create_namespace", Value::from(false)),
                ("timeout", Value::from("300")),
                ("wait", Value::from(true)),
                ("atomic", Value::from(false)),
                ("max_history", Value::int(10)),
                ("api_endpoint", Value::from(KUBEPRISM)),
                ("adopt_existing", Value::from(false)),
                ("deletion_policy", Value::from("uninstall")),
                ("rbac", Value::from(crate::resources::rbac::DEFAULT)),
            ],
            value_inputs: &["values", "set", "set_sensitive"],
            upgrade_inputs: UPGRADE_INPUTS,
            after_upgrade: AFTER_UPGRADE,
            merged_values: &merged,
        };
        let unset_version = req.config.attr("version").is_none_or(Value::is_null);
        let prior_digest = (!req.prior_state.is_null())
            .then(|| req.prior_state.attr("chart_sha256").cloned())
            .flatten()
            .filter(|d| !d.is_null());
        let mut resp = plan(req, &spec);
        plan_chart_digest(&mut resp, prior_digest.as_ref());
        if unset_version
            && resp
                .planned_state
                .attr("version")
                .is_none_or(Value::is_null)
        {
            if let Some(attrs) = resp.planned_state.attrs_mut() {
                attrs.insert("version".into(), Value::unknown());
            }
        }
        resp
    }
    fn with_defaults(mut self) -> Self {
        self.namespace.get_or_insert_with(|| "default".into());
        self.create_namespace.get_or_insert(false);
        self.timeout.get_or_insert_with(|| "300".into());
        self.wait.get_or_insert(true);
        self.atomic.get_or_insert(false);
        self.max_history.get_or_insert(10);
        self.api_endpoint.get_or_insert_with(|| KUBEPRISM.into());
        self.adopt_existing.get_or_insert(false);
        self.deletion_policy
            .get_or_insert_with(|| "uninstall".into());
        self.rbac
            .get_or_insert_with(|| crate::resources::rbac::DEFAULT.into());
        // What the plan read; a chart edited between plan and apply fails as inconsistent.
        if let Some(dir) = self.chart.as_deref().and_then(local_chart) {
            self.chart_sha256 = chart_digest(dir).ok();
        }
        self.id = Some(self.id());
        self
    }
    fn merged_values(&self) -> Result<Json, String> {
        self.values_parts().map(merged)
    }
    fn set_values_sha256(&mut self, hash: Option<String>) {
        self.values_sha256 = hash;
    }
    fn keep_computed(&mut self, prior: &Self) {
        self.status = prior.status.clone();
        self.revision = prior.revision;
        self.chart_version = prior.chart_version.clone();
        self.app_version = prior.app_version.clone();
        self.values_sha256 = prior.values_sha256.clone();
        self.ready = prior.ready;
    }
    fn for_import(namespace: &str, name: &str) -> Self {
        ChartRelease {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        }
    }
    fn moved(req: &MoveRequest, d: &mut Diagnostics) -> Option<(Self, Private)> {
        let (h, private) = read_helm_state(req, TYPE_NAME, d)?;
        let mut state = ChartRelease {
            name: h.name,
            namespace: h.namespace,
            chart: Some(h.chart),
            repository: h.repository,
            version: h.version,
            values: h.values,
            set: h.set,
            set_sensitive: h.set_sensitive,
            wait: h.wait,
            create_namespace: h.create_namespace,
            atomic: h.atomic,
            max_history: h.max_history,
            description: h.description,
            status: h.status,
            revision: h.revision,
            chart_version: h.chart_version,
            app_version: h.app_version,
            ..Default::default()
        }
        .with_defaults();
        state.values_sha256 = h.values_sha256;
        Some((state, private))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_take_seconds_like_helm_release_or_go_durations() {
        assert_eq!(parse_timeout("300"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_timeout("1h30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_timeout("five minutes").is_err());
    }

    #[test]
    fn readiness_comes_from_the_release_manifest_in_its_namespace() {
        let c = ChartRelease {
            name: Some("argocd".into()),
            namespace: Some("argocd".into()),
            ..Default::default()
        };
        let release = HelmRelease {
            name: "argocd".into(),
            namespace: "argocd".into(),
            revision: 1,
            status: "deployed".into(),
            chart: "argo-cd".into(),
            chart_version: "9.4.15".into(),
            app_version: "v3".into(),
            last_deployed: String::new(),
            description: String::new(),
            values_sha256: String::new(),
            workloads: vec![
                crate::cluster::helm_release::ManifestWorkload {
                    kind: "Deployment".into(),
                    namespace: None,
                    name: "argocd-server".into(),
                },
                crate::cluster::helm_release::ManifestWorkload {
                    kind: "StatefulSet".into(),
                    namespace: Some("argocd".into()),
                    name: "argocd-application-controller".into(),
                },
                crate::cluster::helm_release::ManifestWorkload {
                    kind: "Deployment".into(),
                    namespace: Some("elsewhere".into()),
                    name: "x".into(),
                },
            ],
            kinds: Vec::new(),
        };
        let r = c.readiness(Some(&release));
        assert_eq!(r.workloads.len(), 2);
        assert_eq!(r.workloads[1].kind, Kind::StatefulSet);
        assert_eq!(r.pods, "app.kubernetes.io/instance=argocd");
    }
}
