//! The pre-CNI bootstrap engine: one run of "a program in a pod, before any CNI exists", shared
//! by every resource that needs one (Cilium and other chart installs, the Flux bootstrap).
//!
//! A run is a sequence of small named [`Step`]s:
//! 1. the bootstrap namespace: created if missing (labels and annotations from the start, and the
//!    Pod Security level a host-network pod needs); an existing one is used as it is;
//! 2. the Lease of the target, held and renewed for the whole run ([`lease`]);
//! 3. leftovers of earlier runs of the same target removed; a ServiceAccount, its binding (to
//!    `cluster-admin`, or to the run's own ClusterRole/Roles with exactly the rules of
//!    [`Rbac::Minimal`], see [`rbac`]), a ConfigMap with the input files and a Secret with the
//!    sensitive ones ([`objects`]);
//! 4. one Job, named per run (Jobs are immutable: never patched), on the host network with the API
//!    endpoint outside the Service CIDR (KubePrism), deadline = what is left of the timeout;
//! 5. a watch of the Job, its pod and their events until it succeeds, fails, cannot start or the
//!    deadline passes ([`wait`]);
//! 6. cleanup: after success everything goes; after a failure the Job and its pod stay for
//!    `kubectl logs` until the next run; the ServiceAccount, bindings and roles, ConfigMap and
//!    Secret always go. Cleanup problems are warnings, never a failed run.
//!
//! Interrupted (StopProvider): the Job is deleted, the Lease released. Killed outright: the Job's
//! deadline and the Lease's expiry bound what is left.

pub mod diagnosis;
pub mod lease;
pub mod objects;
pub mod rbac;
pub mod report;
pub mod wait;

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

pub use diagnosis::{Diagnosis, diagnose};
pub use report::PodReport;
use wait::JobWait;

use super::retry::retry;
use super::{ClusterError, ClusterHandle};

/// The bootstrap pod's API endpoint, outside the Service CIDR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiEndpoint {
    pub host: String,
    pub port: u16,
}

/// Talos KubePrism: every node, before any CNI, with a certificate that covers `localhost`.
pub const KUBEPRISM: &str = "localhost:7445";

impl ApiEndpoint {
    /// `host:port`, `https://host:port`, `https://host` (port 443) or `[v6]:port` (the host kept
    /// without brackets, as `KUBERNETES_SERVICE_HOST` takes it). One parser for the resources'
    /// `api_endpoint` and the `cilium_talos_values` function.
    ///
    /// # Errors
    /// [`EndpointError`] for another scheme, a path, a missing host or port, or a bad port.
    pub fn parse(endpoint: &str) -> Result<ApiEndpoint, EndpointError> {
        let trimmed = endpoint.trim();
        let (rest, default_port) = match trimmed.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => (rest, Some(443)),
            Some(_) => return Err(EndpointError::Scheme(endpoint.to_owned())),
            None => (trimmed, None),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let shape = || EndpointError::Shape(endpoint.to_owned());
        if rest.contains(['/', '?', '#', '@']) || rest.chars().any(char::is_whitespace) {
            return Err(shape());
        }
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or_else(shape)?;
            match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None if after.is_empty() => (host, None),
                None => return Err(shape()),
            }
        } else {
            match rest.split_once(':') {
                Some((host, port)) if !port.contains(':') => (host, Some(port)),
                Some(_) => return Err(shape()), // a bare IPv6 address needs brackets
                None => (rest, None),
            }
        };
        if host.is_empty() {
            return Err(shape());
        }
        let port = match (port, default_port) {
            (Some(p), _) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| EndpointError::Port(endpoint.to_owned()))?,
            (None, Some(p)) => p,
            (None, None) => return Err(shape()),
        };
        Ok(ApiEndpoint {
            host: host.to_owned(),
            port,
        })
    }
}

/// Why an API endpoint could not be split into host and port.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("only https:// endpoints are supported, got {0:?}")]
    Scheme(String),
    #[error("expected host:port (e.g. \"localhost:7445\" or \"https://10.5.0.2:6443\"), got {0:?}")]
    Shape(String),
    #[error("invalid port in {0:?}: expected 1-65535")]
    Port(String),
}

