//! The chart resources' side of a fleet: what is chart-specific when a resource names its own
//! cluster (`crate::resources::connection`); the rest is `crate::resources::fleet`, shared with
//! the Flux bootstrap.
//! - [`read_at_plan`] refreshes the release where plan has the configuration (refresh has none),
//!   so `plan` still shows drift on every cluster; [`refreshed_prior`] does so again at apply.
//!   It reads an imported release there too ([`crate::resources::private::Imported`]: an import
//!   has only the ID), an error when the release is not on the cluster the resource reaches.
//! - [`applied_identity`] is the checked identity as the chart model stores it; [`destroy_handle`]
//!   finds a connection for a destroy (which has no configuration either).
//! - [`plan_identity`] and [`name_cluster`] are the shared ones.

use super::{ChartResource, observe, refresh};
use crate::cluster::ClusterError;
use crate::cluster::ClusterHandle;
use crate::framework::model::{Unknowns, decode, encode};
use crate::framework::plan::mark_unknown;
use crate::framework::{Block, Ctx, Diagnostic, Diagnostics, PlanRequest, PlanResponse};
use crate::resources::connection::{self, IdentityState, Target};
use crate::resources::engine_report::engine_diagnostic;
pub use crate::resources::fleet::{name_cluster, plan_identity};
use crate::resources::fleet::{
    not_there_to_import, read_import, read_own_cluster, reads_at_plan, reads_import,
};
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
    /// The read's errors, when it failed (an import not there, or not readable): the plan
    /// stops there, since it has nothing to plan from.
    pub fn errors(&self) -> Option<Diagnostics> {
        self.diagnostics
            .has_errors()
            .then(|| self.diagnostics.clone())
    }

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
    if !req.prior_state.is_null()
        && !req.proposed_new_state.is_null()
        && reads_import(target, &req.prior_private)
    {
        read_import_at_plan::<K>(target, &mut req, &mut found.diagnostics).await;
        return (req, found);
    }
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

/// An imported release read through `target`, as the prior state the plan starts from (the
/// state the CLI has is the ID only, or what the provider's cluster has). The private state
/// keeps the import's mark, so that the apply reads the release again before it decides
/// ([`refreshed_prior`]). Not there, or not readable: an error (an import never installs).
async fn read_import_at_plan<K: ChartResource>(
    target: &Target,
    req: &mut PlanRequest,
    diagnostics: &mut Diagnostics,
) {
    let Ok(state) = decode::<K>(&req.prior_state, Unknowns::AsNull) else {
        return;
    };
    // An import's state is its ID only (no version, no chart): the ID is what names it.
    let label = format!("Helm release {}", state.common().id());
    let stored = &state;
    let read = read_import(target, &label, |kube| async move {
        let observed = observe(&kube, stored)
            .await
            .map_err(|e| engine_diagnostic("read", &e))?;
        Ok((kube, observed))
    })
    .await;
    let (kube, observed) = match read {
        Ok(read) => read,
        Err(d) => return diagnostics.push(d),
    };
    let id = state.common().id();
    let mut private = Private::decode(&req.prior_private);
    match refresh(state, &observed, &mut private, diagnostics) {
        Some(refreshed) => {
            if let Ok(v) = encode(&refreshed, &K::schema().value_type()) {
                req.prior_state = job::keep(v, &req.prior_state);
                req.prior_private = private.encode();
                computed_from(
                    &K::schema().block,
                    &req.prior_state,
                    &req.config,
                    &mut req.proposed_new_state,
                );
            }
        }
        None => diagnostics.push(not_there_to_import(
            &format!("Helm release {id}"),
            &kube.endpoint,
        )),
    }
}

/// The CLI proposes the prior state's computed values where the configuration sets none, and
/// its prior was the import's (the ID only): `proposed` with those of `prior`, the release as
/// read, as the CLI would have proposed them from it. Attributes with a default keep the
/// default the dispatcher planned.
fn computed_from(block: &Block, prior: &Value, config: &Value, proposed: &mut Value) {
    for a in block
        .attributes
        .iter()
        .filter(|a| a.computed && a.default.is_none())
    {
        let unset = config.attr(&a.name).is_none_or(Value::is_null);
        if let (true, Some(attrs), Some(v)) = (unset, proposed.attrs_mut(), prior.attr(&a.name)) {
            attrs.insert(a.name.clone(), v.clone());
        }
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

/// At apply, `prior` as the cluster has it now, for a resource with its own `cluster`: refresh
/// could not read it, and the install decision compares what the last apply installed with what
/// runs (a stale prior would call a drifted release unchanged). `None` when the release is gone
/// (installed again); a read that fails leaves `prior` as stored (the install reads again).
///
/// An imported state (whatever the target) is read too, since the CLI's prior is the ID only
/// or another cluster's, and the import's mark leaves the private state; so is a state applied
/// through `cluster` that has been removed since (refresh kept it as it was).
///
/// # Errors
/// An imported release that cannot be read, or is gone since the plan: an import never
/// installs (nor upgrades from a made-up prior).
pub async fn refreshed_prior<K: ChartResource>(
    clients: &crate::cluster::Kube,
    target: &Target,
    prior: Option<K>,
    private: &mut Private,
) -> Result<Option<K>, Diagnostic> {
    let Some(prior) = prior else {
        return Ok(None);
    };
    let imported = private.imported.take().is_some();
    // Refresh kept a state applied through its own `cluster` as it was, also when `cluster` has
    // been removed since (the provider's connection reaches that cluster, or the plan failed).
    let unread = prior.common().cluster_identity.is_some();
    if !imported && !unread && !matches!(target, Target::Own { .. }) {
        return Ok(Some(prior));
    }
    let observed = match observe(clients, &prior).await {
        Ok(observed) => observed,
        // Not read after the connection's whole retry budget (unreachable, or failing with
        // 5xx): the install would spend that budget again before failing the same way.
        Err(e) if imported || e.cause.as_ref().is_some_and(ClusterError::is_transient) => {
            return Err(engine_diagnostic(&format!("read {}", prior.label()), &e));
        }
        Err(_) => return Ok(Some(prior)),
    };
    let id = prior.common().id();
    // Its warnings were the plan's already.
    match refresh(prior, &observed, private, &mut Diagnostics::new()) {
        None if imported => Err(not_there_to_import(
            &format!("Helm release {id}"),
            &clients.endpoint,
        )),
        refreshed => Ok(refreshed),
    }
}
