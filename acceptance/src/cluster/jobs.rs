//! The Job controller (`batch/v1`): one pod at a time from `spec.template` (labels
//! `controller-uid`/`job-name`, a controller ownerReference), `backoffLimit` with exponential
//! back-off between attempts, `activeDeadlineSeconds`, the 1.31+ condition order
//! (`SuccessCriteriaMet` then `Complete`; `FailureTarget` then `Failed`, after the remaining pods
//! are gone), status counters that never go down (each finished pod counted once), refused pod
//! creates as `FailedCreate` events (retried, not failures), and `ttlSecondsAfterFinished`
//! (Background deletion; the store's garbage collector removes the pods). All durations are
//! scaled by the pace; each pass returns its next deadline, so the controller sleeps until then.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{obj, reconcile};
use crate::config::Pace;
use crate::controller::{Controller, ControllerContext, ControllerFuture};
use crate::store::{ApiError, DeleteOptions, ListOptions, Patch, Propagation, Store};

/// See the module docs.
#[derive(Default)]
pub struct JobController;

/// What the controller remembers about a Job between passes.
#[derive(Debug)]
struct Memo {
    started: Instant,
    finished: Option<Instant>,
    failures_seen: i64,
    next_pod_at: Instant,
    /// Pods already counted (by UID), like the real controller's tracking finalizer: a counted
    /// pod that is deleted later does not lower `succeeded`/`failed`.
    counted: HashMap<String, Counted>,
    succeeded: i64,
    failed: i64,
}

impl Memo {
    fn new() -> Self {
        Memo {
            started: Instant::now(),
            finished: None,
            failures_seen: 0,
            next_pod_at: Instant::now(),
            counted: HashMap::new(),
            succeeded: 0,
            failed: 0,
        }
    }
}

/// What has been counted of one pod.
#[derive(Debug, Default)]
struct Counted {
    finished: bool,
    /// Container restarts counted as failures (`restartPolicy: OnFailure`).
    restarts: i64,
}

impl Controller for JobController {
    fn name(&self) -> &str {
        "job-controller"
    }

    fn run(self: Box<Self>, ctx: ControllerContext) -> ControllerFuture {
        let pace = ctx.config.pace;
        let mut memos: HashMap<String, Memo> = HashMap::new();
        Box::pin(reconcile::run_timed(
            ctx,
            vec![obj::jobs(), obj::pods()],
            move |store| {
                let Ok(jobs) = store.list(&obj::jobs(), None, &ListOptions::default()) else {
                    return None;
                };
                memos.retain(|uid, _| jobs.items.iter().any(|j| obj::uid(j) == uid));
                let mut next = None;
                for job in jobs.items.iter().filter(|j| !obj::is_deleting(j)) {
                    let memo = memos
                        .entry(obj::uid(job).to_string())
                        .or_insert_with(Memo::new);
                    let wake = match sync_job(store, pace, job, memo) {
                        Ok(wake) => wake,
                        Err(e) => {
                            tracing::debug!(job = obj::name(job), %e, "job sync failed");
                            Some(reconcile::retry_at(pace))
                        }
                    };
                    next = reconcile::earliest(next, wake);
                }
                next
            },
        ))
    }
}

/// Pod counts of a Job.
#[derive(Debug, Default)]
struct Counts {
    active: i64,
    succeeded: i64,
    failed: i64,
    ready: i64,
    terminating: i64,
}