impl fmt::Display for ApiEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// How and where the bootstrap pod runs.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSettings {
    pub image: String,
    pub pull_policy: Option<String>,
    pub host_network: bool,
    /// `None`: keep the kubelet's `KUBERNETES_SERVICE_*` (only works once a pod network exists).
    pub api_endpoint: Option<ApiEndpoint>,
    pub node_selector: BTreeMap<String, String>,
    /// Kubernetes Tolerations, in addition to the engine's (not-ready, control-plane).
    pub tolerations: Vec<serde_json::Value>,
    pub affinity: Option<serde_json::Value>,
    pub env: BTreeMap<String, String>,
    /// Annotations of the pod (policy tools, sidecar injectors opting out, ...).
    pub annotations: BTreeMap<String, String>,
    /// What the run's ServiceAccount may ask for: chart installs resolve it into the
    /// [`RunSpec::rbac`] of each run.
    pub rbac: rbac::RbacPolicy,
}

impl JobSettings {
    /// The Talos defaults: host network and KubePrism.
    pub fn talos(image: &str) -> JobSettings {
        JobSettings {
            image: image.to_owned(),
            pull_policy: None,
            host_network: true,
            api_endpoint: ApiEndpoint::parse(KUBEPRISM).ok(),
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
            affinity: None,
            env: BTreeMap::new(),
            annotations: BTreeMap::new(),
            rbac: rbac::RbacPolicy::ClusterAdmin,
        }
    }
}

/// The namespace the bootstrap objects live in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapNamespace {
    pub name: String,
    /// Set when the engine creates the namespace (admission policies read them at creation).
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

impl BootstrapNamespace {
    pub fn named(name: &str) -> BootstrapNamespace {
        BootstrapNamespace {
            name: name.to_owned(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
        }
    }
}

/// What the run's ServiceAccount may do (see [`rbac`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Rbac {
    /// Bound to `cluster-admin` for the run.
    #[default]
    ClusterAdmin,
    /// Exactly these rules, granted for the run by its own ClusterRole (rules without a
    /// namespace) and Roles (rules limited to a namespace), deleted after it. A run that lacks a
    /// permission fails with a diagnosis naming the verb and resource. E.g.
    /// [`rbac::helm_install_rules`] of what a chart renders. No rules at all: the ServiceAccount
    /// is bound to nothing (a `helm template` run).
    Minimal(Vec<rbac::Rule>),
}

/// One run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// For messages: "install Cilium 1.18.4 as kube-system/cilium".
    pub purpose: String,
    /// One run per target at a time (the Lease key), e.g. `helm/kube-system/cilium`.
    pub target: String,
    pub namespace: BootstrapNamespace,
    pub job: JobSettings,
    /// The container's argv (no shell).
    pub command: Vec<String>,
    /// Mounted read-only under [`objects::INPUTS_DIR`].
    pub files: BTreeMap<String, String>,
    /// Binary inputs (a packaged chart), mounted beside `files` (ConfigMap `binaryData`).
    pub binary_files: BTreeMap<String, Vec<u8>>,
    /// Mounted read-only under [`objects::SECRETS_DIR`], from a Secret (only when not empty).
    pub secret_files: BTreeMap<String, String>,
    /// The whole run, Lease wait included: the Job's deadline is what is left of it.
    pub timeout: Duration,
    pub rbac: Rbac,
    /// Return the program's whole output (bounded by [`MAX_OUTPUT`]) in [`RunOutcome::output`]:
    /// only for programs whose output is made safe to read (no values, no secrets).
    pub capture_output: bool,
}

/// The most output a run returns (a rendered chart's kinds: a few lines per object).
pub const MAX_OUTPUT: i64 = 4 * 1024 * 1024;

/// The steps of a run, as messages name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Connect,
    Namespace,
    Lease,
    Objects,
    Job,
    Wait,
    Release,
    ReadRelease,
    Render,
    Readiness,
    Preflight,
}

impl Step {
    pub fn describe(self) -> &'static str {
        match self {
            Step::Connect => "connect to the cluster",
            Step::Namespace => "prepare the bootstrap namespace",
            Step::Lease => "take the bootstrap Lease",
            Step::Objects => "create the bootstrap objects",
            Step::Job => "create the bootstrap Job",
            Step::Wait => "run the bootstrap Job",
            Step::Release => "prepare the Helm release",
            Step::ReadRelease => "read the Helm release",
            Step::Render => "learn what the chart creates (rbac = \"minimal\")",
            Step::Readiness => "wait for the workloads to become ready",
            Step::Preflight => "check the cluster before installing",
        }
    }
}

