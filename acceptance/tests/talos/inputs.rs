//! The kubelet's inputs on the real control plane: ConfigMaps and Secrets a pod refers to through
//! `env`, `envFrom` and volumes (how the engine hands a Job its values and chart). Missing ones
//! keep the pod waiting (`CreateContainerConfigError`, `FailedMount`) until they appear; optional
//! references are skipped.

use k8s_openapi::api::core::v1::{ConfigMap, ContainerStateWaiting, Pod, Secret};
use kube::Client;
use kube::api::{Api, LogParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::common::{self, eventually, from_json};

const NS: &str = "inputs";

/// A host-network pod (runs before the CNI) printing `script`'s output.
fn shell_pod(name: &str, script: &str, container: Value, volumes: Value) -> Pod {
    let mut c = json!({"name": "c", "image": "busybox:1.36", "command": ["sh", "-c", script]});
    for (k, v) in container.as_object().unwrap() {
        c[k] = v.clone();
    }
    from_json(json!({
        "metadata": {"name": name},
        "spec": {"hostNetwork": true, "restartPolicy": "Never", "tolerations": [{"operator": "Exists"}],
            "containers": [c], "volumes": volumes},
    }))
}

fn first_waiting(pod: &Pod) -> Option<ContainerStateWaiting> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .state
        .as_ref()?
        .waiting
        .clone()
}

/// The waiting state of the pod's first container once its reason is `reason`.
async fn waiting(pods: &Api<Pod>, name: &str, reason: &str) -> ContainerStateWaiting {
    eventually(60, &format!("{name} waiting with {reason}"), || async {
        first_waiting(&pods.get(name).await.ok()?).filter(|w| w.reason.as_deref() == Some(reason))
    })
    .await
}

async fn succeeded_log(pods: &Api<Pod>, name: &str) -> String {
    let pod = eventually(60, &format!("{name} finished"), || async {
        let pod = pods.get(name).await.ok()?;
        matches!(common::phase(&pod), "Succeeded" | "Failed").then_some(pod)
    })
    .await;
    let log = pods.logs(name, &LogParams::default()).await.unwrap();
    assert_eq!(
        common::phase(&pod),
        "Succeeded",
        "{name}: {log}\n{:?}",
        pod.status.as_ref().map(|s| &s.container_statuses)
    );
    log
}

