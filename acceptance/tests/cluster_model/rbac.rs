//! RBAC for pod identities: programs act as their pod's ServiceAccount, and the emulated tools
//! print the API server's refusal as the real ones do.

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;
use talos_sim::SimConfig;

use crate::common::*;

const HELM: &str = "alpine/helm:3.18.4";

async fn service_account(client: &Client, ns: &str, name: &str) {
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": name}})),
        )
        .await
        .expect("service account");
}

fn job_as(name: &str, sa: &str, command: &[&str]) -> k8s_openapi::api::batch::v1::Job {
    let mut job = bootstrap_job(
        name,
        HELM,
        &command.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        kubeprism_env(),
    );
    let spec = job
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
        .expect("pod spec");
    spec.service_account_name = Some(sa.into());
    job
}

#[tokio::test]
async fn helm_without_permissions_fails_with_the_forbidden_message() {
    let (_sim, client) = start_strict(SimConfig::default()).await;
    service_account(&client, "kube-system", "installer").await;
    let job = job_as(
        "helm-forbidden",
        "installer",
        &[
            "helm",
            "upgrade",
            "--install",
            "demo",
            "demo",
            "--namespace",
            "kube-system",
        ],
    );
    let done = run_job(&client, "kube-system", &job, 20).await;
    assert!(job_condition(&done, "Failed").is_some());
    let log = job_log(&client, "kube-system", "helm-forbidden").await;
    assert!(
        log.contains("Error: query: failed to query with labels: secrets is forbidden: User \"system:serviceaccount:kube-system:installer\" cannot list resource \"secrets\" in API group \"\" in the namespace \"kube-system\""),
        "{log}"
    );
}

#[tokio::test]
async fn a_bound_service_account_installs_and_the_default_one_still_cannot() {
    let (_sim, client) = start_strict(SimConfig::default()).await;
    service_account(&client, "kube-system", "installer").await;
    let binding: ClusterRoleBinding = from_json(json!({"metadata": {"name": "installer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": "kube-system"}]}));
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let cmd = [
        "helm",
        "upgrade",
        "--install",
        "demo",
        "demo",
        "--namespace",
        "kube-system",
    ];
    let done = run_job(
        &client,
        "kube-system",
        &job_as("as-installer", "installer", &cmd),
        20,
    )
    .await;
    assert!(
        job_condition(&done, "Complete").is_some(),
        "{}",
        job_log(&client, "kube-system", "as-installer").await
    );
    let done = run_job(
        &client,
        "kube-system",
        &job_as("as-default", "default", &cmd),
        20,
    )
    .await;
    assert!(job_condition(&done, "Failed").is_some());
    let log = job_log(&client, "kube-system", "as-default").await;
    assert!(
        log.contains(
            "User \"system:serviceaccount:kube-system:default\" cannot list resource \"secrets\""
        ),
        "{log}"
    );
}

#[tokio::test]
async fn kubectl_prints_the_refusal_like_the_real_client() {
    let (_sim, client) = start_strict(SimConfig::default()).await;
    service_account(&client, "kube-system", "reader").await;
    let job = job_as(
        "kubectl-forbidden",
        "reader",
        &["kubectl", "create", "namespace", "x"],
    );
    let done = run_job(&client, "kube-system", &job, 20).await;
    assert!(job_condition(&done, "Failed").is_some());
    let log = job_log(&client, "kube-system", "kubectl-forbidden").await;
    assert!(
        log.contains("Error from server (Forbidden): namespaces is forbidden: User \"system:serviceaccount:kube-system:reader\" cannot create resource \"namespaces\" in API group \"\" at the cluster scope"),
        "{log}"
    );
}

#[tokio::test]
async fn without_rbac_enforcement_pods_act_as_admin() {
    let (_sim, client) = start_strict(SimConfig {
        rbac: false,
        ..SimConfig::default()
    })
    .await;
    let cmd = [
        "helm",
        "upgrade",
        "--install",
        "demo",
        "demo",
        "--namespace",
        "kube-system",
    ];
    let done = run_job(
        &client,
        "kube-system",
        &job_as("no-rbac", "default", &cmd),
        20,
    )
    .await;
    assert!(job_condition(&done, "Complete").is_some());
}
