//! The lifecycle every chart-installing resource shares, against the cluster: observe the release
//! and its workloads, refresh the state from them, install or upgrade along the converge path
//! ([`converge`]: observe, decide, install or upgrade, wait; a stuck release unlocked first, an
//! existing release never taken over by a create, no upgrade when nothing changed), with the
//! resource's own checks and marks between its steps, return the state that is true after a
//! failure, and destroy (uninstall, or forget with `deletion_policy = "keep"`).

use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::common::{ReleaseMetadata, unix_seconds};
use super::recovery;
use super::{ChartResource, CheckAt, ReleaseCommon, ReleaseFields};
use crate::cluster::Kube;
use crate::cluster::converge::{
    self, Converge, ConvergeError, Converged, Decision, Fingerprint, Install, Observed,
    ReadinessOf, Steps, Subject, Want, same_version,
};
use crate::cluster::engine::{EngineError, JobSettings};
use crate::cluster::helm;
use crate::cluster::helm::install::Installed;
use crate::cluster::helm::recovery::FAILED_CREATE;
use crate::cluster::helm::release::{HelmRelease, ReleaseStatus};
use crate::cluster::helm::release_values;
use crate::cluster::talos_inventory;
use crate::framework::{Diagnostic, Diagnostics};
use crate::resources::engine_report::{engine_diagnostic, not_ready_diagnostic};
use crate::resources::job::JobDefaults;
use crate::resources::private::Private;

/// What an install is compared by.
fn fingerprint<K: ChartResource>(m: &K) -> Fingerprint<'_> {
    let c = m.common();
    Fingerprint {
        version: c.version.as_deref().unwrap_or_default(),
        values_sha256: c.values_sha256.as_deref(),
        content_digest: m.content_digest(),
    }
}

/// The release record and its workloads ([`converge::observe`]), as the resource reads them.
pub async fn observe<K: ChartResource>(clients: &Kube, m: &K) -> Result<Observed, EngineError> {
    let readiness = |r: Option<&HelmRelease>| m.refresh_readiness(r);
    converge::observe(clients, &subject(m, &readiness)).await
}

/// The release of `m`, its workloads as `readiness` names them.
fn subject<'a, K: ChartResource>(m: &'a K, readiness: &'a ReadinessOf<'a>) -> Subject<'a> {
    Subject {
        namespace: m.common().release_namespace(),
        name: m.common().release_name(),
        known_revision: m.common().revision,
        source: m.workload_source(),
        readiness,
    }
}

/// Updates `state` with what was observed; `None` when the release is gone. Unhealthy workloads of
/// a deployed release are a warning: not drift an upgrade fixes.
pub fn refresh<K: ChartResource>(
    state: K,
    o: &Observed,
    private: &mut Private,
    diagnostics: &mut Diagnostics,
) -> Option<K> {
    refresh_as(state, o, private, diagnostics, false)
}

/// [`refresh`]; with `after_apply`, a pinned `version` stays as configured even when the cluster
/// has another one (a concurrent run upgraded the release while this apply waited): the state
/// must match the plan, the next plan shows the difference, and a warning says what happened.
pub fn refresh_as<K: ChartResource>(
    mut state: K,
    o: &Observed,
    private: &mut Private,
    diagnostics: &mut Diagnostics,
    after_apply: bool,
) -> Option<K> {
    let release = o
        .release
        .as_ref()
        .filter(|r| r.status != ReleaseStatus::Uninstalled)?;
    let configured = state.common().version.clone().unwrap_or_default();
    let same = same_version(&configured, &release.chart_version);
    let version = if same || (after_apply && !configured.is_empty()) {
        configured.clone()
    } else {
        release.chart_version.clone()
    };
    if after_apply && !same && !configured.is_empty() {
        diagnostics.warning(
            format!("{} was changed by another run", state.label()),
            format!(
                "This apply installed version {configured}, but the release now has chart version {} (revision {}): another run upgraded it while this one waited. The next plan shows the difference.",
                release.chart_version, release.revision
            ),
        );
    }
    if o.unhealthy().is_empty() {
        private.unready_revision = None;
    }
    private.deployed_before = o.deployed_before.clone();
    let fields = ReleaseFields {
        status: release.status.clone(),
        revision: release.revision,
        chart_version: release.chart_version.clone(),
        app_version: release.app_version.clone(),
        values_sha256: private.salted(&release.values_sha256),
        version,
        metadata: ReleaseMetadata {
            name: release.name.clone(),
            revision: release.revision,
            namespace: release.namespace.clone(),
            chart: release.chart.clone(),
            version: release.chart_version.clone(),
            app_version: release.app_version.clone(),
            first_deployed: unix_seconds(&release.first_deployed),
            last_deployed: unix_seconds(&release.last_deployed),
            notes: release.notes.clone(),
        },
    };
    state.common_mut().record(&fields);
    state.record(o);
    private.owner = o.manager().map(|m| m.to_string());
    let unhealthy = o.unhealthy();
    if release.status == ReleaseStatus::Deployed && state.common().wait() && !unhealthy.is_empty() {
        diagnostics.warning(
            format!("{} is not healthy", state.label()),
            format!(
                "The release is deployed, but:\n  - {}\nThis is not drift that an upgrade fixes: check the pods (`kubectl -n {} get pods`).",
                unhealthy.join("\n  - "),
                state.common().release_namespace()
            ),
        );
    }
    Some(state)
}

