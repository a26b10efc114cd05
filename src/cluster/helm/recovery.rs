//! What helps a chart install recover from a failed apply, in the cluster: a Helm command on an
//! existing release in a bootstrap Job ([`ReleaseRun`]: `helm rollback`, [`rollback`], and
//! `helm uninstall`), and annotations on a release record ([`FAILED_CREATE`]: a
//! release a failed create left, to resume rather than uninstall).

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use std::collections::BTreeMap;

use super::install::{helm_env, helm_timeout, release, release_target, unlock_pending};
use super::rbac::{self, helm_install_rules};
use crate::cluster::engine::rbac::RbacPolicy;
use crate::cluster::engine::{
    self, BootstrapNamespace, EngineError, JobSettings, Rbac, RunOutcome, RunSpec,
};
use crate::cluster::{ClusterError, Kube};

/// The annotation a talosboot create that failed after its release existed leaves on the
/// release's newest record (the value: its first-deployed time): the destroy of the tainted
/// object only forgets such a release, and the create that replaces it resumes it in place.
/// Kept in the cluster, not in private state: the CLIs hand the destroy half of a replacement the
/// create's planned private state, not the tainted object's.
pub const FAILED_CREATE: &str = "talosboot.dev/failed-create";

fn record_name(name: &str, revision: i64) -> String {
    format!("sh.helm.release.v1.{name}.v{revision}")
}

/// Sets (or, with `None`, removes) an annotation of the record of `revision`.
///
/// # Errors
/// The record cannot be patched.
pub async fn annotate_record(
    clients: &Kube,
    namespace: &str,
    name: &str,
    revision: i64,
    key: &str,
    value: Option<&str>,
) -> Result<(), ClusterError> {
    let secrets: Api<Secret> = Api::namespaced(clients.client.clone(), namespace);
    let patch = json!({"metadata": {"annotations": {key: value}}});
    let (record, params, patch) = (
        record_name(name, revision),
        PatchParams::default(),
        Patch::Merge(&patch),
    );
    clients
        .retry("annotate the release record", || {
            secrets.patch(&record, &params, &patch)
        })
        .await
        .map(|_| ())
        .map_err(|e| ClusterError::from_kube(e, &clients.endpoint))
}

/// An annotation of the record of `revision` (`None`: unset, or no such record).
///
/// # Errors
/// The record cannot be read.
pub async fn record_annotation(
    clients: &Kube,
    namespace: &str,
    name: &str,
    revision: i64,
    key: &str,
) -> Result<Option<String>, ClusterError> {
    let secrets: Api<Secret> = Api::namespaced(clients.client.clone(), namespace);
    let found = secrets
        .get_metadata_opt(&record_name(name, revision))
        .await
        .map_err(|e| ClusterError::from_kube(e, &clients.endpoint))?;
    Ok(found
        .and_then(|s| s.metadata.annotations)
        .and_then(|mut a| a.remove(key)))
}

/// `helm rollback` of a release to `revision` in a bootstrap Job (no `--wait`: the caller judges
/// readiness natively, naming what is not ready).
#[allow(clippy::too_many_arguments)]
pub async fn rollback(
    clients: &Kube,
    bootstrap_ns: &BootstrapNamespace,
    job: &JobSettings,
    namespace: &str,
    release_name: &str,
    revision: i64,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<RunOutcome, EngineError> {
    let on = ReleaseRun {
        bootstrap_ns,
        job,
        namespace,
        release_name,
        timeout,
    };
    let revision_text = revision.to_string();
    let args = [
        "rollback",
        release_name,
        &revision_text,
        "--namespace",
        namespace,
    ];
    let purpose = format!("roll release {namespace}/{release_name} back to revision {revision}");
    on.run(clients, &args, purpose, cancel).await
}

/// A Helm command on an existing release in a bootstrap Job (uninstall, rollback): under the
/// release's Lease, a stuck record unlocked first, with the RBAC of the release's own kinds for
/// `rbac = "minimal"` (the objects it touches are the current record's or fewer).
pub(crate) struct ReleaseRun<'a> {
    pub bootstrap_ns: &'a BootstrapNamespace,
    pub job: &'a JobSettings,
    pub namespace: &'a str,
    pub release_name: &'a str,
    pub timeout: Duration,
}

impl ReleaseRun<'_> {
    /// Runs `helm ARGS --timeout ...`.
    pub(crate) async fn run(
        &self,
        clients: &Kube,
        args: &[&str],
        purpose: String,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, EngineError> {
        let (namespace, release_name) = (self.namespace, self.release_name);
        let rbac = match self.job.rbac {
            RbacPolicy::ClusterAdmin => Rbac::ClusterAdmin,
            RbacPolicy::Minimal => match release(clients, namespace, release_name).await? {
                Some(current) => Rbac::Minimal(rbac::uninstall_rules(clients, &current).await?),
                // Helm only reads the records to say the release is not found.
                None => Rbac::Minimal(helm_install_rules(namespace, &[])),
            },
        };
        let command = std::iter::once("helm")
            .chain(args.iter().copied())
            .map(str::to_owned)
            .chain([
                "--timeout".to_owned(),
                format!("{}s", helm_timeout(self.timeout).as_secs()),
            ])
            .collect();
        let spec = RunSpec {
            purpose,
            target: release_target(namespace, release_name),
            namespace: self.bootstrap_ns.clone(),
            job: self.job.clone(),
            command,
            env: helm_env(),
            files: BTreeMap::new(),
            binary_files: BTreeMap::new(),
            secret_files: BTreeMap::new(),
            timeout: self.timeout,
            rbac,
            capture_output: false,
        };
        engine::run_with(clients, &spec, cancel, || {
            unlock_pending(clients, namespace, release_name)
        })
        .await
        .map(|(run, _)| run)
    }
}
