//! The container file system, as far as programs read it: volume mounts of `configMap`,
//! `secret` and `projected` volumes, read from the store (with `items` and `subPath` mapping).

use serde_json::Value;

use crate::cluster::obj;
use crate::store::{GroupResource, Store};

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    #[error("open {0}: no such file or directory")]
    NotFound(String),
}

/// Reads `path` in `container` of `pod`.
pub fn read(
    store: &Store,
    pod: &Value,
    container: &Value,
    path: &str,
) -> Result<Vec<u8>, FileError> {
    let not_found = || FileError::NotFound(path.to_string());
    let mount = obj::arr(container, "/volumeMounts")
        .iter()
        .filter(|m| under(path, obj::s(m, "/mountPath")))
        .max_by_key(|m| obj::s(m, "/mountPath").len())
        .ok_or_else(not_found)?;
    let rel = path[obj::s(mount, "/mountPath").len()..].trim_start_matches('/');
    let rel = match obj::s(mount, "/subPath") {
        "" => rel.to_string(),
        sub if rel.is_empty() => sub.to_string(),
        sub => format!("{sub}/{rel}"),
    };
    let volume = obj::arr(pod, "/spec/volumes")
        .iter()
        .find(|v| obj::s(v, "/name") == obj::s(mount, "/name"))
        .ok_or_else(not_found)?;
    let ns = obj::namespace(pod);
    let sources: Vec<&Value> = match volume.pointer("/projected/sources") {
        Some(Value::Array(s)) => s.iter().collect(),
        _ => vec![volume],
    };
    sources
        .iter()
        .find_map(|src| from_source(store, ns, src, &rel))
        .ok_or_else(not_found)
}

fn under(path: &str, mount: &str) -> bool {
    !mount.is_empty()
        && (path == mount || path.starts_with(&format!("{}/", mount.trim_end_matches('/'))))
}

fn from_source(store: &Store, ns: &str, src: &Value, rel: &str) -> Option<Vec<u8>> {
    let (gr, source, name) = source_of(src)?;
    let key = match obj::arr(source, "/items") {
        [] => rel.to_string(),
        items => items
            .iter()
            .find(|i| obj::s(i, "/path") == rel)
            .map(|i| obj::s(i, "/key").to_string())?,
    };
    let object = store.get(&gr, ns, name).ok()?;
    if gr.resource == "secrets" {
        obj::secret_value(&object, &key)
    } else {
        obj::config_map_value(&object, &key)
    }
}

/// The ConfigMap or Secret a volume (or projected volume source) takes its files from.
fn source_of(src: &Value) -> Option<(GroupResource, &Value, &str)> {
    if let Some(cm) = src.get("configMap") {
        return Some((GroupResource::core("configmaps"), cm, obj::s(cm, "/name")));
    }
    let sec = src.get("secret")?;
    let name = match obj::s(sec, "/secretName") {
        "" => obj::s(sec, "/name"),
        n => n,
    };
    Some((GroupResource::core("secrets"), sec, name))
}

/// What the kubelet's volume manager checks before a pod's sandbox is created: every
/// `configMap`/`secret` volume (and projected source) refers to an existing object holding the
/// keys its `items` name, unless it is `optional: true`. The error is the `FailedMount` event
/// message, e.g. `MountVolume.SetUp failed for volume "v" : configmap "x" not found`.
pub(crate) fn mount_error(store: &Store, pod: &Value) -> Option<String> {
    let ns = obj::namespace(pod);
    obj::arr(pod, "/spec/volumes").iter().find_map(|volume| {
        let errors: Vec<String> = match volume.pointer("/projected/sources") {
            Some(Value::Array(sources)) => sources
                .iter()
                .filter_map(|s| source_error(store, ns, s))
                .collect(),
            _ => source_error(store, ns, volume).into_iter().collect(),
        };
        let detail = match errors.as_slice() {
            [] => return None,
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        Some(format!(
            "MountVolume.SetUp failed for volume \"{}\" : {detail}",
            obj::s(volume, "/name")
        ))
    })
}

fn source_error(store: &Store, ns: &str, src: &Value) -> Option<String> {
    let (gr, source, name) = source_of(src)?;
    let optional = source.get("optional") == Some(&Value::Bool(true));
    let secret = gr.resource == "secrets";
    let object = match store.get(&gr, ns, name) {
        Ok(o) => o,
        Err(_) if optional => return None,
        Err(_) if secret => return Some(format!("secret \"{name}\" not found")),
        Err(_) => return Some(format!("configmap \"{name}\" not found")),
    };
    obj::arr(source, "/items").iter().find_map(|item| {
        let key = obj::s(item, "/key");
        let present = if secret {
            obj::secret_value(&object, key).is_some()
        } else {
            obj::config_map_value(&object, key).is_some()
        };
        match (present || optional, secret) {
            (true, _) => None,
            (false, true) => Some(format!("references non-existent secret key: {key}")),
            (false, false) => Some(format!(
                "configmap references non-existent config key: {key}"
            )),
        }
    })
}
