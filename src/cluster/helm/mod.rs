//! Helm: chart installs and uninstalls run as programs on the bootstrap [`engine`](super::engine)
//! ([`install`], speaking Helm 3 and 4: [`major`]), the release records Helm keeps in Secrets ([`release`]), values arithmetic
//! ([`values`]), the RBAC a `rbac = "minimal"` install derives from the chart's render
//! ([`rbac`]), the release status ([`status`]), and chart versions as Helm compares them
//! ([`chart_version`]).
//!
//! The engine knows nothing of Helm: the steps around its runs are named here.

pub mod adoption;
pub mod chart_version;
pub mod install;
pub mod major;
pub mod rbac;
pub mod recovery;
pub mod release;
pub mod release_values;
pub mod repository;
pub mod status;
pub mod values;

use super::engine::Step;

/// Reading and unlocking the release around an install ("failed to prepare the Helm release").
pub const PREPARE_RELEASE: Step = Step::Caller("prepare the Helm release");
/// Reading the release after a run.
pub const READ_RELEASE: Step = Step::Caller("read the Helm release");
/// The `helm template` run and the reads that learn what a chart creates.
pub const RENDER: Step = Step::Caller("learn what the chart creates (rbac = \"minimal\")");
/// The checks of the cluster before an install.
pub const PREREQUISITES: Step = Step::Caller("check the cluster before installing");
