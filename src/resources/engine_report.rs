//! The one place that turns bootstrap-engine outcomes into diagnostics, so every resource reports
//! failures the same way: what failed, the pod's state, the last log lines, the events, and the
//! known signature with its fix in one sentence. Nothing here ever prints an input value.

use crate::cluster::diagnosis::Diagnosis;
use crate::cluster::engine::EngineError;
use crate::cluster::readiness::NotReady;
use crate::framework::Diagnostic;

fn section(out: &mut String, title: &str, lines: &[String], prefix: &str) {
    if lines.is_empty() {
        return;
    }
    out.push_str(&format!("\n\n{title}:"));
    for l in lines {
        out.push_str(&format!("\n{prefix}{l}"));
    }
}

fn diagnosis(out: &mut String, d: &Option<Diagnosis>) {
    if let Some(d) = d {
        out.push_str(&format!(
            "\n\nDiagnosis: {}.\nSeen: {}\nFix: {}.",
            d.cause, d.signature, d.fix
        ));
    }
}

/// `what` completes "Failed to ...", e.g. "install Cilium 1.18.4 (kube-system/cilium)".
pub fn engine_diagnostic(what: &str, e: &EngineError) -> Diagnostic {
    let mut detail = format!("{}.", capitalized(&e.to_string()));
    if let Some(cause) = &e.cause {
        let hint = cause.hint();
        if !hint.is_empty() {
            detail.push_str(&format!("\n\n{hint}"));
        }
    }
    if let Some(r) = &e.report {
        let mut pod = Vec::new();
        if let Some(name) = &r.pod {
            pod.push(format!(
                "{name} on {} (phase {})",
                r.node.as_deref().unwrap_or("no node"),
                r.phase.as_deref().unwrap_or("unknown")
            ));
        }
        section(&mut detail, "Pod", &pod, "  ");
        section(&mut detail, "Containers", &r.containers, "  - ");
        section(&mut detail, "Events", &r.events, "  - ");
        let title = match &e.kept_job {
            Some(job) => {
                let (ns, name) = job.split_once('/').unwrap_or(("", job));
                format!("Last log lines (full log: kubectl -n {ns} logs job/{name})")
            }
            None => "Last log lines".to_owned(),
        };
        section(&mut detail, &title, &r.log_tail, "  | ");
    }
    diagnosis(&mut detail, &e.diagnosis);
    if e.interrupted {
        detail.push_str("\n\nNo installer keeps running: the bootstrap Job was deleted and the Lease released. What Helm applied before it stopped stays applied: if it had started, its release record says `pending-*` and the workloads may be part-way through the change (the next plan shows it). Apply again to finish.");
    }
    section(&mut detail, "Also", &e.warnings, "  - ");
    Diagnostic::error(format!("Failed to {what}"), detail)
}

/// Workloads that did not become ready in time (or showed a known failure).
pub fn not_ready_diagnostic(what: &str, n: &NotReady, timeout_secs: u64) -> Diagnostic {
    let mut detail = if n.interrupted {
        "Interrupted while waiting for readiness (Terraform/OpenTofu asked the provider to stop). The release is installed; apply again to finish waiting.".to_owned()
    } else if n.diagnosis.is_some() {
        "A workload fails in a way that will not fix itself.".to_owned()
    } else {
        format!("Not ready within the timeout ({timeout_secs}s).")
    };
    section(&mut detail, "Not rolled out", &n.workloads, "  - ");
    section(&mut detail, "Pods not ready", &n.pods, "  - ");
    section(&mut detail, "Nodes not ready", &n.nodes, "  - ");
    section(&mut detail, "Events", &n.events, "  - ");
    section(&mut detail, "Last log lines", &n.log_tail, "  | ");
    diagnosis(&mut detail, &n.diagnosis);
    Diagnostic::error(format!("Failed to {what}"), detail)
}

/// `s` with its first letter upper-case: a message that starts with a name of its own.
pub(crate) fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}
