//! The pre-CNI bootstrap engine: one run of "a program in a pod, before any CNI exists", shared
//! by every resource that needs one (Cilium and other chart installs, the Flux bootstrap). It
//! knows nothing of what the program does: callers describe the run ([`RunSpec`]: its purpose,
//! argv, files and the RBAC it needs) and name their own steps around it ([`Step::Caller`]).
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

mod cleanup;
mod job;
pub mod lease;
pub mod objects;
pub mod rbac;
pub mod report;
pub mod wait;

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use cleanup::{cleanup, remove_earlier_runs};
use job::run_job;
pub use report::PodReport;
use wait::JobWait;

use super::diagnosis::{Diagnosis, Signature, diagnose};
use super::endpoint::{ApiEndpoint, KUBEPRISM};
use super::{ClusterError, Kube};

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
    /// What the run's ServiceAccount may ask for: callers resolve it into the [`RunSpec::rbac`]
    /// of each run.
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
    /// permission fails with a diagnosis naming the verb and resource. The caller derives them
    /// from what its program does (a chart install: from what the chart renders). No rules at
    /// all: the ServiceAccount is bound to nothing (a program that only reads its inputs).
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
    /// The program's own environment (where it keeps caches and configuration), beside `HOME`
    /// (`/tmp`, writable); the endpoint's `KUBERNETES_SERVICE_*` and `job.env` win over it.
    pub env: BTreeMap<String, String>,
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
    /// A step of the caller's around its runs (reading what a run changed, checking the cluster
    /// first, ...), in the caller's words: messages say `failed to <words>`.
    Caller(&'static str),
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
            Step::Caller(words) => words,
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
    /// Connecting to the cluster failed ([`ClusterHandle::connect`](crate::cluster::ClusterHandle::connect)).
    pub fn connect(cause: ClusterError) -> EngineError {
        EngineError::api(Step::Connect, cause)
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

impl Kube {
    /// A `kube::Error` of `step`, as the engine reports it.
    pub fn api_error(&self, step: Step, e: kube::Error) -> EngineError {
        EngineError::api(step, self.cluster_error(e))
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
    clients: &Kube,
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
    clients: &Kube,
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
        clients.retry_budget,
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
async fn ensure_namespace(clients: &Kube, spec: &RunSpec) -> Result<(), EngineError> {
    let name = &spec.namespace.name;
    let existing = clients
        .ensure_namespace(&objects::namespace(&spec.namespace, spec.job.host_network))
        .await
        .map_err(|e| EngineError::api(Step::Namespace, e))?;
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
            let mut e = EngineError::new(Step::Namespace, message.clone());
            e.diagnosis = Diagnosis::known(Signature::PodSecurity, &message);
            return Err(e);
        }
        if ns.metadata.deletion_timestamp.is_some() {
            return Err(EngineError::new(
                Step::Namespace,
                format!("namespace {name} is being deleted; wait for it to go, then apply again"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_valid_name_parts() {
        assert_eq!(
            slug("helm/kube-system/cilium", 30),
            "helm-kube-system-cilium"
        );
        assert!(slug(&"x/".repeat(40), 30).len() <= 30);
    }
}
