//! The lifecycle every Helm-release resource shares (`talosboot_cilium`, `talosboot_helm_release`):
//! observe the release and its workloads, install or upgrade through the bootstrap engine (a stuck
//! release unlocked first, an existing release never taken over by a create, no upgrade when
//! nothing changed), wait for readiness natively, return the state that is true after a failure,
//! and destroy (uninstall, or forget with `deletion_policy = "keep"`). A resource supplies what is
//! its own through [`Release`]: its values, its job, and what "ready" means.

pub mod inputs;
pub mod moved;
pub mod plan;
pub mod resource;

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use futures::future::BoxFuture;

use crate::cluster::ClusterError;
use crate::cluster::bootstrap::{BootstrapNamespace, Clients, EngineError, JobSettings, Step};
use crate::cluster::helm_install::{self, ChartInstall};
use crate::cluster::helm_release::HelmRelease;
use crate::cluster::readiness::{self, WorkloadRef, all_nodes_ready, wait_ready};
use crate::framework::{Diagnostic, Diagnostics};
use crate::resources::engine_report::{engine_diagnostic, not_ready_diagnostic};
use crate::resources::private::Private;

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

/// When a [`Release::preflight`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreflightAt {
    /// Best-effort: one try, bounded, skipped when the cluster cannot be read.
    Plan,
    /// Before any Job runs: retried, and an error stops the apply.
    Apply,
}

/// A Helm-release resource's model, as the shared lifecycle needs it.
pub trait Release: Clone + Send + Sync {
    /// For messages: "Cilium 1.18.4 (kube-system/cilium)".
    fn label(&self) -> String;
    fn id(&self) -> String;
    fn release_name(&self) -> &str;
    fn release_namespace(&self) -> &str;
    fn timeout(&self) -> Duration;
    fn wait(&self) -> bool;
    fn keep_on_destroy(&self) -> bool;
    fn chart_install(&self) -> Result<ChartInstall, String>;
    fn job_settings(&self) -> JobSettings;
    fn bootstrap_namespace(&self) -> BootstrapNamespace;
    /// What `wait` waits for; `release` is the current record (its manifest names the workloads).
    fn readiness(&self, release: Option<&HelmRelease>) -> Readiness;
    /// How reads find the workloads of [`Release::refresh_readiness`].
    fn workload_source(&self) -> WorkloadSource;
    /// Checks of the cluster before an install or upgrade runs: an error diagnostic stops it
    /// before any Job. Called at apply, and at plan (best-effort, when the cluster is reachable).
    fn preflight<'a>(
        &'a self,
        _clients: &'a Clients,
        _at: PreflightAt,
    ) -> BoxFuture<'a, Result<Diagnostics, ClusterError>> {
        Box::pin(async { Ok(Diagnostics::new()) })
    }
    /// What a refresh reads beside the record (default: what `wait` waits for). A resource may
    /// read less to keep a refresh cheap.
    fn refresh_readiness(&self, release: Option<&HelmRelease>) -> Readiness {
        self.readiness(release)
    }
    fn status(&self) -> Option<&str>;
    /// The revision last seen (from state): lets a refresh read the record with two GETs.
    fn revision(&self) -> Option<i64>;
    fn version(&self) -> Option<&str>;
    fn values_sha256(&self) -> Option<&str>;
    /// A digest of chart content the version does not pin (a local chart directory): a change
    /// means an upgrade even with the same version and values. `None`: nothing to compare.
    fn content_digest(&self) -> Option<&str> {
        None
    }
    /// Writes what was observed into the model's computed attributes.
    fn record(&mut self, fields: &ReleaseFields, observed: &Observed);
}

/// The release record's fields every model keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct ReleaseFields {
    pub status: String,
    pub revision: i64,
    pub chart_version: String,
    pub app_version: String,
    /// Salted hash of the recorded values.
    pub values_sha256: String,
    /// The configured version, unless the cluster runs another one.
    pub version: String,
}

/// What the cluster has for one release.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub release: Option<HelmRelease>,
    pub workloads: Vec<(WorkloadRef, readiness::Observed)>,
    pub nodes_ready: Option<bool>,
}

