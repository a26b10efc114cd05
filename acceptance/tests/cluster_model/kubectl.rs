//! The kubectl program in a bootstrap Job: the seeds' failure signature, and a working script.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::common::*;

const IMAGE: &str = "ghcr.io/controlplaneio-fluxcd/flux-operator-bootstrap:v0.8.0";
const MANIFEST: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  namespace: demo\ndata:\n  k: v\n";

async fn job_with_inputs(
    client: &kube::Client,
    name: &str,
    command: &[&str],
    env: serde_json::Value,
) -> (bool, String) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = from_json(
        json!({"metadata": {"name": format!("{name}-inputs")}, "data": {"manifests.yaml": MANIFEST}}),
    );
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let command: Vec<String> = command.iter().map(|s| s.to_string()).collect();
    let mut job = bootstrap_job(name, IMAGE, &command, env);
    let spec = job.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    spec.volumes = Some(vec![from_json(
        json!({"name": "inputs", "configMap": {"name": format!("{name}-inputs")}}),
    )]);
    spec.containers[0].volume_mounts = Some(vec![from_json(
        json!({"name": "inputs", "mountPath": "/inputs", "readOnly": true}),
    )]);
    let done = run_job(client, "default", &job, 20).await;
    (
        job_condition(&done, "Complete").is_some(),
        job_log(client, "default", name).await,
    )
}

#[tokio::test]
async fn kubectl_without_the_override_fails_with_the_seed_signature() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let (ok, log) = job_with_inputs(
        &client,
        "apply",
        &["kubectl", "apply", "-f", "/inputs/manifests.yaml"],
        json!([]),
    )
    .await;
    assert!(!ok);
    assert!(
        log.contains("error validating data: failed to download openapi: Get \"https://10.96.0.1:443/openapi/v2?timeout=32s\": dial tcp 10.96.0.1:443: i/o timeout"),
        "{log}"
    );
}

#[tokio::test]
async fn shell_script_applies_manifests_over_kubeprism() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let script = "set -e\necho applying\nkubectl apply -f /inputs/manifests.yaml\nkubectl get configmap demo -n demo -o name && echo done";
    let (ok, log) =
        job_with_inputs(&client, "script", &["sh", "-c", script], kubeprism_env()).await;
    assert!(ok, "{log}");
    assert!(
        log.contains("namespace/demo created\nconfigmap/demo created\nconfigmap/demo\ndone"),
        "{log}"
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "demo");
    assert_eq!(cms.get("demo").await.unwrap().data.unwrap()["k"], "v");
}
