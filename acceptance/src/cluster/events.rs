//! Kubernetes Events (`v1/Event`) as the scheduler, kubelet and controllers record them.
//! A repeated event (same object, reason and message) bumps `count` and `lastTimestamp`.

use serde_json::{Value, json};

use super::obj;
use crate::store::{GroupResource, Patch, Store};

/// `Normal` or `Warning`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// Records an event about `involved` (any object in wire form) from `component`.
/// Failures are logged, never returned: events are best effort, as in Kubernetes.
pub fn record(
    store: &Store,
    involved: &Value,
    ty: EventType,
    reason: &str,
    message: &str,
    component: &str,
) {
    let ns = match obj::namespace(involved) {
        "" => "default",
        ns => ns,
    };
    let key = json!([obj::uid(involved), reason, message]);
    let name = format!("{}.{}", obj::name(involved), obj::short_hash(&key));
    let gr = GroupResource::core("events");
    let now = crate::util::now_rfc3339();
    if let Ok(old) = store.get(&gr, ns, &name) {
        let count = obj::i64_at(&old, "/count").unwrap_or(1) + 1;
        let patch = Patch::Merge(json!({"count": count, "lastTimestamp": now}));
        if let Err(e) = store.patch(&gr, ns, &name, patch, &obj::manager(component)) {
            tracing::debug!(%e, "failed to update event");
        }
        return;
    }
    let event = json!({
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion").cloned().unwrap_or(Value::Null),
            "kind": involved.get("kind").cloned().unwrap_or(Value::Null),
            "namespace": obj::namespace(involved), "name": obj::name(involved), "uid": obj::uid(involved),
        },
        "reason": reason, "message": message,
        "type": match ty { EventType::Normal => "Normal", EventType::Warning => "Warning" },
        "source": {"component": component},
        "reportingComponent": component, "reportingInstance": "",
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    });
    if let Err(e) = store.create(&gr, ns, event, &obj::manager(component)) {
        tracing::debug!(%e, "failed to record event");
    }
}
