//! Whether the cluster has a CNI yet, from its nodes: before Cilium, every node is NotReady with
//! the container runtime's "network plugin not ready / cni plugin not initialized" message. A
//! bootstrap Job on the pod network (or one that dials the Service IP) cannot run then; the
//! resource warns at plan and stops before the Job at apply instead of waiting for its timeout.

use serde_json::Value as Json;

use super::objects;
use super::ownership::{conditions, text};
use super::{FluxError, Kube};

/// Whether a node (as the API returns it) is NotReady because no CNI is up.
pub fn lacks_cni(node: &Json) -> bool {
    conditions(node).iter().any(|c| {
        let message = text(c, "message").to_ascii_lowercase();
        text(c, "type") == "Ready"
            && text(c, "status") != "True"
            && (message.contains("cni") || message.contains("network plugin"))
    })
}

/// True when the cluster has nodes and every one lacks a CNI.
///
/// # Errors
/// The API refused or could not be reached.
pub async fn cni_missing(kube: &Kube) -> Result<bool, FluxError> {
    let nodes = objects::list_nodes(kube).await?;
    Ok(!nodes.is_empty() && nodes.iter().all(lacks_cni))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(status: &str, message: &str) -> Json {
        json!({"status": {"conditions": [{"type": "Ready", "status": status, "message": message}]}})
    }

    #[test]
    fn a_node_lacks_a_cni_only_when_not_ready_for_that_reason() {
        let cni = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized";
        assert!(lacks_cni(&node("False", cni)));
        assert!(!lacks_cni(&node("True", "kubelet is posting ready status")));
        assert!(!lacks_cni(&node(
            "Unknown",
            "Kubelet stopped posting node status."
        )));
        assert!(!lacks_cni(&json!({})));
    }
}
