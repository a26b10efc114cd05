//! Day 2 for `talosboot_cilium`: a version upgrade made safe by construction, on top of the shared
//! release lifecycle. At plan: the upgrade path ([`path_diagnostics`]: one minor at a time, the
//! newest patch first, from [`crate::cluster::cilium::upgrade_path`]) and `upgrade_compatibility`
//! ([`settle`]: the minor first installed, passed as `upgradeCompatibility`). At apply, before the
//! Helm upgrade: Cilium's pre-flight DaemonSet on every node
//! ([`crate::cluster::cilium::preflight`]); after a failed rollout, the rollback
//! (`rollback_on_failure`, in [`crate::resources::release::lifecycle`]).

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::model::Cilium;
use crate::cluster::Kube;
use crate::cluster::cilium::preflight::{self, DAEMON_SET, Preflight, PreflightError, RELEASE};
use crate::cluster::cilium::upgrade_path::{UpgradePath, newer_patch_first, steps, upgrade_path};
use crate::cluster::engine::JobSettings;
use crate::cluster::helm::chart_version::ChartVersion;
use crate::cluster::helm::chart_version::same_version;
use crate::cluster::helm::release::HelmRelease;
use crate::cluster::helm::repository::chart_versions;
use crate::framework::{Diagnostic, Diagnostics};
use crate::resources::engine_report::{engine_diagnostic, not_ready_diagnostic};
use crate::resources::release::ChartResource;
use crate::values::{AttributePath, Value};

/// The chart version that runs: the release record's (refreshed into `chart_version`), else the
/// version the state was applied with.
pub fn running_version(prior: &Cilium) -> Option<ChartVersion> {
    let c = &prior.common;
    c.chart_version
        .as_deref()
        .filter(|v| !v.is_empty())
        .or(c.version.as_deref())
        .and_then(ChartVersion::parse)
}

/// Whether this plan changes the chart version of a running release.
pub fn upgrades_version(
    planned: &Cilium,
    prior: Option<&Cilium>,
) -> Option<(ChartVersion, ChartVersion)> {
    let running = running_version(prior?)?;
    let wanted = ChartVersion::parse(planned.common.version.as_deref()?)?;
    (running != wanted).then_some((running, wanted))
}

/// The diagnostics of moving from `running` to `wanted`, with what the chart repository lists
/// (`known`, empty when it could not be read): errors on `version` for a path Cilium does not
/// test (warnings with `upgrade_path_check = false`), a warning when the running minor has a
/// newer patch to apply first.
pub fn path_diagnostics(
    running: &ChartVersion,
    wanted: &ChartVersion,
    known: &[ChartVersion],
    enforce: bool,
) -> Diagnostics {
    let mut diagnostics = Diagnostics::new();
    let path = upgrade_path(running, wanted);
    let at = AttributePath::attr("version");
    let escape = match enforce {
        true => {
            " If you know better (a cluster you can rebuild), `upgrade_path_check = false` lets the plan through: nothing then checks the settings each minor's upgrade notes ask you to migrate."
        }
        false => " `upgrade_path_check = false`: applying it anyway.",
    };
    let refused = |summary: String, detail: String| match enforce {
        true => Diagnostic::error(summary, detail),
        false => Diagnostic::warning(summary, detail),
    };
    match &path {
        UpgradePath::SkipsMinors { between } => {
            let applies = steps(between, wanted, known).join(", then ");
            diagnostics.push(refused(
                format!("Cilium {running} cannot be upgraded to {wanted} in one step"),
                format!("Cilium runs {running}, and {wanted} skips {}: Cilium tests upgrades only between consecutive minors (its upgrade guide: \"The only tested rollback and upgrade path is between consecutive minor releases\"). Apply {applies}, one `version` at a time, reading each minor's upgrade notes on the way.{escape}", minors(between)),
            ).at(at.clone()));
        }
        UpgradePath::DowngradeTooFar { between } => {
            let applies = steps(between, wanted, known).join(", then ");
            diagnostics.push(refused(
                format!("Cilium {running} cannot be rolled back to {wanted} in one step"),
                format!("Cilium runs {running}, and {wanted} is more than one minor down (past {}): Cilium tests rollbacks only to the previous minor. Apply {applies}, one `version` at a time.{escape}", minors(between)),
            ).at(at.clone()));
        }
        UpgradePath::OtherMajor => {
            diagnostics.push(refused(
                format!("Cilium {running} cannot move to {wanted}"),
                format!("{wanted} is another major than the running {running}: no upgrade path between majors is known. Read that release's upgrade guide first.{escape}"),
            ).at(at.clone()));
        }
        _ => {}
    }
    if let Some(latest) = newer_patch_first(running, &path, known) {
        diagnostics.push(Diagnostic::warning(
            format!("Cilium {running} is not the newest {} patch", running.minor_line()),
            format!("The chart repository has Cilium {latest}. Cilium's upgrade guide: \"Always update to the latest patch release of your current version before attempting an upgrade.\" Apply `version = \"{latest}\"` first, then {wanted}."),
        ).at(at));
    }
    diagnostics
}

