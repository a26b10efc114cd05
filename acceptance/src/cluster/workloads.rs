//! Workload controllers: Deployment → ReplicaSet → Pods, and DaemonSet → one pod per eligible
//! node. Rollouts are simplified: a changed Deployment template gets a new ReplicaSet at full
//! scale while the old ones are scaled to zero; a changed DaemonSet template replaces its pods
//! node by node as they are deleted. Failed/Succeeded pods are replaced. A refused pod create
//! is a `FailedCreate` event (and a `ReplicaFailure` condition on ReplicaSets and Deployments),
//! retried after a short delay.

use std::time::Instant;

use serde_json::{Value, json};

use super::scheduler::{node_affinity_matches, node_selector_matches, tolerates_node};
use super::{events, obj, reconcile};
use crate::config::Pace;
use crate::controller::{Controller, ControllerContext, ControllerFuture};
use crate::store::{ApiError, DeleteOptions, GroupResource, ListOptions, Patch, Store};

macro_rules! controller {
    ($ty:ident, $name:literal, $own:expr, [$($gr:expr),*], $sync:ident) => {
        /// See the module docs.
        pub struct $ty;
        impl Controller for $ty {
            fn name(&self) -> &str {
                $name
            }
            fn run(self: Box<Self>, ctx: ControllerContext) -> ControllerFuture {
                let pace = ctx.config.pace;
                Box::pin(reconcile::run_timed(ctx, vec![$($gr),*], move |store| {
                    sync_all(store, &$own, &$sync, pace)
                }))
            }
        }
    };
}

controller!(
    ReplicaSetController,
    "replicaset-controller",
    obj::replicasets(),
    [obj::replicasets(), obj::pods()],
    sync_replicaset
);
controller!(
    DeploymentController,
    "deployment-controller",
    obj::deployments(),
    [obj::deployments(), obj::replicasets()],
    sync_deployment
);
controller!(
    DaemonSetController,
    "daemonset-controller",
    obj::daemonsets(),
    [obj::daemonsets(), obj::pods(), obj::nodes()],
    sync_daemonset
);

/// One object's pass; `Ok(true)` when it wants a retry without a change (a refused pod create).
type SyncFn = dyn Fn(&Store, &Value) -> Result<bool, ApiError>;

/// Syncs every object of `gr`; returns when to retry, if a pass failed or wants a retry.
fn sync_all(store: &Store, gr: &GroupResource, sync: &SyncFn, pace: Pace) -> Option<Instant> {
    let Ok(list) = store.list(gr, None, &ListOptions::default()) else {
        return Some(reconcile::retry_at(pace));
    };
    let mut retry = false;
    for o in list.items.iter().filter(|o| !obj::is_deleting(o)) {
        match sync(store, o) {
            Ok(r) => retry |= r,
            Err(e) => {
                tracing::debug!(object = obj::name(o), %e, "workload sync failed");
                retry = true;
            }
        }
    }
    retry.then(|| reconcile::retry_at(pace))
}

/// Pods of `owner` (by selector and controller ownerReference).
fn owned_pods(store: &Store, owner: &Value) -> Result<Vec<Value>, ApiError> {
    let selector = obj::selector_string(owner.pointer("/spec/selector").unwrap_or(&Value::Null));
    let list = store.list(
        &obj::pods(),
        Some(obj::namespace(owner)),
        &ListOptions::default().labels(&selector),
    )?;
    Ok(list
        .items
        .into_iter()
        .filter(|p| obj::owned_by(p, obj::uid(owner)))
        .collect())
}

fn delete_pod(store: &Store, pod: &Value) -> Result<(), ApiError> {
    match store.delete(
        &obj::pods(),
        obj::namespace(pod),
        obj::name(pod),
        &DeleteOptions::default(),
    ) {
        Err(e) if e.code != 404 => Err(e),
        _ => Ok(()),
    }
}

