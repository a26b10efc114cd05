//! The rollout predicates, pure (kube-rs style, apart from the watch in [`super`]): a workload's
//! rollout as `kubectl rollout status` and `cilium status --wait` judge it (desired == ready ==
//! updated at the current generation), a Job's completion, and a node's readiness.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    DaemonSet,
    Deployment,
    StatefulSet,
    Job,
}

impl Kind {
    /// The Kubernetes kind, as manifests spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::DaemonSet => "DaemonSet",
            Kind::Deployment => "Deployment",
            Kind::StatefulSet => "StatefulSet",
            Kind::Job => "Job",
        }
    }

    /// The kind of a manifest object, if it is a workload whose readiness is judged.
    pub fn of(kind: &str) -> Option<Kind> {
        Some(match kind {
            "DaemonSet" => Kind::DaemonSet,
            "Deployment" => Kind::Deployment,
            "StatefulSet" => Kind::StatefulSet,
            "Job" => Kind::Job,
            _ => return None,
        })
    }
}

/// A workload whose rollout is awaited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadRef {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

/// Where a workload's rollout stands.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rollout {
    pub exists: bool,
    /// DaemonSets: the nodes it is scheduled on; others: the replicas asked for.
    pub desired: i64,
    pub ready: i64,
    /// Ready for the workload's `minReadySeconds` (what `cilium status` counts as available).
    pub available: i64,
    pub updated: i64,
    /// The controller has seen the current spec.
    pub observed: bool,
}

impl Rollout {
    /// Rolled out as `cilium status --wait` judges it: at the current generation, every desired
    /// pod (DaemonSets: on every scheduled node) updated, ready and available.
    pub fn done(&self) -> bool {
        self.exists
            && self.observed
            && self.desired > 0
            && self.ready == self.desired
            && self.available >= self.desired
            && self.updated == self.desired
    }
}

pub fn daemonset_rollout(ds: &DaemonSet) -> Rollout {
    let status = ds.status.clone().unwrap_or_default();
    Rollout {
        exists: true,
        desired: i64::from(status.desired_number_scheduled),
        ready: i64::from(status.number_ready),
        available: i64::from(status.number_available.unwrap_or(0)),
        updated: i64::from(status.updated_number_scheduled.unwrap_or(0)),
        observed: status.observed_generation.unwrap_or(0) >= ds.metadata.generation.unwrap_or(0),
    }
}

pub fn deployment_rollout(d: &Deployment) -> Rollout {
    let status = d.status.clone().unwrap_or_default();
    let desired = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    Rollout {
        exists: true,
        desired: i64::from(desired),
        ready: i64::from(status.ready_replicas.unwrap_or(0)),
        available: i64::from(status.available_replicas.unwrap_or(0)),
        updated: i64::from(status.updated_replicas.unwrap_or(0)),
        observed: status.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0),
    }
}

pub fn statefulset_rollout(s: &StatefulSet) -> Rollout {
    let status = s.status.clone().unwrap_or_default();
    let desired = s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    Rollout {
        exists: true,
        desired: i64::from(desired),
        ready: i64::from(status.ready_replicas.unwrap_or(0)),
        available: i64::from(
            status
                .available_replicas
                .or(status.ready_replicas)
                .unwrap_or(0),
        ),
        updated: i64::from(status.updated_replicas.unwrap_or(0)),
        observed: status.observed_generation.unwrap_or(0) >= s.metadata.generation.unwrap_or(0),
    }
}

/// A Job is "rolled out" once it completed.
pub fn job_rollout(j: &Job) -> Rollout {
    let complete = j
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter().any(|c| {
                (c.type_ == "Complete" || c.type_ == "SuccessCriteriaMet") && c.status == "True"
            })
        });
    let done = i64::from(complete);
    Rollout {
        exists: true,
        desired: 1,
        ready: done,
        available: done,
        updated: 1,
        observed: true,
    }
}

/// The taint that keeps ordinary pods off a node whose CNI is not running yet. Kubernetes'
/// node lifecycle controller removes it as soon as it sees the node `Ready`; the `NoExecute`
/// taint of the same key goes only at its next node health pass (`--node-monitor-period`, 5 s
/// by default), and every pod tolerates that one for 300 s, so waiting for it would only add up
/// to 5 s to every apply without a pod being any closer to running.
const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// Why a node cannot take pods yet: not `Ready=True`, or still tainted
/// `node.kubernetes.io/not-ready:NoSchedule`. `None` when it can.
pub fn node_not_ready(node: &Node) -> Option<String> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let keeps_pods_off = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter()
                .any(|t| t.key == NOT_READY_TAINT && t.effect == "NoSchedule")
        });
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    match ready {
        Some(c) if c.status == "True" && !keeps_pods_off => None,
        Some(c) if c.status == "True" => Some(format!(
            "{name}: Ready, but still tainted {NOT_READY_TAINT}:NoSchedule (the controller-manager's node lifecycle controller removes it)"
        )),
        Some(c) => Some(format!(
            "{name}: {}",
            c.message.clone().unwrap_or_else(|| "not ready".into())
        )),
        None => Some(format!("{name}: no Ready condition yet")),
    }
}