/// What apply hands back: the state (`None`: nothing exists) and its diagnostics.
pub struct Applied<K> {
    pub state: Option<K>,
    pub diagnostics: Diagnostics,
}

/// Re-reads the cluster after a failure, so the state says what is true.
async fn truthful<K: ChartResource>(
    clients: &Kube,
    m: &K,
    private: &mut Private,
    diagnostics: &mut Diagnostics,
) -> Option<K> {
    match observe(clients, m).await {
        Ok(o) => refresh(m.clone(), &o, private, &mut Diagnostics::new()),
        Err(e) => {
            diagnostics.push(Diagnostic::warning(
                "Could not re-read the release after the failure",
                format!("{e}. The state keeps what was planned; the next refresh corrects it."),
            ));
            Some(m.clone())
        }
    }
}

/// Marks on the new release record which value paths came from `set_sensitive`/`set_wo`/`values_wo` (names
/// only), so later plans hide their values whatever state they come from. Best-effort: without
/// it, the plan still hides what the configuration and state mark sensitive.
async fn mark_sensitive(clients: &Kube, c: &ReleaseCommon) {
    let mut paths: Vec<String> = c
        .set_sensitive
        .iter()
        .flatten()
        .chain(c.set_wo.iter().flatten())
        .filter_map(|s| s.name.clone())
        .collect();
    // The keys of `values_wo` too: a later plan without them in its configuration (removed, or
    // from a moved state) must still never show their values.
    let mut write_only = super::values_diff::SensitivePaths::default();
    for doc in c.values_wo.iter().flatten() {
        if let Ok(v) = helm::values::parse_values(doc) {
            write_only = write_only.with_write_only(&v);
        }
    }
    paths.extend(write_only.write_only_names());
    let marked = release_values::mark_sensitive_paths(
        clients.client.clone(),
        &clients.endpoint,
        c.release_namespace(),
        c.release_name(),
        &paths,
    )
    .await;
    if let Err(e) = marked {
        tracing::warn!(error = %e, release = %c.id(), "could not mark the sensitive value paths on the release record");
    }
}

/// What a chart resource adds between the converge steps: the Repair warning and its
/// prerequisites before a Job, the sensitive-path marks and the Job's warnings after it, and the
/// release's objects out of Talos' inventory before the wait.
struct ResourceSteps<'a, K> {
    desired: &'a K,
    /// The prior state when talosboot's last apply installed it ([`ChartResource::applied_by_talosboot`]).
    prior: Option<&'a K>,
    what: &'a str,
    diagnostics: &'a mut Diagnostics,
    job: &'a JobSettings,
    deadline: Instant,
    cancel: &'a CancellationToken,
}

