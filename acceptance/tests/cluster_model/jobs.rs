//! Job controller behaviour with the kubelet's programs: deadlines, TTL, kills, pull failures.

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
