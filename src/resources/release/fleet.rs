//! The chart resources' side of a fleet: what is chart-specific when a resource names its own
//! cluster (`crate::resources::connection`); the rest is `crate::resources::fleet`, shared with
//! the Flux bootstrap.
//! - [`read_at_plan`] refreshes the release where plan has the configuration (refresh has none),
//!   so `plan` still shows drift on every cluster; [`refreshed_prior`] does so again at apply.
//! - [`applied_identity`] is the checked identity as the chart model stores it; [`destroy_handle`]
//!   finds a connection for a destroy (which has no configuration either).
//! - [`plan_identity`] and [`name_cluster`] are the shared ones.

use super::{ChartResource, observe, refresh};
use crate::cluster::ClusterHandle;
use crate::framework::model::{Unknowns, decode, encode};
use crate::framework::plan::mark_unknown;
use crate::framework::{Ctx, Diagnostic, Diagnostics, PlanRequest, PlanResponse};
use crate::resources::connection::{self, IdentityState, Target};
use crate::resources::engine_report::engine_diagnostic;
pub use crate::resources::fleet::{name_cluster, plan_identity};
use crate::resources::fleet::{read_own_cluster, reads_at_plan};
use crate::resources::job;
use crate::resources::private::Private;
use crate::values::Value;

/// What [`read_at_plan`] found, for [`ReadAtPlan::finish`].
#[derive(Default)]
pub struct ReadAtPlan {
    /// The release is gone from the cluster: the apply installs it again.
    gone: Option<String>,
    diagnostics: Diagnostics,
}

impl ReadAtPlan {
    /// Adds what the read found to the plan: its warnings, and for a release gone from the
    /// cluster an install (every attribute an install changes becomes unknown).
    pub fn finish(self, resp: &mut PlanResponse, stored_prior: &Value) {
        resp.diagnostics.extend(self.diagnostics);
        if let Some(server) = self.gone {
            if !stored_prior.is_null() && !resp.planned_state.is_null() {
                let after = [
                    "revision",
                    "status",
                    "chart_version",
                    "app_version",
                    "metadata",
                ];
                mark_unknown(&mut resp.planned_state, &after);
                resp.diagnostics.warning(
                    "Release missing from its cluster",
                    format!("The release of this resource is no longer on {server}: apply installs it again."),
                );
            }
        }
    }
}

/// With the resource's own `cluster` and a prior state: the refresh the ReadResource could not
/// make (it has no configuration), as the prior state and private state the plan starts from.
/// Anything else, or a cluster that cannot be read in time (then with a warning), plans from the
/// stored state.
pub async fn read_at_plan<K: ChartResource>(
    target: &Target,
    mut req: PlanRequest,
) -> (PlanRequest, ReadAtPlan) {
    let mut found = ReadAtPlan::default();
    if !reads_at_plan(target, &req).await {
        return (req, found);
    }
    let Ok(state) = decode::<K>(&req.prior_state, Unknowns::AsNull) else {
        return (req, found);
    };
    let label = state.label();
    let stored = &state;
    let read = read_own_cluster(target, &label, &mut found.diagnostics, |kube| async move {
        let observed = observe(&kube, stored)
            .await
            .map_err(|e| engine_diagnostic("read", &e))?;
        Ok((kube, observed))
    })
    .await;
    let Some((kube, observed)) = read else {
        return (req, found);
    };
    let mut private = Private::decode(&req.prior_private);
    match refresh(state, &observed, &mut private, &mut found.diagnostics) {
        Some(refreshed) => {
            if let Ok(v) = encode(&refreshed, &K::schema().value_type()) {
                req.prior_state = job::keep(v, &req.prior_state);
                req.prior_private = private.encode();
            }
        }
        None => found.gone = Some(kube.endpoint.clone()),
    }
    (req, found)
}

/// The `cluster_identity` the apply stores (see [`connection::applied_identity`]).
///
/// # Errors
/// The `cluster` does not load, or reaches another cluster than planned.
pub async fn applied_identity(
    target: &Target,
    planned: &Value,
    private: &Private,
) -> Result<Option<IdentityState>, Diagnostic> {
    let v = connection::applied_identity(target, planned, private).await?;
    let text = |name| v.attr(name).and_then(Value::as_str).map(str::to_owned);
    Ok((!v.is_null()).then(|| IdentityState {
        api_server: text("api_server"),
        ca_sha256: text("ca_sha256"),
    }))
}

/// The connection a destroy of `prior` uses (see [`connection::destroy_handle`]).
pub async fn destroy_handle(ctx: &Ctx, prior: &Value, private: &Private) -> Option<ClusterHandle> {
    connection::destroy_handle(ctx, prior, private).await
}

/// At apply, `prior` as the cluster has it now, for a resource with its own `cluster`: refresh
/// could not read it, and the install decision compares what the last apply installed with what
/// runs (a stale prior would call a drifted release unchanged). `None` when the release is gone
/// (installed again); a read that fails leaves `prior` as stored (the install reads again).
pub async fn refreshed_prior<K: ChartResource>(
    clients: &crate::cluster::Kube,
    target: &Target,
    prior: Option<K>,
    private: &mut Private,
) -> Option<K> {
    let prior = prior?;
    if !matches!(target, Target::Own { .. }) {
        return Some(prior);
    }
    let Ok(observed) = observe(clients, &prior).await else {
        return Some(prior);
    };
    // Its warnings were the plan's already.
    refresh(prior, &observed, private, &mut Diagnostics::new())
}
