//! The objects a fresh Talos cluster has before anyone applies anything: system namespaces, the
//! `kubernetes` Service (ClusterIP 10.96.0.1) and its Endpoints, the Node objects (NotReady, with
//! the `not-ready` taint: no CNI yet), and the `default` ServiceAccount per namespace.
//! The cluster model may take the nodes over (readiness, conditions).

use std::net::SocketAddr;

use serde_json::{Value, json};

use crate::config::SimConfig;
use crate::store::{ApiError, GroupResource, Store, WriteOptions};

/// Node names: `talos-cp-1..`, `talos-worker-1..`.
pub fn node_names(config: &SimConfig) -> Vec<(String, bool)> {
    let cps = (1..=config.control_planes.max(1)).map(|i| (format!("talos-cp-{i}"), true));
    let workers = (1..=config.workers).map(|i| (format!("talos-worker-{i}"), false));
    cps.chain(workers).collect()
}

fn node(name: &str, control_plane: bool, ip: &str) -> Value {
    let mut labels = json!({
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
    });
    let mut taints = vec![json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})];
    if control_plane {
        labels["node-role.kubernetes.io/control-plane"] = json!("");
        taints
            .push(json!({"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}));
    }
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints, "podCIDR": "", "providerID": format!("talos://sim/{name}")},
        "status": {
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                "message": "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"}],
            "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Talos (v1.10.0)", "containerRuntimeVersion": "containerd://2.0.5",
                "operatingSystem": "linux", "architecture": "amd64", "kernelVersion": "6.12.0-talos"},
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        }
    })
}

/// Creates the initial objects.
pub fn seed(store: &Store, config: &SimConfig, api_addr: SocketAddr) -> Result<(), ApiError> {
    let opts = WriteOptions::manager("kube-apiserver");
    let ns = GroupResource::core("namespaces");
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        store.create(&ns, "", json!({"metadata": {"name": name}}), &opts)?;
        store.create(
            &GroupResource::core("serviceaccounts"),
            name,
            json!({"metadata": {"name": "default"}}),
            &opts,
        )?;
    }
    store.create(
        &GroupResource::core("services"),
        "default",
        json!({"metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
               "spec": {"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"], "type": "ClusterIP",
                        "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]}}),
        &opts,
    )?;
    store.create(
        &GroupResource::core("endpoints"),
        "default",
        json!({"metadata": {"name": "kubernetes"},
               "subsets": [{"addresses": [{"ip": api_addr.ip().to_string()}],
                            "ports": [{"name": "https", "port": api_addr.port(), "protocol": "TCP"}]}]}),
        &opts,
    )?;
    for (i, (name, cp)) in node_names(config).into_iter().enumerate() {
        let ip = format!("10.5.0.{}", i + 2);
        store.create(
            &GroupResource::core("nodes"),
            "",
            node(&name, cp, &ip),
            &WriteOptions::manager("kubelet"),
        )?;
    }
    Ok(())
}