async fn has_event(client: &Client, pod: &str, reason: &str, message: &str) {
    let want = format!("{reason}: {message}");
    eventually(60, &format!("event {want}"), || async {
        common::events(client, NS, pod)
            .await
            .contains(&want)
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_inputs_keep_a_pod_waiting_until_they_appear_and_optional_ones_are_skipped() {
    let (_cluster, client) = common::shared().await;
    common::privileged_namespace(&client, NS).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let create = |pod: Pod| {
        let pods = pods.clone();
        async move { pods.create(&PostParams::default(), &pod).await.unwrap() }
    };
    create(shell_pod(
        "env-cm",
        "echo $GREETING",
        json!({"env": [{"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "greeting"}}}]}),
        json!([]),
    ))
    .await;
    create(shell_pod(
        "env-sec",
        "echo $S_token",
        json!({"envFrom": [{"secretRef": {"name": "creds"}, "prefix": "S_"}]}),
        json!([]),
    ))
    .await;
    create(shell_pod(
        "optional",
        "echo \"a=$A b=$B\"",
        json!({
            "env": [
                {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "a", "optional": true}}},
                {"name": "B", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "b", "optional": true}}}],
            "envFrom": [{"configMapRef": {"name": "absent", "optional": true}}, {"secretRef": {"name": "absent", "optional": true}}],
            "volumeMounts": [{"name": "v", "mountPath": "/in"}]}),
        json!([{"name": "v", "configMap": {"name": "absent", "optional": true}}]),
    ))
    .await;
    create(shell_pod(
        "mounts",
        "cat /in/values.yaml",
        json!({"volumeMounts": [{"name": "inputs", "mountPath": "/in"}]}),
        json!([{"name": "inputs", "configMap": {"name": "inputs"}}]),
    ))
    .await;
    create(shell_pod(
        "secret-mount",
        "cat /keys/identity",
        json!({"volumeMounts": [{"name": "keys", "mountPath": "/keys"}]}),
        json!([{"name": "keys", "secret": {"secretName": "deploy-key"}}]),
    ))
    .await;

    // env from a missing ConfigMap: CreateContainerConfigError, Pending.
    let w = waiting(&pods, "env-cm", "CreateContainerConfigError").await;
    assert_eq!(w.message.as_deref(), Some("configmap \"cfg\" not found"));
    has_event(
        &client,
        "env-cm",
        "Failed",
        "Error: configmap \"cfg\" not found",
    )
    .await;
    assert_eq!(common::phase(&pods.get("env-cm").await.unwrap()), "Pending");
    // envFrom a missing Secret.
    let w = waiting(&pods, "env-sec", "CreateContainerConfigError").await;
    assert_eq!(w.message.as_deref(), Some("secret \"creds\" not found"));
    has_event(
        &client,
        "env-sec",
        "Failed",
        "Error: secret \"creds\" not found",
    )
    .await;
    // Volumes of a missing ConfigMap / Secret: ContainerCreating with FailedMount.
    has_event(
        &client,
        "mounts",
        "FailedMount",
        "MountVolume.SetUp failed for volume \"inputs\" : configmap \"inputs\" not found",
    )
    .await;
    has_event(
        &client,
        "secret-mount",
        "FailedMount",
        "MountVolume.SetUp failed for volume \"keys\" : secret \"deploy-key\" not found",
    )
    .await;
    let mounts = pods.get("mounts").await.unwrap();
    assert_eq!(common::phase(&mounts), "Pending");
    assert_eq!(
        first_waiting(&mounts).and_then(|w| w.reason).as_deref(),
        Some("ContainerCreating")
    );

    // The objects appear, first without the keys the pods want.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    cms.create(
        &PostParams::default(),
        &from_json(json!({"metadata": {"name": "cfg"}, "data": {"other": "x"}})),
    )
    .await
    .unwrap();
    eventually(60, "missing key message", || async {
        let msg = first_waiting(&pods.get("env-cm").await.ok()?)?.message?;
        (msg == "couldn't find key greeting in ConfigMap inputs/cfg").then_some(())
    })
    .await;
    secrets
        .create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": "creds"}, "stringData": {"token": "s3cr3t"}})),
        )
        .await
        .unwrap();
    cms.patch(
        "cfg",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"greeting": "hello"}})),
    )
    .await
    .unwrap();
    cms.create(
        &PostParams::default(),
        &from_json(json!({"metadata": {"name": "inputs"}, "data": {"values.yaml": "replicas: 3"}})),
    )
    .await
    .unwrap();
    secrets
        .create(
            &PostParams::default(),
            &from_json(
                json!({"metadata": {"name": "deploy-key"}, "stringData": {"identity": "KEY"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(succeeded_log(&pods, "env-cm").await, "hello\n");
    assert_eq!(succeeded_log(&pods, "env-sec").await, "s3cr3t\n");
    assert_eq!(succeeded_log(&pods, "mounts").await, "replicas: 3");
    assert_eq!(succeeded_log(&pods, "secret-mount").await, "KEY");

    // Optional references: the pod runs without them.
    assert_eq!(succeeded_log(&pods, "optional").await, "a= b=\n");

    // A Secret without the key a pod wants names the key and the Secret.
    create(shell_pod(
        "env-key",
        "echo $T",
        json!({"env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "missing"}}}]}),
        json!([]),
    ))
    .await;
    let w = waiting(&pods, "env-key", "CreateContainerConfigError").await;
    assert_eq!(
        w.message.as_deref(),
        Some("couldn't find key missing in Secret inputs/creds")
    );
}
