//! The scheduler: binds Pending pods without `spec.nodeName` to a feasible node (fewest pods
//! first). Filters, in the real scheduler's order: `spec.unschedulable`, taints (NoSchedule /
//! NoExecute) against tolerations, `nodeSelector`, required node affinity, required pod
//! anti-affinity (no pod its `labelSelector` matches, in its namespaces, on a node with the same
//! `topologyKey` label value: Cilium's operator replicas, one per node). An unschedulable pod
//! gets `PodScheduled=False` (reason `Unschedulable`) and a `FailedScheduling` event worded like
//! kube-scheduler's.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::events::{self, EventType};
use super::obj;
use super::reconcile;
use crate::controller::{Controller, ControllerContext, ControllerFuture};
use crate::store::{ApiError, ListOptions, Patch, Store};

/// See the module docs.
pub struct Scheduler;

impl Controller for Scheduler {
    fn name(&self) -> &str {
        "kube-scheduler"
    }

    fn run(self: Box<Self>, ctx: ControllerContext) -> ControllerFuture {
        Box::pin(reconcile::run(
            ctx,
            vec![obj::pods(), obj::nodes()],
            schedule_all,
        ))
    }
}

fn schedule_all(store: &Store) {
    let Ok(nodes) = store.list(&obj::nodes(), None, &ListOptions::default()) else {
        return;
    };
    let Ok(pods) = store.list(&obj::pods(), None, &ListOptions::default()) else {
        return;
    };
    let mut load: BTreeMap<String, usize> = BTreeMap::new();
    for p in &pods.items {
        *load
            .entry(obj::s(p, "/spec/nodeName").to_string())
            .or_default() += 1;
    }
    // Pods on nodes, for anti-affinity: terminating ones still count, as in kube-scheduler.
    let mut assigned: Vec<Value> = pods
        .items
        .iter()
        .filter(|p| !obj::s(p, "/spec/nodeName").is_empty() && !obj::pod_finished(p))
        .cloned()
        .collect();
    for pod in pods.items.iter().filter(|p| wants_scheduling(p)) {
        let result = match place_among(pod, &nodes.items, &load, &assigned) {
            Ok(node) => bind(store, pod, &node).map(|()| {
                *load.entry(node.clone()).or_default() += 1;
                let mut bound = pod.clone();
                bound["spec"]["nodeName"] = json!(node);
                assigned.push(bound);
            }),
            Err(message) => mark_unschedulable(store, pod, &message),
        };
        if let Err(e) = result {
            tracing::debug!(pod = obj::name(pod), %e, "scheduling failed");
        }
    }
}

fn wants_scheduling(pod: &Value) -> bool {
    obj::s(pod, "/spec/nodeName").is_empty()
        && !obj::is_deleting(pod)
        && matches!(obj::s(pod, "/spec/schedulerName"), "" | "default-scheduler")
        && obj::pod_phase(pod) == "Pending"
}

/// The node to bind to, or the `FailedScheduling` message (no other pod on any node).
pub fn place(
    pod: &Value,
    nodes: &[Value],
    load: &BTreeMap<String, usize>,
) -> Result<String, String> {
    place_among(pod, nodes, load, &[])
}

/// [`place`] with the pods already on nodes (`spec.nodeName` set), for pod anti-affinity.
pub fn place_among(
    pod: &Value,
    nodes: &[Value],
    load: &BTreeMap<String, usize>,
    assigned: &[Value],
) -> Result<String, String> {
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut feasible = Vec::new();
    for node in nodes {
        let reason = filter(pod, node).or_else(|| {
            (!anti_affinity_allows(pod, node, nodes, assigned))
                .then(|| "node(s) didn't match pod anti-affinity rules".to_owned())
        });
        match reason {
            None => feasible.push(obj::name(node).to_string()),
            Some(reason) => *reasons.entry(reason).or_default() += 1,
        }
    }
    if let Some(best) = feasible
        .iter()
        .min_by_key(|n| (load.get(*n).copied().unwrap_or(0), (*n).clone()))
    {
        return Ok(best.clone());
    }
    let n = nodes.len();
    let mut parts: Vec<String> = reasons.iter().map(|(r, c)| format!("{c} {r}")).collect();
    parts.sort();
    Err(format!(
        "0/{n} nodes are available: {}. preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling.",
        parts.join(", ")
    ))
}

