//! Job controller behaviour with the kubelet's programs: deadlines, TTL, kills, pull failures,
//! counters that never go down, the condition order a watch sees, refused pod creates; and a
//! restarted container's log (ignored until the store keeps per-attempt logs).

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use crate::common::*;

fn shell_job(name: &str, script: &str, extra: serde_json::Value) -> Job {
    let mut v = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "template": {"spec": {"hostNetwork": true, "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", script]}]}}}});
    talos_sim::programs::values::merge(&mut v, &extra);
    from_json(v)
}

#[tokio::test]
async fn active_deadline_kills_a_hanging_program() {
    let (_sim, client) = start().await;
    let mut manifest = serde_json::to_value(shell_job(
        "hangs",
        "echo started; exit 0",
        json!({"spec": {"activeDeadlineSeconds": 5}}),
    ))
    .unwrap();
    talos_sim::cluster::hang_template(&mut manifest);
    let done = run_job(&client, "default", &from_json(manifest), 20).await;
    assert_eq!(
        job_condition(&done, "Failed"),
        Some((
            "DeadlineExceeded".to_string(),
            "Job was active longer than specified deadline".to_string()
        ))
    );
    assert_eq!(
        job_condition(&done, "FailureTarget")
            .map(|c| c.0)
            .as_deref(),
        Some("DeadlineExceeded")
    );
    assert_eq!(done.status.unwrap().active, Some(0));
}

#[tokio::test]
async fn failing_program_exhausts_the_backoff_limit() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let done = run_job(
        &client,
        "default",
        &shell_job(
            "fails",
            "echo boom; exit 3",
            json!({"spec": {"backoffLimit": 1}}),
        ),
        20,
    )
    .await;
    assert_eq!(
        job_condition(&done, "Failed").map(|c| c.0).as_deref(),
        Some("BackoffLimitExceeded")
    );
    assert_eq!(
        done.status.unwrap().failed,
        Some(2),
        "backoffLimit 1 = two attempts"
    );
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let list = pods
        .list(&ListParams::default().labels("job-name=fails"))
        .await
        .unwrap();
    let term = list.items[0]
        .status
        .clone()
        .unwrap()
        .container_statuses
        .unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!((term.exit_code, term.reason.as_deref()), (3, Some("Error")));
}

#[tokio::test]
async fn ttl_deletes_the_job_and_its_pods() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &shell_job(
            "short",
            "echo done",
            json!({"spec": {"ttlSecondsAfterFinished": 2}}),
        ),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    eventually(10, "pod succeeded", || async {
        let list = pods
            .list(&ListParams::default().labels("job-name=short"))
            .await
            .ok()?;
        list.items
            .iter()
            .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded"))
            .then_some(())
    })
    .await;
    eventually(10, "job and pods deleted", || async {
        let gone = jobs.get_opt("short").await.ok()?.is_none();
        let no_pods = pods
            .list(&ListParams::default().labels("job-name=short"))
            .await
            .ok()?
            .items
            .is_empty();
        (gone && no_pods).then_some(())
    })
    .await;
}

