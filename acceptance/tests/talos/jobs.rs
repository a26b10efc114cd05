//! The real Job controller with the emulated kubelet: backoff limits and the counters that never go
//! down, deadlines (the Job's and the pod's), TTL, the condition order a watch sees, refused pod
//! creates until the ServiceAccount exists, and a restarted container's logs. The engine reads all
//! of these to tell the user what happened to a bootstrap Job.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod, ServiceAccount};
use kube::api::{Api, ListParams, LogParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use super::common::{self, eventually, from_json};

const NS: &str = "jobs";
/// The pod-deadline test's own namespace (both tests run on the shared cluster).
const DEADLINE_NS: &str = "jobs-deadline";

fn shell_job(name: &str, script: &str, spec: serde_json::Value) -> Job {
    let mut v = json!({"metadata": {"name": name},
        "spec": {"backoffLimit": 0, "template": {"spec": {"hostNetwork": true, "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", script]}]}}}});
    for (k, x) in spec.as_object().unwrap() {
        if k == "serviceAccountName" {
            v["spec"]["template"]["spec"][k] = x.clone();
        } else {
            v["spec"][k] = x.clone();
        }
    }
    from_json(v)
}

fn condition(job: &Job, ty: &str) -> Option<(String, String)> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty && c.status == "True")
        .map(|c| {
            (
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

async fn finished(jobs: &Api<Job>, name: &str, secs: u64) -> Job {
    eventually(secs, &format!("job {name} finished"), || async {
        let j = jobs.get(name).await.ok()?;
        (condition(&j, "Complete").is_some() || condition(&j, "Failed").is_some()).then_some(j)
    })
    .await
}

/// The True condition types of every MODIFIED event of the Job until it has `last`.
async fn condition_history(jobs: Api<Job>, job: Job, last: &'static str) -> Vec<Vec<String>> {
    let name = job.metadata.name.clone().unwrap();
    let created = jobs.create(&PostParams::default(), &job).await.unwrap();
    let rv = created.metadata.resource_version.unwrap();
    let params = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(90);
    let mut stream = jobs.watch(&params, &rv).await.unwrap().boxed();
    let mut history = Vec::new();
    while let Some(ev) = tokio::time::timeout(std::time::Duration::from_secs(90), stream.try_next())
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

fn first_with(history: &[Vec<String>], ty: &str) -> Option<usize> {
    history.iter().position(|h| h.iter().any(|t| t == ty))
}

async fn job_events(client: &kube::Client, job: &str, reason: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            e.involved_object.name.as_deref() == Some(job) && e.reason.as_deref() == Some(reason)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_job_controller_counts_deadlines_ttl_and_refused_creates_as_users_see_them() {
    let (_cluster, client) = common::shared().await;
    common::privileged_namespace(&client, NS).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let post = PostParams::default();

    // Start everything at once; each is checked below.
    let ok = tokio::spawn(condition_history(
        jobs.clone(),
        shell_job("ok", "echo ok", json!({})),
        "Complete",
    ));
    let ko = tokio::spawn(condition_history(
        jobs.clone(),
        shell_job("ko", "exit 1", json!({})),
        "Failed",
    ));
    for job in [
        shell_job("flaky", "echo boom; exit 3", json!({"backoffLimit": 2})),
        shell_job(
            "hangs",
            "echo started; sleep 300",
            json!({"activeDeadlineSeconds": 5}),
        ),
        shell_job("short", "echo done", json!({"ttlSecondsAfterFinished": 2})),
        shell_job(
            "needs-sa",
            "echo ran",
            json!({"serviceAccountName": "installer"}),
        ),
    ] {
        jobs.create(&post, &job).await.unwrap();
    }
    let crashy: Pod = from_json(
        json!({"metadata": {"name": "crashy"}, "spec": {"hostNetwork": true,
        "restartPolicy": "Always", "tolerations": [{"operator": "Exists"}],
        "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sh", "-c", "echo boom; exit 1"]}]}}),
    );
    pods.create(&post, &crashy).await.unwrap();

    // A watch sees SuccessCriteriaMet before Complete, FailureTarget before Failed.
    let history = ok.await.unwrap();
    let met = first_with(&history, "SuccessCriteriaMet").expect("SuccessCriteriaMet seen");
    assert!(
        met < first_with(&history, "Complete").unwrap(),
        "{history:?}"
    );
    let history = ko.await.unwrap();
    let target = first_with(&history, "FailureTarget").expect("FailureTarget seen");
    assert!(
        target < first_with(&history, "Failed").unwrap(),
        "{history:?}"
    );

    // A failed pod deleted by hand neither lowers `failed` nor adds an attempt.
    let first = eventually(60, "a failed pod of flaky", || async {
        let list = pods
            .list(&ListParams::default().labels("job-name=flaky"))
            .await
            .ok()?;
        list.items
            .into_iter()
            .find(|p| common::phase(p) == "Failed")
    })
    .await;
    let term = first.status.clone().unwrap().container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!((term.exit_code, term.reason.as_deref()), (3, Some("Error")));
    pods.delete(first.metadata.name.as_deref().unwrap(), &Default::default())
        .await
        .unwrap();
    let done = finished(&jobs, "flaky", 120).await;
    assert_eq!(
        condition(&done, "Failed").map(|c| c.0).as_deref(),
        Some("BackoffLimitExceeded")
    );
    assert_eq!(
        done.status.unwrap().failed,
        Some(3),
        "backoffLimit 2 = three attempts"
    );
    assert_eq!(
        job_events(&client, "flaky", "SuccessfulCreate").await.len(),
        3
    );

    // The Job's deadline ends a hanging program.
    let done = finished(&jobs, "hangs", 60).await;
    assert_eq!(
        condition(&done, "Failed"),
        Some((
            "DeadlineExceeded".to_string(),
            "Job was active longer than specified deadline".to_string()
        ))
    );
    assert_eq!(
        condition(&done, "FailureTarget").map(|c| c.0).as_deref(),
        Some("DeadlineExceeded")
    );
    assert_eq!(done.status.unwrap().active.unwrap_or(0), 0);

    // TTL: the Job and its pods are deleted after it finished.
    eventually(60, "job short and its pods deleted", || async {
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

    // A missing ServiceAccount: pod creates are refused and retried, not counted as failures.
    let message = eventually(60, "FailedCreate event", || async {
        job_events(&client, "needs-sa", "FailedCreate")
            .await
            .into_iter()
            .next()
            .and_then(|e| e.message)
    })
    .await;
    assert!(message.starts_with("Error creating: pods "), "{message}");
    assert!(
        message.ends_with(
            "is forbidden: error looking up service account jobs/installer: serviceaccount \"installer\" not found"
        ),
        "{message}"
    );
    eventually(60, "FailedCreate retried", || async {
        let refusals: i32 = job_events(&client, "needs-sa", "FailedCreate")
            .await
            .iter()
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
    Api::<ServiceAccount>::namespaced(client.clone(), NS)
        .create(
            &post,
            &from_json(json!({"metadata": {"name": "installer"}})),
        )
        .await
        .unwrap();
    let done = finished(&jobs, "needs-sa", 60).await;
    assert!(condition(&done, "Complete").is_some(), "{:?}", done.status);
    assert_eq!(done.status.unwrap().failed.unwrap_or(0), 0);

    // A restarted container: the log is the last attempt's, `--previous` the one before.
    eventually(120, "two restarts", || async {
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

#[tokio::test(flavor = "multi_thread")]
async fn a_pods_active_deadline_fails_it() {
    let (_cluster, client) = common::shared().await;
    common::privileged_namespace(&client, DEADLINE_NS).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), DEADLINE_NS);
    let post = PostParams::default();
    let bounded: Pod = from_json(
        json!({"metadata": {"name": "bounded"}, "spec": {"hostNetwork": true,
        "activeDeadlineSeconds": 3, "restartPolicy": "Never", "tolerations": [{"operator": "Exists"}],
        "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}}),
    );
    pods.create(&post, &bounded).await.unwrap();
    // The pod's own deadline (enforced by the kubelet).
    let pod = common::wait_pod(&client, DEADLINE_NS, "bounded", 60, |p| {
        common::phase(p) == "Failed"
    })
    .await;
    let status = pod.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(
        status.message.as_deref(),
        Some("Pod was active on the node longer than the specified deadline")
    );
}