/// A pod from `owner`'s template, with extra labels and an ownerReference.
fn pod_from_template(owner: &Value, kind: &str, extra_labels: &Value) -> Value {
    let template = owner
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null);
    let mut meta = template
        .get("metadata")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    for (k, v) in extra_labels.as_object().into_iter().flatten() {
        meta["labels"][k] = v.clone();
    }
    meta["generateName"] = json!(format!("{}-", obj::name(owner)));
    meta["ownerReferences"] = json!([obj::owner_ref(owner, "apps/v1", kind)]);
    json!({"metadata": meta, "spec": template.get("spec").cloned().unwrap_or(Value::Null)})
}

/// Creates a pod for `owner` and records `SuccessfulCreate`; a refused create (e.g. the
/// ServiceAccount does not exist yet) records a Warning `FailedCreate` event,
/// `Error creating: <message>`, like the real controllers, and is retried after
/// [`reconcile::retry_at`].
/// Returns the refusal's message.
pub(crate) fn create_owned_pod(
    store: &Store,
    owner: &Value,
    pod: Value,
    controller: &str,
) -> Option<String> {
    let (ty, reason, msg) = match store.create(
        &obj::pods(),
        obj::namespace(owner),
        pod,
        &obj::manager(controller),
    ) {
        Ok(created) => (
            events::EventType::Normal,
            "SuccessfulCreate",
            format!("Created pod: {}", obj::name(&created)),
        ),
        Err(e) => {
            tracing::debug!(owner = obj::name(owner), %e, "pod create refused");
            let message = e.message;
            events::record(
                store,
                owner,
                events::EventType::Warning,
                "FailedCreate",
                &format!("Error creating: {message}"),
                controller,
            );
            return Some(message);
        }
    };
    events::record(store, owner, ty, reason, &msg, controller);
    None
}

fn patch_status(
    store: &Store,
    gr: &GroupResource,
    o: &Value,
    status: Value,
    manager: &str,
) -> Result<(), ApiError> {
    store.patch_status(
        gr,
        obj::namespace(o),
        obj::name(o),
        Patch::Merge(json!({"status": status})),
        &obj::manager(manager),
    )?;
    Ok(())
}

/// Sets condition `ReplicaFailure` (`FailedCreate`) while pod creates are refused, removes it
/// once they succeed (as the ReplicaSet and Deployment controllers do).
fn replica_failure(conds: &mut Vec<Value>, failure: Option<&str>) {
    match failure {
        Some(message) => {
            obj::set_condition(conds, "ReplicaFailure", "True", "FailedCreate", message)
        }
        None => conds.retain(|c| obj::s(c, "/type") != "ReplicaFailure"),
    }
}

fn sync_replicaset(store: &Store, rs: &Value) -> Result<bool, ApiError> {
    let pods = owned_pods(store, rs)?;
    for p in pods
        .iter()
        .filter(|p| obj::pod_finished(p) && !obj::is_deleting(p))
    {
        delete_pod(store, p)?;
    }
    let mut live: Vec<&Value> = pods
        .iter()
        .filter(|p| !obj::pod_finished(p) && !obj::is_deleting(p))
        .collect();
    let desired = obj::i64_at(rs, "/spec/replicas").unwrap_or(1).max(0) as usize;
    let mut failure = None;
    for _ in live.len()..desired {
        let pod = pod_from_template(rs, "ReplicaSet", &json!({}));
        failure = create_owned_pod(store, rs, pod, "replicaset-controller");
        if failure.is_some() {
            break;
        }
    }
    live.sort_by_key(|p| obj::pod_ready(p));
    for p in live.iter().take(live.len().saturating_sub(desired)) {
        delete_pod(store, p)?;
    }
    let ready = live
        .iter()
        .filter(|p| obj::pod_ready(p))
        .count()
        .min(desired);
    let mut conds = obj::arr(rs, "/status/conditions").to_vec();
    replica_failure(&mut conds, failure.as_deref());
    let status = json!({"replicas": live.len().min(desired), "fullyLabeledReplicas": live.len().min(desired),
        "readyReplicas": ready, "availableReplicas": ready, "observedGeneration": obj::i64_at(rs, "/metadata/generation"),
        "conditions": if conds.is_empty() { Value::Null } else { json!(conds) }});
    patch_status(
        store,
        &obj::replicasets(),
        rs,
        status,
        "replicaset-controller",
    )?;
    Ok(failure.is_some())
}

