//! Small accessors for objects in their JSON wire form, shared by the cluster model.

use serde_json::{Value, json};

use crate::store::{GroupResource, WriteOptions};

pub(crate) fn pods() -> GroupResource {
    GroupResource::core("pods")
}
pub(crate) fn nodes() -> GroupResource {
    GroupResource::core("nodes")
}
pub(crate) fn jobs() -> GroupResource {
    GroupResource::new("batch", "jobs")
}
pub(crate) fn deployments() -> GroupResource {
    GroupResource::new("apps", "deployments")
}
pub(crate) fn replicasets() -> GroupResource {
    GroupResource::new("apps", "replicasets")
}
pub(crate) fn daemonsets() -> GroupResource {
    GroupResource::new("apps", "daemonsets")
}

/// Write options with a field manager.
pub(crate) fn manager(name: &str) -> WriteOptions {
    WriteOptions::manager(name)
}

/// The string at a JSON pointer, or `""`.
pub(crate) fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

pub(crate) fn name(v: &Value) -> &str {
    s(v, "/metadata/name")
}
pub(crate) fn namespace(v: &Value) -> &str {
    s(v, "/metadata/namespace")
}
pub(crate) fn uid(v: &Value) -> &str {
    s(v, "/metadata/uid")
}

pub(crate) fn is_deleting(v: &Value) -> bool {
    v.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

/// The array at a pointer (empty when missing).
pub(crate) fn arr<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

pub(crate) fn i64_at(v: &Value, pointer: &str) -> Option<i64> {
    v.pointer(pointer).and_then(Value::as_i64)
}

/// The condition of `type` in `status.conditions`.
pub(crate) fn condition<'a>(obj: &'a Value, ty: &str) -> Option<&'a Value> {
    arr(obj, "/status/conditions")
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
}

/// Whether `status.conditions[type=ty].status == "True"`.
pub(crate) fn condition_true(obj: &Value, ty: &str) -> bool {
    condition(obj, ty).is_some_and(|c| c.get("status").and_then(Value::as_str) == Some("True"))
}

/// Sets (or replaces) a condition; keeps `lastTransitionTime` when the status did not change.
pub(crate) fn set_condition(
    conds: &mut Vec<Value>,
    ty: &str,
    status: &str,
    reason: &str,
    message: &str,
) {
    let now = crate::util::now_rfc3339();
    let mut cond = json!({"type": ty, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": now, "lastProbeTime": null});
    if let Some(old) = conds
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
    {
        if old.get("status").and_then(Value::as_str) == Some(status) {
            cond["lastTransitionTime"] =
                old.get("lastTransitionTime").cloned().unwrap_or(json!(now));
        }
        *old = cond;
    } else {
        conds.push(cond);
    }
}

/// Whether the pod is `Ready=True` and not being deleted.
pub(crate) fn pod_ready(pod: &Value) -> bool {
    !is_deleting(pod) && condition_true(pod, "Ready")
}

pub(crate) fn pod_phase(pod: &Value) -> &str {
    s(pod, "/status/phase")
}

pub(crate) fn pod_finished(pod: &Value) -> bool {
    matches!(pod_phase(pod), "Succeeded" | "Failed")
}

/// Whether `obj` has a controller ownerReference with `uid`.
pub(crate) fn owned_by(obj: &Value, owner_uid: &str) -> bool {
    arr(obj, "/metadata/ownerReferences")
        .iter()
        .any(|r| r.get("uid").and_then(Value::as_str) == Some(owner_uid))
}

/// A controller ownerReference to `owner`.
pub(crate) fn owner_ref(owner: &Value, api_version: &str, kind: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "name": name(owner), "uid": uid(owner),
           "controller": true, "blockOwnerDeletion": true})
}

/// A short, stable hash (FNV-1a, hex) of a JSON value, like `pod-template-hash`.
pub(crate) fn short_hash(v: &Value) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in v.to_string().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..10)
        .map(|i| ALPHABET[((h >> (i * 6)) % ALPHABET.len() as u64) as usize] as char)
        .collect()
}

/// The decoded value of `key` in a Secret's `data` (base64 on the wire). `None` when the key
/// is missing or not valid base64.
pub(crate) fn secret_value(secret: &Value, key: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    let raw = secret.get("data")?.get(key)?.as_str()?;
    base64::engine::general_purpose::STANDARD.decode(raw).ok()
}

/// All decoded `data` entries of a Secret (entries that are not valid base64 are skipped).
pub(crate) fn secret_entries(secret: &Value) -> Vec<(String, Vec<u8>)> {
    secret
        .get("data")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, _)| Some((k.clone(), secret_value(secret, k)?)))
        .collect()
}

/// The value of `key` in a ConfigMap: `data` (text), else `binaryData` (base64 on the wire).
pub(crate) fn config_map_value(cm: &Value, key: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    if let Some(text) = cm
        .get("data")
        .and_then(|d| d.get(key))
        .and_then(Value::as_str)
    {
        return Some(text.as_bytes().to_vec());
    }
    let raw = cm.get("binaryData")?.get(key)?.as_str()?;
    base64::engine::general_purpose::STANDARD.decode(raw).ok()
}

/// `matchLabels` of a selector, as `k=v,k2=v2` for list options.
pub(crate) fn selector_string(selector: &Value) -> String {
    selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_keep_transition_time() {
        let mut c = vec![json!({"type": "Ready", "status": "True", "lastTransitionTime": "t0"})];
        set_condition(&mut c, "Ready", "True", "R", "m");
        assert_eq!(c[0]["lastTransitionTime"], "t0");
        set_condition(&mut c, "Ready", "False", "R", "m");
        assert_ne!(c[0]["lastTransitionTime"], "t0");
        assert_eq!(short_hash(&json!({"a": 1})).len(), 10);
    }
}