/// The first failing filter for `node`, as the scheduler words it.
fn filter(pod: &Value, node: &Value) -> Option<String> {
    if node.pointer("/spec/unschedulable") == Some(&json!(true)) {
        return Some("node(s) were unschedulable".into());
    }
    let tolerations = obj::arr(pod, "/spec/tolerations");
    for taint in obj::arr(node, "/spec/taints") {
        let effect = obj::s(taint, "/effect");
        if matches!(effect, "NoSchedule" | "NoExecute")
            && !tolerations.iter().any(|t| tolerates(t, taint))
        {
            return Some(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                obj::s(taint, "/key"),
                obj::s(taint, "/value")
            ));
        }
    }
    if !node_selector_matches(pod, node) || !node_affinity_matches(pod, node) {
        return Some("node(s) didn't match Pod's node affinity/selector".into());
    }
    None
}

/// Whether toleration `t` tolerates `taint` (an empty key with `Exists` tolerates everything).
pub fn tolerates(t: &Value, taint: &Value) -> bool {
    let key = obj::s(t, "/key");
    let exists = obj::s(t, "/operator") == "Exists";
    let effect_ok =
        matches!(obj::s(t, "/effect"), "") || obj::s(t, "/effect") == obj::s(taint, "/effect");
    if key.is_empty() {
        return exists && effect_ok;
    }
    key == obj::s(taint, "/key")
        && effect_ok
        && (exists || obj::s(t, "/value") == obj::s(taint, "/value"))
}

/// Whether all of the node's `NoSchedule`/`NoExecute` taints are tolerated.
pub fn tolerates_node(tolerations: &[Value], node: &Value) -> bool {
    obj::arr(node, "/spec/taints").iter().all(|taint| {
        !matches!(obj::s(taint, "/effect"), "NoSchedule" | "NoExecute")
            || tolerations.iter().any(|t| tolerates(t, taint))
    })
}

