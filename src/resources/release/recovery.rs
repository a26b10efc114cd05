//! What a failed apply of a chart resource leaves, and how the next apply picks it up, so the
//! release that runs (a CNI, for Cilium) is never taken down by the recovery itself:
//! - a create that failed after its release existed marks the release's newest record
//!   ([`FAILED_CREATE`]): the tainted object's destroy only forgets the release, and the create
//!   that replaces it resumes the same release in place;
//! - an upgrade that did not become ready is rolled back to the revision that ran, when the
//!   resource asks for it ([`ChartResource::rollback_on_failure`]);
//! - a create that finds a live release is refused ([`already_exists`]); the plan says so
//!   already, an error when `deletion_policy = "keep"` would make a replacement forget it first,
//!   a warning when a replacement would uninstall it first ([`plan_create_over_live_release`]).

use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::ChartResource;
use super::common::unix_seconds;
use crate::cluster::Kube;
use crate::cluster::engine::JobSettings;
use crate::cluster::helm;
use crate::cluster::helm::recovery::FAILED_CREATE;
use crate::cluster::helm::release::HelmRelease;
use crate::framework::{Diagnostic, Diagnostics};

/// Whether a create resumes the release a failed talosboot create left (its newest record carries
/// [`FAILED_CREATE`]), rather than refusing it as somebody else's.
pub(super) async fn resumes_failed_create<K: ChartResource>(clients: &Kube, desired: &K) -> bool {
    let c = desired.common();
    let (ns, name) = (c.release_namespace(), c.release_name());
    let Ok(Some(found)) = helm::install::release(clients, ns, name).await else {
        return false;
    };
    left_by_failed_create(clients, &found).await
}

/// Whether `found`'s newest record carries the [`FAILED_CREATE`] mark of this very release.
async fn left_by_failed_create(clients: &Kube, found: &HelmRelease) -> bool {
    let (ns, name) = (found.namespace.as_str(), found.name.as_str());
    helm::recovery::record_annotation(clients, ns, name, found.revision, FAILED_CREATE)
        .await
        .ok()
        .flatten()
        .is_some_and(|mark| mark == unix_seconds(&found.first_deployed).to_string())
}

/// After a create failed with its release in the cluster (the object is then tainted): the mark
/// on the release's newest record that makes the tainted object's destroy only forget the
/// release and the replacing create resume it, so a CNI that serves pods is never uninstalled
/// between the failure and the next success.
pub(super) async fn mark_failed_create<K: ChartResource>(
    clients: &Kube,
    state: Option<&K>,
    diagnostics: &mut Diagnostics,
) {
    let Some(state) = state else { return };
    let c = state.common();
    let (Some(revision), Some(first_deployed)) = (
        c.revision,
        c.metadata
            .as_ref()
            .map(|m| m.first_deployed)
            .filter(|t| *t != 0),
    ) else {
        return;
    };
    let (ns, name) = (c.release_namespace(), c.release_name());
    let mark = first_deployed.to_string();
    let marked =
        helm::recovery::annotate_record(clients, ns, name, revision, FAILED_CREATE, Some(&mark))
            .await;
    match marked {
        Ok(()) => diagnostics.warning(
            format!("{} stays installed", state.label()),
            format!("The create failed after release {} was installed. OpenTofu/Terraform marks the resource tainted and plans to replace it: talosboot then keeps the release running (the replacement's destroy only forgets it, for any `deletion_policy`) and the next apply resumes it in place. To remove it instead, uninstall it with Helm after the destroy.", c.id()),
        ),
        Err(e) => diagnostics.warning(
            format!("{} may be uninstalled by the replacement", state.label()),
            format!("The create failed after release {} was installed, and talosboot could not mark the release to be resumed ({e}): the replacement OpenTofu/Terraform plans would uninstall it first. To keep it running, `untaint` the resource before the next apply.", c.id()),
        ),
    }
}

/// After a resumed create succeeded without a new record (nothing changed): the mark goes.
pub(super) async fn unmark_failed_create<K: ChartResource>(clients: &Kube, state: &K) {
    let c = state.common();
    if let Some(revision) = c.revision {
        let (ns, name) = (c.release_namespace(), c.release_name());
        let cleared =
            helm::recovery::annotate_record(clients, ns, name, revision, FAILED_CREATE, None).await;
        if let Err(e) = cleared {
            tracing::warn!(error = %e, release = %c.id(), "could not clear the failed-create mark");
        }
    }
}

