//! What a failed run left behind, gathered for the diagnostic: the pod's phase and node, every
//! container's state, the last lines of the log (bounded: the full log stays in the cluster), and
//! the Warning events of the Job and its pod.

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::{ListParams, LogParams};

use crate::cluster::pods::{container_statuses, describe_container, warnings_about};
use crate::cluster::scrub_api_message;

/// Log lines and bytes a report carries at most.
pub const LOG_TAIL_LINES: i64 = 20;
const LOG_TAIL_BYTES: usize = 8 * 1024;
/// How far back the report looks for the error a tool printed before the tail: one error can be
/// longer than the tail (the apiserver's escalation refusal lists every rule not held, one per
/// line), and its first line is the one that says what happened.
const LOG_SCAN_LINES: i64 = 500;
const LOG_SCAN_BYTES: i64 = 128 * 1024;
const MAX_EVENTS: usize = 8;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodReport {
    pub pod: Option<String>,
    pub node: Option<String>,
    pub phase: Option<String>,
    /// `name: state` lines, init containers first.
    pub containers: Vec<String>,
    pub log_tail: Vec<String>,
    /// The wider window of the log that diagnoses read ([`LOG_SCAN_LINES`]); not shown.
    pub log_window: Vec<String>,
    /// `Reason: message` of Warning events, oldest first.
    pub events: Vec<String>,
}

impl PodReport {
    /// Every text a diagnosis may match against.
    pub fn texts(&self) -> impl Iterator<Item = &str> + Clone {
        self.containers
            .iter()
            .chain(&self.events)
            .chain(&self.log_tail)
            .chain(&self.log_window)
            .map(String::as_str)
    }
}

/// The last [`LOG_TAIL_LINES`] lines of `log` (at most [`LOG_TAIL_BYTES`]), headed, when the tail
/// has no `Error...` line, by the error lines before it (the last `Error...` line and the `* `
/// items of Helm's multi-error list after it, at most 5), then `...`: the headline of an error
/// too long for the tail.
fn log_tail(log: &str) -> Vec<String> {
    let lines: Vec<&str> = log.lines().collect();
    let mut start = lines.len().saturating_sub(LOG_TAIL_LINES as usize);
    while start < lines.len()
        && lines[start..].iter().map(|l| l.len() + 1).sum::<usize>() > LOG_TAIL_BYTES
    {
        start += 1;
    }
    let is_error = |l: &str| l.trim_start().starts_with("Error");
    let mut tail: Vec<String> = Vec::new();
    if !lines[start..].iter().any(|l| is_error(l))
        && let Some(at) = lines[..start].iter().rposition(|l| is_error(l))
    {
        tail.push(lines[at].to_owned());
        tail.extend(
            lines[at + 1..start]
                .iter()
                .filter(|l| l.trim_start().starts_with("* "))
                .take(4)
                .map(|l| (*l).to_owned()),
        );
        tail.push("...".to_owned());
    }
    tail.extend(lines[start..].iter().map(|l| (*l).to_owned()));
    tail
}

/// The whole log of the run's pod (selected by `pod_selector`: the newest one), bounded by
/// [`super::MAX_OUTPUT`]: a log that fills the bound is refused rather than read as if it were
/// complete. Transient API errors are retried: the run succeeded, its output must not be lost to
/// a 503.
pub async fn output(
    retry_budget: crate::cluster::RetryBudget,
    pods: &Api<Pod>,
    pod_selector: &str,
) -> Result<String, String> {
    let params = ListParams::default().labels(pod_selector);
    let list = retry_budget
        .retry("list the run's pods", || pods.list(&params))
        .await
        .map_err(|e| scrub_api_message(&e.to_string()))?;
    let pod = list
        .items
        .into_iter()
        .max_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .and_then(|p| p.metadata.name)
        .ok_or("no pod of the Job was found")?;
    let params = LogParams {
        limit_bytes: Some(super::MAX_OUTPUT),
        ..Default::default()
    };
    let log = retry_budget
        .retry("read the pod log", || pods.logs(&pod, &params))
        .await
        .map_err(|e| scrub_api_message(&e.to_string()))?;
    if log.len() as i64 >= super::MAX_OUTPUT {
        return Err(format!(
            "the output exceeds {} MiB",
            super::MAX_OUTPUT / 1024 / 1024
        ));
    }
    Ok(log)
}