fn sync_deployment(store: &Store, d: &Value) -> Result<bool, ApiError> {
    let template = d.pointer("/spec/template").cloned().unwrap_or(Value::Null);
    let hash = obj::short_hash(&template);
    let rs_name = format!("{}-{hash}", obj::name(d));
    let desired = obj::i64_at(d, "/spec/replicas").unwrap_or(1);
    let ns = obj::namespace(d);
    let all = store
        .list(&obj::replicasets(), Some(ns), &ListOptions::default())?
        .items;
    let owned: Vec<&Value> = all
        .iter()
        .filter(|rs| obj::owned_by(rs, obj::uid(d)))
        .collect();
    let current = match owned.iter().find(|rs| obj::name(rs) == rs_name) {
        Some(rs) if obj::i64_at(rs, "/spec/replicas") == Some(desired) => (*rs).clone(),
        Some(_) => store.patch(
            &obj::replicasets(),
            ns,
            &rs_name,
            Patch::Merge(json!({"spec": {"replicas": desired}})),
            &obj::manager("deployment-controller"),
        )?,
        None => create_replicaset(store, d, &rs_name, &hash, desired)?,
    };
    for old in owned
        .iter()
        .filter(|rs| obj::name(rs) != rs_name && obj::i64_at(rs, "/spec/replicas") != Some(0))
    {
        store.patch(
            &obj::replicasets(),
            ns,
            obj::name(old),
            Patch::Merge(json!({"spec": {"replicas": 0}})),
            &obj::manager("deployment-controller"),
        )?;
    }
    let sum = |p: &str| {
        owned
            .iter()
            .filter_map(|rs| obj::i64_at(rs, p))
            .sum::<i64>()
    };
    let (replicas, ready, available) = (
        sum("/status/replicas"),
        sum("/status/readyReplicas"),
        sum("/status/availableReplicas"),
    );
    let updated = obj::i64_at(&current, "/status/replicas").unwrap_or(0);
    let mut conds = obj::arr(d, "/status/conditions").to_vec();
    if available >= desired {
        obj::set_condition(
            &mut conds,
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        );
    } else {
        obj::set_condition(
            &mut conds,
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        );
    }
    let done = updated == desired
        && obj::i64_at(&current, "/status/availableReplicas") == Some(desired)
        && replicas == desired;
    let (reason, msg) = match done {
        true => (
            "NewReplicaSetAvailable",
            format!("ReplicaSet \"{rs_name}\" has successfully progressed."),
        ),
        false => (
            "ReplicaSetUpdated",
            format!("ReplicaSet \"{rs_name}\" is progressing."),
        ),
    };
    obj::set_condition(&mut conds, "Progressing", "True", reason, &msg);
    let failure = obj::condition(&current, "ReplicaFailure")
        .filter(|_| obj::condition_true(&current, "ReplicaFailure"))
        .map(|c| obj::s(c, "/message").to_string());
    replica_failure(&mut conds, failure.as_deref());
    let mut status = json!({"replicas": replicas, "updatedReplicas": updated, "readyReplicas": ready,
        "availableReplicas": available, "observedGeneration": obj::i64_at(d, "/metadata/generation"), "conditions": conds});
    status["unavailableReplicas"] = if replicas > available {
        json!(replicas - available)
    } else {
        Value::Null
    };
    patch_status(
        store,
        &obj::deployments(),
        d,
        status,
        "deployment-controller",
    )?;
    Ok(false)
}

