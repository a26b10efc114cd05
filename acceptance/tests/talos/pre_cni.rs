//! Before any CNI, on the real control plane: node taints and conditions, the real scheduler's
//! refusal of a pod that tolerates neither, a pod-network pod without an IP, and a host-network pod
//! running with its node's IP (why every bootstrap Job is host-network).

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, LogParams, PostParams};
use serde_json::json;

use super::common::{self, eventually, from_json};

const NS: &str = "precni";

fn pod(name: &str, spec: serde_json::Value) -> Pod {
    from_json(json!({"metadata": {"name": name}, "spec": spec}))
}

#[tokio::test(flavor = "multi_thread")]
async fn before_the_cni_nodes_are_tainted_and_only_host_network_pods_run() {
    let (_cluster, client) = common::shared().await;
    common::privileged_namespace(&client, NS).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let post = PostParams::default();
    pods.create(
        &post,
        &pod(
            "plain",
            json!({"containers": [{"name": "c", "image": "busybox:1.36"}]}),
        ),
    )
    .await
    .unwrap();
    pods.create(
        &post,
        &pod(
            "netless",
            json!({"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sh", "-c", "echo hi"]}]}),
        ),
    )
    .await
    .unwrap();
    pods.create(
        &post,
        &pod(
            "hostnet",
            json!({"hostNetwork": true, "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "c", "image": "docker.io/library/busybox:1.36",
                    "command": ["sh", "-c", "echo hello from $HOSTNAME; sleep 3600"]}]}),
        ),
    )
    .await
    .unwrap();

    // Every node NotReady (the kubelet's reason) with the not-ready taint; control planes carry
    // their own taint as well.
    let nodes: Api<Node> = Api::all(client.clone());
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
                .ends_with("cni plugin not initialized"),
            "{:?}",
            n.metadata.name
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
            "control planes carry their taint: {taints:?}"
        );
    }

    // A pod tolerating neither taint: the real scheduler's message.
    let cond = eventually(60, "PodScheduled=False", || async {
        let p = pods.get("plain").await.ok()?;
        p.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")
    })
    .await;
    // The real scheduler (v1.37) names no taint when the nodes' taints differ (the old simulator
    // listed each node's).
    let expected = "0/2 nodes are available: 2 node(s) had untolerated taint(s). preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.";
    assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
    assert_eq!(cond.message.as_deref(), Some(expected));
    let events = eventually(30, "FailedScheduling", || async {
        let events = common::events(&client, NS, "plain").await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    assert!(
        events.contains(&format!("FailedScheduling: {expected}")),
        "{events:?}"
    );
    assert_eq!(common::phase(&pods.get("plain").await.unwrap()), "Pending");

    // A pod-network pod tolerating not-ready lands on the worker and waits for the CNI there.
    let waiting = eventually(60, "ContainerCreating", || async {
        let p = pods.get("netless").await.ok()?;
        let cs = p.status?.container_statuses?.into_iter().next()?;
        cs.state?
            .waiting
            .filter(|w| w.reason.as_deref() == Some("ContainerCreating"))
    })
    .await;
    assert!(waiting.message.is_none(), "{waiting:?}");
    let events = eventually(60, "FailedCreatePodSandBox", || async {
        let ev = common::events(&client, NS, "netless").await;
        ev.iter()
            .any(|e| e.starts_with("FailedCreatePodSandBox: "))
            .then_some(ev)
    })
    .await;
    assert!(
        events.iter().any(|e| e.ends_with("network is not ready: container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized")),
        "{events:?}"
    );
    let p = pods.get("netless").await.unwrap();
    assert_eq!(
        p.spec.and_then(|s| s.node_name).as_deref(),
        Some("talos-worker-1")
    );
    let status = p.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert!(status.pod_ip.is_none(), "no pod IP without a pod network");

    // A host-network pod runs, Ready, with its node's IP.
    let status = eventually(60, "hostnet Running and Ready", || async {
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
    let log = eventually(30, "log", || async {
        pods.logs("hostnet", &LogParams::default())
            .await
            .ok()
            .filter(|l| !l.is_empty())
    })
    .await;
    assert!(log.starts_with("hello from talos-"), "{log}");
}