/// Whether `pod`'s required anti-affinity terms allow `node`: for each term, no pod of
/// `assigned` in the term's namespaces (default: the pod's) whose labels its `labelSelector`
/// matches runs on a node sharing `node`'s value of `topologyKey` (a node without that label is
/// never in conflict).
fn anti_affinity_allows(pod: &Value, node: &Value, nodes: &[Value], assigned: &[Value]) -> bool {
    let terms = obj::arr(
        pod,
        "/spec/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution",
    );
    let label = |n: &Value, key: &str| {
        n.pointer("/metadata/labels")
            .and_then(|l| l.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    terms.iter().all(|term| {
        let key = obj::s(term, "/topologyKey");
        let Some(domain) = label(node, key) else {
            return true;
        };
        let namespaces: Vec<&str> = match obj::arr(term, "/namespaces") {
            [] => vec![obj::namespace(pod)],
            list => list.iter().filter_map(Value::as_str).collect(),
        };
        !assigned.iter().any(|other| {
            namespaces.contains(&obj::namespace(other))
                && selector_matches(term.get("labelSelector").unwrap_or(&Value::Null), other)
                && nodes.iter().any(|n| {
                    obj::name(n) == obj::s(other, "/spec/nodeName")
                        && label(n, key).as_deref() == Some(domain.as_str())
                })
        })
    })
}

/// A `LabelSelector` (`matchLabels`, `matchExpressions`) against an object's labels; a null
/// selector matches nothing.
fn selector_matches(selector: &Value, o: &Value) -> bool {
    if selector.is_null() {
        return false;
    }
    let label = |k: &str| {
        o.pointer("/metadata/labels")
            .and_then(|l| l.get(k))
            .and_then(Value::as_str)
    };
    let labels_ok = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    labels_ok
        && obj::arr(selector, "/matchExpressions")
            .iter()
            .all(|e| expr_matches(e, label(obj::s(e, "/key"))))
}

pub(crate) fn node_selector_matches(pod: &Value, node: &Value) -> bool {
    let labels = node.pointer("/metadata/labels");
    pod.pointer("/spec/nodeSelector")
        .and_then(Value::as_object)
        .is_none_or(|sel| {
            sel.iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        })
}

pub(crate) fn node_affinity_matches(pod: &Value, node: &Value) -> bool {
    let terms = obj::arr(
        pod,
        "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
    );
    terms.is_empty() || terms.iter().any(|term| term_matches(term, node))
}

fn term_matches(term: &Value, node: &Value) -> bool {
    let label = |k: &str| {
        node.pointer("/metadata/labels")
            .and_then(|l| l.get(k))
            .and_then(Value::as_str)
    };
    obj::arr(term, "/matchExpressions")
        .iter()
        .all(|e| expr_matches(e, label(obj::s(e, "/key"))))
        && obj::arr(term, "/matchFields").iter().all(|e| {
            expr_matches(
                e,
                (obj::s(e, "/key") == "metadata.name").then(|| obj::name(node)),
            )
        })
}

fn expr_matches(e: &Value, actual: Option<&str>) -> bool {
    let values: Vec<&str> = obj::arr(e, "/values")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let number = |s: Option<&str>| s.and_then(|v| v.parse::<i64>().ok());
    match obj::s(e, "/operator") {
        "In" => actual.is_some_and(|a| values.contains(&a)),
        "NotIn" => actual.is_none_or(|a| !values.contains(&a)),
        "Exists" => actual.is_some(),
        "DoesNotExist" => actual.is_none(),
        "Gt" => {
            matches!((number(actual), number(values.first().copied())), (Some(a), Some(v)) if a > v)
        }
        "Lt" => {
            matches!((number(actual), number(values.first().copied())), (Some(a), Some(v)) if a < v)
        }
        _ => false,
    }
}

fn bind(store: &Store, pod: &Value, node: &str) -> Result<(), ApiError> {
    let mut bound = pod.clone();
    bound["spec"]["nodeName"] = json!(node);
    let opts = obj::manager("kube-scheduler");
    let stored = store.update(&obj::pods(), obj::namespace(pod), bound, &opts)?;
    let mut conds = obj::arr(&stored, "/status/conditions").to_vec();
    obj::set_condition(&mut conds, "PodScheduled", "True", "", "");
    store.patch_status(
        &obj::pods(),
        obj::namespace(pod),
        obj::name(pod),
        Patch::Merge(json!({"status": {"conditions": conds}})),
        &opts,
    )?;
    let msg = format!(
        "Successfully assigned {}/{} to {node}",
        obj::namespace(pod),
        obj::name(pod)
    );
    events::record(
        store,
        &stored,
        EventType::Normal,
        "Scheduled",
        &msg,
        "default-scheduler",
    );
    Ok(())
}

fn mark_unschedulable(store: &Store, pod: &Value, message: &str) -> Result<(), ApiError> {
    let current = obj::condition(pod, "PodScheduled");
    if current.is_some_and(|c| obj::s(c, "/message") == message) {
        return Ok(());
    }
    let mut conds = obj::arr(pod, "/status/conditions").to_vec();
    obj::set_condition(
        &mut conds,
        "PodScheduled",
        "False",
        "Unschedulable",
        message,
    );
    let opts = obj::manager("kube-scheduler");
    store.patch_status(
        &obj::pods(),
        obj::namespace(pod),
        obj::name(pod),
        Patch::Merge(json!({"status": {"conditions": conds}})),
        &opts,
    )?;
    events::record(
        store,
        pod,
        EventType::Warning,
        "FailedScheduling",
        message,
        "default-scheduler",
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, taints: Value) -> Value {
        let mut labels = json!({"kubernetes.io/hostname": name});
        if name == "cp" {
            labels["node-role.kubernetes.io/control-plane"] = json!("");
        }
        json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}})
    }

    #[test]
    fn words_failures_like_the_scheduler() {
        let nodes = vec![
            node(
                "cp",
                json!([{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}, {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]),
            ),
            node(
                "w",
                json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]),
            ),
        ];
        let pod = json!({"spec": {}});
        assert_eq!(
            place(&pod, &nodes, &BTreeMap::new()).unwrap_err(),
            "0/2 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        );
        let all = json!({"spec": {"tolerations": [{"operator": "Exists"}]}});
        assert_eq!(place(&all, &nodes, &BTreeMap::new()).unwrap(), "cp");
        let affinity = json!({"spec": {"tolerations": [{"operator": "Exists"}], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"}]}]}}}}});
        assert_eq!(place(&affinity, &nodes, &BTreeMap::new()).unwrap(), "w");
    }

    #[test]
    fn required_pod_anti_affinity_keeps_replicas_on_separate_nodes() {
        let nodes = vec![node("cp", json!([])), node("w", json!([]))];
        let operator = |name: &str, on: Option<&str>| {
            json!({"metadata": {"name": name, "namespace": "kube-system", "labels": {"io.cilium/app": "operator"}},
                "spec": {"nodeName": on, "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"io.cilium/app": "operator"}}}]}}}})
        };
        let first = operator("op-1", Some("cp"));
        assert_eq!(
            place_among(
                &operator("op-2", None),
                &nodes,
                &BTreeMap::new(),
                std::slice::from_ref(&first)
            )
            .unwrap(),
            "w"
        );
        let second = operator("op-2", Some("w"));
        assert_eq!(
            place_among(
                &operator("op-3", None),
                &nodes,
                &BTreeMap::new(),
                &[first, second]
            )
            .unwrap_err(),
            "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        );
        let mut elsewhere = operator("op-1", Some("cp"));
        elsewhere["metadata"]["namespace"] = json!("other");
        assert_eq!(
            place_among(
                &operator("op-2", None),
                &nodes[..1],
                &BTreeMap::new(),
                &[elsewhere]
            )
            .unwrap(),
            "cp",
            "another namespace's pods do not count"
        );
    }
}