/// Collects the report for the pods of one run (selected by `pod_selector`) and the Job `job`.
/// Best effort: what cannot be read is left out, the failure itself is already known.
pub async fn collect(
    pods: &Api<Pod>,
    events: &Api<Event>,
    job: &str,
    pod_selector: &str,
) -> PodReport {
    let mut report = PodReport::default();
    let list = pods.list(&ListParams::default().labels(pod_selector)).await;
    let pod = list.ok().and_then(|l| {
        l.items
            .into_iter()
            .max_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0))
    });
    let mut names = vec![job.to_owned()];
    if let Some(pod) = &pod {
        let name = pod.metadata.name.clone().unwrap_or_default();
        names.push(name.clone());
        report.pod = Some(name.clone());
        report.node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        if let Some(status) = &pod.status {
            report.phase = status.phase.clone();
            report.containers = container_statuses(pod).map(describe_container).collect();
        }
        let params = LogParams {
            tail_lines: Some(LOG_SCAN_LINES),
            limit_bytes: Some(LOG_SCAN_BYTES),
            ..Default::default()
        };
        if let Ok(log) = pods.logs(&name, &params).await {
            report.log_tail = log_tail(&log)
                .into_iter()
                .map(|l| scrub_api_message(&l))
                .collect();
            report.log_window = log.lines().map(scrub_api_message).collect();
        }
    }
    if let Ok(mut warnings) = warnings_about(events, |n| names.iter().any(|x| x == n)).await {
        warnings.sort_by_key(|e| e.last_timestamp.as_ref().map(|t| t.0));
        let skip = warnings.len().saturating_sub(MAX_EVENTS);
        report.events = warnings
            .into_iter()
            .skip(skip)
            .map(|e| {
                format!(
                    "{}: {}",
                    e.reason.unwrap_or_default(),
                    scrub_api_message(e.message.unwrap_or_default().trim())
                )
            })
            .collect();
        report.events.dedup();
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_longer_than_the_tail_keeps_its_headline() {
        let mut log = String::from(
            "installing\nError: clusterroles \"cilium\" is forbidden: user \"u\" is attempting to grant RBAC permissions not currently held:\n",
        );
        for i in 0..40 {
            log.push_str(&format!(
                "{{APIGroups:[\"\"], Resources:[\"r{i}\"], Verbs:[\"get\"]}}\n"
            ));
        }
        let tail = log_tail(&log);
        assert_eq!(tail.len(), 2 + LOG_TAIL_LINES as usize);
        assert!(
            tail[0].contains("is attempting to grant RBAC permissions"),
            "{tail:?}"
        );
        assert_eq!(tail[1], "...");
        assert!(tail.last().unwrap().contains("r39"));
    }

    #[test]
    fn helms_multi_error_list_keeps_its_items() {
        let mut log = String::from(
            "Error: 2 errors occurred:\n\t* clusterroles.rbac.authorization.k8s.io \"cilium\" is forbidden: user \"u\" is attempting to grant RBAC permissions not currently held:\n",
        );
        for i in 0..40 {
            log.push_str(&format!("{{APIGroups:[\"\"], Resources:[\"r{i}\"]}}\n"));
        }
        log.push_str("\t* clusterrolebindings \"cilium\" not found\n");
        let tail = log_tail(&log);
        assert_eq!(tail[0], "Error: 2 errors occurred:");
        assert!(tail[1].contains("attempting to grant"), "{tail:?}");
        assert_eq!(tail[2], "...");
        assert!(tail.last().unwrap().contains("not found"));
    }

    #[test]
    fn a_short_log_is_the_tail_as_it_is() {
        let log = "a\nError: b\nc\n";
        assert_eq!(log_tail(log), vec!["a", "Error: b", "c"]);
        let long: String = (0..30).map(|i| format!("line {i}\n")).collect();
        let tail = log_tail(&long);
        assert_eq!(tail.len(), LOG_TAIL_LINES as usize);
        assert_eq!(tail[0], "line 10");
    }
}
