//! What every resource with a `cluster` attribute does the same way when it names its own
//! cluster (`crate::resources::connection`) instead of using the provider's connection, whatever
//! it installs (the chart resources, `release::fleet`; the Flux bootstrap, `flux_bootstrap::fleet`):
//! - [`validate_cluster`] checks the `cluster` settings without I/O (validate and plan, no cluster
//!   needed), on their attribute paths;
//! - [`read_own_cluster`]: refresh has no configuration, so it keeps such a state as it is; plan,
//!   which has it, reads the cluster within [`PLAN_READ_BUDGET`] (a warning, never an error, when
//!   it cannot), so that `plan` still shows drift on every cluster;
//! - [`plan_identity`] plans `cluster_identity`, and a replacement (saying why) when `cluster`
//!   reaches another cluster than the one the state was applied to, or when `cluster` was
//!   removed and the provider's connection reaches another cluster ([`provider_reach`]: removing
//!   `cluster` never silently moves a resource);
//! - [`reads_import`] and [`read_import`]: an import receives only the ID (no configuration, so
//!   no `cluster`), so the plan reads what it imported through the resource's own target, and an
//!   object that is not there is an error (an import never creates anything);
//! - [`without_its_cluster`] decides a destroy that cannot reach the resource's cluster (a
//!   destroy has no configuration either);
//! - [`name_cluster`] names the cluster (its API server URL, never a credential) in errors.

use std::future::Future;
use std::time::Duration;

use crate::cluster::engine::EngineError;
use crate::cluster::{ClusterHandle, Kube, ProviderConfig};
use crate::framework::{Diagnostic, Diagnostics, PlanRequest, PlanResponse, Severity};
use crate::resources::cluster_diagnostic;
use crate::resources::connection::{self, CLUSTER, IDENTITY, Scope, Target};
use crate::resources::engine_report::engine_diagnostic;
use crate::resources::private::{Imported, Private};
use crate::values::{AttributePath, Value};

/// How long a plan waits for the read of a resource's own cluster: a cluster that does not
/// answer is reported by a warning (the plan goes on from the stored state) and by the apply.
pub const PLAN_READ_BUDGET: Duration = Duration::from_secs(20);

/// The `cluster` settings' mistakes (conflicting settings, a credential without `host`, a bad
/// URL, PEM or kubeconfig), each on `cluster.<name>`, as the provider block reports its own
/// ([`connection::resolve`]), each detail starting with its path ([`path_in_detail`]). An empty
/// `cluster` is reported by [`connection::target`] at plan.
pub fn validate_cluster(config: &Value, diagnostics: &mut Diagnostics) {
    let Some(block) = config
        .attr(CLUSTER)
        .filter(|v| !v.is_null() && !v.is_unknown())
    else {
        return;
    };
    let (_, found) = connection::resolve(block, Scope::Block);
    for d in found {
        diagnostics.push(path_in_detail(d));
    }
}

/// `d` with its attribute path at the front of its detail: OpenTofu cannot point at the source
/// line of a nested attribute (`cluster.host`), so the message itself says which one.
pub fn path_in_detail(mut d: Diagnostic) -> Diagnostic {
    if let Some(path) = &d.attribute {
        d.detail = format!("`{path}`: {}", d.detail);
    }
    d
}

/// Whether a plan reads the resource's own cluster: with `cluster` (every setting known), an
/// existing state (refresh kept it as stored), no destroy planned, and `cluster` reaching the
/// cluster the state was applied to (another one plans a replacement: nothing of it is there).
///
/// With `cluster` removed from such a state, refresh kept it too: the plan reads it through the
/// provider's connection when that reaches the same cluster (else [`plan_identity`] plans a
/// replacement or fails).
pub async fn reads_at_plan(target: &Target, req: &PlanRequest) -> bool {
    if req.prior_state.is_null() || req.proposed_new_state.is_null() {
        return false;
    }
    let Target::Own { source, .. } = target else {
        let (Target::Provider(handle), Some(stored)) = (target, stored_identity(&req.prior_state))
        else {
            return false;
        };
        let private = Private::decode_without_new_salt(&req.prior_private);
        return provider_reach(handle, stored, &private).await == Ok(ProviderReach::Same);
    };
    let Some(stored) = req.prior_state.attr(IDENTITY).filter(|v| !v.is_null()) else {
        // Applied through the provider's connection: `cluster` is where the apply goes now.
        return true;
    };
    let private = Private::decode_without_new_salt(&req.prior_private);
    match crate::cluster::identity(source).await {
        Ok(id) => &connection::identity_value(&id, Some(&private)) == stored,
        // `plan_identity` reports it.
        Err(_) => false,
    }
}

