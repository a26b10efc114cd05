//! Failures as diagnostics: what failed (the step), why (the engine's diagnosis of a known
//! signature, or the cluster's answer), what to do, and with `debug_on_failure` the Job's log tail,
//! its pod's state and events and the FluxInstance's conditions. Never a secret value: the inputs
//! are not quoted, and the Job log only shows what Helm printed.

use std::fmt::Write;

use super::run::RunError;
use crate::cluster::bootstrap::EngineError;
use crate::cluster::flux::FluxError;
use crate::framework::Diagnostic;

fn engine_detail(e: &EngineError, debug: bool, out: &mut String) {
    let _ = writeln!(out, "{e}.");
    if let Some(d) = &e.diagnosis {
        let _ = writeln!(
            out,
            "\nCause: {}.\nFix: {}.\n(recognised: {:?})",
            d.cause, d.fix, d.signature
        );
    }
    if let Some(cause) = &e.cause {
        let hint = cause.hint();
        if !hint.is_empty() {
            let _ = writeln!(out, "\n{hint}");
        }
    }
    if let Some(job) = &e.kept_job {
        let (ns, name) = job.split_once('/').unwrap_or(("", job));
        let _ = writeln!(
            out,
            "\nThe failed Job is kept until the next run: kubectl -n {ns} logs job/{name}"
        );
    }
    let Some(report) = e.report.as_ref().filter(|_| debug) else {
        if e.report.is_some() {
            let _ = writeln!(
                out,
                "\nSet `debug_on_failure = true` to see the Job's log here."
            );
        }
        return;
    };
    if let Some(pod) = &report.pod {
        let _ = writeln!(
            out,
            "\nPod {pod} on {} ({}):",
            report.node.as_deref().unwrap_or("no node"),
            report.phase.as_deref().unwrap_or("unknown")
        );
    }
    for c in &report.containers {
        let _ = writeln!(out, "  {c}");
    }
    if !report.events.is_empty() {
        let _ = writeln!(out, "Events:");
        report.events.iter().for_each(|ev| {
            let _ = writeln!(out, "  {ev}");
        });
    }
    if !report.log_tail.is_empty() {
        let _ = writeln!(out, "Log (last lines):");
        report.log_tail.iter().for_each(|l| {
            let _ = writeln!(out, "  {l}");
        });
    }
}

fn flux_detail(e: &FluxError, out: &mut String) {
    let _ = writeln!(out, "{e}.");
    if let Some(hint) = e
        .cluster_error()
        .map(|c| c.hint())
        .filter(|h| !h.is_empty())
    {
        let _ = writeln!(out, "\n{hint}");
    }
    if let FluxError::Timeout { .. } = e {
        let _ = writeln!(
            out,
            "\nRaise `timeout` if the cluster is just slow; `debug_on_failure = true` adds the FluxInstance's conditions."
        );
    }
}

/// The diagnostic of a failed run; `conditions` are the FluxInstance's, shown with `debug`.
pub fn run_diagnostic(err: &RunError, debug: bool, conditions: Option<&str>) -> Diagnostic {
    let mut detail = String::new();
    let summary = match err {
        RunError::Engine(e) => {
            engine_detail(e, debug, &mut detail);
            format!("Flux bootstrap failed to {}", e.step.describe())
        }
        RunError::Flux(e) => {
            flux_detail(e, &mut detail);
            match e {
                FluxError::NoPodNetwork { .. } => "Flux bootstrap ran before the CNI".to_owned(),
                FluxError::InstanceFailed { .. } => "FluxInstance failed".to_owned(),
                _ => "Flux bootstrap failed".to_owned(),
            }
        }
    };
    if let Some(c) = conditions.filter(|c| debug && !c.is_empty()) {
        let _ = writeln!(detail, "\nFluxInstance conditions:\n{c}");
    }
    Diagnostic::error(summary, detail.trim_end().to_owned())
}