/// `helm rollback` to the revision that ran before a failed upgrade, then the wait for it: what
/// happened, in a sentence for the failure's detail.
pub(super) async fn roll_back<K: ChartResource>(
    clients: &Kube,
    desired: &K,
    job: &JobSettings,
    prior: Option<&K>,
    target: i64,
    cancel: &CancellationToken,
) -> String {
    let c = desired.common();
    let (ns, name) = (c.release_namespace(), c.release_name());
    let before = prior
        .and_then(|p| p.common().chart_version.clone())
        .unwrap_or_default();
    // The rollback gets a budget of its own: the upgrade may have used the timeout up.
    let budget = c.timeout();
    let rolled = helm::recovery::rollback(
        clients,
        &desired.bootstrap_namespace(),
        job,
        ns,
        name,
        target,
        budget,
        cancel,
    )
    .await;
    if let Err(e) = rolled {
        return format!(
            "`rollback_on_failure`: the rollback to revision {target} failed too: {e}. Roll back by hand (`helm rollback -n {ns} {name} {target}`)."
        );
    }
    let release = helm::install::release(clients, ns, name)
        .await
        .ok()
        .flatten();
    let r = desired.readiness(release.as_ref());
    let waited = crate::cluster::readiness::wait_ready(
        clients,
        ns,
        &r.workloads,
        &r.pods,
        r.nodes,
        Instant::now() + budget,
        cancel,
    )
    .await;
    let revision = release.map(|r| r.revision).unwrap_or_default();
    match waited {
        Ok(_) => format!(
            "`rollback_on_failure`: rolled back to revision {target} (chart {before}), now revision {revision}, and it is ready again: the upgrade changed nothing that lasts. The state says what runs; the next plan proposes the upgrade again."
        ),
        Err(n) => {
            // Cilium's wait is also for the nodes: they may be all that is not ready.
            let waiting: Vec<&str> = n
                .workloads
                .iter()
                .chain(&n.nodes)
                .chain(&n.pods)
                .map(String::as_str)
                .collect();
            let waiting = match waiting.is_empty() {
                true => String::new(),
                false => format!(": {}", waiting.join("; ")),
            };
            format!(
                "`rollback_on_failure`: rolled back to revision {target} (chart {before}), now revision {revision}, but it did not become ready again within {}s either{waiting}.",
                budget.as_secs(),
            )
        }
    }
}

/// The error of a create that finds `existing` running: talosboot never takes over a live
/// release by creating it. Said at apply (`lifecycle::declined`) and, when the cluster answers in time,
/// already at plan ([`plan_create_over_live_release`]).
pub(super) fn already_exists<K: ChartResource>(desired: &K, existing: &HelmRelease) -> Diagnostic {
    let id = desired.common().id();
    Diagnostic::error(
        "Release already exists",
        format!(
            "Release {id} (revision {}, chart {} {}, status {}) exists already; talosboot does not take over a release by creating it. Import it instead, then apply: add this block to the configuration, with your resource's address in `to` (or run `tofu import` / `terraform import` with the same ID):\n\nimport {{\n  to = {}.this\n  id = \"{id}\"\n}}",
            existing.revision,
            existing.chart,
            existing.chart_version,
            existing.status,
            K::TYPE_NAME,
        ),
    )
}

/// A planned create of a release that already runs (and that this resource's failed create did
/// not leave, [`resumes_failed_create`]) is said at plan, when the cluster answers within
/// `budget` (the plan's other best-effort checks'), so that nothing runs first:
/// - with `deletion_policy = "keep"` it is an error: even as the create half of a replacement
///   (`-replace`, or a change that forces one) it would be refused, since that destroy only
///   forgets the release, which would then run outside the state;
/// - with `uninstall` it is a warning: the plan cannot tell a fresh create (which the apply
///   refuses, [`already_exists`]) from a replacement's (whose destroy uninstalls the release
///   first), so it says what each will do. Both CLIs show it for a fresh create and a tainted
///   object's replacement; they drop the warnings of the create half of any other replacement.
pub(super) async fn plan_create_over_live_release<K: ChartResource>(
    cluster: &crate::cluster::ClusterHandle,
    planned: &K,
    budget: std::time::Duration,
) -> Option<Diagnostic> {
    let c = planned.common();
    let (ns, name) = (c.release_namespace(), c.release_name());
    if ns.is_empty() || name.is_empty() {
        return None;
    }
    let found = tokio::time::timeout(budget, async {
        let clients = cluster.connect().await.ok()?;
        let existing = helm::install::release(&clients, ns, name).await.ok()??;
        let live = existing.status.is_live();
        (live && !left_by_failed_create(&clients, &existing).await).then_some(existing)
    })
    .await
    .ok()??;
    let mut d = already_exists(planned, &found);
    if c.keep_on_destroy() {
        d.detail.push_str(&format!("\n\nNothing was changed. If this create replaces the resource (`-replace`, or a change that forces a replacement): with `deletion_policy = \"keep\"` the replacement's destroy only forgets the release, and this create would then be refused, leaving the release running outside the state. To reinstall it, uninstall it with Helm first (`helm uninstall -n {ns} {name}`; for a CNI, pods lose their network until it is back)."));
        return Some(d);
    }
    Some(Diagnostic::warning(
        format!("Release {ns}/{name} already runs"),
        format!(
            "If this plan replaces the resource (it was tainted), its destroy uninstalls the release first and this create installs it again, and what it runs is gone in between (for a CNI, the pods' network). Otherwise this is a create over a release that talosboot does not manage, and the apply will refuse it, changing nothing:\n\n{}",
            d.detail
        ),
    ))
}
