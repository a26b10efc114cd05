//! Applying `talosboot_cilium`: install or upgrade through the bootstrap engine, then wait for
//! readiness natively; destroy uninstalls (or forgets, with `deletion_policy = "keep"`). A failed
//! apply returns the state that is true: the release as it now is (Terraform taints it on create),
//! or nothing when nothing was created.

use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::model::Cilium;
use super::read::{apply_observed, observe};
use crate::cluster::bootstrap::Clients;
use crate::cluster::helm_install::{self, ChartInstall};
use crate::cluster::readiness::{Kind, WorkloadRef, wait_ready};
use crate::framework::{Diagnostic, Diagnostics};
use crate::resources::engine_report::{engine_diagnostic, not_ready_diagnostic};
use crate::resources::private::Private;

/// What apply hands back: the state (`None`: nothing exists) and its diagnostics.
pub struct Applied {
    pub state: Option<Cilium>,
    pub diagnostics: Diagnostics,
}

fn what(c: &Cilium, verb: &str) -> String {
    format!(
        "{verb} Cilium {} ({})",
        c.version.clone().unwrap_or_default(),
        c.id.clone().unwrap_or_default()
    )
}

/// Re-reads the cluster after a failure, so the state says what is true.
async fn truthful(
    clients: &Clients,
    c: &Cilium,
    private: &mut Private,
    diagnostics: &mut Diagnostics,
) -> Option<Cilium> {
    match observe(clients, c).await {
        Ok(o) => apply_observed(c.clone(), &o, private, &mut Diagnostics::new()),
        Err(e) => {
            diagnostics.push(Diagnostic::warning(
                "Could not re-read the release after the failure",
                format!("{e}. The state keeps what was planned; the next refresh corrects it."),
            ));
            Some(c.clone())
        }
    }
}

/// Create or update. `prior` is `None` on create.
pub async fn install(
    clients: &Clients,
    desired: Cilium,
    prior: Option<&Cilium>,
    private: &mut Private,
    cancel: &CancellationToken,
) -> Applied {
    let mut diagnostics = Diagnostics::new();
    let started = Instant::now();
    let verb = if prior.is_some() {
        "upgrade"
    } else {
        "install"
    };
    let chart: ChartInstall = match desired.chart_install() {
        Ok(chart) => chart,
        Err(e) => {
            diagnostics.error("Invalid Cilium values", e);
            return Applied {
                state: prior.cloned(),
                diagnostics,
            };
        }
    };
    let observed = match observe(clients, &desired).await {
        Ok(o) => o,
        Err(e) => {
            diagnostics.push(engine_diagnostic(&what(&desired, verb), &e));
            return Applied {
                state: prior.cloned(),
                diagnostics,
            };
        }
    };
    if prior.is_none() {
        if let Some(existing) = observed
            .release
            .as_ref()
            .filter(|r| r.status == "deployed" || r.status == "superseded")
        {
            diagnostics.error(
                "Cilium release already exists",
                format!(
                    "Release {} (revision {}, chart {}, status {}) exists already; talosboot does not take over a release by creating it. Import it instead with an `import {{ to = {}.<name>  id = \"{}\" }}` block (or `tofu import` / `terraform import`), then apply.",
                    desired.id.clone().unwrap_or_default(), existing.revision, existing.chart_version, existing.status,
                    super::schema::TYPE_NAME, desired.id.clone().unwrap_or_default(),
                ),
            );
            return Applied {
                state: None,
                diagnostics,
            };
        }
        if let Some(stuck) = observed.release.as_ref() {
            diagnostics.warning(
                "Repairing an earlier release",
                format!("Release {} exists with status {:?} (revision {}), left by an earlier run; talosboot upgrades it in place.", desired.id.clone().unwrap_or_default(), stuck.status, stuck.revision),
            );
        }
    }
    let unchanged = prior.is_some_and(|p| {
        p.values_sha256 == desired.values_sha256
            && p.version == desired.version
            && p.status.as_deref() == Some("deployed")
            && observed
                .release
                .as_ref()
                .is_some_and(|r| r.status == "deployed")
    });
    let deadline = started + desired.timeout();
    if !unchanged {
        let installed = helm_install::install_or_upgrade(
            clients,
            &desired.bootstrap_namespace(),
            &desired.job_settings(),
            &chart,
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
                    diagnostics.warning("Unlocked a stuck release", format!("The release was left {status:?} by an interrupted operation; talosboot marked it failed and upgraded from it."));
                }
            }
            Err(e) => {
                diagnostics.push(engine_diagnostic(&what(&desired, verb), &e));
                let state = truthful(clients, &desired, private, &mut diagnostics).await;
                let state = match (state, prior) {
                    // Nothing was installed and there was nothing before: no state.
                    (Some(s), None) if s.status.is_none() => None,
                    (s, _) => s,
                };
                return Applied { state, diagnostics };
            }
        }
    }
    if desired.wait.unwrap_or(true) {
        let ns = desired.release_namespace().to_owned();
        let workloads = [
            WorkloadRef {
                kind: Kind::DaemonSet,
                namespace: ns.clone(),
                name: "cilium".into(),
            },
            WorkloadRef {
                kind: Kind::Deployment,
                namespace: ns.clone(),
                name: "cilium-operator".into(),
            },
        ];
        if let Err(not_ready) = wait_ready(
            clients,
            &ns,
            &workloads,
            "app.kubernetes.io/part-of=cilium",
            true,
            deadline,
            cancel,
        )
        .await
        {
            diagnostics.push(not_ready_diagnostic(
                &format!(
                    "wait for Cilium {} to become ready",
                    desired.version.clone().unwrap_or_default()
                ),
                &not_ready,
                desired.timeout().as_secs(),
            ));
            let state = truthful(clients, &desired, private, &mut diagnostics).await;
            return Applied { state, diagnostics };
        }
    }
    let state = match observe(clients, &desired).await {
        Ok(o) => apply_observed(desired.clone(), &o, private, &mut diagnostics),
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
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "cilium applied"
    );
    Applied { state, diagnostics }
}

/// Destroy: uninstall, or forget with `deletion_policy = "keep"`.
pub async fn destroy(clients: &Clients, prior: &Cilium, cancel: &CancellationToken) -> Diagnostics {
    let mut diagnostics = Diagnostics::new();
    if prior.keep_on_destroy() {
        diagnostics.warning(
            "Cilium left running",
            format!("deletion_policy is \"keep\": release {} stays in the cluster and is no longer managed by this configuration.", prior.id.clone().unwrap_or_default()),
        );
        return diagnostics;
    }
    match helm_install::release(clients, prior.release_namespace(), prior.release_name()).await {
        Ok(None) => return diagnostics,
        Ok(Some(_)) => {}
        Err(e) => {
            diagnostics.push(engine_diagnostic(&what(prior, "uninstall"), &e));
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
        diagnostics.push(engine_diagnostic(&what(prior, "uninstall"), &e));
    }
    diagnostics
}