/// The read of `label` on the resource's own cluster that refresh could not make: connects
/// and runs `read` within [`PLAN_READ_BUDGET`]. `None`, with a warning in `diagnostics` saying
/// the plan shows no drift there, when the cluster cannot be read in time.
pub async fn read_own_cluster<T, F, Fut>(
    target: &Target,
    label: &str,
    diagnostics: &mut Diagnostics,
    read: F,
) -> Option<(Kube, T)>
where
    F: FnOnce(Kube) -> Fut,
    Fut: Future<Output = Result<(Kube, T), Diagnostic>>,
{
    let outcome = read_within_plan_budget(target, read).await;
    let why = match outcome {
        Ok(Ok(read)) => return Some(read),
        Ok(Err(d)) => format!(
            "Its cluster could not be read, so this plan does not show drift there and plans from the stored state: {}",
            d.detail
        ),
        Err(_) => format!(
            "Its cluster{} did not answer within {}s (not reachable, or refusing connections), so this plan does not show drift there and plans from the stored state. Apply reaches it again, and fails naming the cause if it still cannot.",
            api_server(target)
                .await
                .map(|s| format!(" at {s}"))
                .unwrap_or_default(),
            PLAN_READ_BUDGET.as_secs()
        ),
    };
    diagnostics.warning(format!("Could not read {label} at plan"), why);
    None
}

/// Connects through `target` and runs `read` within [`PLAN_READ_BUDGET`] (`Err` when that ran
/// out), its retries capped by [`within_plan_budget`].
async fn read_within_plan_budget<T, F, Fut>(
    target: &Target,
    read: F,
) -> Result<Result<T, Diagnostic>, tokio::time::error::Elapsed>
where
    F: FnOnce(Kube) -> Fut,
    Fut: Future<Output = Result<T, Diagnostic>>,
{
    let handle = target.handle();
    tokio::time::timeout(PLAN_READ_BUDGET, async {
        let kube = handle
            .connect()
            .await
            .map_err(|e| engine_diagnostic("connect", &EngineError::connect(e)))?;
        read(within_plan_budget(kube)).await
    })
    .await
}

/// `kube` retrying transient errors for at most 3/4 of [`PLAN_READ_BUDGET`]: a cluster that
/// refuses connections then fails the read with that cause ("connection refused") before the
/// plan stops waiting, which could only say that it did not answer.
fn within_plan_budget(mut kube: Kube) -> Kube {
    let cap = PLAN_READ_BUDGET * 3 / 4;
    if kube.retry_budget.duration() > cap {
        kube.retry_budget = crate::cluster::RetryBudget::new(cap);
    }
    kube
}

/// The API server `target` connects to, read from its settings (no network).
async fn api_server(target: &Target) -> Option<String> {
    let source = match target {
        Target::Own { source, .. } => source,
        Target::Provider(handle) => match handle.config() {
            ProviderConfig::Known(source) => source,
            _ => return None,
        },
        Target::Unknown => return None,
    };
    crate::cluster::identity(source)
        .await
        .ok()
        .map(|i| i.api_server)
}

/// Whether the plan must read, through `target`, a state an import made ([`Imported`]): one
/// not read at all (whatever the target), or one read through the provider's connection when
/// the configuration names its own cluster (which the import could not know, and which may be
/// another one: what the provider's cluster has must not stay in the plan).
pub fn reads_import(target: &Target, prior_private: &[u8]) -> bool {
    match Private::decode_without_new_salt(prior_private).imported {
        Some(Imported::NotRead) => true,
        Some(Imported::ThroughProvider) => target.is_own(),
        None => false,
    }
}

