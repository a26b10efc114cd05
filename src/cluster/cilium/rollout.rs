//! Where a rollout of the agent DaemonSet stands, node by node: the DaemonSet controller replaces
//! the agents one node at a time (the chart's `updateStrategy`), and a node's pod network pauses
//! while its agent restarts. Which nodes run a pod of the current template (the
//! `pod-template-generation` label the controller sets equals the DaemonSet's generation) and
//! which still wait, for the diagnosis of an upgrade that did not roll out.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;

use crate::cluster::{ClusterError, Kube};

/// The agents' rollout by node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ByNode {
    /// Nodes whose agent runs the current template and is ready.
    pub done: Vec<String>,
    /// Nodes whose agent runs the current template and is not ready (yet).
    pub updating: Vec<String>,
    /// Nodes still on an older template.
    pub left: Vec<String>,
}

impl ByNode {
    /// Lines for a diagnosis; empty when nothing is known.
    pub fn lines(&self) -> Vec<String> {
        let list = |nodes: &[String]| match nodes.is_empty() {
            true => "none".to_owned(),
            false => nodes.join(", "),
        };
        if self.done.is_empty() && self.updating.is_empty() && self.left.is_empty() {
            return Vec::new();
        }
        vec![
            format!("updated and ready: {}", list(&self.done)),
            format!("updated, not ready: {}", list(&self.updating)),
            format!("not updated yet: {}", list(&self.left)),
        ]
    }
}

/// Sorts the pods of a DaemonSet at `generation` by node (pure).
pub fn by_node(generation: i64, pods: &[Pod]) -> ByNode {
    let mut nodes: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for p in pods {
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            continue;
        };
        let current = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("pod-template-generation"))
            .and_then(|g| g.parse::<i64>().ok())
            == Some(generation);
        let ready = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let entry = nodes.entry(node).or_insert((false, false));
        entry.0 |= current;
        entry.1 |= current && ready;
    }
    let mut out = ByNode::default();
    for (node, (current, ready)) in nodes {
        match (current, ready) {
            (true, true) => out.done.push(node),
            (true, false) => out.updating.push(node),
            _ => out.left.push(node),
        }
    }
    out
}

/// The rollout of DaemonSet `namespace/name` by node.
///
/// # Errors
/// The DaemonSet or its pods cannot be read.
pub async fn read(clients: &Kube, namespace: &str, name: &str) -> Result<ByNode, ClusterError> {
    let api = |e| ClusterError::from_kube(e, &clients.endpoint);
    let Some(ds) = Api::<DaemonSet>::namespaced(clients.client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(api)?
    else {
        return Ok(ByNode::default());
    };
    let selector = ds
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.as_ref())
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let pods = Api::<Pod>::namespaced(clients.client.clone(), namespace)
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(api)?;
    Ok(by_node(
        ds.metadata.generation.unwrap_or_default(),
        &pods.items,
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(node: &str, generation: i64, ready: bool) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"labels": {"pod-template-generation": generation.to_string()}},
            "spec": {"nodeName": node, "containers": []},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        }))
        .expect("pod")
    }

    #[test]
    fn nodes_are_done_updating_or_left() {
        let pods = [
            pod("cp-1", 2, true),
            pod("worker-1", 2, false),
            pod("worker-2", 1, true),
        ];
        let r = by_node(2, &pods);
        assert_eq!(r.done, ["cp-1"]);
        assert_eq!(r.updating, ["worker-1"]);
        assert_eq!(r.left, ["worker-2"]);
        assert_eq!(
            r.lines(),
            [
                "updated and ready: cp-1",
                "updated, not ready: worker-1",
                "not updated yet: worker-2"
            ]
        );
        assert!(by_node(2, &[]).lines().is_empty());
    }
}
