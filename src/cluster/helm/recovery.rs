//! What helps a chart install recover from a failed apply, in the cluster: `helm rollback` in a
//! bootstrap Job ([`rollback`]), and annotations on a release record ([`FAILED_CREATE`]: a
//! release a failed create left, to resume rather than uninstall).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::install::{helm_env, helm_timeout, release, release_target, unlock_pending};
use super::rbac::{self, helm_install_rules};
use crate::cluster::engine::rbac::RbacPolicy;
use crate::cluster::engine::{
    self, BootstrapNamespace, EngineError, JobSettings, Rbac, RunOutcome, RunSpec,
};
use crate::cluster::retry::retry;
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
    retry("annotate the release record", || {
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
    let rbac = match job.rbac {
        RbacPolicy::ClusterAdmin => Rbac::ClusterAdmin,
        // The objects of the record it returns to are those of the current one or fewer.
        RbacPolicy::Minimal => match release(clients, namespace, release_name).await? {
            Some(current) => Rbac::Minimal(rbac::uninstall_rules(clients, &current).await?),
            None => Rbac::Minimal(helm_install_rules(namespace, &[])),
        },
    };
    let command = [
        "helm".to_owned(),
        "rollback".to_owned(),
        release_name.to_owned(),
        revision.to_string(),
        "--namespace".to_owned(),
        namespace.to_owned(),
        "--timeout".to_owned(),
        format!("{}s", helm_timeout(timeout).as_secs()),
    ]
    .to_vec();
    let spec = RunSpec {
        purpose: format!("roll release {namespace}/{release_name} back to revision {revision}"),
        target: release_target(namespace, release_name),
        namespace: bootstrap_ns.clone(),
        job: job.clone(),
        command,
        env: helm_env(),
        files: BTreeMap::new(),
        binary_files: BTreeMap::new(),
        secret_files: BTreeMap::new(),
        timeout,
        rbac,
        capture_output: false,
    };
    engine::run_with(clients, &spec, cancel, || {
        unlock_pending(clients, namespace, release_name)
    })
    .await
    .map(|(run, _)| run)
}