/// Counts the Job's pods. `succeeded`/`failed` never go down: finished pods (and, with
/// `OnFailure`, container restarts) are counted once, and the result is at least what the
/// Job's status already records.
fn count(job: &Value, pods: &[Value], memo: &mut Memo) -> Counts {
    let on_failure = obj::s(job, "/spec/template/spec/restartPolicy") == "OnFailure";
    let mut c = Counts::default();
    memo.counted
        .retain(|uid, _| pods.iter().any(|p| obj::uid(p) == uid));
    for p in pods {
        let seen = memo.counted.entry(obj::uid(p).to_string()).or_default();
        match (obj::pod_phase(p), obj::is_deleting(p)) {
            (phase @ ("Succeeded" | "Failed"), _) if !seen.finished => {
                seen.finished = true;
                match phase {
                    "Succeeded" => memo.succeeded += 1,
                    _ => memo.failed += 1,
                }
            }
            ("Succeeded" | "Failed", _) => {}
            (_, true) => c.terminating += 1,
            _ => c.active += 1,
        }
        if obj::pod_ready(p) {
            c.ready += 1;
        }
        if on_failure {
            let restarts = obj::arr(p, "/status/containerStatuses")
                .iter()
                .filter_map(|s| obj::i64_at(s, "/restartCount"))
                .sum::<i64>();
            if restarts > seen.restarts {
                memo.failed += restarts - seen.restarts;
                seen.restarts = restarts;
            }
        }
    }
    memo.succeeded = memo
        .succeeded
        .max(obj::i64_at(job, "/status/succeeded").unwrap_or(0));
    memo.failed = memo
        .failed
        .max(obj::i64_at(job, "/status/failed").unwrap_or(0));
    c.succeeded = memo.succeeded;
    c.failed = memo.failed;
    c
}

/// One pass over a Job. Returns when the Job next needs a pass without any change (the end of
/// a back-off, its active deadline, its TTL).
fn sync_job(
    store: &Store,
    pace: Pace,
    job: &Value,
    memo: &mut Memo,
) -> Result<Option<Instant>, ApiError> {
    let (ns, name, uid) = (obj::namespace(job), obj::name(job), obj::uid(job));
    if obj::condition_true(job, "Complete") || obj::condition_true(job, "Failed") {
        let finished = *memo.finished.get_or_insert_with(Instant::now);
        let Some(ttl) = obj::i64_at(job, "/spec/ttlSecondsAfterFinished") else {
            return Ok(None);
        };
        let expires = finished + pace.scale(Duration::from_secs(ttl.max(0) as u64));
        if Instant::now() < expires {
            return Ok(Some(expires));
        }
        let opts = DeleteOptions {
            propagation: Some(Propagation::Background),
            ..Default::default()
        };
        store.delete(&obj::jobs(), ns, name, &opts)?;
        return Ok(None);
    }
    if job.pointer("/spec/suspend") == Some(&json!(true)) {
        return Ok(None);
    }
    let selector = format!("batch.kubernetes.io/controller-uid={uid}");
    let pods: Vec<Value> = store
        .list(
            &obj::pods(),
            Some(ns),
            &ListOptions::default().labels(&selector),
        )?
        .items
        .into_iter()
        .filter(|p| obj::owned_by(p, uid))
        .collect();
    let c = count(job, &pods, memo);
    let mut conds = obj::arr(job, "/status/conditions").to_vec();
    let mut completion_time = job
        .pointer("/status/completionTime")
        .cloned()
        .unwrap_or(Value::Null);
    let settled = c.active == 0 && c.terminating == 0;
    let deadline = deadline(job, pace, memo);
    let past_deadline = deadline.is_some_and(|d| Instant::now() >= d);
    let mut next = deadline.filter(|_| !past_deadline);
    if obj::condition_true(job, "SuccessCriteriaMet") {
        if settled {
            obj::set_condition(
                &mut conds,
                "Complete",
                "True",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            );
            completion_time = json!(crate::util::now_rfc3339());
        }
    } else if let Some(target) =
        obj::condition(job, "FailureTarget").filter(|_| obj::condition_true(job, "FailureTarget"))
    {
        delete_active(store, &pods)?;
        if settled {
            obj::set_condition(
                &mut conds,
                "Failed",
                "True",
                obj::s(target, "/reason"),
                obj::s(target, "/message"),
            );
        }
    } else if c.succeeded >= obj::i64_at(job, "/spec/completions").unwrap_or(1) {
        obj::set_condition(
            &mut conds,
            "SuccessCriteriaMet",
            "True",
            "CompletionsReached",
            "Reached expected number of succeeded pods",
        );
    } else if past_deadline {
        obj::set_condition(
            &mut conds,
            "FailureTarget",
            "True",
            "DeadlineExceeded",
            "Job was active longer than specified deadline",
        );
        delete_active(store, &pods)?;
    } else if c.failed > obj::i64_at(job, "/spec/backoffLimit").unwrap_or(6) {
        obj::set_condition(
            &mut conds,
            "FailureTarget",
            "True",
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
        );
        delete_active(store, &pods)?;
    } else if c.active + c.terminating == 0 {
        if c.failed > memo.failures_seen {
            memo.failures_seen = c.failed;
            let backoff =
                Duration::from_secs(10) * 2u32.saturating_pow((c.failed - 1).clamp(0, 5) as u32);
            memo.next_pod_at = Instant::now() + pace.scale(backoff.min(Duration::from_secs(360)));
        }
        // Once created, the pod's events drive the next pass.
        if Instant::now() < memo.next_pod_at {
            next = reconcile::earliest(next, Some(memo.next_pod_at));
        } else if create_pod(store, job).is_some() {
            next = reconcile::earliest(next, Some(reconcile::retry_at(pace)));
        }
    }
    for cond in conds.iter_mut() {
        if let Some(m) = cond.as_object_mut() {
            m.insert(
                "lastProbeTime".into(),
                m.get("lastTransitionTime").cloned().unwrap_or(Value::Null),
            );
        }
    }
    let start = job
        .pointer("/status/startTime")
        .cloned()
        .unwrap_or_else(|| json!(crate::util::now_rfc3339()));
    let status = json!({"status": {
        "active": c.active, "succeeded": c.succeeded, "failed": c.failed, "ready": c.ready,
        "terminating": c.terminating, "startTime": start, "completionTime": completion_time,
        "conditions": if conds.is_empty() { Value::Null } else { json!(conds) },
        "uncountedTerminatedPods": {},
    }});
    store.patch_status(
        &obj::jobs(),
        ns,
        name,
        Patch::Merge(status),
        &obj::manager("job-controller"),
    )?;
    Ok(next)
}