fn minors(lines: &[(u64, u64)]) -> String {
    lines
        .iter()
        .map(|(major, minor)| format!("{major}.{minor}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The plan's upgrade-path check: the rule needs no I/O; the chart repository is read (within
/// `budget`, never an error) only when the minor changes, for the newest patches it lists.
/// When the newest release record did not finish (a killed or failed upgrade), the workloads may
/// still run the version deployed before it (`private.deployed_before`): the path must hold from
/// that one too, so an interrupted upgrade cannot become a skip of minors.
pub async fn plan_checks(
    planned: &Cilium,
    prior: Option<&Cilium>,
    private: &crate::resources::private::Private,
    budget: Duration,
) -> Diagnostics {
    let mut diagnostics = Diagnostics::new();
    if let (Some(newest), Some(wanted), Some(before)) = (
        prior.and_then(running_version),
        planned
            .common
            .version
            .as_deref()
            .and_then(ChartVersion::parse),
        private
            .deployed_before
            .as_deref()
            .and_then(ChartVersion::parse),
    ) {
        if before != newest && before != wanted {
            let status = prior
                .and_then(|p| p.common.status.clone())
                .map_or_else(|| "unfinished".to_owned(), |s| s.to_string());
            let note = format!(
                " Judged from {before}: the newest release record, {newest}, did not finish ({status}), and until an upgrade to it succeeds agents may still run {before}, the version deployed before it."
            );
            // No versions listed: only the path's own diagnostics, no newest-patch advice.
            for mut d in path_diagnostics(&before, &wanted, &[], planned.upgrade_path_check()) {
                d.detail.push_str(&note);
                diagnostics.push(d);
            }
        }
    }
    let Some((running, wanted)) = upgrades_version(planned, prior) else {
        return diagnostics;
    };
    let path = upgrade_path(&running, &wanted);
    let known = match path.changes_minor() {
        true => {
            let c = &planned.common;
            let repository = c
                .repository
                .as_deref()
                .unwrap_or(super::model::DEFAULT_REPOSITORY);
            let chart = c.chart.as_deref().unwrap_or(super::model::DEFAULT_CHART);
            chart_versions(repository, chart, budget)
                .await
                .inspect_err(|e| tracing::debug!(error = %e, repository, "chart repository not read at plan"))
                .unwrap_or_default()
        }
        false => Vec::new(),
    };
    diagnostics.extend(path_diagnostics(
        &running,
        &wanted,
        &known,
        planned.upgrade_path_check(),
    ));
    diagnostics
}

/// Settles `upgrade_compatibility` in the proposed state before the values are hashed: the
/// configuration's when set; else the state's; else, on a create, the minor of `version`; else,
/// when a release recorded without it changes version, the minor that runs (the closest to the
/// first installed one that is known). A release that keeps its version keeps none, so that a
/// provider upgrade plans nothing.
pub fn settle(config: &Value, prior: &Value, planned: &mut Value) {
    const ATTR: &str = "upgrade_compatibility";
    let set = |v: &Value| v.as_str().is_some() || v.is_unknown();
    if config.attr(ATTR).is_some_and(set) {
        return;
    }
    let text = |v: &Value, attr: &str| v.attr(attr).and_then(Value::as_str).map(str::to_owned);
    let minor_of = |v: Option<String>| {
        v.as_deref()
            .and_then(ChartVersion::parse)
            .map(|v| Value::from(v.minor_line()))
    };
    let version = planned.attr("version").cloned().unwrap_or_default();
    let settled = if let Some(kept) = prior.attr(ATTR).filter(|v| v.as_str().is_some()) {
        kept.clone()
    } else if prior.is_null() {
        match version.is_unknown() {
            true => Value::unknown(),
            false => minor_of(version.as_str().map(str::to_owned)).unwrap_or_default(),
        }
    } else {
        let running = text(prior, "chart_version")
            .filter(|v| !v.is_empty())
            .or_else(|| text(prior, "version"));
        let changes = match (&running, version.as_str()) {
            (_, None) => version.is_unknown(),
            (Some(r), Some(w)) => !same_version(r, w),
            (None, Some(_)) => false,
        };
        match changes {
            true => minor_of(running).unwrap_or_default(),
            false => Value::Null,
        }
    };
    if let Some(attrs) = planned.attrs_mut() {
        attrs.insert(ATTR.into(), settled);
    }
}

/// Before the Helm upgrade of a running Cilium to another version: the pre-flight check
/// (`preflight`), whose failure stops the apply with nothing changed.
pub async fn before_upgrade(
    c: &Cilium,
    clients: &Kube,
    running: &HelmRelease,
    job: &JobSettings,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Diagnostics {
    let mut diagnostics = Diagnostics::new();
    let wanted = c.common.version.clone().unwrap_or_default();
    if !c.preflight() || same_version(&running.chart_version, &wanted) {
        return diagnostics;
    }
    let (Ok(chart), Ok(values)) = (c.chart_install(), c.merged_values()) else {
        return diagnostics;
    };
    let bootstrap = c.bootstrap_namespace();
    let p = Preflight {
        chart: &chart,
        values: &values,
        bootstrap: &bootstrap,
        job,
    };
    let started = Instant::now();
    let unchanged = format!(
        "Nothing was upgraded: Cilium {} (revision {}) still runs. Fix what the check names, then apply again; `preflight = false` skips the check (an upgrade then finds the same problem halfway through its rollout, on a node left without its CNI).",
        running.chart_version, running.revision
    );
    let what = format!(
        "pass the pre-flight check of Cilium {wanted} (release {}/{RELEASE})",
        chart.namespace
    );
    let (outcome, warnings) = match preflight::run(clients, &p, deadline, cancel).await {
        Ok(passed) => {
            tracing::info!(nodes = passed.nodes, elapsed_ms = started.elapsed().as_millis() as u64, version = %wanted, "Cilium pre-flight check passed on every node");
            (None, passed.warnings)
        }
        Err((e, warnings)) => {
            let mut d = match e {
                PreflightError::Install(e) | PreflightError::Read(e) => {
                    engine_diagnostic(&what, &e)
                }
                PreflightError::NotReady(n) => {
                    let budget = deadline.saturating_duration_since(started).as_secs();
                    let mut d = not_ready_diagnostic(&what, &n, budget);
                    d.detail = format!(
                        "DaemonSet {DAEMON_SET} pulls and starts Cilium {wanted}'s image on every node before the upgrade. {}",
                        d.detail
                    );
                    d
                }
                PreflightError::FewerNodes { ready, agents } => Diagnostic::error(
                    format!("Failed to {what}"),
                    format!(
                        "DaemonSet {DAEMON_SET} became ready on {ready} nodes, but the Cilium agent runs on {agents}: the new image was not proven on every node (a node selector or taint the pre-flight pods do not match)."
                    ),
                ),
            };
            d.detail.push_str(&format!("\n\n{unchanged}"));
            (Some(d), warnings)
        }
    };
    if let Some(d) = outcome {
        diagnostics.push(d);
    }
    for w in warnings {
        diagnostics.warning("Pre-flight check not removed", w);
    }
    diagnostics
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::Value;

    fn v(s: &str) -> ChartVersion {
        ChartVersion::parse(s).expect(s)
    }

    fn summaries(d: &Diagnostics) -> Vec<(bool, String, String)> {
        d.iter()
            .map(|d| {
                (
                    d.severity == crate::framework::Severity::Error,
                    d.summary.clone(),
                    d.detail.clone(),
                )
            })
            .collect()
    }

    #[test]
    fn a_skipped_minor_is_an_error_naming_the_steps() {
        let known: Vec<ChartVersion> = ["1.18.4", "1.19.6", "1.19.7", "1.20.2"]
            .iter()
            .map(|s| v(s))
            .collect();
        let d = path_diagnostics(&v("1.18.4"), &v("1.20.2"), &known, true);
        let found = summaries(&d);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].0, "an error");
        assert!(
            found[0].2.contains("Apply 1.19.7, then 1.20.2"),
            "{}",
            found[0].2
        );
        assert!(d.iter().all(|d| {
            d.attribute
                .as_ref()
                .is_some_and(|p| p.describe().contains("version"))
        }));
        let unread = path_diagnostics(&v("1.18.4"), &v("1.20.2"), &[], true);
        assert!(
            summaries(&unread)[0]
                .2
                .contains("Apply 1.19.x, then 1.20.2")
        );
        let let_through = path_diagnostics(&v("1.18.4"), &v("1.20.2"), &known, false);
        assert!(
            !let_through.has_errors(),
            "upgrade_path_check = false warns"
        );
        assert_eq!(let_through.iter().count(), 1);
    }

    #[tokio::test]
    async fn an_interrupted_upgrade_is_judged_from_the_version_deployed_before_it_too() {
        use crate::cluster::helm::release::ReleaseStatus;
        use crate::resources::private::Private;
        use crate::resources::release::ReleaseCommon;
        let cilium = |version: &str| Cilium {
            common: ReleaseCommon {
                version: Some(version.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        // A killed 1.18.4 -> 1.19.7 upgrade: the newest record is 1.19.7, pending.
        let mut prior = cilium("1.19.7");
        prior.common.chart_version = Some("1.19.7".into());
        prior.common.status = Some(ReleaseStatus::PendingUpgrade);
        let interrupted = Private {
            deployed_before: Some("1.18.4".into()),
            ..Default::default()
        };
        // The repository is not read: the minor changes only from a version with no repository.
        let budget = Duration::ZERO;
        let skip = plan_checks(&cilium("1.20.2"), Some(&prior), &interrupted, budget).await;
        let found = summaries(&skip);
        assert!(
            found.iter().any(|(error, summary, detail)| *error
                && summary == "Cilium 1.18.4 cannot be upgraded to 1.20.2 in one step"
                && detail.contains(
                    "the newest release record, 1.19.7, did not finish (pending-upgrade)"
                )),
            "{found:?}"
        );
        let finish = plan_checks(&cilium("1.19.7"), Some(&prior), &interrupted, budget).await;
        assert!(!finish.has_errors(), "{:?}", summaries(&finish));
        let back = plan_checks(&cilium("1.18.4"), Some(&prior), &interrupted, budget).await;
        assert!(!back.has_errors(), "{:?}", summaries(&back));
        let finished =
            plan_checks(&cilium("1.20.2"), Some(&prior), &Private::default(), budget).await;
        assert!(
            !finished.has_errors(),
            "from a deployed 1.19.7: {:?}",
            summaries(&finished)
        );
    }

    #[test]
    fn a_downgrade_of_more_than_one_minor_is_an_error_and_one_minor_is_not() {
        assert!(path_diagnostics(&v("1.20.2"), &v("1.18.4"), &[], true).has_errors());
        assert!(path_diagnostics(&v("1.20.2"), &v("1.19.7"), &[], true).is_empty());
        assert!(path_diagnostics(&v("1.19.7"), &v("1.20.2"), &[], true).is_empty());
    }

    #[test]
    fn moving_off_an_old_patch_warns_with_the_newest() {
        let known: Vec<ChartVersion> = ["1.19.6", "1.19.7", "1.20.2"]
            .iter()
            .map(|s| v(s))
            .collect();
        let d = path_diagnostics(&v("1.19.6"), &v("1.20.2"), &known, true);
        let found = summaries(&d);
        assert_eq!(found.len(), 1);
        assert!(!found[0].0, "a warning");
        assert!(
            found[0].2.contains("`version = \"1.19.7\"` first"),
            "{}",
            found[0].2
        );
    }

    fn obj(pairs: &[(&str, Value)]) -> Value {
        Value::Object(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn upgrade_compatibility_is_the_first_minor_and_stays() {
        let settled = |config: &Value, prior: &Value, version: Value| {
            let mut planned = obj(&[("version", version), ("upgrade_compatibility", Value::Null)]);
            settle(config, prior, &mut planned);
            planned
                .attr("upgrade_compatibility")
                .cloned()
                .unwrap_or_default()
        };
        let none = obj(&[]);
        assert_eq!(
            settled(&none, &Value::Null, "1.19.7".into()),
            Value::from("1.19"),
            "a create"
        );
        assert!(settled(&none, &Value::Null, Value::unknown()).is_unknown());
        let kept = obj(&[
            ("upgrade_compatibility", "1.18".into()),
            ("chart_version", "1.19.7".into()),
        ]);
        assert_eq!(
            settled(&none, &kept, "1.20.2".into()),
            Value::from("1.18"),
            "kept"
        );
        let old = obj(&[
            ("chart_version", "1.19.7".into()),
            ("version", "1.19.7".into()),
        ]);
        assert_eq!(
            settled(&none, &old, "1.19.7".into()),
            Value::Null,
            "no version change: nothing planned"
        );
        assert_eq!(
            settled(&none, &old, "1.20.2".into()),
            Value::from("1.19"),
            "the running minor"
        );
        let config = obj(&[("upgrade_compatibility", "1.16".into())]);
        let mut planned = obj(&[
            ("version", "1.20.2".into()),
            ("upgrade_compatibility", "1.16".into()),
        ]);
        settle(&config, &old, &mut planned);
        assert_eq!(
            planned.attr("upgrade_compatibility"),
            Some(&Value::from("1.16")),
            "the user's"
        );
    }
}