/// A run that did not succeed: which step, what happened, what the pod left behind, and the known
/// signature it matches. Turned into one diagnostic by the resources' shared reporter.
#[derive(Debug)]
pub struct EngineError {
    pub step: Step,
    pub message: String,
    pub cause: Option<ClusterError>,
    pub report: Option<PodReport>,
    pub diagnosis: Option<Diagnosis>,
    /// `namespace/name` of a failed Job kept for `kubectl logs`.
    pub kept_job: Option<String>,
    pub interrupted: bool,
    /// Cleanup problems met on the way out.
    pub warnings: Vec<String>,
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "failed to {}: {}", self.step.describe(), self.message)
    }
}

impl std::error::Error for EngineError {}

impl EngineError {
    pub fn new(step: Step, message: impl Into<String>) -> EngineError {
        EngineError {
            step,
            message: message.into(),
            cause: None,
            report: None,
            diagnosis: None,
            kept_job: None,
            interrupted: false,
            warnings: Vec::new(),
        }
    }
    pub fn api(step: Step, cause: ClusterError) -> EngineError {
        let mut e = EngineError::new(step, cause.to_string());
        e.cause = Some(cause);
        e
    }
    pub fn interrupted(step: Step, what: &str) -> EngineError {
        let mut e = EngineError::new(
            step,
            format!("interrupted while {what} (Terraform/OpenTofu asked the provider to stop)"),
        );
        e.interrupted = true;
        e
    }
    pub fn with_diagnosis(mut self, texts: &[&str]) -> EngineError {
        if self.diagnosis.is_none() {
            self.diagnosis = diagnose(texts.iter().copied());
        }
        self
    }
}

/// A finished run.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub job: String,
    pub duration: Duration,
    /// The last lines of the program's output.
    pub log_tail: Vec<String>,
    /// The whole output, when [`RunSpec::capture_output`] asked for it.
    pub output: Option<String>,
    /// Waiting for another run, cleanup problems: worth a warning, not a failure.
    pub warnings: Vec<String>,
}

/// The clients a run uses: one for ordinary requests, one for long-lived watches and log streams.
#[derive(Clone)]
pub struct Clients {
    pub client: kube::Client,
    pub stream: kube::Client,
    pub endpoint: String,
}

impl Clients {
    pub async fn connect(cluster: &ClusterHandle) -> Result<Clients, EngineError> {
        let connect = |e| EngineError::api(Step::Connect, e);
        let (client, endpoint) = cluster.client().await.map_err(connect)?;
        let (stream, _) = cluster.stream_client().await.map_err(connect)?;
        Ok(Clients {
            client,
            stream,
            endpoint,
        })
    }
    pub fn api_error(&self, step: Step, e: kube::Error) -> EngineError {
        EngineError::api(step, ClusterError::from_kube(e, &self.endpoint))
    }
}

/// Lower-case, dash-separated, at most `max` characters: for object names.
fn slug(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    while out.contains("--") {
        out = out.replace("--", "-");
    }
    out.truncate(max);
    out.trim_matches('-').to_owned()
}

fn hex_digest(s: &str, len: usize) -> String {
    let digest = Sha256::digest(s.as_bytes());
    digest
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()[..len]
        .to_owned()
}

fn new_run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    hex_digest(&format!("{nanos}/{}", std::process::id()), 8)
}

fn holder_identity(run_id: &str) -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown-host".into());
    format!("talosboot@{host}/pid-{}/run-{run_id}", std::process::id())
}

/// The Lease of a target: `talosboot-<target>` (e.g. `talosboot-helm-kube-system-cilium`), with a
/// hash suffix only when the target is too long for a name.
pub fn lease_name(target: &str) -> String {
    let full = slug(target, 200);
    if full.len() <= 53 {
        format!("talosboot-{full}")
    } else {
        format!("talosboot-{}-{}", slug(target, 40), hex_digest(target, 8))
    }
}

/// Runs `spec` to the end. See the module docs for the steps.
pub async fn run(
    clients: &Clients,
    spec: &RunSpec,
    cancel: &CancellationToken,
) -> Result<RunOutcome, EngineError> {
    run_with(clients, spec, cancel, || async { Ok(()) })
        .await
        .map(|(outcome, ())| outcome)
}

