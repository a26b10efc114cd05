//! Failures as diagnostics: engine failures through the shared reporter (step, pod state, log
//! tail, events, the known signature and its fix); native steps with the cluster's answer and what
//! to do; with `debug_on_failure` also the FluxInstance's conditions. Never a secret value: inputs
//! are not quoted.

use std::fmt::Write;

use super::run::RunError;
use crate::cluster::flux::FluxError;
use crate::cluster::flux::diagnosis::{SourceState, instance_hint, object_hint};
use crate::framework::Diagnostic;
use crate::resources::engine_report::engine_diagnostic;

fn flux_detail(e: &FluxError, out: &mut String) {
    let _ = writeln!(out, "{e}.");
    if let Some(hint) = e
        .cluster_error()
        .map(|c| c.hint())
        .filter(|h| !h.is_empty())
    {
        let _ = writeln!(out, "\n{hint}");
    }
    match e {
        FluxError::Timeout { .. } => {
            let _ = writeln!(
                out,
                "\nRaise `timeout` if the cluster is just slow; `debug_on_failure = true` adds the FluxInstance's conditions."
            );
        }
        FluxError::InstanceFailed {
            reason,
            message,
            sources,
            ..
        } => {
            let hint = instance_hint(reason, message);
            if !hint.is_empty() {
                let _ = writeln!(out, "\n{hint}");
            }
            sources_detail(sources, out);
        }
        FluxError::InstanceNotReady { sources, .. } => {
            sources_detail(sources, out);
            if !sources.iter().any(|s| s.failure().is_some()) {
                let _ = writeln!(
                    out,
                    "\nNo sync object reports a failure yet: the operator may still be installing Flux or waiting for it. Give `timeout` room for the chart installs plus the operator's health-check wait, or set `debug_on_failure = true` for the FluxInstance's conditions."
                );
            }
        }
        _ => {}
    }
}

/// The sync objects' state, and what to do about the first that fails.
fn sources_detail(sources: &[SourceState], out: &mut String) {
    if sources.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nFlux's sync objects:");
    for s in sources {
        let _ = writeln!(out, "  - {s}");
    }
    if let Some((s, c)) = sources.iter().find_map(|s| s.failure().map(|c| (s, c))) {
        let hint = object_hint(&s.kind, &c.reason, &c.message);
        if !hint.is_empty() {
            let _ = writeln!(out, "\n{hint}");
        }
    }
}