#[tokio::test]
async fn killed_pod_counts_as_a_failure() {
    let (sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let mut manifest = serde_json::to_value(shell_job(
        "rebooted",
        "exit 0",
        json!({"spec": {"backoffLimit": 1}}),
    ))
    .unwrap();
    talos_sim::cluster::hang_template(&mut manifest);
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    jobs.create(&PostParams::default(), &from_json(manifest))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let first = eventually(10, "pod running", || async {
        let list = pods
            .list(&ListParams::default().labels("job-name=rebooted"))
            .await
            .ok()?;
        list.items
            .into_iter()
            .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))?
            .metadata
            .name
    })
    .await;
    talos_sim::cluster::kill_pod(sim.store(), "default", &first).unwrap();
    let term = eventually(10, "pod killed", || async {
        let s = pods.get(&first).await.ok()?.status?;
        (s.phase.as_deref() == Some("Failed")).then_some(())?;
        s.container_statuses?.into_iter().next()?.state?.terminated
    })
    .await;
    assert_eq!(
        (term.exit_code, term.reason.as_deref()),
        (137, Some("Error"))
    );
    eventually(10, "a replacement pod", || async {
        let j = jobs.get("rebooted").await.ok()?;
        let s = j.status?;
        (s.failed == Some(1) && s.active == Some(1)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn unknown_image_ends_in_image_pull_backoff() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = from_json(
        json!({"metadata": {"name": "nope"}, "spec": {"hostNetwork": true, "tolerations": [{"operator": "Exists"}],
        "containers": [{"name": "c", "image": "example.com/nope:1"}]}}),
    );
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let waiting = eventually(10, "ImagePullBackOff", || async {
        let cs = pods
            .get("nope")
            .await
            .ok()?
            .status?
            .container_statuses?
            .into_iter()
            .next()?;
        cs.state?
            .waiting
            .filter(|w| w.reason.as_deref() == Some("ImagePullBackOff"))
    })
    .await;
    assert!(
        waiting
            .message
            .unwrap_or_default()
            .starts_with("Back-off pulling image \"example.com/nope:1\"")
    );
    let events = events_for(&client, "default", "nope").await;
    assert!(
        events.iter().any(|(r, m)| r == "Failed"
            && m.contains("failed to pull and unpack image \"example.com/nope:1\"")
            && m.ends_with("not found")),
        "{events:?}"
    );
}

#[tokio::test]
async fn pod_active_deadline_fails_the_pod() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = from_json(
        json!({"metadata": {"name": "bounded"}, "spec": {"hostNetwork": true, "activeDeadlineSeconds": 3,
        "restartPolicy": "Never", "tolerations": [{"operator": "Exists"}],
        "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}}),
    );
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let status = eventually(10, "pod failed", || async {
        let s = pods.get("bounded").await.ok()?.status?;
        (s.phase.as_deref() == Some("Failed")).then_some(s)
    })
    .await;
    assert_eq!(status.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(
        status.message.as_deref(),
        Some("Pod was active on the node longer than the specified deadline")
    );
}

/// `SuccessfulCreate` events of a Job: one per pod it created.
async fn pods_created(client: &kube::Client, ns: &str, job: &str) -> usize {
    events_for(client, ns, job)
        .await
        .iter()
        .filter(|(r, _)| r == "SuccessfulCreate")
        .count()
}

#[tokio::test]
async fn deleting_a_failed_pod_does_not_lower_failed_or_add_attempts() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &shell_job(
            "flaky",
            "echo boom; exit 3",
            json!({"spec": {"backoffLimit": 2}}),
        ),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let first = eventually(10, "a failed pod", || async {
        let list = pods
            .list(&ListParams::default().labels("job-name=flaky"))
            .await
            .ok()?;
        list.items
            .into_iter()
            .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed"))?
            .metadata
            .name
    })
    .await;
    pods.delete(&first, &Default::default()).await.unwrap();
    let done = eventually(20, "job failed", || async {
        let j = jobs.get("flaky").await.ok()?;
        job_condition(&j, "Failed").map(|_| j)
    })
    .await;
    assert_eq!(
        job_condition(&done, "Failed").map(|c| c.0).as_deref(),
        Some("BackoffLimitExceeded")
    );
    assert_eq!(
        done.status.unwrap().failed,
        Some(3),
        "backoffLimit 2 = three attempts"
    );
    assert_eq!(pods_created(&client, "default", "flaky").await, 3);
}

/// The condition types of every MODIFIED event of Job `name` until it has `last`.
async fn condition_history(client: &kube::Client, job: Job, last: &str) -> Vec<Vec<String>> {
    use futures::{StreamExt, TryStreamExt};
    use kube::api::{WatchEvent, WatchParams};
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let name = job.metadata.name.clone().unwrap();
    let created = jobs.create(&PostParams::default(), &job).await.unwrap();
    let rv = created.metadata.resource_version.unwrap();
    let params = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(20);
    let mut stream = jobs.watch(&params, &rv).await.unwrap().boxed();
    let mut history = Vec::new();
    while let Some(ev) = tokio::time::timeout(std::time::Duration::from_secs(20), stream.try_next())
        .await
        .expect("watch event in time")
        .unwrap()
    {
        let WatchEvent::Modified(j) = ev else {
            continue;
        };
        let types: Vec<String> = j
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.status == "True")
            .map(|c| c.type_)
            .collect();
        let done = types.iter().any(|t| t == last);
        history.push(types);
        if done {
            return history;
        }
    }
    panic!("watch ended before {last}: {history:?}");
}

/// Index of the first entry of `history` holding `ty`.
fn first_with(history: &[Vec<String>], ty: &str) -> Option<usize> {
    history.iter().position(|h| h.iter().any(|t| t == ty))
}

#[tokio::test]
async fn watch_sees_success_criteria_met_before_complete() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let history =
        condition_history(&client, shell_job("ok", "echo ok", json!({})), "Complete").await;
    let met = first_with(&history, "SuccessCriteriaMet").expect("SuccessCriteriaMet seen");
    let complete = first_with(&history, "Complete").unwrap();
    assert!(met < complete, "{history:?}");
}

#[tokio::test]
async fn watch_sees_failure_target_before_failed() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let history = condition_history(&client, shell_job("ko", "exit 1", json!({})), "Failed").await;
    let target = first_with(&history, "FailureTarget").expect("FailureTarget seen");
    let failed = first_with(&history, "Failed").unwrap();
    assert!(target < failed, "{history:?}");
}

#[tokio::test]
async fn missing_service_account_is_a_failed_create_until_it_exists() {
    use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
    let (_sim, client) = start().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &from_json(
                json!({"metadata": {"name": "boot", "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}),
            ),
        )
        .await
        .unwrap();
    let jobs: Api<Job> = Api::namespaced(client.clone(), "boot");
    jobs.create(
        &PostParams::default(),
        &shell_job(
            "needs-sa",
            "echo ran",
            json!({"spec": {"template": {"spec": {"serviceAccountName": "installer"}}}}),
        ),
    )
    .await
    .unwrap();
    let message = eventually(10, "FailedCreate event", || async {
        let events = events_for(&client, "boot", "needs-sa").await;
        events
            .into_iter()
            .find(|(r, _)| r == "FailedCreate")
            .map(|(_, m)| m)
    })
    .await;
    assert!(message.starts_with("Error creating: pods "), "{message}");
    assert!(
        message.ends_with(
            "is forbidden: error looking up service account boot/installer: serviceaccount \"installer\" not found"
        ),
        "{message}"
    );
    // Not a pod failure: the Job keeps waiting. Wait for the controller to have handled the refusal
    // and retried (a second refusal: a new event, as each attempt names a new pod, or a repeated
    // one with a higher count), then check that it counted no failure.
    eventually(30, "FailedCreate retried", || async {
        let events: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(client.clone(), "boot");
        let list = events.list(&ListParams::default()).await.ok()?;
        let refusals: i32 = list
            .items
            .iter()
            .filter(|e| {
                e.involved_object.name.as_deref() == Some("needs-sa")
                    && e.reason.as_deref() == Some("FailedCreate")
            })
            .map(|e| e.count.unwrap_or(1))
            .sum();
        (refusals >= 2).then_some(())
    })
    .await;
    let status = jobs
        .get("needs-sa")
        .await
        .unwrap()
        .status
        .unwrap_or_default();
    assert_eq!(status.failed.unwrap_or(0), 0);
    assert!(status.conditions.unwrap_or_default().is_empty());

    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "boot");
    sas.create(
        &PostParams::default(),
        &from_json(json!({"metadata": {"name": "installer"}})),
    )
    .await
    .unwrap();
    let done = eventually(10, "job complete", || async {
        let j = jobs.get("needs-sa").await.ok()?;
        job_condition(&j, "Complete").map(|_| j)
    })
    .await;
    assert_eq!(done.status.unwrap().failed, Some(0));
}

#[tokio::test]
async fn restarted_container_log_shows_only_the_last_attempt() {
    use kube::api::LogParams;
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = from_json(
        json!({"metadata": {"name": "crashy"}, "spec": {"hostNetwork": true, "restartPolicy": "Always",
        "tolerations": [{"operator": "Exists"}],
        "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "echo boom; exit 1"]}]}}),
    );
    pods.create(&PostParams::default(), &pod).await.unwrap();
    eventually(10, "two restarts", || async {
        let cs = pods.get("crashy").await.ok()?.status?.container_statuses?;
        (cs.first()?.restart_count >= 2).then_some(())
    })
    .await;
    let log = pods.logs("crashy", &LogParams::default()).await.unwrap();
    assert_eq!(log, "boom\n");
    let previous = pods
        .logs(
            "crashy",
            &LogParams {
                previous: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(previous, "boom\n");
}