/// [`run`], with `before_job` run once the target's Lease is held and before any object of the
/// run exists: work on the target that must not race another run (unlocking a release left
/// `pending-*` is only safe when no other run's installer can be writing it). Its error ends the
/// run (the Lease is released).
pub async fn run_with<T, F, Fut>(
    clients: &Clients,
    spec: &RunSpec,
    cancel: &CancellationToken,
    before_job: F,
) -> Result<(RunOutcome, T), EngineError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<T, EngineError>>,
{
    let started = Instant::now();
    let deadline = started + spec.timeout;
    let ns = &spec.namespace.name;
    ensure_namespace(clients, spec).await?;
    let run_id = new_run_id();
    let lease_name = lease_name(&spec.target);
    let lease = lease::acquire(
        Api::namespaced(clients.client.clone(), ns),
        &clients.endpoint,
        &lease_name,
        &holder_identity(&run_id),
        deadline,
        cancel,
    )
    .await?;
    let names = objects::RunNames {
        object: format!("talosboot-{}-{run_id}", slug(&spec.target, 30)),
        run_id,
        target_label: hex_digest(&spec.target, 16),
    };
    let before = match before_job().await {
        Ok(t) => t,
        Err(mut e) => {
            if let Some(w) = lease.release().await {
                e.warnings.push(w);
            }
            return Err(e);
        }
    };
    let mut warnings = Vec::new();
    if let Some((holder, waited)) = &lease.waited {
        warnings.push(format!(
            "Waited {}s for another run on the same target to finish (Lease {lease_name}, holder {holder}).",
            waited.as_secs()
        ));
    }
    warnings.extend(remove_earlier_runs(clients, spec, &names).await);
    let result = run_job(clients, spec, &names, deadline, cancel).await;
    let kept = matches!(&result, Err(e) if e.kept_job.is_some());
    warnings.extend(cleanup(clients, spec, &names, !kept).await);
    if let Some(w) = lease.release().await {
        warnings.push(w);
    }
    match result {
        Ok((log_tail, output)) => Ok((
            RunOutcome {
                job: format!("{ns}/{}", names.object),
                duration: started.elapsed(),
                log_tail,
                output,
                warnings,
            },
            before,
        )),
        Err(mut e) => {
            e.warnings.extend(warnings);
            super::kube_proxy::explain(clients, &mut e.diagnosis).await;
            Err(e)
        }
    }
}

/// Creates the namespace when missing. An existing namespace is used as it is: if its Pod Security
/// level refuses the pod, the Job's `FailedCreate` event ends the wait at once with that diagnosis.
async fn ensure_namespace(clients: &Clients, spec: &RunSpec) -> Result<(), EngineError> {
    let api: Api<Namespace> = Api::all(clients.client.clone());
    let name = &spec.namespace.name;
    let existing = retry("get namespace", || api.get_opt(name))
        .await
        .map_err(|e| clients.api_error(Step::Namespace, e))?;
    if let Some(ns) = existing {
        let level = ns
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(objects::PSA_ENFORCE))
            .cloned();
        if spec.job.host_network && matches!(level.as_deref(), Some("baseline" | "restricted")) {
            let message = format!(
                "namespace {name} enforces Pod Security {:?}, which refuses the bootstrap pod: violates PodSecurity \"{}:latest\": host namespaces (hostNetwork=true)",
                level.clone().unwrap_or_default(),
                level.unwrap_or_default()
            );
            return Err(
                EngineError::new(Step::Namespace, message.clone()).with_diagnosis(&[&message])
            );
        }
        if ns.metadata.deletion_timestamp.is_some() {
            return Err(EngineError::new(
                Step::Namespace,
                format!("namespace {name} is being deleted; wait for it to go, then apply again"),
            ));
        }
        return Ok(());
    }
    match api
        .create(
            &PostParams::default(),
            &objects::namespace(&spec.namespace, spec.job.host_network),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(clients.api_error(Step::Namespace, e)),
    }
}

