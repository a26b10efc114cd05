//! Before any CNI: node taints and conditions, scheduling failures, pods without a network.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, LogParams, PostParams};
use serde_json::json;

use crate::common::{allow_host_pods, events_for, eventually, from_json, start};

fn pod(name: &str, spec: serde_json::Value) -> Pod {
    from_json(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}))
}

#[tokio::test]
async fn nodes_are_not_ready_and_tainted_before_the_cni() {
    let (_sim, client) = start().await;
    let nodes: Api<Node> = Api::all(client);
    let list = nodes.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 2);
    for n in &list.items {
        let taints = n
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        assert!(
            taints
                .iter()
                .any(|t| t.key == "node.kubernetes.io/not-ready" && t.effect == "NoSchedule"),
            "{taints:?}"
        );
        let ready = n
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .cloned()
            .unwrap();
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason.as_deref(), Some("KubeletNotReady"));
        assert!(
            ready
                .message
                .unwrap_or_default()
                .ends_with("cni plugin not initialized")
        );
        let cp = n
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key("node-role.kubernetes.io/control-plane"));
        assert_eq!(
            cp,
            taints
                .iter()
                .any(|t| t.key == "node-role.kubernetes.io/control-plane"),
            "control planes carry their taint"
        );
    }
}

#[tokio::test]
async fn untolerated_pod_stays_pending_with_failed_scheduling() {
    let (_sim, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(
        &PostParams::default(),
        &pod(
            "plain",
            json!({"containers": [{"name": "c", "image": "busybox:1.36"}]}),
        ),
    )
    .await
    .unwrap();
    let expected = "0/2 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.";
    let cond = eventually(5, "PodScheduled=False", || async {
        let p = pods.get("plain").await.ok()?;
        p.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")
    })
    .await;
    assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
    assert_eq!(cond.message.as_deref(), Some(expected));
    let events = events_for(&client, "default", "plain").await;
    assert!(
        events.contains(&("FailedScheduling".into(), expected.into())),
        "{events:?}"
    );
    let p = pods.get("plain").await.unwrap();
    assert_eq!(p.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
}

#[tokio::test]
async fn pod_network_pod_is_stuck_in_container_creating() {
    let (_sim, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let spec = json!({"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sh", "-c", "echo hi"]}]});
    pods.create(&PostParams::default(), &pod("netless", spec))
        .await
        .unwrap();
    let waiting = eventually(5, "ContainerCreating", || async {
        let p = pods.get("netless").await.ok()?;
        let cs = p.status?.container_statuses?.into_iter().next()?;
        cs.state?
            .waiting
            .filter(|w| w.reason.as_deref() == Some("ContainerCreating"))
    })
    .await;
    assert!(waiting.message.is_none());
    let events = eventually(5, "FailedCreatePodSandBox", || async {
        let ev = events_for(&client, "default", "netless").await;
        ev.iter()
            .any(|(r, _)| r == "FailedCreatePodSandBox")
            .then_some(ev)
    })
    .await;
    let msg = "network is not ready: container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized";
    assert!(
        events.contains(&("FailedCreatePodSandBox".into(), msg.into())),
        "{events:?}"
    );
    let p = pods.get("netless").await.unwrap();
    let status = p.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert_eq!(
        p.spec.and_then(|s| s.node_name).as_deref(),
        Some("talos-worker-1"),
        "scheduled on the worker"
    );
    assert!(status.pod_ip.is_none(), "no pod IP without a pod network");
}

#[tokio::test]
async fn host_network_pod_runs_with_the_node_ip() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let spec = json!({"hostNetwork": true, "tolerations": [{"operator": "Exists"}],
        "containers": [{"name": "c", "image": "docker.io/library/busybox:1.36", "command": ["sh", "-c", "echo hello from $HOSTNAME; sleep 3600"]}]});
    pods.create(&PostParams::default(), &pod("hostnet", spec))
        .await
        .unwrap();
    let status = eventually(5, "Running and Ready", || async {
        let s = pods.get("hostnet").await.ok()?.status?;
        let ready = s
            .conditions
            .as_ref()?
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        (s.phase.as_deref() == Some("Running") && ready).then_some(s)
    })
    .await;
    assert!(status.pod_ip.is_some());
    assert_eq!(
        status.pod_ip, status.host_ip,
        "hostNetwork: podIP is the node IP"
    );
    assert!(status.start_time.is_some());
    let cs = &status.container_statuses.unwrap()[0];
    assert!(cs.ready && cs.state.as_ref().is_some_and(|s| s.running.is_some()));
    let log = eventually(5, "log", || async {
        pods.logs("hostnet", &LogParams::default())
            .await
            .ok()
            .filter(|l| !l.is_empty())
    })
    .await;
    assert!(log.starts_with("hello from talos-"), "{log}");
}
