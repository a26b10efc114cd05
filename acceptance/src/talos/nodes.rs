//! Nodes as Talos registers them: `talos-cp-N` with the control-plane role label and taint,
//! `talos-worker-N`, each with a loopback `InternalIP` (`127.0.0.2`, `127.0.0.3`, ...), the
//! kubelet's endpoint on port 10250 of that address, and the not-ready taint at registration.
//! Each node's Lease in `kube-node-lease` is renewed every 10 s; its `Ready` condition is
//! `False` with the CNI message until a Cilium agent is Ready on it. The real
//! controller-manager does the rest: taints from conditions, `Unknown` when the Lease expires.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The kubelet's port (logs), on the node's address.
pub const KUBELET_PORT: u16 = 10250;
/// The Kubernetes version the nodes report (the control plane's).
pub const KUBELET_VERSION: &str = "v1.37.2";
const NOT_READY: &str = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized";

/// A node's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    ControlPlane,
    Worker,
}

/// One machine of the cluster.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    pub name: String,
    pub role: Role,
    pub ip: String,
}

fn now_micro() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let seconds = crate::util::format_rfc3339(since.as_secs());
    format!(
        "{}.{:06}Z",
        seconds.trim_end_matches('Z'),
        since.subsec_micros()
    )
}

fn now() -> String {
    crate::util::now_rfc3339()
}

fn ready_condition(ready: bool) -> Value {
    if ready {
        json!({"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status", "lastHeartbeatTime": now(), "lastTransitionTime": now()})
    } else {
        json!({"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": NOT_READY, "lastHeartbeatTime": now(), "lastTransitionTime": now()})
    }
}

fn status(node: &NodeInfo, ready: bool) -> Value {
    let pressure = |kind: &str, reason: &str, message: &str| json!({"type": kind, "status": "False", "reason": reason, "message": message, "lastHeartbeatTime": now(), "lastTransitionTime": now()});
    json!({
        "addresses": [{"type": "InternalIP", "address": node.ip}, {"type": "Hostname", "address": node.name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": KUBELET_PORT}},
        "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "50Gi"},
        "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "50Gi"},
        "conditions": [
            pressure("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            pressure("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            pressure("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ready_condition(ready),
        ],
        "nodeInfo": {
            "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "6.12.0-talos",
            "osImage": "Talos (v1.11.0)", "containerRuntimeVersion": "containerd://2.1.0",
            "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "", "operatingSystem": "linux",
            "architecture": "amd64",
        },
    })
}

/// Registers `node` (idempotent: an existing Node is kept, as a restarted kubelet does).
pub async fn register(client: &kube::Client, node: &NodeInfo) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let labels = json!({
        "kubernetes.io/hostname": node.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
    });
    let mut taints = vec![json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})];
    if node.role == Role::ControlPlane {
        // The role label is not the kubelet's to set (NodeRestriction refuses
        // `node-role.kubernetes.io/*` from a node): Talos' machined adds it, see `label_role`.
        taints
            .push(json!({"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}));
    }
    let object: Node = serde_json::from_value(json!({
        "metadata": {"name": node.name, "labels": labels},
        "spec": {"taints": taints},
        "status": status(node, false),
    }))?;
    match nodes.create(&PostParams::default(), &object).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => anyhow::bail!("failed to register node {}: {e}", node.name),
    }
    set_ready(client, node, false).await
}

/// Labels a control-plane node with its role, as Talos' machined does after the kubelet has
/// registered it (with the cluster's admin credentials: a node may not label itself so).
pub async fn label_role(admin: &kube::Client, node: &NodeInfo) -> anyhow::Result<()> {
    if node.role != Role::ControlPlane {
        return Ok(());
    }
    let nodes: Api<Node> = Api::all(admin.clone());
    let patch = json!({"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}});
    nodes
        .patch(&node.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| anyhow::anyhow!("failed to label node {}: {e}", node.name))?;
    Ok(())
}

/// Writes the node's status with `Ready` as given.
pub async fn set_ready(client: &kube::Client, node: &NodeInfo, ready: bool) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let patch = json!({"status": status(node, ready)});
    let mut last = None;
    for attempt in 0..10 {
        match nodes
            .patch_status(
                &node.name,
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100 << attempt.min(4))).await;
    }
    anyhow::bail!(
        "failed to update node {}: {}",
        node.name,
        last.map(|e| e.to_string()).unwrap_or_default()
    )
}

/// Renews the node's Lease every 10 s until `stop` (then the controller-manager will mark the
/// node `Unknown` once the Lease is 40 s old, as for a stopped kubelet).
pub async fn heartbeat(client: kube::Client, node: NodeInfo, stop: CancellationToken) {
    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    loop {
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": node.name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": node.name, "leaseDurationSeconds": 40, "renewTime": now_micro()},
        });
        let params = PatchParams::apply("kubelet").force();
        if let Err(e) = leases
            .patch(&node.name, &params, &Patch::Apply(&lease))
            .await
        {
            tracing::debug!(node = %node.name, error = %e, "lease renewal failed");
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(10)) => {}
        }
    }
}
