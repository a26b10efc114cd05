//! The pre-CNI rule: the Cilium bootstrap Job works over KubePrism (hostNetwork + env
//! override), times out on the Service IP without it, and works on the Service IP with kube-proxy.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use serde_json::json;
use talos_sim::SimConfig;
use talos_sim::programs::release::Release;

use crate::common::*;

const CILIUM_CLI: &str = "quay.io/cilium/cilium-cli:v0.18.7";

#[tokio::test]
async fn cilium_bootstrap_job_over_kubeprism_completes() {
    let (_sim, client) = start().await;
    let job = bootstrap_job(
        "cilium-install",
        CILIUM_CLI,
        &cilium_install(&talos_cilium_sets()),
        kubeprism_env(),
    );
    let done = run_job(&client, "kube-system", &job, 20).await;
    assert!(job_condition(&done, "SuccessCriteriaMet").is_some());
    assert_eq!(
        job_condition(&done, "Complete").map(|c| c.0).as_deref(),
        Some("CompletionsReached")
    );
    let status = done.status.clone().unwrap();
    assert_eq!((status.succeeded, status.failed), (Some(1), Some(0)));
    assert!(status.completion_time.is_some() && status.start_time.is_some());
    let log = job_log(&client, "kube-system", "cilium-install").await;
    assert!(log.contains("Using Cilium version 1.18.4"), "{log}");

    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    let record = secrets.get("sh.helm.release.v1.cilium.v1").await.unwrap();
    assert_eq!(record.type_.as_deref(), Some("helm.sh/release.v1"));
    let labels = record.metadata.labels.clone().unwrap();
    assert_eq!(
        (
            labels["owner"].as_str(),
            labels["status"].as_str(),
            labels["version"].as_str()
        ),
        ("helm", "deployed", "1")
    );
    let rel = Release::from_secret(&serde_json::to_value(&record).unwrap()).expect("a Helm record");
    assert_eq!(
        (
            rel.chart.as_str(),
            rel.chart_version.as_str(),
            rel.status.as_str()
        ),
        ("cilium", "1.18.4", "deployed")
    );
    assert_eq!(rel.config["k8sServiceHost"], json!("localhost"));

    wait_nodes_ready(&client).await;
    let ds: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    let cilium = eventually(10, "DaemonSet ready", || async {
        let d = ds.get("cilium").await.ok()?;
        let s = d.status.clone()?;
        (s.desired_number_scheduled == 2
            && s.number_ready == 2
            && s.updated_number_scheduled == Some(2)
            && s.observed_generation == d.metadata.generation)
            .then_some(d)
    })
    .await;
    let image = cilium.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone();
    assert_eq!(image.as_deref(), Some("quay.io/cilium/cilium:v1.18.4"));
}

#[tokio::test]
async fn bootstrap_without_env_override_times_out_on_the_service_ip() {
    let (_sim, client) = start().await;
    let job = bootstrap_job(
        "cilium-install",
        CILIUM_CLI,
        &cilium_install(&talos_cilium_sets()),
        json!([]),
    );
    let done = run_job(&client, "kube-system", &job, 20).await;
    let (reason, message) = job_condition(&done, "Failed").expect("job failed");
    assert_eq!(reason, "BackoffLimitExceeded");
    assert_eq!(message, "Job has reached the specified backoff limit");
    assert!(job_condition(&done, "FailureTarget").is_some());
    let log = job_log(&client, "kube-system", "cilium-install").await;
    assert!(
        log.contains("Get \"https://10.96.0.1:443/version\": dial tcp 10.96.0.1:443: i/o timeout"),
        "{log}"
    );
}

#[tokio::test]
async fn kubeprism_disabled_makes_the_override_fail() {
    let (_sim, client) = start_with(SimConfig {
        kubeprism_port: None,
        ..SimConfig::default()
    })
    .await;
    let job = bootstrap_job(
        "cilium-install",
        CILIUM_CLI,
        &cilium_install(&talos_cilium_sets()),
        kubeprism_env(),
    );
    let done = run_job(&client, "kube-system", &job, 20).await;
    assert_eq!(
        job_condition(&done, "Failed").map(|c| c.0).as_deref(),
        Some("BackoffLimitExceeded")
    );
    let log = job_log(&client, "kube-system", "cilium-install").await;
    assert!(
        log.contains("dial tcp 127.0.0.1:7445: connect: connection refused"),
        "{log}"
    );
}

#[tokio::test]
async fn kube_proxy_makes_the_service_ip_work_before_the_cni() {
    let (_sim, client) = start_with(SimConfig {
        kube_proxy: true,
        ..SimConfig::default()
    })
    .await;
    let job = bootstrap_job(
        "cilium-install",
        CILIUM_CLI,
        &cilium_install(&talos_cilium_sets()),
        json!([]),
    );
    let done = run_job(&client, "kube-system", &job, 20).await;
    assert!(
        job_condition(&done, "Complete").is_some(),
        "{:?}",
        done.status
    );
}

#[tokio::test]
async fn control_plane_ip_works_from_a_pinned_host_network_pod() {
    let (_sim, client) = start().await;
    let mut job = bootstrap_job(
        "cilium-install",
        CILIUM_CLI,
        &cilium_install(&talos_cilium_sets()),
        json!([
        {"name": "KUBERNETES_SERVICE_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"}]),
    );
    let spec = job.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    spec.node_selector = Some(
        [(
            "node-role.kubernetes.io/control-plane".to_string(),
            String::new(),
        )]
        .into(),
    );
    let done = run_job(&client, "kube-system", &job, 20).await;
    assert!(
        job_condition(&done, "Complete").is_some(),
        "{:?}",
        done.status
    );
}
