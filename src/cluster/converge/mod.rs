//! The one converge path every chart install takes: `talosboot_cilium`, `talosboot_helm_release`,
//! the Flux Operator release and the Flux prerequisite charts. Its steps, in order:
//! 1. [`observe`]: the release record and the workloads whose readiness and marks count;
//! 2. [`decide`]: refuse, repair (a stuck record is unlocked by the install), upgrade, leave
//!    unchanged, or leave to the tool that manages the release ([`decide::decide_wanted`], pure);
//! 3. install or upgrade: `helm upgrade --install` in a bootstrap Job ([`crate::cluster::helm`]);
//! 4. wait: every workload rolled out (and the nodes Ready, for a CNI).
//!
//! [`converge`] runs them; a caller adds what is its own between them through [`Steps`] (checks
//! before a Job, marks after it) and turns the [`Converged`] outcome or [`ConvergeError`] into its
//! diagnostics and state. Nothing here knows about Terraform.

pub mod decide;

use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value as Json;
use tokio_util::sync::CancellationToken;

pub use decide::{Decision, Fingerprint, Found, Want, decide, decide_wanted, same_version};

use crate::cluster::Kube;
use crate::cluster::engine::{BootstrapNamespace, EngineError, JobSettings};
use crate::cluster::helm::values::{merge, parse_values};
use crate::cluster::helm::{self, install::ChartInstall, install::Installed, release::HelmRelease};
use crate::cluster::ownership::{Manager, manager_of};
use crate::cluster::readiness::{self, NotReady, WorkloadRef, all_nodes_ready, wait_ready};

/// What "ready" means for a release.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Readiness {
    pub workloads: Vec<WorkloadRef>,
    /// Label selector of the pods behind the workloads (for the diagnosis of those not ready).
    pub pods: String,
    /// Every node must be Ready without the `not-ready:NoSchedule` taint (a CNI's readiness).
    pub nodes: bool,
}

/// How [`observe`] finds the workloads whose readiness it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadSource {
    /// The record's manifest names them: each read after the record.
    Manifest,
    /// The record's manifest names them, DaemonSets and Deployments of the release namespace
    /// only: both kinds are listed there concurrently with the record, then matched to the
    /// manifest, so a chart's many components cost one round trip.
    ManifestListed,
}

/// What the cluster has for one release.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub release: Option<HelmRelease>,
    /// When the newest record did not finish (`pending-*`, `failed`): the chart version of the
    /// newest `deployed` one, what the workloads ran before ([`helm::release::deployed_release`]).
    pub deployed_before: Option<String>,
    pub workloads: Vec<(WorkloadRef, readiness::Observed)>,
    pub nodes_ready: Option<bool>,
}

impl Observed {
    /// The GitOps tool that manages the release's workloads, if any.
    pub fn manager(&self) -> Option<Manager> {
        self.workloads
            .iter()
            .find_map(|(_, o)| manager_of(&o.labels, &o.annotations))
    }

    /// The current record, unless it says uninstalled (which counts as none).
    pub fn current(&self) -> Option<&HelmRelease> {
        self.release
            .as_ref()
            .filter(|r| r.status != helm::release::ReleaseStatus::Uninstalled)
    }

    /// `kind/name: ready/desired` of workloads that are not rolled out.
    pub fn unhealthy(&self) -> Vec<String> {
        self.workloads
            .iter()
            .filter(|(_, o)| !o.rollout.done())
            .map(|(w, o)| match o.rollout.exists {
                true => format!(
                    "{:?} {}/{}: {} of {} ready",
                    w.kind, w.namespace, w.name, o.rollout.ready, o.rollout.desired
                ),
                false => format!("{:?} {}/{}: missing", w.kind, w.namespace, w.name),
            })
            .collect()
    }

    pub fn rollout(&self, name: &str) -> Option<&readiness::Rollout> {
        self.workloads
            .iter()
            .find(|(w, _)| w.name == name)
            .map(|(_, o)| &o.rollout)
    }

    /// The decision for `want` on what was observed.
    pub fn decide(&self, want: &Want) -> Decision {
        let current = self.current();
        let manager = self.manager();
        let found = Found {
            status: current.map(|r| &r.status),
            record: current.map(record_fingerprint),
            manager: manager.as_ref(),
            workload_missing: self.workloads.iter().any(|(_, o)| !o.rollout.exists),
        };
        decide_wanted(want, &found)
    }
}

/// What a record installed, as [`decide`] compares it (values hashed as [`recorded_values`] are).
pub fn record_fingerprint(release: &HelmRelease) -> Fingerprint<'_> {
    Fingerprint {
        version: &release.chart_version,
        values_sha256: Some(&release.values_sha256),
        content_digest: None,
    }
}

