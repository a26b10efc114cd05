//! Waiting for a bootstrap Job: watches of the Job, its pod and their events, composed with a pure
//! classification and a caller-owned deadline. Success is `Complete` or `SuccessCriteriaMet`
//! (Kubernetes 1.31+ writes it first), failure `Failed` or `FailureTarget`. A pod that cannot start
//! for a reason that will not fix itself (image not found, Pod Security refusing it, no pod network
//! before the CNI, unschedulable) ends the wait at once instead of at the deadline. Watch drops,
//! 410 Gone and transient API errors are resumed by the watcher, never reported as failures.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio_util::sync::CancellationToken;

use crate::cluster::pods::container_statuses;

/// How a Job ended, or why waiting stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobWait {
    Succeeded,
    /// The Job failed (`reason` is the condition's, e.g. `BackoffLimitExceeded`, `DeadlineExceeded`)
    /// or the pod cannot start (`reason` is the container's or event's, e.g. `ImagePullBackOff`).
    Failed {
        reason: String,
        message: String,
    },
    TimedOut,
    Interrupted,
}

/// An unschedulable pod is reported after this long: nodes can still change (a taint lifted).
const UNSCHEDULABLE_GRACE: Duration = Duration::from_secs(5);

/// The Job's terminal state from its conditions, if it has one.
pub fn classify_job(job: &Job) -> Option<JobWait> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    for c in conditions.iter().filter(|c| c.status == "True") {
        match c.type_.as_str() {
            "Complete" | "SuccessCriteriaMet" => return Some(JobWait::Succeeded),
            "Failed" | "FailureTarget" => {
                return Some(JobWait::Failed {
                    reason: c.reason.clone().unwrap_or_else(|| c.type_.clone()),
                    message: crate::cluster::scrub_api_message(
                        &c.message.clone().unwrap_or_default(),
                    ),
                });
            }
            _ => {}
        }
    }
    None
}

/// A pod state that will not fix itself, or `Unschedulable` (judged with a grace period).
pub fn classify_pod(pod: &Pod) -> Option<JobWait> {
    let status = pod.status.as_ref()?;
    for c in container_statuses(pod) {
        let Some(waiting) = c.state.as_ref().and_then(|s| s.waiting.as_ref()) else {
            continue;
        };
        let reason = waiting.reason.clone().unwrap_or_default();
        let message = waiting.message.clone().unwrap_or_default();
        let permanent = match reason.as_str() {
            "ImagePullBackOff" | "InvalidImageName" | "ErrImageNeverPull" => true,
            "ErrImagePull" => message.contains("not found"),
            _ => false,
        };
        if permanent {
            return Some(JobWait::Failed {
                reason,
                message: format!("container {:?}: {message}", c.name),
            });
        }
    }
    let unschedulable = status.conditions.iter().flatten().find(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
    })?;
    Some(JobWait::Failed {
        reason: "Unschedulable".into(),
        message: unschedulable.message.clone().unwrap_or_default(),
    })
}

/// Events that mean the run cannot succeed: the Job controller refused by admission (Pod
/// Security), or the pod's sandbox waiting for a pod network that only the CNI brings.
pub fn classify_event(event: &Event) -> Option<JobWait> {
    let reason = event.reason.as_deref().unwrap_or_default();
    let message = crate::cluster::scrub_api_message(&event.message.clone().unwrap_or_default());
    let fatal = match reason {
        // "serviceaccount not found" resolves by itself once the ServiceAccount is visible.
        "FailedCreate" => {
            message.contains("violates PodSecurity") || message.contains("is forbidden: User")
        }
        "FailedCreatePodSandBox" => {
            message.contains("network is not ready")
                || message.contains("cni plugin not initialized")
        }
        _ => false,
    };
    fatal.then(|| JobWait::Failed {
        reason: reason.to_owned(),
        message,
    })
}

fn watch<K>(api: Api<K>, config: watcher::Config) -> impl Stream<Item = K> + Send
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    watcher(api, config)
        .default_backoff()
        .filter_map(|event| async move {
            match event {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => Some(o),
                Ok(_) => None,
                Err(e) => {
                    // Retried by the watcher with back-off: a dropped watch is not a failure.
                    tracing::debug!(error = %e, "watch interrupted; resuming");
                    None
                }
            }
        })
}

