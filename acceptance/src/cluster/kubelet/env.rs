//! The container environment as the kubelet builds it: service variables for the `kubernetes`
//! Service (always injected, even with `enableServiceLinks: false`), then `envFrom`, then `env`
//! (explicit entries win), with `$(VAR)` references expanded.

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::Value;

use crate::cluster::network::{SERVICE_HOST, SERVICE_PORT};
use crate::cluster::obj;
use crate::store::{GroupResource, Store};

/// The environment of `container` in `pod` (with `pod_ip` for `status.podIP`).
pub(crate) fn build(
    store: &Store,
    pod: &Value,
    container: &Value,
    pod_ip: &str,
    host_ip: &str,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let hostname = if pod.pointer("/spec/hostNetwork") == Some(&Value::Bool(true)) {
        obj::s(pod, "/spec/nodeName")
    } else {
        obj::name(pod)
    };
    env.insert("HOSTNAME".into(), hostname.to_string());
    env.insert(
        "PATH".into(),
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
    );
    let addr = format!("{SERVICE_HOST}:{SERVICE_PORT}");
    for (k, v) in [
        ("KUBERNETES_SERVICE_HOST", SERVICE_HOST.to_string()),
        ("KUBERNETES_SERVICE_PORT", SERVICE_PORT.to_string()),
        ("KUBERNETES_SERVICE_PORT_HTTPS", SERVICE_PORT.to_string()),
        ("KUBERNETES_PORT", format!("tcp://{addr}")),
        ("KUBERNETES_PORT_443_TCP", format!("tcp://{addr}")),
        ("KUBERNETES_PORT_443_TCP_PROTO", "tcp".into()),
        ("KUBERNETES_PORT_443_TCP_PORT", SERVICE_PORT.to_string()),
        ("KUBERNETES_PORT_443_TCP_ADDR", SERVICE_HOST.to_string()),
    ] {
        env.insert(k.into(), v);
    }
    let ns = obj::namespace(pod);
    for from in obj::arr(container, "/envFrom") {
        let prefix = obj::s(from, "/prefix");
        for (k, v) in env_from(store, ns, from) {
            env.insert(format!("{prefix}{k}"), v);
        }
    }
    for e in obj::arr(container, "/env") {
        let name = obj::s(e, "/name").to_string();
        let value = match e.get("valueFrom") {
            Some(from) => value_from(store, pod, from, pod_ip, host_ip),
            None => Some(expand(obj::s(e, "/value"), &env)),
        };
        if let Some(v) = value {
            env.insert(name, v);
        }
    }
    env
}

fn env_from(store: &Store, ns: &str, from: &Value) -> Vec<(String, String)> {
    let b64 = base64::engine::general_purpose::STANDARD;
    if let Some(name) = from.pointer("/configMapRef/name").and_then(Value::as_str) {
        let Ok(cm) = store.get(&GroupResource::core("configmaps"), ns, name) else {
            return Vec::new();
        };
        return cm
            .get("data")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
            .collect();
    }
    if let Some(name) = from.pointer("/secretRef/name").and_then(Value::as_str) {
        let Ok(sec) = store.get(&GroupResource::core("secrets"), ns, name) else {
            return Vec::new();
        };
        return sec
            .get("data")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| {
                Some((
                    k.clone(),
                    String::from_utf8(b64.decode(v.as_str()?).ok()?).ok()?,
                ))
            })
            .collect();
    }
    Vec::new()
}

fn value_from(
    store: &Store,
    pod: &Value,
    from: &Value,
    pod_ip: &str,
    host_ip: &str,
) -> Option<String> {
    let ns = obj::namespace(pod);
    if let Some(path) = from.pointer("/fieldRef/fieldPath").and_then(Value::as_str) {
        return Some(match path {
            "status.podIP" => pod_ip.to_string(),
            "status.hostIP" => host_ip.to_string(),
            "spec.nodeName" => obj::s(pod, "/spec/nodeName").to_string(),
            "metadata.name" => obj::name(pod).to_string(),
            "metadata.namespace" => ns.to_string(),
            "metadata.uid" => obj::uid(pod).to_string(),
            "spec.serviceAccountName" => obj::s(pod, "/spec/serviceAccountName").to_string(),
            _ => String::new(),
        });
    }
    let key_ref = |r: &str, gr: &str| -> Option<String> {
        let sel = from.get(r)?;
        let obj = store
            .get(&GroupResource::core(gr), ns, obj::s(sel, "/name"))
            .ok()?;
        let raw = obj.get("data")?.get(obj::s(sel, "/key"))?.as_str()?;
        if gr == "secrets" {
            String::from_utf8(base64::engine::general_purpose::STANDARD.decode(raw).ok()?).ok()
        } else {
            Some(raw.to_string())
        }
    };
    key_ref("configMapKeyRef", "configmaps").or_else(|| key_ref("secretKeyRef", "secrets"))
}

/// Expands `$(VAR)` references to earlier variables; `$$(VAR)` escapes.
pub(crate) fn expand(value: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(i) = rest.find("$(") {
        if rest[..i].ends_with('$') {
            out.push_str(&rest[..i]);
            out.push('(');
            rest = &rest[i + 2..];
            continue;
        }
        out.push_str(&rest[..i]);
        match rest[i + 2..].find(')') {
            Some(j) => {
                let var = &rest[i + 2..i + 2 + j];
                match env.get(var) {
                    Some(v) => out.push_str(v),
                    None => out.push_str(&rest[i..i + 3 + j]),
                }
                rest = &rest[i + 3 + j..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}