/// When `activeDeadlineSeconds` (scaled, from when the controller first saw the Job) passes.
fn deadline(job: &Value, pace: Pace, memo: &Memo) -> Option<Instant> {
    obj::i64_at(job, "/spec/activeDeadlineSeconds")
        .map(|d| memo.started + pace.scale(Duration::from_secs(d.max(0) as u64)))
}

fn delete_active(store: &Store, pods: &[Value]) -> Result<(), ApiError> {
    for p in pods
        .iter()
        .filter(|p| !obj::pod_finished(p) && !obj::is_deleting(p))
    {
        match store.delete(
            &obj::pods(),
            obj::namespace(p),
            obj::name(p),
            &DeleteOptions::default(),
        ) {
            Ok(_) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Creates the next pod. A refused create (e.g. the ServiceAccount does not exist yet) is a
/// Warning `FailedCreate` event on the Job, `Error creating: <message>`, retried after
/// [`reconcile::retry_at`]; it is not a pod failure. Returns the refusal's message.
fn create_pod(store: &Store, job: &Value) -> Option<String> {
    let template = job
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null);
    let mut meta = template
        .get("metadata")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    meta["generateName"] = json!(format!("{}-", obj::name(job)));
    meta["ownerReferences"] = json!([obj::owner_ref(job, "batch/v1", "Job")]);
    if let Some(m) = meta.as_object_mut() {
        m.remove("name");
    }
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template.get("spec").cloned().unwrap_or(Value::Null)});
    super::workloads::create_owned_pod(store, job, pod, "job-controller")
}
