//! The container environment as the kubelet builds it: service variables for the `kubernetes`
//! Service (always injected, even with `enableServiceLinks: false`), then `envFrom`, then `env`
//! (explicit entries win), with `$(VAR)` references expanded.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::cluster::network::{SERVICE_HOST, SERVICE_PORT};
use crate::cluster::obj;
use crate::store::{GroupResource, Store};

/// The environment of `container` in `pod` (with `pod_ip` for `status.podIP`).
///
/// Errors are the kubelet's `CreateContainerConfigError` messages: a referenced ConfigMap or
/// Secret that does not exist (`configmap "x" not found`, `secret "x" not found`) or lacks the
/// key (`couldn't find key k in ConfigMap ns/x`), unless the reference is `optional: true`.
pub(crate) fn build(
    store: &Store,
    pod: &Value,
    container: &Value,
    pod_ip: &str,
    host_ip: &str,
) -> Result<BTreeMap<String, String>, String> {
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
        for (k, v) in env_from(store, ns, from)? {
            env.insert(format!("{prefix}{k}"), v);
        }
    }
    for e in obj::arr(container, "/env") {
        let name = obj::s(e, "/name").to_string();
        let value = match e.get("valueFrom") {
            Some(from) => value_from(store, pod, from, pod_ip, host_ip)?,
            None => Some(expand(obj::s(e, "/value"), &env)),
        };
        if let Some(v) = value {
            env.insert(name, v);
        }
    }
    Ok(env)
}

/// A ConfigMap or Secret a container refers to.
#[derive(Clone, Copy)]
enum Source {
    ConfigMap,
    Secret,
}

impl Source {
    fn resource(self) -> GroupResource {
        GroupResource::core(match self {
            Source::ConfigMap => "configmaps",
            Source::Secret => "secrets",
        })
    }

    /// Kind as the kubelet words it in `couldn't find key` errors.
    fn kind(self) -> &'static str {
        match self {
            Source::ConfigMap => "ConfigMap",
            Source::Secret => "Secret",
        }
    }

    /// Resource as the kubelet's object managers word it in not-found errors.
    fn singular(self) -> &'static str {
        match self {
            Source::ConfigMap => "configmap",
            Source::Secret => "secret",
        }
    }

    /// The object `name` in `ns`: `Ok(None)` when missing and `optional`, else the kubelet's
    /// `<kind> "<name>" not found`.
    fn get(
        self,
        store: &Store,
        ns: &str,
        name: &str,
        optional: bool,
    ) -> Result<Option<Value>, String> {
        match store.get(&self.resource(), ns, name) {
            Ok(o) => Ok(Some(o)),
            Err(_) if optional => Ok(None),
            Err(e) if e.code == 404 => Err(format!("{} \"{name}\" not found", self.singular())),
            Err(e) => Err(e.message),
        }
    }

    /// All entries as strings (Secret values decoded; env takes ConfigMap `data` only).
    fn entries(self, object: &Value) -> Vec<(String, String)> {
        match self {
            Source::ConfigMap => object
                .get("data")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect(),
            Source::Secret => obj::secret_entries(object)
                .into_iter()
                .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
                .collect(),
        }
    }

    fn value(self, object: &Value, key: &str) -> Option<String> {
        match self {
            Source::ConfigMap => object.get("data")?.get(key)?.as_str().map(String::from),
            Source::Secret => {
                obj::secret_value(object, key).map(|v| String::from_utf8_lossy(&v).into_owned())
            }
        }
    }
}

fn optional(reference: &Value) -> bool {
    reference.get("optional") == Some(&Value::Bool(true))
}

fn env_from(store: &Store, ns: &str, from: &Value) -> Result<Vec<(String, String)>, String> {
    let (source, reference) = match (from.get("configMapRef"), from.get("secretRef")) {
        (Some(r), _) => (Source::ConfigMap, r),
        (None, Some(r)) => (Source::Secret, r),
        (None, None) => return Ok(Vec::new()),
    };
    let name = obj::s(reference, "/name");
    Ok(source
        .get(store, ns, name, optional(reference))?
        .map(|o| source.entries(&o))
        .unwrap_or_default())
}

fn value_from(
    store: &Store,
    pod: &Value,
    from: &Value,
    pod_ip: &str,
    host_ip: &str,
) -> Result<Option<String>, String> {
    let ns = obj::namespace(pod);
    if let Some(path) = from.pointer("/fieldRef/fieldPath").and_then(Value::as_str) {
        return Ok(Some(match path {
            "status.podIP" => pod_ip.to_string(),
            "status.hostIP" => host_ip.to_string(),
            "spec.nodeName" => obj::s(pod, "/spec/nodeName").to_string(),
            "metadata.name" => obj::name(pod).to_string(),
            "metadata.namespace" => ns.to_string(),
            "metadata.uid" => obj::uid(pod).to_string(),
            "spec.serviceAccountName" => obj::s(pod, "/spec/serviceAccountName").to_string(),
            _ => String::new(),
        }));
    }
    let (source, sel) = match (from.get("configMapKeyRef"), from.get("secretKeyRef")) {
        (Some(r), _) => (Source::ConfigMap, r),
        (None, Some(r)) => (Source::Secret, r),
        (None, None) => return Ok(None),
    };
    let (name, key) = (obj::s(sel, "/name"), obj::s(sel, "/key"));
    let Some(object) = source.get(store, ns, name, optional(sel))? else {
        return Ok(None);
    };
    match source.value(&object, key) {
        Some(v) => Ok(Some(v)),
        None if optional(sel) => Ok(None),
        None => Err(format!(
            "couldn't find key {key} in {} {ns}/{name}",
            source.kind()
        )),
    }
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
