//! What every chart-installing resource shares (`talosboot_cilium`, `talosboot_helm_release`, and
//! the install decision of the Flux bootstrap's operator). Reads top-down:
//! - [`common`]: [`ReleaseCommon`], the shared inputs and computed attributes, embedded in each
//!   model, and their checks without I/O; [`inputs`]: the shared `job`/`set` schema pieces;
//! - [`kind`]: [`ChartResource`], the one trait a resource implements for what is its own;
//! - [`plan`]: the shared plan; [`values_diff`]: which value paths an upgrade changes, pure;
//!   [`decide`]: the install decision, pure; [`helm_major`]: what the plan says about the Helm
//!   major that will run (a Helm 3 image on a server-side release, whose fields an adoption takes);
//! - [`lifecycle`]: observe, refresh, install, destroy against the cluster;
//! - [`resource`]: the framework resource every [`ChartResource`] becomes, with its identity
//!   (namespace and name); [`moved`]: from hashicorp/helm's `helm_release`; [`list`]: its list
//!   resource (`terraform query`) and the configuration generated for a listed release.

pub mod common;
pub mod decide;
pub mod helm_major;
pub mod inputs;
pub mod kind;
pub mod lifecycle;
pub mod list;
pub mod moved;
pub mod plan;
pub mod resource;
pub mod values_diff;

pub use common::{ReleaseCommon, ReleaseFields};
pub use decide::{Decision, Fingerprint, decide, same_version};
pub(crate) use kind::common_in_field;
pub use kind::{ChartResource, PreflightAt};
pub use lifecycle::{Applied, destroy, install, observe, refresh, refresh_as};

use crate::cluster::helm::release::HelmRelease;
use crate::cluster::ownership::{Manager, manager_of};
use crate::cluster::readiness::{self, WorkloadRef};
use crate::framework::Diagnostics;

/// Every check of a chart resource's inputs without I/O: the shared ones, then its own.
pub fn validate<K: ChartResource>(m: &K, diagnostics: &mut Diagnostics) {
    m.common().validate(diagnostics);
    m.validate(diagnostics);
}

/// What "ready" means for a release.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Readiness {
    pub workloads: Vec<WorkloadRef>,
    /// Label selector of the pods behind the workloads (for the diagnosis of those not ready).
    pub pods: String,
    /// Every node must be Ready without the not-ready taint (a CNI's readiness).
    pub nodes: bool,
}

/// How the lifecycle finds the workloads whose readiness it reads.
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
}
