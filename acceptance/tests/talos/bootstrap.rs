//! The API endpoint of a pre-CNI bootstrap Job when KubePrism is off (Talos before 1.6, or
//! disabled): the KubePrism override is refused, and the control plane's own address from a
//! host-network pod pinned to a control-plane node works. The Job conditions are the real
//! controller's, as the engine reads them.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, LogParams, PostParams};
use serde_json::{Value, json};
use talos_sim::talos::TalosConfig;

use super::common::{self, eventually, from_json};

const NS: &str = "boot";

fn helm_job(name: &str, env: Value, node_selector: Value) -> Job {
    from_json(
        json!({"metadata": {"name": name}, "spec": {"backoffLimit": 0, "template": {"spec": {
        "hostNetwork": true, "dnsPolicy": "Default", "restartPolicy": "Never",
        "nodeSelector": node_selector, "tolerations": [{"operator": "Exists"}],
        "volumes": [{"name": "tmp", "emptyDir": {}}],
        "containers": [{"name": "main", "image": "alpine/helm:3.18.4",
            "command": ["sh", "-c", "helm list -A --output json"], "env": env,
            "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}]}]}}}}),
    )
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

/// Runs the Job to its Complete or Failed condition: (the Job, its pod's log).
async fn run(client: &kube::Client, job: Job) -> (Job, String) {
    let name = job.metadata.name.clone().unwrap();
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    jobs.create(&PostParams::default(), &job).await.unwrap();
    let done = eventually(120, &format!("job {name} finished"), || async {
        let j = jobs.get(&name).await.ok()?;
        (condition(&j, "Complete").is_some() || condition(&j, "Failed").is_some()).then_some(j)
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod = pods
        .list(&ListParams::default().labels(&format!("job-name={name}")))
        .await
        .unwrap()
        .items
        .remove(0);
    let log = pods
        .logs(pod.metadata.name.as_deref().unwrap(), &LogParams::default())
        .await
        .unwrap_or_default();
    (done, log)
}

#[tokio::test(flavor = "multi_thread")]
async fn without_kubeprism_the_override_is_refused_and_the_control_plane_ip_works() {
    let (_cluster, client) = common::start_with(TalosConfig {
        kubeprism: None,
        ..TalosConfig::default()
    })
    .await;
    common::privileged_namespace(&client, NS).await;
    common::cluster_admin(&client, NS).await;

    let kubeprism = json!([
        {"name": "KUBERNETES_SERVICE_HOST", "value": "localhost"},
        {"name": "KUBERNETES_SERVICE_PORT", "value": "7445"},
        {"name": "HOME", "value": "/tmp"}]);
    let (done, log) = run(&client, helm_job("kubeprism", kubeprism, json!({}))).await;
    assert_eq!(
        condition(&done, "Failed"),
        Some((
            "BackoffLimitExceeded".to_string(),
            "Job has reached the specified backoff limit".to_string()
        ))
    );
    assert!(
        condition(&done, "FailureTarget").is_some(),
        "{:?}",
        done.status
    );
    assert!(
        log.contains("dial tcp 127.0.0.1:7445: connect: connection refused"),
        "{log}"
    );

    // The apiserver's own address, from a host-network pod on a control-plane node.
    let own = json!([
        {"name": "KUBERNETES_SERVICE_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"},
        {"name": "HOME", "value": "/tmp"}]);
    let (done, log) = run(
        &client,
        helm_job(
            "pinned",
            own,
            json!({"node-role.kubernetes.io/control-plane": ""}),
        ),
    )
    .await;
    assert!(
        condition(&done, "Complete").is_some(),
        "{:?}\n{log}",
        done.status
    );
    assert!(
        condition(&done, "SuccessCriteriaMet").is_some(),
        "{:?}",
        done.status
    );
    assert_eq!(
        condition(&done, "Complete").map(|c| c.0).as_deref(),
        Some("CompletionsReached")
    );
    let status = done.status.clone().unwrap();
    assert_eq!(status.succeeded, Some(1));
    assert_eq!(status.failed.unwrap_or(0), 0);
    assert!(status.completion_time.is_some() && status.start_time.is_some());
    assert!(log.contains("[]"), "helm reached the API: {log}");
}