/// Jobs (and leftovers of killed runs) of earlier runs of this target: a failed Job stays for
/// `kubectl logs` until the next run, which is now.
async fn remove_earlier_runs(
    clients: &Clients,
    spec: &RunSpec,
    names: &objects::RunNames,
) -> Vec<String> {
    let selector = format!("{}={}", objects::TARGET_LABEL, names.target_label);
    let mut warnings = Vec::new();
    warnings.extend(delete_target_jobs(clients, spec, names, None).await);
    warnings.extend(delete_run_objects(clients, spec, &selector).await);
    warnings
}

/// Deletes the Jobs of this target except `keep`. A failed list is a warning, never ignored.
async fn delete_target_jobs(
    clients: &Clients,
    spec: &RunSpec,
    names: &objects::RunNames,
    keep: Option<&str>,
) -> Vec<String> {
    let selector = format!("{}={}", objects::TARGET_LABEL, names.target_label);
    let ns = &spec.namespace.name;
    let jobs: Api<Job> = Api::namespaced(clients.client.clone(), ns);
    let params = ListParams::default().labels(&selector);
    let list = match retry("list jobs", || jobs.list_metadata(&params)).await {
        Ok(list) => list,
        Err(e) => {
            return vec![format!(
                "failed to list earlier bootstrap Jobs in {ns}: {e} (their ttlSecondsAfterFinished removes them later)"
            )];
        }
    };
    let mut warnings = Vec::new();
    for job in list.items {
        let name = job.metadata.name.unwrap_or_default();
        if Some(name.as_str()) == keep || job.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let background = DeleteParams::background();
        match retry("delete job", || jobs.delete(&name, &background)).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => warnings.push(format!(
                "failed to delete the earlier bootstrap Job {ns}/{name}: {e}"
            )),
        }
    }
    warnings
}

async fn delete_labelled<K>(api: Api<K>, selector: &str, what: &str) -> Vec<String>
where
    K: kube::Resource + Clone + fmt::Debug + serde::de::DeserializeOwned,
{
    let mut warnings = Vec::new();
    match api
        .list_metadata(&ListParams::default().labels(selector))
        .await
    {
        Ok(list) => {
            for item in list.items {
                let name = item.metadata.name.unwrap_or_default();
                let params = DeleteParams::default();
                match retry("delete", || api.delete(&name, &params)).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => {
                        warnings.push(format!("failed to delete the bootstrap {what} {name}: {e}"))
                    }
                }
            }
        }
        Err(e) => warnings.push(format!("failed to list bootstrap {what}s: {e}")),
    }
    warnings
}

/// Namespaced objects matching `selector` in every namespace (the Roles and RoleBindings of
/// [`Rbac::Minimal`] live in the namespaces their rules are limited to).
async fn delete_labelled_everywhere<K>(
    client: &kube::Client,
    selector: &str,
    what: &str,
) -> Vec<String>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + fmt::Debug
        + serde::de::DeserializeOwned,
    K::DynamicType: Default,
{
    let all: Api<K> = Api::all(client.clone());
    let params = ListParams::default().labels(selector);
    let list = match retry("list", || all.list_metadata(&params)).await {
        Ok(list) => list,
        Err(e) => return vec![format!("failed to list bootstrap {what}s: {e}")],
    };
    let mut warnings = Vec::new();
    for item in list.items {
        let ns = item.metadata.namespace.unwrap_or_default();
        let name = item.metadata.name.unwrap_or_default();
        let api: Api<K> = Api::namespaced(client.clone(), &ns);
        let params = DeleteParams::default();
        match retry("delete", || api.delete(&name, &params)).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => warnings.push(format!(
                "failed to delete the bootstrap {what} {ns}/{name}: {e}"
            )),
        }
    }
    warnings
}

/// ServiceAccounts, bindings and roles, ConfigMaps and Secrets matching `selector`.
async fn delete_run_objects(clients: &Clients, spec: &RunSpec, selector: &str) -> Vec<String> {
    let ns = &spec.namespace.name;
    let c = &clients.client;
    let mut warnings = Vec::new();
    warnings.extend(
        delete_labelled(
            Api::<ClusterRoleBinding>::all(c.clone()),
            selector,
            "ClusterRoleBinding",
        )
        .await,
    );
    warnings
        .extend(delete_labelled(Api::<ClusterRole>::all(c.clone()), selector, "ClusterRole").await);
    warnings.extend(delete_labelled_everywhere::<RoleBinding>(c, selector, "RoleBinding").await);
    warnings.extend(delete_labelled_everywhere::<Role>(c, selector, "Role").await);
    warnings.extend(
        delete_labelled(
            Api::<ServiceAccount>::namespaced(c.clone(), ns),
            selector,
            "ServiceAccount",
        )
        .await,
    );
    warnings.extend(
        delete_labelled(
            Api::<ConfigMap>::namespaced(c.clone(), ns),
            selector,
            "ConfigMap",
        )
        .await,
    );
    warnings.extend(
        delete_labelled(Api::<Secret>::namespaced(c.clone(), ns), selector, "Secret").await,
    );
    warnings
}