/// The values a chart install makes Helm record: its documents merged as Helm merges `-f` files
/// (maps deeply, later wins); a document that does not parse counts as empty. Their
/// [`helm::release::values_digest`] is what [`record_fingerprint`] holds after the install.
pub fn recorded_values(chart: &ChartInstall) -> Json {
    let mut values = Json::Object(Default::default());
    for doc in chart.values_yaml.iter().chain(&chart.sensitive_values_yaml) {
        if let Ok(v @ Json::Object(_)) = parse_values(doc) {
            merge(&mut values, &v);
        }
    }
    values
}

/// What to read or wait for, given the release's record (its manifest names the workloads).
pub type ReadinessOf<'a> = dyn Fn(Option<&HelmRelease>) -> Readiness + Sync + 'a;

/// Which release, and which of its workloads count.
pub struct Subject<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    /// The revision the caller last saw: a refresh that finds it still newest is cheaper.
    pub known_revision: Option<i64>,
    pub source: WorkloadSource,
    /// The workloads (and nodes) to read, given the record (its manifest names them).
    pub readiness: &'a ReadinessOf<'a>,
}

async fn observe_workloads(
    clients: &Kube,
    r: &Readiness,
) -> Result<(Vec<(WorkloadRef, readiness::Observed)>, Option<bool>), EngineError> {
    let workloads = futures::future::try_join_all(
        r.workloads
            .iter()
            .map(|w| async move { readiness::observe(clients, w).await.map(|o| (w.clone(), o)) }),
    );
    let nodes = async {
        if r.nodes {
            all_nodes_ready(clients).await.map(Some)
        } else {
            Ok(None)
        }
    };
    let (workloads, nodes) = tokio::join!(workloads, nodes);
    let api = |e| EngineError::api(helm::PREPARE_RELEASE, e);
    Ok((workloads.map_err(api)?, nodes.map_err(api)?))
}

/// Step 1: the release record and its workloads, in as few round trips as the
/// [`WorkloadSource`] allows.
pub async fn observe(clients: &Kube, s: &Subject<'_>) -> Result<Observed, EngineError> {
    let (ns, name, known) = (s.namespace, s.name, s.known_revision);
    let (release, (workloads, nodes_ready)) = match s.source {
        WorkloadSource::Manifest => {
            let release = helm::install::release_after(clients, ns, name, known).await?;
            let readiness = (s.readiness)(release.as_ref());
            (release, observe_workloads(clients, &readiness).await?)
        }
        WorkloadSource::ManifestListed => {
            let (release, listed, nodes) = tokio::join!(
                helm::install::release_after(clients, ns, name, known),
                readiness::observe_namespace(clients, ns),
                async {
                    // Whether nodes are read does not depend on the record.
                    match (s.readiness)(None).nodes {
                        true => all_nodes_ready(clients).await.map(Some),
                        false => Ok(None),
                    }
                },
            );
            let api = |e| EngineError::api(helm::PREPARE_RELEASE, e);
            let release = release?;
            let listed = listed.map_err(api)?;
            let nodes = nodes.map_err(api)?;
            let wanted = (s.readiness)(release.as_ref()).workloads;
            (release, (matched(&wanted, listed), nodes))
        }
    };
    let deployed_before = match &release {
        Some(r) if r.status.is_pending() || r.status == helm::release::ReleaseStatus::Failed => {
            let read = || {
                helm::release::deployed_release(clients.client.clone(), &clients.endpoint, ns, name)
            };
            // Best effort: a stuck release must stay readable (refresh, import, recovery) even
            // when its older record cannot be; the upgrade path then judges from the newest.
            match clients
                .retry_if(
                    "read the release",
                    crate::cluster::ClusterError::is_transient,
                    read,
                )
                .await
            {
                Ok(deployed) => deployed.map(|d| d.chart_version),
                Err(e) => {
                    tracing::warn!(error = %e, "the release's last deployed record could not be read");
                    None
                }
            }
        }
        _ => None,
    };
    Ok(Observed {
        release,
        deployed_before,
        workloads,
        nodes_ready,
    })
}

/// Each wanted workload with what the listing found of it (missing: not rolled out, `exists`
/// false).
fn matched(
    wanted: &[WorkloadRef],
    listed: Vec<(WorkloadRef, readiness::Observed)>,
) -> Vec<(WorkloadRef, readiness::Observed)> {
    wanted
        .iter()
        .map(|w| {
            let found = listed
                .iter()
                .find(|(l, _)| l == w)
                .map(|(_, o)| o.clone())
                .unwrap_or_default();
            (w.clone(), found)
        })
        .collect()
}

/// Where and how a chart is installed: the install, and the bootstrap Job that runs it.
pub struct Install<'a> {
    pub chart: &'a ChartInstall,
    pub bootstrap: &'a BootstrapNamespace,
    pub job: &'a JobSettings,
}

/// One converge: which release, what is wanted of it, how it is installed, and until when.
pub struct Converge<'a> {
    pub subject: Subject<'a>,
    pub want: Want<'a>,
    pub install: Install<'a>,
    /// What to wait for, given the new record (`None`: no wait). It may name more than
    /// [`Subject::readiness`], which a refresh reads and should keep cheap.
    pub wait: Option<&'a ReadinessOf<'a>>,
    /// The end of the caller's budget: the Job's deadline and the wait's.
    pub deadline: Instant,
}

