//! What every chart-installing resource shares (`talosboot_cilium`, `talosboot_helm_release`; the
//! Flux bootstrap's chart installs take the same converge path, [`crate::cluster::converge`]).
//! Reads top-down:
//! - [`common`]: [`ReleaseCommon`], the shared inputs and computed attributes, embedded in each
//!   model, and their checks without I/O; [`inputs`]: the shared `job`/`set` schema pieces;
//! - [`kind`]: [`ChartResource`], the one trait a resource implements for what is its own;
//! - [`plan`]: the shared plan; [`values_diff`]: which value paths an upgrade changes, pure;
//! - [`lifecycle`]: refresh, install, destroy: the converge path every chart install takes
//!   ([`crate::cluster::converge`]: observe, decide, install or upgrade, wait), turned into
//!   state and diagnostics; [`recovery`]: what a failed apply leaves and how the next picks it
//!   up (a failed create resumed, never uninstalled; a failed upgrade rolled back); [`helm_major`]: what the plan says about the Helm major that will run (a Helm 3 image on a
//!   server-side release, whose fields an adoption takes);
//! - [`resource`]: the framework resource every [`ChartResource`] becomes, with its identity
//!   (namespace and name); [`moved`]: from hashicorp/helm's `helm_release`; [`list`]: its list
//!   resource (`terraform query`) and the configuration generated for a listed release.

pub mod common;
pub mod fleet;
pub mod helm_major;
pub mod inputs;
pub mod kind;
pub mod lifecycle;
pub mod list;
pub mod moved;
pub mod plan;
pub mod recovery;
pub mod resource;
pub mod values_diff;

pub use crate::cluster::converge::{
    Decision, Fingerprint, Observed, Readiness, WorkloadSource, decide, same_version,
};
pub use common::{ReleaseCommon, ReleaseFields};
pub(crate) use kind::common_in_field;
pub use kind::{ChartResource, CheckAt};
pub use lifecycle::{Applied, destroy, install, observe, refresh, refresh_as};

use crate::framework::Diagnostics;

/// Every check of a chart resource's inputs without I/O: the shared ones, then its own.
pub fn validate<K: ChartResource>(m: &K, diagnostics: &mut Diagnostics) {
    m.common().validate(diagnostics);
    m.validate(diagnostics);
}
