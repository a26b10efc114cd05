//! Rollout predicates and the readiness watch against inline fixtures.

use serde_json::json;

use super::*;

#[test]
fn a_daemonset_is_rolled_out_only_at_its_current_generation() {
    let ds = |observed: i64, ready: i32| -> DaemonSet {
        serde_json::from_value(json!({
            "metadata": {"name": "cilium", "generation": 2},
            "status": {"desiredNumberScheduled": 3, "numberReady": ready, "updatedNumberScheduled": 3,
                       "numberAvailable": ready, "currentNumberScheduled": 3, "numberMisscheduled": 0,
                       "observedGeneration": observed},
        }))
        .expect("daemonset")
    };
    assert!(daemonset_rollout(&ds(2, 3)).done());
    assert!(!daemonset_rollout(&ds(1, 3)).done(), "old generation");
    assert!(!daemonset_rollout(&ds(2, 2)).done(), "one agent not ready");
    assert!(!Rollout::default().done(), "missing");
}

#[test]
fn a_deployment_is_rolled_out_when_every_replica_is_available_at_its_generation() {
    let d = |observed: i64, ready: i32, available: i32, updated: i32| -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "hubble-relay", "generation": 4},
            "spec": {"replicas": 2, "selector": {}, "template": {}},
            "status": {"observedGeneration": observed, "replicas": 2, "readyReplicas": ready,
                       "availableReplicas": available, "updatedReplicas": updated},
        }))
        .expect("deployment")
    };
    assert!(deployment_rollout(&d(4, 2, 2, 2)).done());
    assert!(!deployment_rollout(&d(3, 2, 2, 2)).done(), "old generation");
    assert!(
        !deployment_rollout(&d(4, 2, 1, 2)).done(),
        "one not available"
    );
    assert!(
        !deployment_rollout(&d(4, 2, 2, 1)).done(),
        "one not updated"
    );
}

fn empty_state() -> State {
    State::new(true)
}

fn pod(name: &str, owner_kind: &str, owner: &str, generation: Option<&str>) -> Pod {
    let mut labels = json!({});
    if let Some(g) = generation {
        labels["pod-template-generation"] = json!(g);
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels, "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": owner_kind, "name": owner, "uid": "u", "controller": true}
        ]},
    }))
    .expect("pod")
}

#[test]
fn only_pods_of_the_current_revision_can_fail_the_wait_early() {
    let mut state = empty_state();
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "cilium", "generation": 3},
        "status": {"desiredNumberScheduled": 2, "numberReady": 0, "updatedNumberScheduled": 0,
                   "currentNumberScheduled": 2, "numberMisscheduled": 0, "observedGeneration": 3},
    }))
    .expect("daemonset");
    state.daemonsets.insert("cilium".into(), ds);
    assert!(
        !state.is_current(&pod("cilium-old", "DaemonSet", "cilium", Some("2"))),
        "the broken revision a fix replaces"
    );
    assert!(state.is_current(&pod("cilium-new", "DaemonSet", "cilium", Some("3"))));
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "cilium-operator", "generation": 2},
        "spec": {"replicas": 1, "selector": {}, "template": {}},
        "status": {"observedGeneration": 2, "updatedReplicas": 0},
    }))
    .expect("deployment");
    state.deployments.insert("cilium-operator".into(), d);
    state.preexisting = Some(BTreeSet::from(["op-old".to_owned()]));
    let old = pod("op-old", "ReplicaSet", "cilium-operator-5d8f", None);
    assert!(
        !state.is_current(&old),
        "older than the wait, rollout not done"
    );
    assert!(state.is_current(&pod("op-new", "ReplicaSet", "cilium-operator-7c9a", None)));
    if let Some(d) = state.deployments.get_mut("cilium-operator") {
        d.status.as_mut().expect("status").updated_replicas = Some(1);
    }
    assert!(
        state.is_current(&old),
        "every replica updated: what is left is current"
    );
}

#[test]
fn a_scheduling_failure_of_a_pod_scheduled_since_is_outdated() {
    let mut state = empty_state();
    let mut relay = pod("hubble-relay-x", "ReplicaSet", "hubble-relay-5d8f", None);
    state.pods.insert("hubble-relay-x".into(), relay.clone());
    let event = |reason: &str| -> k8s_openapi::api::core::v1::Event {
        serde_json::from_value(json!({
            "metadata": {"name": "e"}, "reason": reason, "type": "Warning",
            "involvedObject": {"kind": "Pod", "name": "hubble-relay-x"},
        }))
        .expect("event")
    };
    assert!(!state.outdated(&event("FailedScheduling")), "still pending");
    relay.spec =
        Some(serde_json::from_value(json!({"nodeName": "w", "containers": []})).expect("spec"));
    state.pods.insert("hubble-relay-x".into(), relay);
    assert!(
        state.outdated(&event("FailedScheduling")),
        "scheduled since"
    );
    assert!(
        !state.outdated(&event("Failed")),
        "an image pull failure stays"
    );
}

#[test]
fn a_tainted_node_is_not_ready_even_if_its_condition_says_so() {
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "n1"},
        "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }))
    .expect("node");
    let why = node_not_ready(&node).expect("not ready");
    assert!(
        why.contains("n1: Ready, but still tainted node.kubernetes.io/not-ready:NoSchedule"),
        "{why}"
    );
}

#[test]
fn a_ready_node_whose_not_ready_no_execute_taint_awaits_the_health_pass_takes_pods() {
    // The controller-manager lifts the NoSchedule taint on the node's update and the NoExecute
    // one at its next health pass (every 5 s): pods schedule in between, so the wait is over.
    let node = |taints: serde_json::Value, ready: &str| -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n1"},
            "spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": ready, "message": "cni plugin not initialized"}]},
        }))
        .expect("node")
    };
    let no_execute = json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]);
    assert_eq!(node_not_ready(&node(no_execute.clone(), "True")), None);
    assert_eq!(
        node_not_ready(&node(no_execute, "False")).as_deref(),
        Some("n1: cni plugin not initialized"),
        "a node that is not Ready stays not ready whatever its taints"
    );
    assert_eq!(node_not_ready(&node(json!([]), "True")), None);
}