/// The diagnostic of a failed run; `conditions` are the FluxInstance's, shown with `debug`.
pub fn run_diagnostic(err: &RunError, debug: bool, conditions: Option<&str>) -> Diagnostic {
    let mut detail = String::new();
    let summary = match err {
        RunError::Engine { what, source } => {
            let d = engine_diagnostic(what, source);
            detail = d.detail;
            d.summary
        }
        RunError::Flux(e) => {
            flux_detail(e, &mut detail);
            match e {
                FluxError::NoPodNetwork { .. } => "Flux bootstrap ran before the CNI".to_owned(),
                FluxError::JobNeedsCni { .. } => {
                    "Bootstrap Job cannot run before the CNI".to_owned()
                }
                FluxError::InstanceFailed { .. } => "FluxInstance failed".to_owned(),
                FluxError::InstanceNotReady { .. } => "FluxInstance not Ready".to_owned(),
                _ => "Flux bootstrap failed".to_owned(),
            }
        }
    };
    if let Some(c) = conditions.filter(|c| debug && !c.is_empty()) {
        let _ = writeln!(detail, "\nFluxInstance conditions:\n{c}");
    }
    Diagnostic::error(summary, detail.trim_end().to_owned())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cluster::flux::diagnosis::{Condition, OperatorWait};

    fn git(status: &str, reason: &str, message: &str) -> SourceState {
        SourceState {
            kind: "GitRepository".into(),
            namespace: "flux-system".into(),
            name: "flux-system".into(),
            ready: Some(Condition {
                status: status.into(),
                reason: reason.into(),
                message: message.into(),
            }),
            fetch_failed: None,
            exists: true,
        }
    }

    #[test]
    fn a_timeout_before_the_operators_verdict_names_the_source_and_the_fix() {
        let err = RunError::Flux(FluxError::InstanceNotReady {
            namespace: "flux-system".into(),
            name: "flux".into(),
            after: Duration::from_secs(60),
            last: "Ready=Unknown (Progressing) Reconciliation in progress".into(),
            operator_wait: OperatorWait::Default,
            sources: vec![git(
                "False",
                "GitOperationFailed",
                "failed to checkout and determine revision: unable to clone 'ssh://git@github.com/org/infra.git': ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey]",
            )],
        });
        let d = run_diagnostic(&err, false, None);
        assert_eq!(d.summary, "FluxInstance not Ready");
        for words in [
            "timed out after 60s waiting for FluxInstance flux-system/flux to be Ready",
            "reports a failure only after its health-check wait (300s",
            "GitRepository/flux-system/flux-system is Ready=False (GitOperationFailed)",
            "register the deploy key's public half (read access)",
        ] {
            assert!(d.detail.contains(words), "{words:?} in\n{}", d.detail);
        }
        let waiting = RunError::Flux(FluxError::InstanceNotReady {
            namespace: "flux-system".into(),
            name: "flux".into(),
            after: Duration::from_secs(60),
            last: "no Ready condition yet".into(),
            operator_wait: OperatorWait::Default,
            sources: Vec::new(),
        });
        let d = run_diagnostic(&waiting, false, None);
        assert!(d.detail.contains("Give `timeout` room"), "{}", d.detail);
        // Caught while source-controller retries: Ready only says it progresses, the refusal
        // is in FetchFailed, and the diagnostic names it with its fix.
        let mut retrying = git("Unknown", "Progressing", "building artifact");
        retrying.fetch_failed = Some(Condition {
            status: "True".into(),
            reason: "GitOperationFailed".into(),
            message: "failed to checkout and determine revision: unable to clone 'ssh://git@127.0.0.1:2222/infra.git': ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey]".into(),
        });
        let mid_retry = RunError::Flux(FluxError::InstanceNotReady {
            namespace: "flux-system".into(),
            name: "flux".into(),
            after: Duration::from_secs(60),
            last: "Ready=Unknown (Progressing) Reconciliation in progress".into(),
            operator_wait: OperatorWait::Default,
            sources: vec![retrying],
        });
        let d = run_diagnostic(&mid_retry, false, None);
        for words in [
            "its last fetch failed and source-controller retries",
            "unable to authenticate",
            "register the deploy key's public half (read access)",
        ] {
            assert!(d.detail.contains(words), "{words:?} in\n{}", d.detail);
        }
        assert!(
            !d.detail.contains("No sync object reports a failure yet"),
            "{}",
            d.detail
        );
    }

    #[test]
    fn the_operators_failure_names_the_source_with_what_to_do() {
        let err = RunError::Flux(FluxError::InstanceFailed {
            namespace: "flux-system".into(),
            name: "flux".into(),
            reason: "ReconciliationFailed".into(),
            message: "reconciliation failed: timeout waiting for: [GitRepository/flux-system/flux-system status: 'Failed']\nGitRepository/flux-system/flux-system status: failed to checkout and determine revision: unable to clone 'ssh://git@github.com/org/infra.git': ssh: handshake failed: knownhosts: key mismatch".into(),
            sources: vec![git("False", "GitOperationFailed", "ssh: handshake failed: knownhosts: key mismatch")],
        });
        let d = run_diagnostic(&err, false, None);
        assert_eq!(d.summary, "FluxInstance failed");
        assert!(d.detail.contains("ReconciliationFailed"), "{}", d.detail);
        assert!(d.detail.contains("known_hosts"), "{}", d.detail);
        assert!(!d.detail.contains("ArtifactFailed"), "{}", d.detail);
    }
}