#[async_trait::async_trait]
impl<K: ChartResource> Steps for ResourceSteps<'_, K> {
    async fn before_install(&mut self, clients: &Kube, observed: &Observed, d: Decision) -> bool {
        if let (Decision::Repair, Some(stuck)) = (d, observed.current()) {
            self.diagnostics.warning(
                "Repairing an earlier release",
                format!("Release {} exists with status {:?} (revision {}), left by an earlier run; talosboot upgrades it in place.", self.desired.common().id(), stuck.status.as_str(), stuck.revision),
            );
        }
        match self
            .desired
            .prerequisites(clients, self.prior, CheckAt::Apply)
            .await
        {
            Ok(found) => {
                let refused = found.has_errors();
                self.diagnostics.extend(found);
                if refused {
                    return false;
                }
            }
            Err(e) => {
                self.diagnostics.push(engine_diagnostic(
                    self.what,
                    &EngineError::api(helm::PREREQUISITES, e),
                ));
                return false;
            }
        }
        if let (Decision::Upgrade, Some(running)) = (d, observed.current()) {
            let found = self
                .desired
                .before_upgrade(clients, running, self.job, self.deadline, self.cancel)
                .await;
            let refused = found.has_errors();
            self.diagnostics.extend(found);
            return !refused;
        }
        true
    }

    async fn after_install(&mut self, clients: &Kube, done: &Installed) {
        mark_sensitive(clients, self.desired.common()).await;
        for w in &done.run.warnings {
            self.diagnostics.warning("Bootstrap", w.clone());
        }
        if let Some(status) = &done.unlocked {
            self.diagnostics.warning(
                "Unlocked a stuck release",
                format!("The release was left {status:?} by an interrupted operation; talosboot marked it failed and upgraded from it."),
            );
        }
    }

    async fn before_wait(&mut self, clients: &Kube) {
        if self.desired.common().adopt_existing == Some(true) {
            release_from_talos(clients, self.desired.common(), self.diagnostics).await;
        }
    }
}