/// Labels that say a GitOps tool manages an object.
const GITOPS_LABELS: &[(&str, &str)] = &[
    ("helm.toolkit.fluxcd.io/name", "Flux HelmRelease"),
    ("kustomize.toolkit.fluxcd.io/name", "Flux Kustomization"),
    ("argocd.argoproj.io/instance", "Argo CD Application"),
];

impl Observed {
    /// The GitOps tool that manages the release's workloads, if any.
    pub fn gitops_owner(&self) -> Option<String> {
        self.workloads.iter().find_map(|(_, o)| {
            GITOPS_LABELS.iter().find_map(|(label, tool)| {
                o.labels.get(*label).map(|name| format!("{tool} {name:?}"))
            })
        })
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

fn api(step: Step) -> impl Fn(crate::cluster::ClusterError) -> EngineError {
    move |e| EngineError::api(step, e)
}

async fn observe_workloads(
    clients: &Clients,
    r: &Readiness,
) -> Result<(Vec<(WorkloadRef, readiness::Observed)>, Option<bool>), EngineError> {
    let workloads = futures::future::try_join_all(
        r.workloads
            .iter()
            .map(|w| async move { readiness::observe(clients, w).await.map(|o| (w.clone(), o)) }),
    );
    let nodes = async {
        if r.nodes {
            all_nodes_ready(clients).await.map(Some)
        } else {
            Ok(None)
        }
    };
    let (workloads, nodes) = tokio::join!(workloads, nodes);
    Ok((
        workloads.map_err(api(Step::Release))?,
        nodes.map_err(api(Step::Release))?,
    ))
}

/// The release record and its workloads, in as few round trips as the [`WorkloadSource`] allows.
pub async fn observe<R: Release>(clients: &Clients, m: &R) -> Result<Observed, EngineError> {
    let (ns, name, known) = (m.release_namespace(), m.release_name(), m.revision());
    let (release, (workloads, nodes_ready)) = match m.workload_source() {
        WorkloadSource::Manifest => {
            let release = helm_install::release_after(clients, ns, name, known).await?;
            let readiness = m.refresh_readiness(release.as_ref());
            (release, observe_workloads(clients, &readiness).await?)
        }
        WorkloadSource::ManifestListed => {
            let (release, listed, nodes) = tokio::join!(
                helm_install::release_after(clients, ns, name, known),
                readiness::observe_namespace(clients, ns),
                async {
                    // Whether nodes are read does not depend on the record.
                    match m.refresh_readiness(None).nodes {
                        true => all_nodes_ready(clients).await.map(Some),
                        false => Ok(None),
                    }
                },
            );
            let release = release?;
            let listed = listed.map_err(api(Step::Release))?;
            let nodes = nodes.map_err(api(Step::Release))?;
            let wanted = m.refresh_readiness(release.as_ref()).workloads;
            (release, (matched(&wanted, listed), nodes))
        }
    };
    Ok(Observed {
        release,
        workloads,
        nodes_ready,
    })
}

/// Each wanted workload with what the listing found of it (missing: not rolled out, `exists`
/// false).
fn matched(
    wanted: &[WorkloadRef],
    listed: Vec<(WorkloadRef, readiness::Observed)>,
) -> Vec<(WorkloadRef, readiness::Observed)> {
    wanted
        .iter()
        .map(|w| {
            let found = listed
                .iter()
                .find(|(l, _)| l == w)
                .map(|(_, o)| o.clone())
                .unwrap_or_default();
            (w.clone(), found)
        })
        .collect()
}

/// Updates `state` with what was observed; `None` when the release is gone. Unhealthy workloads of
/// a deployed release are a warning: not drift an upgrade fixes.
pub fn refresh<R: Release>(
    state: R,
    o: &Observed,
    private: &mut Private,
    diagnostics: &mut Diagnostics,
) -> Option<R> {
    refresh_as(state, o, private, diagnostics, false)
}

/// [`refresh`]; with `after_apply`, a pinned `version` stays as configured even when the cluster
/// has another one (a concurrent run upgraded the release while this apply waited): the state
/// must match the plan, the next plan shows the difference, and a warning says what happened.
pub fn refresh_as<R: Release>(
    mut state: R,
    o: &Observed,
    private: &mut Private,
    diagnostics: &mut Diagnostics,
    after_apply: bool,
) -> Option<R> {
    let release = o.release.as_ref().filter(|r| r.status != "uninstalled")?;
    let configured = state.version().unwrap_or_default().to_owned();
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
    let fields = ReleaseFields {
        status: release.status.clone(),
        revision: release.revision,
        chart_version: release.chart_version.clone(),
        app_version: release.app_version.clone(),
        values_sha256: private.salted(&release.values_sha256),
        version,
    };
    state.record(&fields, o);
    private.owner = o.gitops_owner();
    let unhealthy = o.unhealthy();
    if release.status == "deployed" && state.wait() && !unhealthy.is_empty() {
        diagnostics.warning(
            format!("{} is not healthy", state.label()),
            format!(
                "The release is deployed, but:\n  - {}\nThis is not drift that an upgrade fixes: check the pods (`kubectl -n {} get pods`).",
                unhealthy.join("\n  - "),
                state.release_namespace()
            ),
        );
    }
    Some(state)
}

/// Whether two spellings name the same chart version (`v1.18.4` is `1.18.4` to Helm).
pub fn same_version(a: &str, b: &str) -> bool {
    a.trim_start_matches('v') == b.trim_start_matches('v')
}

/// What apply hands back: the state (`None`: nothing exists) and its diagnostics.
pub struct Applied<R> {
    pub state: Option<R>,
    pub diagnostics: Diagnostics,
}

/// Re-reads the cluster after a failure, so the state says what is true.
async fn truthful<R: Release>(
    clients: &Clients,
    m: &R,
    private: &mut Private,
    diagnostics: &mut Diagnostics,
) -> Option<R> {
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

/// Create (`prior` is `None`) or update.
pub async fn install<R: Release>(
    clients: &Clients,
    desired: R,
    prior: Option<&R>,
    private: &mut Private,
    cancel: &CancellationToken,
) -> Applied<R> {
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
    let observed = match observe(clients, &desired).await {
        Ok(o) => o,
        Err(e) => {
            diagnostics.push(engine_diagnostic(&what, &e));
            return Applied {
                state: prior.cloned(),
                diagnostics,
            };
        }
    };
    let current = observed
        .release
        .as_ref()
        .filter(|r| r.status != "uninstalled");
    if prior.is_none() {
        if let Some(existing) =
            current.filter(|r| r.status == "deployed" || r.status == "superseded")
        {
            diagnostics.error(
                "Release already exists",
                format!(
                    "Release {} (revision {}, chart {} {}, status {}) exists already; talosboot does not take over a release by creating it. Import it instead with an `import {{ to = <resource address>  id = \"{}\" }}` block (or `tofu import` / `terraform import`), then apply.",
                    desired.id(), existing.revision, existing.chart, existing.chart_version, existing.status, desired.id(),
                ),
            );
            return Applied {
                state: None,
                diagnostics,
            };
        }
        if let Some(stuck) = current {
            diagnostics.warning(
                "Repairing an earlier release",
                format!("Release {} exists with status {:?} (revision {}), left by an earlier run; talosboot upgrades it in place.", desired.id(), stuck.status, stuck.revision),
            );
        }
    }
    let unchanged = prior.is_some_and(|p| {
        p.values_sha256() == desired.values_sha256()
            && same_version(
                p.version().unwrap_or_default(),
                desired.version().unwrap_or_default(),
            )
            && (p.content_digest().is_none() || p.content_digest() == desired.content_digest())
            && current.is_some_and(|r| r.status == "deployed")
    });
    let deadline = started + desired.timeout();
    if !unchanged {
        match desired.preflight(clients, PreflightAt::Apply).await {
            Ok(found) => {
                let refused = found.has_errors();
                diagnostics.extend(found);
                if refused {
                    return Applied {
                        state: prior.cloned(),
                        diagnostics,
                    };
                }
            }
            Err(e) => {
                diagnostics.push(engine_diagnostic(
                    &what,
                    &EngineError::api(Step::Preflight, e),
                ));
                return Applied {
                    state: prior.cloned(),
                    diagnostics,
                };
            }
        }
        let installed = helm_install::install_or_upgrade_from(
            clients,
            &desired.bootstrap_namespace(),
            &desired.job_settings(),
            &chart,
            current,
            desired.timeout(),
            cancel,
        )
        .await;
        match installed {
            Ok(done) => {
                for w in done.run.warnings {
                    diagnostics.warning("Bootstrap", w);
                }
                if let Some(status) = done.unlocked {
                    diagnostics.warning(
                        "Unlocked a stuck release",
                        format!("The release was left {status:?} by an interrupted operation; talosboot marked it failed and upgraded from it."),
                    );
                }
            }
            Err(e) => {
                diagnostics.push(engine_diagnostic(&what, &e));
                let state = truthful(clients, &desired, private, &mut diagnostics).await;
                let state = match (state, prior) {
                    // Nothing was installed and nothing was there before: no state.
                    (Some(s), None) if s.status().is_none() => None,
                    (s, _) => s,
                };
                return Applied { state, diagnostics };
            }
        }
    }
    if desired.wait() {
        let release = match helm_install::release(
            clients,
            desired.release_namespace(),
            desired.release_name(),
        )
        .await
        {
            Ok(r) => r,
            Err(e) => {
                diagnostics.push(engine_diagnostic(&what, &e));
                return Applied {
                    state: truthful(clients, &desired, private, &mut diagnostics).await,
                    diagnostics,
                };
            }
        };
        let readiness = desired.readiness(release.as_ref());
        if let Err(not_ready) = wait_ready(
            clients,
            desired.release_namespace(),
            &readiness.workloads,
            &readiness.pods,
            readiness.nodes,
            deadline,
            cancel,
        )
        .await
        {
            diagnostics.push(not_ready_diagnostic(
                &format!("wait for {} to become ready", desired.label()),
                &not_ready,
                desired.timeout().as_secs(),
            ));
            let state = truthful(clients, &desired, private, &mut diagnostics).await;
            private.unready_revision = state
                .as_ref()
                .and_then(Release::revision)
                .or(release.as_ref().map(|r| r.revision));
            return Applied { state, diagnostics };
        }
    }
    private.unready_revision = None;
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
    if state.is_none() {
        diagnostics.error(
            "Release missing after install",
            "The installer finished but no release record exists. Is another tool uninstalling it?",
        );
    }
    tracing::info!(release = %desired.id(), elapsed_ms = started.elapsed().as_millis() as u64, "release applied");
    Applied { state, diagnostics }
}

/// Destroy: uninstall, or forget with `deletion_policy = "keep"`.
pub async fn destroy<R: Release>(
    clients: &Clients,
    prior: &R,
    cancel: &CancellationToken,
) -> Diagnostics {
    let mut diagnostics = Diagnostics::new();
    if prior.keep_on_destroy() {
        diagnostics.warning(
            format!("{} left running", prior.label()),
            format!("deletion_policy is \"keep\": release {} stays in the cluster and is no longer managed by this configuration.", prior.id()),
        );
        return diagnostics;
    }
    let what = format!("uninstall {}", prior.label());
    match helm_install::release(clients, prior.release_namespace(), prior.release_name()).await {
        Ok(None) => return diagnostics,
        Ok(Some(_)) => {}
        Err(e) => {
            diagnostics.push(engine_diagnostic(&what, &e));
            return diagnostics;
        }
    }
    let result = helm_install::uninstall(
        clients,
        &prior.bootstrap_namespace(),
        &prior.job_settings(),
        prior.release_namespace(),
        prior.release_name(),
        prior.timeout(),
        cancel,
    )
    .await;
    if let Err(e) = result {
        diagnostics.push(engine_diagnostic(&what, &e));
    }
    diagnostics
}