fn create_replicaset(
    store: &Store,
    d: &Value,
    name: &str,
    hash: &str,
    replicas: i64,
) -> Result<Value, ApiError> {
    let mut template = d.pointer("/spec/template").cloned().unwrap_or(Value::Null);
    template["metadata"]["labels"]["pod-template-hash"] = json!(hash);
    let mut selector = d
        .pointer("/spec/selector")
        .cloned()
        .unwrap_or_else(|| json!({}));
    selector["matchLabels"]["pod-template-hash"] = json!(hash);
    let rs = json!({"metadata": {"name": name, "labels": template["metadata"]["labels"].clone(),
            "annotations": {"deployment.kubernetes.io/revision": "1"},
            "ownerReferences": [obj::owner_ref(d, "apps/v1", "Deployment")]},
        "spec": {"replicas": replicas, "selector": selector, "template": template}});
    let created = store.create(
        &obj::replicasets(),
        obj::namespace(d),
        rs,
        &obj::manager("deployment-controller"),
    )?;
    let msg = format!("Scaled up replica set {name} from 0 to {replicas}");
    events::record(
        store,
        d,
        events::EventType::Normal,
        "ScalingReplicaSet",
        &msg,
        "deployment-controller",
    );
    Ok(created)
}

/// Tolerations the DaemonSet controller adds to its pods.
fn daemon_tolerations(template_spec: &Value) -> Vec<Value> {
    let mut t = obj::arr(template_spec, "/tolerations").to_vec();
    for (key, effect) in [
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ] {
        t.push(json!({"key": key, "operator": "Exists", "effect": effect}));
    }
    if template_spec.get("hostNetwork") == Some(&json!(true)) {
        t.push(json!({"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"}));
    }
    t
}

fn sync_daemonset(store: &Store, ds: &Value) -> Result<bool, ApiError> {
    let template = ds.pointer("/spec/template").cloned().unwrap_or(Value::Null);
    let hash = obj::short_hash(&template);
    let mut pod_spec = template.get("spec").cloned().unwrap_or(Value::Null);
    pod_spec["tolerations"] = json!(daemon_tolerations(&pod_spec));
    let probe = json!({"spec": pod_spec});
    let nodes = store
        .list(&obj::nodes(), None, &ListOptions::default())?
        .items;
    let eligible: Vec<&str> = nodes
        .iter()
        .filter(|n| {
            tolerates_node(obj::arr(&probe, "/spec/tolerations"), n)
                && node_selector_matches(&probe, n)
                && node_affinity_matches(&probe, n)
        })
        .map(obj::name)
        .collect();
    let pods = owned_pods(store, ds)?;
    let live: Vec<&Value> = pods.iter().filter(|p| !obj::is_deleting(p)).collect();
    for p in &live {
        let outdated = obj::s(p, "/metadata/labels/controller-revision-hash") != hash;
        if outdated || obj::pod_finished(p) || !eligible.contains(&obj::s(p, "/spec/nodeName")) {
            delete_pod(store, p)?;
        }
    }
    let mut refused = false;
    for node in &eligible {
        if !pods.iter().any(|p| obj::s(p, "/spec/nodeName") == *node) {
            let mut pod = pod_from_template(
                ds,
                "DaemonSet",
                &json!({"controller-revision-hash": hash, "pod-template-generation": obj::i64_at(ds, "/metadata/generation").unwrap_or(1).to_string()}),
            );
            pod["spec"] = pod_spec.clone();
            pod["spec"]["nodeName"] = json!(node);
            pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]});
            refused |= create_owned_pod(store, ds, pod, "daemonset-controller").is_some();
        }
    }
    let current: Vec<&&Value> = live
        .iter()
        .filter(|p| {
            obj::s(p, "/metadata/labels/controller-revision-hash") == hash
                && eligible.contains(&obj::s(p, "/spec/nodeName"))
        })
        .collect();
    let ready = current.iter().filter(|p| obj::pod_ready(p)).count();
    let scheduled = eligible
        .iter()
        .filter(|n| live.iter().any(|p| obj::s(p, "/spec/nodeName") == **n))
        .count();
    let status = json!({"desiredNumberScheduled": eligible.len(), "currentNumberScheduled": scheduled,
        "numberReady": ready, "updatedNumberScheduled": current.len(), "numberAvailable": ready,
        "numberUnavailable": if eligible.len() > ready { json!(eligible.len() - ready) } else { Value::Null },
        "numberMisscheduled": 0, "observedGeneration": obj::i64_at(ds, "/metadata/generation")});
    patch_status(
        store,
        &obj::daemonsets(),
        ds,
        status,
        "daemonset-controller",
    )?;
    Ok(refused)
}