/// After the run: its ServiceAccount, binding, ConfigMap and Secret always go; the Job too unless
/// it failed (kept for `kubectl logs`).
async fn cleanup(
    clients: &Clients,
    spec: &RunSpec,
    names: &objects::RunNames,
    delete_job: bool,
) -> Vec<String> {
    let selector = format!("{}={}", objects::RUN_LABEL, names.run_id);
    let mut warnings = Vec::new();
    if delete_job {
        let jobs: Api<Job> = Api::namespaced(clients.client.clone(), &spec.namespace.name);
        let background = DeleteParams::background();
        match retry("delete job", || jobs.delete(&names.object, &background)).await {
            Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => warnings.push(format!(
                "failed to delete the bootstrap Job {}/{}: {e} (its ttlSecondsAfterFinished removes it later)",
                spec.namespace.name, names.object
            )),
        }
    }
    if delete_job {
        // After a success nothing of this target is left: also earlier failed Jobs the first
        // sweep could not remove (e.g. the API was unreachable for a moment).
        warnings.extend(delete_target_jobs(clients, spec, names, Some(&names.object)).await);
    }
    warnings.extend(delete_run_objects(clients, spec, &selector).await);
    warnings
}

async fn create<K>(
    clients: &Clients,
    api: &Api<K>,
    object: &K,
    step: Step,
) -> Result<(), EngineError>
where
    K: kube::Resource + Clone + fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let params = PostParams::default();
    match retry("create", || api.create(&params, object)).await {
        // A retried create whose first attempt went through.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        other => other.map(|_| ()),
    }
    .map_err(|e| clients.api_error(step, e))
}

