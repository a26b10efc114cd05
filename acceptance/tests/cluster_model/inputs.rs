//! Kubelet inputs: ConfigMaps and Secrets a pod refers to through `env`, `envFrom` and volumes.
//! Missing ones keep the pod waiting (`CreateContainerConfigError`, `FailedMount`) until they
//! appear; optional references are skipped.

use k8s_openapi::api::core::v1::{ConfigMap, ContainerStateWaiting, Pod, Secret};
use kube::Client;
use kube::api::{Api, LogParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::common::*;

/// A host-network pod (runs before the CNI) printing `script`'s output.
fn shell_pod(name: &str, script: &str, container: Value, pod: Value) -> Pod {
    let mut v = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"hostNetwork": true, "restartPolicy": "Never", "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sh", "-c", script]}]}});
    talos_sim::programs::values::merge(&mut v["spec"]["containers"][0], &container);
    talos_sim::programs::values::merge(&mut v, &pod);
    from_json(v)
}

/// The waiting state of the pod's first container once its reason is `reason`.
async fn waiting(pods: &Api<Pod>, name: &str, reason: &str) -> ContainerStateWaiting {
    eventually(10, &format!("{name} waiting with {reason}"), || async {
        let cs = pods
            .get(name)
            .await
            .ok()?
            .status?
            .container_statuses?
            .into_iter()
            .next()?;
        cs.state?
            .waiting
            .filter(|w| w.reason.as_deref() == Some(reason))
    })
    .await
}

/// Waits for the pod to succeed and returns its log.
async fn succeeded_log(pods: &Api<Pod>, name: &str) -> String {
    eventually(10, &format!("{name} succeeded"), || async {
        let phase = pods.get(name).await.ok()?.status?.phase?;
        (phase == "Succeeded").then_some(())
    })
    .await;
    pods.logs(name, &LogParams::default()).await.unwrap()
}

async fn has_event(client: &Client, pod: &str, reason: &str, message: &str) {
    eventually(10, &format!("event {reason}: {message}"), || async {
        let events = events_for(client, "default", pod).await;
        events
            .iter()
            .any(|(r, m)| r == reason && m == message)
            .then_some(())
    })
    .await;
}

fn config_map(name: &str, data: Value) -> ConfigMap {
    from_json(json!({"metadata": {"name": name}, "data": data}))
}

#[tokio::test]
async fn missing_config_map_key_ref_is_a_create_container_config_error_until_it_appears() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let env = json!({"env": [{"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "greeting"}}}]});
    pods.create(
        &PostParams::default(),
        &shell_pod("env-cm", "echo $GREETING", env, json!({})),
    )
    .await
    .unwrap();
    let w = waiting(&pods, "env-cm", "CreateContainerConfigError").await;
    assert_eq!(w.message.as_deref(), Some("configmap \"cfg\" not found"));
    has_event(
        &client,
        "env-cm",
        "Failed",
        "Error: configmap \"cfg\" not found",
    )
    .await;
    let phase = pods.get("env-cm").await.unwrap().status.unwrap().phase;
    assert_eq!(phase.as_deref(), Some("Pending"));

    // The ConfigMap appears without the key: the message changes on the next retry.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &config_map("cfg", json!({"other": "x"})),
    )
    .await
    .unwrap();
    eventually(10, "missing key message", || async {
        let cs = pods.get("env-cm").await.ok()?.status?.container_statuses?;
        let msg = cs
            .first()?
            .state
            .as_ref()?
            .waiting
            .as_ref()?
            .message
            .clone()?;
        (msg == "couldn't find key greeting in ConfigMap default/cfg").then_some(())
    })
    .await;

    // The key appears: the container starts with it.
    cms.patch(
        "cfg",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"greeting": "hello"}})),
    )
    .await
    .unwrap();
    assert_eq!(succeeded_log(&pods, "env-cm").await, "hello\n");
}

