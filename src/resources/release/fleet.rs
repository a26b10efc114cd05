//! The chart resources' side of a fleet: what changes when a resource names its own cluster
//! (`crate::resources::connection`) instead of using the provider's connection.
//! - Refresh has no configuration, so it keeps such a state as it is; [`read_at_plan`] reads the
//!   release where plan has the configuration, so `plan` still shows drift on every cluster.
//! - [`plan_identity`] plans `cluster_identity`, and a replacement (saying why) when `cluster`
//!   reaches another cluster than the one the state was applied to.
//! - [`applied_identity`] checks at apply that the cluster is the planned one; [`destroy_handle`]
//!   finds a connection for a destroy (which has no configuration either).
//! - [`name_cluster`] names the cluster (its API server URL, never a credential) in errors.

use std::time::Duration;

use super::{ChartResource, observe, refresh};
use crate::cluster::ClusterHandle;
use crate::framework::model::{Unknowns, decode, encode};
use crate::framework::plan::mark_unknown;
use crate::framework::{Ctx, Diagnostic, Diagnostics, PlanRequest, PlanResponse, Severity};
use crate::resources::connection::{self, IDENTITY, IdentityState, Target};
use crate::resources::engine_report::engine_diagnostic;
use crate::resources::job;
use crate::resources::private::Private;
use crate::values::{AttributePath, Value};

/// How long a plan waits for the read of a resource's own cluster: a cluster that does not
/// answer is reported by a warning (the plan goes on from the stored state) and by the apply.
const PLAN_READ_BUDGET: Duration = Duration::from_secs(20);

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
/// Anything else, or a cluster that cannot be read within [`PLAN_READ_BUDGET`] (then with a
/// warning), plans from the stored state.
pub async fn read_at_plan<K: ChartResource>(
    target: &Target,
    mut req: PlanRequest,
) -> (PlanRequest, ReadAtPlan) {
    let mut found = ReadAtPlan::default();
    let reads = matches!(target, Target::Own { .. })
        && !req.prior_state.is_null()
        && !req.proposed_new_state.is_null();
    if !reads {
        return (req, found);
    }
    let Ok(state) = decode::<K>(&req.prior_state, Unknowns::AsNull) else {
        return (req, found);
    };
    let label = state.label();
    let handle = target.handle();
    let read = tokio::time::timeout(PLAN_READ_BUDGET, async {
        let kube = handle.connect().await.map_err(|e| {
            engine_diagnostic("connect", &crate::cluster::engine::EngineError::connect(e))
        })?;
        let observed = observe(&kube, &state)
            .await
            .map_err(|e| engine_diagnostic("read", &e))?;
        Ok::<_, Diagnostic>((kube, observed))
    })
    .await;
    let (kube, observed) = match read {
        Ok(Ok(read)) => read,
        Ok(Err(d)) => {
            found.diagnostics.warning(
                format!("Could not read {label} at plan"),
                format!("Its own cluster could not be read, so this plan does not show drift there and plans from the stored state: {}", d.detail),
            );
            return (req, found);
        }
        Err(_) => {
            found.diagnostics.warning(
                format!("Could not read {label} at plan"),
                format!("Its own cluster did not answer within {}s, so this plan does not show drift there and plans from the stored state.", PLAN_READ_BUDGET.as_secs()),
            );
            return (req, found);
        }
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

/// Plans `cluster_identity` (see [`connection::planned_identity`]) and, when `cluster` reaches
/// another cluster than the one `stored_prior` was applied to, a replacement with the reason.
pub async fn plan_identity(
    target: &Target,
    stored_prior: &Value,
    prior_private: &[u8],
    resp: &mut PlanResponse,
) {
    if resp.planned_state.is_null() {
        return;
    }
    // A create has no salt yet (it is made at apply): its CA hash is known after apply.
    let private = Private::decode_without_new_salt(prior_private);
    let salted = (!stored_prior.is_null() && !private.salt.is_empty()).then_some(&private);
    match connection::planned_identity(target, stored_prior, salted).await {
        Ok(identity) => {
            if let Some(attrs) = resp.planned_state.attrs_mut() {
                attrs.insert(IDENTITY.to_owned(), identity);
            }
        }
        Err(d) => resp.diagnostics.push(d),
    }
    if let Some(why) = connection::moved_to_another_cluster(stored_prior, &resp.planned_state) {
        resp.diagnostics.push(why);
        resp.requires_replace.push(AttributePath::attr(IDENTITY));
    }
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

/// `diagnostics` with the cluster named in every error of a resource with its own `cluster`
/// (unless the error already names it): with a fleet in one root, "which cluster" is the first
/// question. Only the URL, which `Kube::endpoint` keeps free of user info.
pub fn name_cluster(mut diagnostics: Diagnostics, target: &Target, endpoint: &str) -> Diagnostics {
    if target.is_own() {
        for d in diagnostics.iter_mut() {
            if d.severity == Severity::Error && !d.detail.contains(endpoint) {
                d.detail.push_str(&format!(
                    "\n\nCluster: {endpoint} (this resource's `cluster`)."
                ));
            }
        }
    }
    diagnostics
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