/// Waits for Job `name` (whose pods carry `pod_selector`) until `deadline`.
pub async fn wait_for_job(
    jobs: Api<Job>,
    pods: Api<Pod>,
    events: Api<Event>,
    name: &str,
    pod_selector: &str,
    deadline: Instant,
    cancel: &CancellationToken,
) -> JobWait {
    let job_stream = watch(
        jobs,
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    );
    let pod_stream = watch(pods, watcher::Config::default().labels(pod_selector));
    let event_stream = watch(events, watcher::Config::default());
    tokio::pin!(job_stream, pod_stream, event_stream);
    let mut pod_names: BTreeMap<String, String> = BTreeMap::new();
    let mut unschedulable: Option<(Instant, JobWait)> = None;
    let deadline = tokio::time::Instant::from_std(deadline);
    loop {
        let grace = unschedulable
            .as_ref()
            .map(|(since, _)| tokio::time::Instant::from_std(*since + UNSCHEDULABLE_GRACE));
        tokio::select! {
            Some(job) = job_stream.next() => {
                if let Some(outcome) = classify_job(&job) {
                    return outcome;
                }
            }
            Some(pod) = pod_stream.next() => {
                let pod_name = pod.metadata.name.clone().unwrap_or_default();
                pod_names.insert(pod.metadata.uid.clone().unwrap_or_default(), pod_name);
                match classify_pod(&pod) {
                    Some(JobWait::Failed { reason, message }) if reason == "Unschedulable" => {
                        if unschedulable.is_none() {
                            unschedulable = Some((Instant::now(), JobWait::Failed { reason, message }));
                        }
                    }
                    Some(outcome) => return outcome,
                    None => unschedulable = None,
                }
            }
            Some(event) = event_stream.next() => {
                let involved = &event.involved_object;
                let ours = involved.name.as_deref() == Some(name)
                    || involved.uid.as_ref().is_some_and(|uid| pod_names.contains_key(uid))
                    || involved.name.as_deref().is_some_and(|n| n.starts_with(&format!("{name}-")));
                if ours {
                    if let Some(outcome) = classify_event(&event) {
                        return outcome;
                    }
                }
            }
            _ = async { tokio::time::sleep_until(grace.unwrap_or(deadline)).await }, if grace.is_some() => {
                if let Some((_, outcome)) = unschedulable.take() {
                    return outcome;
                }
            }
            _ = tokio::time::sleep_until(deadline) => return JobWait::TimedOut,
            _ = cancel.cancelled() => return JobWait::Interrupted,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn job(conditions: serde_json::Value) -> Job {
        serde_json::from_value(
            json!({"metadata": {"name": "j"}, "status": {"conditions": conditions}}),
        )
        .expect("job")
    }

    #[test]
    fn success_criteria_met_counts_as_success_before_complete() {
        let j = job(json!([{"type": "SuccessCriteriaMet", "status": "True"}]));
        assert_eq!(classify_job(&j), Some(JobWait::Succeeded));
        let j = job(json!([{"type": "Complete", "status": "True"}]));
        assert_eq!(classify_job(&j), Some(JobWait::Succeeded));
    }

    #[test]
    fn failure_target_and_failed_carry_their_reason() {
        let j = job(
            json!([{"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded", "message": "Job was active longer than specified deadline"}]),
        );
        assert!(
            matches!(classify_job(&j), Some(JobWait::Failed { reason, .. }) if reason == "DeadlineExceeded")
        );
        let j =
            job(json!([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]));
        assert!(
            matches!(classify_job(&j), Some(JobWait::Failed { reason, .. }) if reason == "BackoffLimitExceeded")
        );
        let j = job(json!([{"type": "Failed", "status": "False"}]));
        assert_eq!(classify_job(&j), None);
    }

    #[test]
    fn image_pull_back_off_fails_fast_but_a_running_pod_does_not() {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "status": {"containerStatuses": [
            {"name": "bootstrap", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}}]}}))
        .expect("pod");
        assert!(
            matches!(classify_pod(&pod), Some(JobWait::Failed { reason, .. }) if reason == "ImagePullBackOff")
        );
        let running: Pod = serde_json::from_value(
            json!({"metadata": {"name": "p"}, "status": {"containerStatuses": [
            {"name": "bootstrap", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
             "state": {"running": {}}}]}}),
        )
        .expect("pod");
        assert_eq!(classify_pod(&running), None);
    }

    #[test]
    fn pod_security_refusal_is_fatal_but_a_missing_service_account_is_not() {
        let event = |m: &str| -> Event {
            serde_json::from_value(json!({"metadata": {"name": "e"}, "involvedObject": {}, "reason": "FailedCreate", "message": m}))
                .expect("event")
        };
        assert!(classify_event(&event("Error creating: pods \"x\" is forbidden: violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)")).is_some());
        assert!(classify_event(&event("Error creating: pods \"x\" is forbidden: error looking up service account a/b: serviceaccount \"b\" not found")).is_none());
    }
}