#[tokio::test]
async fn missing_secret_in_env_from_is_a_create_container_config_error() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let env = json!({"envFrom": [{"secretRef": {"name": "creds"}, "prefix": "S_"}]});
    pods.create(
        &PostParams::default(),
        &shell_pod("env-sec", "echo $S_token", env, json!({})),
    )
    .await
    .unwrap();
    let w = waiting(&pods, "env-sec", "CreateContainerConfigError").await;
    assert_eq!(w.message.as_deref(), Some("secret \"creds\" not found"));
    has_event(
        &client,
        "env-sec",
        "Failed",
        "Error: secret \"creds\" not found",
    )
    .await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    secrets
        .create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": "creds"}, "stringData": {"token": "s3cr3t"}})),
        )
        .await
        .unwrap();
    assert_eq!(succeeded_log(&pods, "env-sec").await, "s3cr3t\n");
}

#[tokio::test]
async fn missing_secret_key_names_the_key_and_the_secret() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    secrets
        .create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": "creds"}, "stringData": {"user": "u"}})),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let env = json!({"env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}}]});
    pods.create(
        &PostParams::default(),
        &shell_pod("env-key", "echo $T", env, json!({})),
    )
    .await
    .unwrap();
    let w = waiting(&pods, "env-key", "CreateContainerConfigError").await;
    assert_eq!(
        w.message.as_deref(),
        Some("couldn't find key token in Secret default/creds")
    );
}

#[tokio::test]
async fn optional_references_are_skipped() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let container = json!({
        "env": [
            {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "a", "optional": true}}},
            {"name": "B", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "b", "optional": true}}}],
        "envFrom": [{"configMapRef": {"name": "absent", "optional": true}}, {"secretRef": {"name": "absent", "optional": true}}],
        "volumeMounts": [{"name": "v", "mountPath": "/in"}]});
    let pod = json!({"spec": {"volumes": [{"name": "v", "configMap": {"name": "absent", "optional": true}}]}});
    pods.create(
        &PostParams::default(),
        &shell_pod("optional", "echo \"a=$A b=$B\"", container, pod),
    )
    .await
    .unwrap();
    assert_eq!(succeeded_log(&pods, "optional").await, "a= b=\n");
}

#[tokio::test]
async fn missing_config_map_volume_stays_container_creating_with_failed_mount() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let container = json!({"volumeMounts": [{"name": "inputs", "mountPath": "/in"}]});
    let pod = json!({"spec": {"volumes": [{"name": "inputs", "configMap": {"name": "inputs"}}]}});
    pods.create(
        &PostParams::default(),
        &shell_pod("mounts", "cat /in/values.yaml", container, pod),
    )
    .await
    .unwrap();
    has_event(
        &client,
        "mounts",
        "FailedMount",
        "MountVolume.SetUp failed for volume \"inputs\" : configmap \"inputs\" not found",
    )
    .await;
    let status = pods.get("mounts").await.unwrap().status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    let state = status.container_statuses.unwrap()[0].state.clone().unwrap();
    assert_eq!(
        state.waiting.and_then(|w| w.reason).as_deref(),
        Some("ContainerCreating")
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &config_map("inputs", json!({"values.yaml": "replicas: 3"})),
    )
    .await
    .unwrap();
    assert_eq!(succeeded_log(&pods, "mounts").await, "replicas: 3");
}

#[tokio::test]
async fn missing_secret_volume_stays_container_creating_with_failed_mount() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let container = json!({"volumeMounts": [{"name": "keys", "mountPath": "/keys"}]});
    let pod =
        json!({"spec": {"volumes": [{"name": "keys", "secret": {"secretName": "deploy-key"}}]}});
    pods.create(
        &PostParams::default(),
        &shell_pod("secret-mount", "cat /keys/identity", container, pod),
    )
    .await
    .unwrap();
    has_event(
        &client,
        "secret-mount",
        "FailedMount",
        "MountVolume.SetUp failed for volume \"keys\" : secret \"deploy-key\" not found",
    )
    .await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    secrets
        .create(
            &PostParams::default(),
            &from_json(
                json!({"metadata": {"name": "deploy-key"}, "stringData": {"identity": "KEY"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(succeeded_log(&pods, "secret-mount").await, "KEY");
}