/// Creates the run's objects and Job, waits for it; on success returns the log tail and, when
/// asked for, the whole output.
async fn run_job(
    clients: &Clients,
    spec: &RunSpec,
    names: &objects::RunNames,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<(Vec<String>, Option<String>), EngineError> {
    let c = &clients.client;
    let ns = &spec.namespace.name;
    create(
        clients,
        &Api::namespaced(c.clone(), ns),
        &objects::service_account(spec, names),
        Step::Objects,
    )
    .await?;
    if let Some(role) = objects::cluster_role(spec, names) {
        create(clients, &Api::all(c.clone()), &role, Step::Objects).await?;
    }
    for (role, binding) in objects::namespaced_rbac(spec, names) {
        let role_ns = role.metadata.namespace.clone().unwrap_or_default();
        create(
            clients,
            &Api::namespaced(c.clone(), &role_ns),
            &role,
            Step::Objects,
        )
        .await?;
        create(
            clients,
            &Api::namespaced(c.clone(), &role_ns),
            &binding,
            Step::Objects,
        )
        .await?;
    }
    if let Some(binding) = objects::cluster_role_binding(spec, names) {
        create(clients, &Api::all(c.clone()), &binding, Step::Objects).await?;
    }
    create(
        clients,
        &Api::namespaced(c.clone(), ns),
        &objects::config_map(spec, names),
        Step::Objects,
    )
    .await?;
    if let Some(secret) = objects::secret(spec, names) {
        create(
            clients,
            &Api::namespaced(c.clone(), ns),
            &secret,
            Step::Objects,
        )
        .await?;
    }
    let mut job_spec = spec.clone();
    // What is left of the timeout after the Lease wait: the Job can never outlive the apply.
    job_spec.timeout = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_secs(1));
    let jobs: Api<Job> = Api::namespaced(c.clone(), ns);
    create(clients, &jobs, &objects::job(&job_spec, names), Step::Job).await?;
    let pod_selector = format!("{}={}", objects::RUN_LABEL, names.run_id);
    let pods: Api<Pod> = Api::namespaced(c.clone(), ns);
    let events: Api<Event> = Api::namespaced(c.clone(), ns);
    // The Job controller marks a deadline failure a moment after it passes.
    let grace = Duration::from_secs(10);
    let outcome = wait::wait_for_job(
        Api::namespaced(clients.stream.clone(), ns),
        Api::namespaced(clients.stream.clone(), ns),
        Api::namespaced(clients.stream.clone(), ns),
        &names.object,
        &pod_selector,
        deadline + grace,
        cancel,
    )
    .await;
    let job_ref = format!("{ns}/{}", names.object);
    let report = report::collect(&pods, &events, &names.object, &pod_selector).await;
    let mut failure = match outcome {
        JobWait::Succeeded if spec.capture_output => {
            let output = report::output(&pods, &pod_selector)
                .await
                .map_err(|e| {
                    EngineError::new(
                        Step::Wait,
                        format!(
                            "the bootstrap Job {job_ref} succeeded, but its output could not be read: {e}"
                        ),
                    )
                })?;
            return Ok((report.log_tail, Some(output)));
        }
        JobWait::Succeeded => return Ok((report.log_tail, None)),
        JobWait::Interrupted => {
            let _ = jobs
                .delete(&names.object, &DeleteParams::background())
                .await;
            let mut e = EngineError::interrupted(
                Step::Wait,
                &format!("the bootstrap Job {job_ref} was running; it was deleted"),
            );
            e.report = Some(report);
            return Err(e);
        }
        JobWait::TimedOut => EngineError::new(
            Step::Wait,
            format!(
                "the bootstrap Job {job_ref} did not finish within {}s",
                spec.timeout.as_secs()
            ),
        ),
        JobWait::Failed { reason, message } => {
            let mut e = EngineError::new(
                Step::Wait,
                format!("the bootstrap Job {job_ref} failed: {reason}: {message}"),
            );
            let finished = matches!(
                reason.as_str(),
                "BackoffLimitExceeded" | "DeadlineExceeded" | "PodFailurePolicy"
            );
            if finished {
                e.kept_job = Some(job_ref.clone());
            } else {
                // Cannot start: nothing to keep running until the deadline.
                let _ = jobs
                    .delete(&names.object, &DeleteParams::background())
                    .await;
            }
            let text = format!("{reason}: {message}");
            e = e.with_diagnosis(&[text.as_str()]);
            e
        }
    };
    let texts: Vec<&str> = report.texts().collect();
    if failure.diagnosis.is_none()
        || failure
            .diagnosis
            .as_ref()
            .is_some_and(|d| d.kind == diagnosis::Signature::Deadline)
    {
        // A signature in the log beats the generic deadline diagnosis.
        if let Some(d) = diagnose(texts.iter().copied()) {
            failure.diagnosis = Some(d);
        }
    }
    failure.report = Some(report);
    if failure.kept_job.is_none() && failure.message.contains("did not finish") {
        let _ = jobs
            .delete(&names.object, &DeleteParams::background())
            .await;
    }
    Err(failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_with_clear_errors() {
        assert_eq!(
            ApiEndpoint::parse("localhost:7445"),
            Ok(ApiEndpoint {
                host: "localhost".into(),
                port: 7445
            })
        );
        assert_eq!(
            ApiEndpoint::parse("[fd00::1]:6443").map(|e| e.to_string()),
            Ok("[fd00::1]:6443".into())
        );
        assert!(ApiEndpoint::parse("localhost").is_err());
        assert!(ApiEndpoint::parse("localhost:0").is_err());
        // As users copy it from a kubeconfig: the scheme is accepted, the host and port kept.
        assert_eq!(
            ApiEndpoint::parse("https://10.0.0.10:6443").map(|e| e.to_string()),
            Ok("10.0.0.10:6443".into())
        );
        assert!(ApiEndpoint::parse("http://x:6443").is_err());
        assert!(ApiEndpoint::parse("https://x:6443/api").is_err());
    }

    #[test]
    fn slugs_are_valid_name_parts() {
        assert_eq!(
            slug("helm/kube-system/cilium", 30),
            "helm-kube-system-cilium"
        );
        assert!(slug(&"x/".repeat(40), 30).len() <= 30);
    }
}