/// The plan's read of what an import named (`label`), through `target`, within
/// [`PLAN_READ_BUDGET`]. Unlike [`read_own_cluster`] it cannot fall back to the stored state (an
/// import's is the ID only, or another cluster's): a read that cannot be made is an error.
///
/// # Errors
/// `cluster` not known until apply; no `cluster` and no provider connection; the cluster cannot
/// be reached or read in time. Each names the cluster when it is known and says what to do.
pub async fn read_import<T, F, Fut>(target: &Target, label: &str, read: F) -> Result<T, Diagnostic>
where
    F: FnOnce(Kube) -> Fut,
    Fut: Future<Output = Result<T, Diagnostic>>,
{
    let summary = format!("Cannot read the imported {label}");
    match target {
        Target::Unknown => {
            return Err(Diagnostic::error(
                summary,
                "Its `cluster` is not known until apply (a cluster created in this run), and an import is read at plan. Import it in a later run, once the cluster exists.",
            )
            .at(AttributePath::attr(CLUSTER)));
        }
        Target::Provider(handle) if !matches!(handle.config(), ProviderConfig::Known(_)) => {
            return Err(Diagnostic::error(
                summary,
                "An import receives only its ID, and this resource sets no `cluster` while the provider block has no connection known at plan. Set `cluster` to the cluster it runs on, or configure the provider's connection.",
            )
            .at(AttributePath::attr(CLUSTER)));
        }
        _ => {}
    }
    let outcome = read_within_plan_budget(target, read).await;
    match outcome {
        Ok(read) => read.map_err(|mut d| {
            d.summary = summary;
            d
        }),
        Err(_) => Err(Diagnostic::error(
            summary,
            format!(
                "Its cluster did not answer within {}s. An import is read at plan; run the plan again once the cluster answers.",
                PLAN_READ_BUDGET.as_secs()
            ),
        )),
    }
}

/// The error of an import whose object is not on the cluster the plan read (`api_server`): the
/// plan of an import never creates anything.
pub fn not_there_to_import(what: &str, api_server: &str) -> Diagnostic {
    Diagnostic::error(
        format!("Cannot import: no {what} on {api_server}"),
        format!(
            "The import names {what}, which is not on {api_server}, the cluster this resource reaches (its `cluster`, or the provider's connection without one). An import never creates anything. Fix the import ID, or the resource's `cluster`; after `terraform import`/`tofu import`, remove the state with `state rm`."
        ),
    )
}

/// Where the provider's connection goes, against the cluster a state was applied to through
/// its own `cluster` ([`provider_reach`]).
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderReach {
    /// The same cluster: the same API server URL and CA.
    Same,
    /// Another cluster, by its API server URL (the same URL with another CA is another cluster).
    Other(String),
    /// The provider block has no connection.
    NotConfigured,
    /// The provider's connection is not known until apply (fed by another resource).
    NotKnownYet,
}

/// The stored `cluster_identity` of a state, when it has one.
fn stored_identity(state: &Value) -> Option<&Value> {
    state.attr(IDENTITY).filter(|v| !v.is_null())
}

/// Where `provider` (the provider's connection) goes, against `stored` (a state's
/// `cluster_identity`), its CA hash salted with the resource's salt (`private`) as the stored one.
///
/// # Errors
/// The provider's connection does not load (a kubeconfig file that cannot be read, ...).
pub async fn provider_reach(
    provider: &ClusterHandle,
    stored: &Value,
    private: &Private,
) -> Result<ProviderReach, Diagnostic> {
    let source = match provider.config() {
        ProviderConfig::Known(source) => source,
        ProviderConfig::Unknown => return Ok(ProviderReach::NotKnownYet),
        ProviderConfig::Missing => return Ok(ProviderReach::NotConfigured),
    };
    let id = crate::cluster::identity(source).await.map_err(|e| {
        cluster_diagnostic("load the provider's connection", &e).at(AttributePath::attr(CLUSTER))
    })?;
    Ok(
        match &connection::identity_value(&id, Some(private)) == stored {
            true => ProviderReach::Same,
            false => ProviderReach::Other(id.api_server),
        },
    )
}