/// Create (`prior` is `None`) or update, along the converge path.
pub async fn install<K: ChartResource>(
    clients: &Kube,
    desired: K,
    prior: Option<&K>,
    private: &mut Private,
    defaults: &JobDefaults,
    cancel: &CancellationToken,
) -> Applied<K> {
    let mut diagnostics = Diagnostics::new();
    let started = Instant::now();
    let what = format!(
        "{} {}",
        if prior.is_some() {
            "upgrade"
        } else {
            "install"
        },
        desired.label()
    );
    let chart = match desired.chart_install() {
        Ok(chart) => chart,
        Err(e) => {
            diagnostics.error("Invalid values", e);
            return Applied {
                state: prior.cloned(),
                diagnostics,
            };
        }
    };
    let (bootstrap, job) = (
        desired.bootstrap_namespace(),
        desired.common().job_settings(defaults),
    );
    let refresh_readiness = |r: Option<&HelmRelease>| desired.refresh_readiness(r);
    let wait_readiness = |r: Option<&HelmRelease>| desired.readiness(r);
    let resumes = prior.is_none() && recovery::resumes_failed_create(clients, &desired).await;
    let want = match resumes {
        // The release this resource's failed create left: upgraded (or waited for) in place.
        true => Want::Record(fingerprint(&desired)),
        false => Want::Since {
            prior: prior.map(fingerprint),
            desired: fingerprint(&desired),
        },
    };
    let deadline = started + desired.common().timeout();
    let c = Converge {
        subject: subject(&desired, &refresh_readiness),
        want,
        install: Install {
            chart: &chart,
            bootstrap: &bootstrap,
            job: &job,
        },
        wait: desired
            .common()
            .wait()
            .then_some(&wait_readiness as &ReadinessOf<'_>),
        deadline,
    };
    let applied_prior = K::applied_by_talosboot(prior, private);
    let mut steps = ResourceSteps {
        desired: &desired,
        prior: applied_prior,
        what: &what,
        diagnostics: &mut diagnostics,
        job: &job,
        deadline,
        cancel,
    };
    let converged = converge::converge(clients, &c, &mut steps, cancel).await;
    match converged {
        Ok(Converged::Declined { decision, observed }) => {
            return declined(&desired, prior, private, decision, &observed, diagnostics);
        }
        Ok(Converged::Stopped) => {
            return Applied {
                state: prior.cloned(),
                diagnostics,
            };
        }
        Ok(Converged::Done { .. }) => {}
        Err(ConvergeError::Observe(e)) => {
            diagnostics.push(engine_diagnostic(&what, &e));
            return Applied {
                state: prior.cloned(),
                diagnostics,
            };
        }
        Err(ConvergeError::Install(e)) => {
            diagnostics.push(engine_diagnostic(&what, &e));
            let state = truthful(clients, &desired, private, &mut diagnostics).await;
            let state = match (state, prior) {
                // Nothing was installed and nothing was there before: no state.
                (Some(s), None) if s.common().status.is_none() => None,
                (s, _) => s,
            };
            if prior.is_none() {
                recovery::mark_failed_create(clients, state.as_ref(), &mut diagnostics).await;
            }
            return Applied { state, diagnostics };
        }
        Err(ConvergeError::Read(e)) => {
            diagnostics.push(engine_diagnostic(&what, &e));
            return Applied {
                state: truthful(clients, &desired, private, &mut diagnostics).await,
                diagnostics,
            };
        }
        Err(ConvergeError::NotReady {
            not_ready,
            revision,
        }) => {
            let mut failed = not_ready_diagnostic(
                &format!("wait for {} to become ready", desired.label()),
                &not_ready,
                desired.common().timeout().as_secs(),
            );
            let by_node = desired.rollout_details(clients).await;
            if !by_node.is_empty() {
                failed.detail.push_str(&format!(
                    "\n\nRollout by node:\n  - {}",
                    by_node.join("\n  - ")
                ));
            }
            let target = prior.and_then(|p| p.common().revision);
            if let (true, Some(target), Some(failed_revision)) =
                (desired.rollback_on_failure(), target, revision)
            {
                if failed_revision > target {
                    let rolled =
                        recovery::roll_back(clients, &desired, &job, prior, target, cancel).await;
                    failed.detail.push_str(&format!("\n\n{rolled}"));
                }
            }
            diagnostics.push(failed);
            let state = truthful(clients, &desired, private, &mut diagnostics).await;
            private.unready_revision = state
                .as_ref()
                .and_then(|s| s.common().revision)
                .or(revision);
            if prior.is_none() {
                recovery::mark_failed_create(clients, state.as_ref(), &mut diagnostics).await;
            }
            return Applied { state, diagnostics };
        }
    }
    private.unready_revision = None;
    // Apply set it to the salted hash of the values this install recorded.
    private.applied_values = desired.common().values_sha256.clone();
    let state = match observe(clients, &desired).await {
        Ok(o) => refresh_as(desired.clone(), &o, private, &mut diagnostics, true),
        Err(e) => {
            diagnostics.push(Diagnostic::warning(
                "Could not read the release after installing it",
                e.to_string(),
            ));
            Some(desired.clone())
        }
    };
    if let (true, Some(state)) = (resumes, &state) {
        recovery::unmark_failed_create(clients, state).await;
    }
    if state.is_none() {
        diagnostics.error(
            "Release missing after install",
            "The installer finished but no release record exists. Is another tool uninstalling it?",
        );
    }
    tracing::info!(release = %desired.common().id(), elapsed_ms = started.elapsed().as_millis() as u64, "release applied");
    Applied { state, diagnostics }
}

/// The converge declined to run a Job: a create found a live release, or another tool manages
/// it. The state and diagnostics that say so.
fn declined<K: ChartResource>(
    desired: &K,
    prior: Option<&K>,
    private: &mut Private,
    decision: Decision,
    observed: &Observed,
    mut diagnostics: Diagnostics,
) -> Applied<K> {
    // The plan knew the manager when its refresh read it (private state carries it here): it
    // planned no upgrade, and this apply records the configuration only.
    let plan_knew_manager = private.owner.is_some();
    if let (Decision::LeaveToManager, Some(prior), Some(manager)) =
        (decision, prior, observed.manager())
    {
        let detail = format!(
            "{} manages release {} (its workloads carry that tool's marks): no change was made in the cluster. Change the release through {manager}, or remove this resource from the configuration with a `removed` block that names it in `from` and holds `lifecycle {{ destroy = false }}`.",
            crate::resources::engine_report::capitalized(&manager.to_string()),
            desired.common().id()
        );
        private.owner = Some(manager.to_string());
        // Decided on this fresh read: a plan made without a refresh (`-refresh=false`) or
        // before the tool took over promised an upgrade, which is refused, keeping the state
        // that is true; the next plan (with a refresh) records the configuration without one.
        if !plan_knew_manager && fingerprint(desired) != fingerprint(prior) {
            diagnostics.error(
                "Release managed by GitOps",
                format!("{detail} The plan asked for a Helm upgrade, which talosboot does not run on a release another tool manages; run `plan` again (with a refresh) to record the configuration only."),
            );
            return Applied {
                state: Some(prior.clone()),
                diagnostics,
            };
        }
        diagnostics.warning(
            "Release managed by GitOps",
            format!("{detail} The configuration is recorded only."),
        );
        let mut recorded = desired.clone();
        recorded.common_mut().keep_computed(prior.common());
        recorded.keep_computed(prior);
        return Applied {
            state: Some(recorded),
            diagnostics,
        };
    }
    if let Some(existing) = observed.current() {
        diagnostics.push(recovery::already_exists(desired, existing));
    }
    Applied {
        state: None,
        diagnostics,
    }
}

/// After an adoption: the release's objects out of Talos' manifest inventory (Talos 1.13+), so
/// that removing the inline manifest from the machine config never lets `talosctl upgrade-k8s`
/// prune them ([`talos_inventory::release_from_talos`]). Reported as warnings either way: the
/// release is installed, and a failure here must not make the client replace (uninstall) it.
async fn release_from_talos(clients: &Kube, c: &ReleaseCommon, diagnostics: &mut Diagnostics) {
    let (namespace, name) = (c.release_namespace(), c.release_name());
    let released = match helm::install::release(clients, namespace, name).await {
        Ok(Some(release)) => {
            talos_inventory::release_from_talos(clients, &release.objects, namespace)
                .await
                .map_err(|e| e.to_string())
        }
        Ok(None) => return,
        Err(e) => Err(e.to_string()),
    };
    match released {
        Ok(released) if released.changed() => {
            let (summary, detail) = talos_inventory::released_message(&c.id(), &released);
            diagnostics.warning(summary, detail);
        }
        Ok(_) => {}
        Err(e) => {
            let (summary, detail) = talos_inventory::not_released_message(&c.id(), &e);
            diagnostics.warning(summary, detail);
        }
    }
}

/// Destroy: uninstall, or forget with `deletion_policy = "keep"` (and after a failed create,
/// whose replacement resumes the release: see [`FAILED_CREATE`]).
pub async fn destroy<K: ChartResource>(
    clients: &Kube,
    prior: &K,
    defaults: &JobDefaults,
    cancel: &CancellationToken,
) -> Diagnostics {
    let mut diagnostics = Diagnostics::new();
    let (ns, name) = (
        prior.common().release_namespace(),
        prior.common().release_name(),
    );
    let left_by_failed_create = match helm::install::release(clients, ns, name).await {
        Ok(Some(r)) => {
            helm::recovery::record_annotation(clients, ns, name, r.revision, FAILED_CREATE)
                .await
                .ok()
                .flatten()
                .is_some()
        }
        _ => false,
    };
    if left_by_failed_create {
        diagnostics.warning(
            format!("{} left running", prior.label()),
            format!("Its create failed after the release was installed, so this destroy only forgets release {} (for any `deletion_policy`): a replacement resumes it in place, and a running CNI is never uninstalled between a failure and the next success. To remove it for good, uninstall it with Helm (`helm uninstall -n {} {}`).", prior.common().id(), prior.common().release_namespace(), prior.common().release_name()),
        );
        return diagnostics;
    }
    if prior.common().keep_on_destroy() {
        diagnostics.warning(
            format!("{} left running", prior.label()),
            format!("deletion_policy is \"keep\": release {} stays in the cluster and is no longer managed by this configuration.", prior.common().id()),
        );
        return diagnostics;
    }
    let what = format!("uninstall {}", prior.label());
    match helm::install::release(
        clients,
        prior.common().release_namespace(),
        prior.common().release_name(),
    )
    .await
    {
        Ok(None) => return diagnostics,
        Ok(Some(_)) => {}
        Err(e) => {
            diagnostics.push(engine_diagnostic(&what, &e));
            return diagnostics;
        }
    }
    let result = helm::install::uninstall(
        clients,
        &prior.bootstrap_namespace(),
        &prior.common().job_settings(defaults),
        prior.common().release_namespace(),
        prior.common().release_name(),
        prior.common().timeout(),
        cancel,
    )
    .await;
    if let Err(e) = result {
        diagnostics.push(engine_diagnostic(&what, &e));
    }
    diagnostics
}
