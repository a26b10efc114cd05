//! The container file system, as far as programs read it: volume mounts of `configMap`,
//! `secret` and `projected` volumes, read from the store (with `items` and `subPath` mapping).

use base64::Engine;
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
    let (gr, source, name) = if let Some(cm) = src.get("configMap") {
        (GroupResource::core("configmaps"), cm, obj::s(cm, "/name"))
    } else if let Some(sec) = src.get("secret") {
        let name = match obj::s(sec, "/secretName") {
            "" => obj::s(sec, "/name"),
            n => n,
        };
        (GroupResource::core("secrets"), sec, name)
    } else {
        return None;
    };
    let key = match obj::arr(source, "/items") {
        [] => rel.to_string(),
        items => items
            .iter()
            .find(|i| obj::s(i, "/path") == rel)
            .map(|i| obj::s(i, "/key").to_string())?,
    };
    let object = store.get(&gr, ns, name).ok()?;
    let b64 = base64::engine::general_purpose::STANDARD;
    if gr.resource == "secrets" {
        return object
            .get("data")
            .and_then(|d| d.get(&key))
            .and_then(Value::as_str)
            .and_then(|v| b64.decode(v).ok());
    }
    if let Some(text) = object
        .get("data")
        .and_then(|d| d.get(&key))
        .and_then(Value::as_str)
    {
        return Some(text.as_bytes().to_vec());
    }
    object
        .get("binaryData")
        .and_then(|d| d.get(&key))
        .and_then(Value::as_str)
        .and_then(|v| b64.decode(v).ok())
}
