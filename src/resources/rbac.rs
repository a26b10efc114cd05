//! The `rbac` input every resource that installs charts shares: `cluster-admin` (default) or
//! `minimal` (the run gets exactly what the chart renders, learnt by rendering it first; see
//! [`crate::cluster::helm::rbac`]).

use crate::cluster::engine::rbac::RbacPolicy;
use crate::framework::{Attribute, Diagnostics};
use crate::resources::choice::choice;
use crate::values::{AttributePath, Type};

choice! {
    /// `rbac`: what the bootstrap Jobs may do.
    Rbac {
        /// Cluster-admin, as every Talos guide does (the default).
        ClusterAdmin = "cluster-admin",
        /// Exactly what the chart renders, learnt by rendering it first.
        Minimal = "minimal",
    }
}

/// The attribute, with what `minimal` costs and what it does not protect against.
pub fn attribute() -> Attribute {
    Attribute::optional_computed(
        "rbac",
        Type::String,
        "What the bootstrap Jobs may do. `cluster-admin` (default, as every Talos guide and the flux-operator-bootstrap module do) or `minimal`: a first Job renders the chart (`helm template`, bound to no permission, its log filtered to each object's `apiVersion` and `kind`), then the install runs with a ClusterRole (and Roles) granting exactly those kinds, plus the release records and the kinds of the current revision, deleted after the run. Charts that create roles or bindings also get `escalate` and `bind`: the run can still grant itself what the chart grants. A chart that `lookup`s kinds it does not render fails with the missing verb and resource named.",
    )
}

/// `cluster-admin` or `minimal`; unknown (absent) values are left to apply.
pub fn validate(value: Option<&Rbac>, path: AttributePath, d: &mut Diagnostics) {
    if let Some(Rbac::Other(r)) = value {
        d.error_at(
            path,
            "Invalid rbac",
            format!("{r:?}: use `cluster-admin` or `minimal`."),
        );
    }
}

/// The policy the engine resolves per run.
pub fn policy(value: Option<&Rbac>) -> RbacPolicy {
    match value {
        Some(Rbac::Minimal) => RbacPolicy::Minimal,
        _ => RbacPolicy::ClusterAdmin,
    }
}