/// `cluster` removed from a resource applied through it (`stored`, its `cluster_identity`): it
/// now uses the provider's connection, which must not silently be another cluster.
async fn plan_without_cluster(
    provider: &ClusterHandle,
    stored: &Value,
    private: &Private,
    resp: &mut PlanResponse,
) {
    let from = stored
        .attr("api_server")
        .and_then(Value::as_str)
        .unwrap_or("its cluster")
        .to_owned();
    // Null, as for any resource without `cluster`: refresh reads it through the provider's
    // connection again from the next run on.
    if let Some(attrs) = resp.planned_state.attrs_mut() {
        attrs.insert(IDENTITY.to_owned(), Value::Null);
    }
    let at = AttributePath::attr(CLUSTER);
    let why = match provider_reach(provider, stored, private).await {
        Ok(ProviderReach::Same) => return,
        Ok(ProviderReach::Other(to)) => {
            let reaches = match to == from {
                true => format!("reaches {to} too, but trusts another CA there"),
                false => format!("reaches {to}"),
            };
            resp.diagnostics.push(
                Diagnostic::warning(
                    "Resource moves to another cluster",
                    format!("This resource is replaced: it was applied to {from} through its `cluster`, which is removed, and the provider's connection {reaches}. Terraform destroys it on {from} (which needs a connection there, unless `deletion_policy = \"keep\"`) and creates it on {to}. To keep it on {from}, put `cluster` back or point the provider block at {from}."),
                )
                .at(at),
            );
            resp.requires_replace.push(AttributePath::attr(IDENTITY));
            return;
        }
        Ok(ProviderReach::NotConfigured) => "the provider block has no connection".to_owned(),
        Ok(ProviderReach::NotKnownYet) => {
            "the provider's connection is not known until apply".to_owned()
        }
        Err(d) => {
            resp.diagnostics.push(d);
            return;
        }
    };
    resp.diagnostics.push(
        Diagnostic::error(
            "Cannot tell which cluster this resource moves to",
            format!("It was applied to {from} through its `cluster`, which is removed, so it would use the provider's connection, but {why}: the plan cannot tell whether that is {from}. Put `cluster` back, or point the provider block at {from} (a known connection) to manage it through the provider."),
        )
        .at(at),
    );
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
    if let (Target::Provider(provider), Some(stored)) = (target, stored_identity(stored_prior)) {
        plan_without_cluster(provider, stored, &private, resp).await;
        return;
    }
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

/// A destroy that cannot reach the cluster its resource was applied to (see
/// [`connection::destroy_handle`]).
#[derive(Debug)]
pub enum UnreachableDestroy {
    /// The deletion policy keeps what runs: the resource leaves the state, with this warning.
    Forget(Diagnostic),
    /// It must delete something there: an error, and the state is kept.
    Refuse(Diagnostic),
}

/// Decides a destroy of `label` (state `prior`) without its cluster. `left_running` is what the
/// deletion policy leaves in the cluster (the warning's text), `None` when the policy deletes.
pub fn without_its_cluster(
    label: &str,
    prior: &Value,
    left_running: Option<&str>,
) -> UnreachableDestroy {
    let Some(left) = left_running else {
        return UnreachableDestroy::Refuse(connection::unreachable_on_destroy(label, prior));
    };
    let server = connection::stored_api_server(prior).unwrap_or("its cluster");
    UnreachableDestroy::Forget(Diagnostic::warning(
        format!("{label} left running"),
        format!(
            "deletion_policy is \"keep\" and the provider's connection does not reach {server} (a destroy receives no `cluster`): {left} stays on {server} and is no longer managed by this configuration."
        ),
    ))
}

/// `diagnostics` with the cluster named in every error of a resource with its own `cluster`
/// (unless the error already names it): with a fleet in one root, "which cluster" is the first
/// question. Only the URL, which `Kube::endpoint` and `cluster_identity` keep free of user info.
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

#[cfg(test)]
mod tests;
