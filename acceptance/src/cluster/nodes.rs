//! The node lifecycle controller: a node is `NotReady` with the `node.kubernetes.io/not-ready`
//! taint until its CNI is initialized, i.e. a `cilium` agent pod (label `k8s-app=cilium`) is
//! Ready on it; then the taint is lifted and `Ready=True`. Once initialized, a node stays Ready
//! (the CNI configuration stays on disk, as on a real node).

use serde_json::{Value, json};

use super::obj;
use super::reconcile;
use crate::controller::{Controller, ControllerContext, ControllerFuture};
use crate::store::{ListOptions, Patch, Store};

pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
pub const NETWORK_NOT_READY: &str = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized";

/// See the module docs.
pub struct NodeController;

impl Controller for NodeController {
    fn name(&self) -> &str {
        "node-lifecycle"
    }

    fn run(self: Box<Self>, ctx: ControllerContext) -> ControllerFuture {
        Box::pin(reconcile::run(
            ctx,
            vec![obj::pods(), obj::nodes()],
            reconcile_nodes,
        ))
    }
}

fn reconcile_nodes(store: &Store) {
    let Ok(nodes) = store.list(&obj::nodes(), None, &ListOptions::default()) else {
        return;
    };
    let agents = store
        .list(
            &obj::pods(),
            None,
            &ListOptions::default().labels("k8s-app=cilium"),
        )
        .map(|l| l.items)
        .unwrap_or_default();
    for (i, node) in nodes.items.iter().enumerate() {
        let name = obj::name(node);
        let cni = obj::condition_true(node, "Ready")
            || agents
                .iter()
                .any(|p| obj::s(p, "/spec/nodeName") == name && obj::pod_ready(p));
        if let Err(e) = sync_node(store, node, i, cni) {
            tracing::debug!(node = name, %e, "failed to update node");
        }
    }
}

fn sync_node(
    store: &Store,
    node: &Value,
    index: usize,
    cni: bool,
) -> Result<(), crate::store::ApiError> {
    let name = obj::name(node);
    let opts = obj::manager("kubelet");
    let taints: Vec<Value> = obj::arr(node, "/spec/taints").to_vec();
    // As on a real node: the kubelet registers with its role taints, the node lifecycle
    // controller adds `not-ready` after them.
    let mut want: Vec<Value> = taints
        .iter()
        .filter(|t| obj::s(t, "/key") != NOT_READY_TAINT)
        .cloned()
        .collect();
    want.extend(
        taints
            .iter()
            .filter(|t| obj::s(t, "/key") == NOT_READY_TAINT)
            .cloned(),
    );
    if cni {
        want.retain(|t| obj::s(t, "/key") != NOT_READY_TAINT);
    }
    let mut spec = json!({});
    if want != taints {
        spec["taints"] = json!(want);
    }
    if obj::s(node, "/spec/podCIDR").is_empty() {
        let cidr = format!("10.244.{index}.0/24");
        spec["podCIDR"] = json!(cidr);
        spec["podCIDRs"] = json!([cidr]);
    }
    if spec.as_object().is_some_and(|m| !m.is_empty()) {
        store.patch(
            &obj::nodes(),
            "",
            name,
            Patch::Merge(json!({"spec": spec})),
            &opts,
        )?;
    }
    let mut conds = obj::arr(node, "/status/conditions").to_vec();
    for (ty, reason, message) in [
        (
            "MemoryPressure",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        (
            "DiskPressure",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
        ),
        (
            "PIDPressure",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
    ] {
        obj::set_condition(&mut conds, ty, "False", reason, message);
    }
    if cni {
        obj::set_condition(
            &mut conds,
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status",
        );
    } else {
        obj::set_condition(
            &mut conds,
            "Ready",
            "False",
            "KubeletNotReady",
            NETWORK_NOT_READY,
        );
    }
    // Heartbeat times would make every pass a write: keep them as they are.
    for c in conds.iter_mut() {
        if let Some(m) = c.as_object_mut() {
            m.remove("lastProbeTime");
        }
    }
    if conds.as_slice() != obj::arr(node, "/status/conditions") {
        store.patch_status(
            &obj::nodes(),
            "",
            name,
            Patch::Merge(json!({"status": {"conditions": conds}})),
            &opts,
        )?;
    }
    Ok(())
}