/// What a caller adds between the steps. Every method has a default that adds nothing.
#[async_trait]
pub trait Steps: Send {
    /// Before a Job runs (the decision is an upgrade or a repair): checks that may stop the
    /// converge (`false`), e.g. a preflight of the cluster.
    async fn before_install(
        &mut self,
        _kube: &Kube,
        _observed: &Observed,
        _decision: Decision,
    ) -> bool {
        true
    }
    /// After a Job installed or upgraded the release.
    async fn after_install(&mut self, _kube: &Kube, _installed: &Installed) {}
    /// Before the wait, whether a Job ran or not (the release is what was wanted).
    async fn before_wait(&mut self, _kube: &Kube) {}
}

/// A caller with nothing of its own between the steps.
pub struct NoSteps;
impl Steps for NoSteps {}

/// How a converge ended.
#[derive(Debug)]
pub enum Converged {
    /// Decided not to run a Job: a create found a live release ([`Decision::Refuse`]) or another
    /// tool manages it ([`Decision::LeaveToManager`]). What was observed, for the caller's words.
    Declined {
        decision: Decision,
        observed: Box<Observed>,
    },
    /// [`Steps::before_install`] stopped it before any Job.
    Stopped,
    /// The release is as wanted (and ready, when waited for); `installed` when a Job ran.
    Done {
        decision: Decision,
        observed: Box<Observed>,
        installed: Option<Box<Installed>>,
    },
}

/// Which step failed.
#[derive(Debug, thiserror::Error)]
pub enum ConvergeError {
    /// Reading the release or its workloads before deciding.
    #[error(transparent)]
    Observe(EngineError),
    /// The install or upgrade (its Job, the Lease, the unlock of a stuck record).
    #[error(transparent)]
    Install(EngineError),
    /// Reading the new record for the wait.
    #[error(transparent)]
    Read(EngineError),
    /// The workloads did not become ready by the deadline; `revision` is the record's.
    #[error("not ready")]
    NotReady {
        not_ready: Box<NotReady>,
        revision: Option<i64>,
    },
}

fn remaining(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_secs(1))
}

/// Observe, decide, install or upgrade, wait: the path of every chart install.
///
/// # Errors
/// The step that failed ([`ConvergeError`]); what the cluster has then is for the caller to
/// read again (a failed install may have written a record).
pub async fn converge(
    kube: &Kube,
    c: &Converge<'_>,
    steps: &mut dyn Steps,
    cancel: &CancellationToken,
) -> Result<Converged, ConvergeError> {
    let observed = observe(kube, &c.subject)
        .await
        .map_err(ConvergeError::Observe)?;
    let decision = observed.decide(&c.want);
    let installed = match decision {
        Decision::Refuse | Decision::LeaveToManager => {
            return Ok(Converged::Declined {
                decision,
                observed: Box::new(observed),
            });
        }
        Decision::Unchanged => None,
        Decision::Upgrade | Decision::Repair => {
            if !steps.before_install(kube, &observed, decision).await {
                return Ok(Converged::Stopped);
            }
            let i = &c.install;
            let installed = helm::install::install_or_upgrade_from(
                kube,
                i.bootstrap,
                i.job,
                i.chart,
                observed.current(),
                remaining(c.deadline),
                cancel,
            )
            .await
            .map_err(ConvergeError::Install)?;
            steps.after_install(kube, &installed).await;
            Some(Box::new(installed))
        }
    };
    steps.before_wait(kube).await;
    if let Some(readiness) = c.wait {
        let (ns, name) = (c.subject.namespace, c.subject.name);
        let release = helm::install::release(kube, ns, name)
            .await
            .map_err(ConvergeError::Read)?;
        let r = readiness(release.as_ref());
        let waited = wait_ready(kube, ns, &r.workloads, &r.pods, r.nodes, c.deadline, cancel).await;
        if let Err(not_ready) = waited {
            return Err(ConvergeError::NotReady {
                not_ready: Box::new(not_ready),
                revision: release.map(|r| r.revision),
            });
        }
    }
    Ok(Converged::Done {
        decision,
        observed: Box::new(observed),
        installed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_values_merge_deeply_as_helm_records_them() {
        let chart = ChartInstall {
            values_yaml: vec![
                "{\"a\": {\"b\": 1, \"c\": 2}}".into(),
                "a:\n  c: 3\n".into(),
            ],
            sensitive_values_yaml: vec!["{\"s\": {\"k\": \"v\"}}".into()],
            ..Default::default()
        };
        assert_eq!(
            recorded_values(&chart),
            serde_json::json!({"a": {"b": 1, "c": 3}, "s": {"k": "v"}})
        );
        let digest = helm::release::values_digest;
        assert_eq!(
            digest(Some(&recorded_values(&ChartInstall::default()))),
            digest(None),
            "no values hash as Helm's empty values"
        );
    }
}
