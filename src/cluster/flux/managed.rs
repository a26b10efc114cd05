//! Managed resources: the Secrets of `secrets_yaml` and the `flux-runtime-info` ConfigMap, applied
//! server-side with the bootstrap's field manager on every run, recorded in the module's
//! `inventory` ConfigMap (so objects retired from the input are deleted, also those the module
//! applied before a migration), and fingerprinted so that Read can tell when one was edited.
//!
//! A fingerprint is a salted SHA-256 over the fields the bootstrap sets (type, the data keys it
//! writes, its labels and annotations), computed the same way from the input and from the live
//! object: it says whether they differ, and nothing about the value.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};
use sha2::{Digest, Sha256};

use super::manifest::{Manifest, ObjectRef};
use super::objects::{self, configmaps, secrets};
use super::ownership::adopted_by_flux;
use super::{FluxError, INVENTORY_CONFIGMAP, Kube};

/// The keys a fingerprint covers (names only, never values).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldKeys {
    pub data: Vec<String>,
    pub labels: Vec<String>,
    pub annotations: Vec<String>,
}

/// One object the bootstrap applied, as remembered in private state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tracked {
    pub object: String,
    pub fingerprint: String,
    pub keys: FieldKeys,
}

/// A Secret's data as bytes (`data` is base64, `stringData` plain); a ConfigMap's as text bytes.
fn data_bytes(object: &Json) -> BTreeMap<String, Vec<u8>> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let secret = object.get("kind").and_then(Json::as_str) == Some("Secret");
    let mut out = BTreeMap::new();
    let entries = |key: &str| {
        object
            .get(key)
            .and_then(Json::as_object)
            .cloned()
            .unwrap_or_default()
    };
    for (k, v) in entries("data") {
        let text = v.as_str().unwrap_or_default();
        let bytes = if secret {
            let compact: String = text.split_whitespace().collect();
            b64.decode(compact)
                .unwrap_or_else(|_| text.as_bytes().to_vec())
        } else {
            text.as_bytes().to_vec()
        };
        out.insert(k, bytes);
    }
    for (k, v) in entries("stringData") {
        out.insert(k, v.as_str().unwrap_or_default().as_bytes().to_vec());
    }
    out
}

fn metadata_keys(object: &Json, field: &str) -> Vec<String> {
    object
        .pointer(&format!("/metadata/{field}"))
        .and_then(Json::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// The keys the input object sets.
pub fn keys_of(desired: &Json) -> FieldKeys {
    FieldKeys {
        data: data_bytes(desired).into_keys().collect(),
        labels: metadata_keys(desired, "labels"),
        annotations: metadata_keys(desired, "annotations"),
    }
}

/// The salted fingerprint of `object` restricted to `keys`.
pub fn fingerprint(salt: &[u8], object: &Json, keys: &FieldKeys) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let data = data_bytes(object);
    let pick = |field: &str, wanted: &[String]| -> BTreeMap<String, Json> {
        wanted
            .iter()
            .map(|k| {
                let v = object.pointer(&format!("/metadata/{field}/{}", escape(k)));
                (k.clone(), v.cloned().unwrap_or(Json::Null))
            })
            .collect()
    };
    let kind = object
        .get("kind")
        .and_then(Json::as_str)
        .unwrap_or_default();
    let type_ = match kind {
        "Secret" => object
            .get("type")
            .and_then(Json::as_str)
            .unwrap_or("Opaque"),
        _ => "",
    };
    let canonical = json!({
        "kind": kind,
        "type": type_,
        "data": keys.data.iter().map(|k| (k.clone(), data.get(k).map(|b| b64.encode(b)))).collect::<BTreeMap<_, _>>(),
        "labels": pick("labels", &keys.labels),
        "annotations": pick("annotations", &keys.annotations),
    });
    let mut hasher = Sha256::new();
    hasher.update(salt);
    hasher.update(canonical.to_string().as_bytes());
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// JSON pointer escaping of one key (`~` and `/`).
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The runtime-info ConfigMap manifest.
pub fn runtime_info_configmap(
    namespace: &str,
    data: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Manifest {
    let mut metadata = json!({"name": super::RUNTIME_INFO_CONFIGMAP, "namespace": namespace});
    if !labels.is_empty() {
        metadata["labels"] = json!(labels);
    }
    if !annotations.is_empty() {
        metadata["annotations"] = json!(annotations);
    }
    Manifest {
        object: json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}),
    }
}

fn resource_of(kind: &str) -> Option<kube::api::ApiResource> {
    match kind {
        "Secret" => Some(secrets()),
        "ConfigMap" => Some(configmaps()),
        _ => None,
    }
}

/// What one reconcile of the managed resources did.
#[derive(Debug, Default)]
pub struct ManagedOutcome {
    pub tracked: Vec<Tracked>,
    /// Retired from the input (or from the module's inventory) and deleted.
    pub deleted: Vec<ObjectRef>,
    /// Adopted by Flux: neither applied nor deleted.
    pub adopted: Vec<ObjectRef>,
}

/// Applies every desired object, deletes what the inventory lists but the input no longer has, and
/// rewrites the inventory.
pub async fn reconcile(
    kube: &Kube,
    bootstrap_namespace: &str,
    desired: &[Manifest],
    salt: &[u8],
) -> Result<ManagedOutcome, FluxError> {
    let previous = load_inventory(kube, bootstrap_namespace).await?;
    let mut outcome = ManagedOutcome::default();
    for manifest in desired {
        apply_one(kube, manifest, salt, &mut outcome).await?;
    }
    let current: BTreeSet<ObjectRef> = desired.iter().map(Manifest::reference).collect();
    for retired in previous.difference(&current) {
        delete_retired(kube, retired, &mut outcome).await?;
    }
    write_inventory(kube, bootstrap_namespace, &current).await?;
    Ok(outcome)
}

async fn apply_one(
    kube: &Kube,
    manifest: &Manifest,
    salt: &[u8],
    outcome: &mut ManagedOutcome,
) -> Result<(), FluxError> {
    let reference = manifest.reference();
    let resource = resource_of(manifest.kind()).ok_or_else(|| FluxError::UnknownKind {
        api_version: manifest.api_version().to_owned(),
        kind: manifest.kind().to_owned(),
    })?;
    let api = objects::api(kube, &resource, Some(manifest.namespace()));
    let what = reference.to_string();
    if let Some(current) = objects::get(kube, &api, manifest.name(), &what).await? {
        if adopted_by_flux(&current) {
            outcome.adopted.push(reference);
            return Ok(());
        }
        objects::strip_disallowed_managers(kube, &api, &current, &what).await?;
    }
    objects::apply(kube, &api, manifest.name(), &manifest.object, &what).await?;
    let keys = keys_of(&manifest.object);
    outcome.tracked.push(Tracked {
        object: what,
        fingerprint: fingerprint(salt, &manifest.object, &keys),
        keys,
    });
    Ok(())
}

async fn delete_retired(
    kube: &Kube,
    retired: &ObjectRef,
    outcome: &mut ManagedOutcome,
) -> Result<(), FluxError> {
    let Some(resource) = resource_of(&retired.kind) else {
        tracing::warn!(object = %retired, "inventory entry of an unmanaged kind left alone");
        return Ok(());
    };
    let api = objects::api(kube, &resource, Some(&retired.namespace));
    let what = retired.to_string();
    match objects::get(kube, &api, &retired.name, &what).await? {
        Some(current) if adopted_by_flux(&current) => outcome.adopted.push(retired.clone()),
        Some(_) => {
            objects::delete(kube, &api, &retired.name, &what).await?;
            outcome.deleted.push(retired.clone());
        }
        None => {}
    }
    Ok(())
}

/// The inventory's entries (`- Kind/namespace/name` lines); empty when it does not exist.
pub async fn load_inventory(
    kube: &Kube,
    bootstrap_namespace: &str,
) -> Result<BTreeSet<ObjectRef>, FluxError> {
    let api = objects::api(kube, &configmaps(), Some(bootstrap_namespace));
    let what = format!("the inventory ConfigMap {bootstrap_namespace}/{INVENTORY_CONFIGMAP}");
    let Some(cm) = objects::get(kube, &api, INVENTORY_CONFIGMAP, &what).await? else {
        return Ok(BTreeSet::new());
    };
    let entries = cm
        .pointer("/data/entries")
        .and_then(Json::as_str)
        .unwrap_or_default();
    Ok(parse_inventory(entries))
}

pub fn parse_inventory(entries: &str) -> BTreeSet<ObjectRef> {
    entries
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .filter_map(ObjectRef::parse)
        .collect()
}

pub fn render_inventory(entries: &BTreeSet<ObjectRef>) -> String {
    if entries.is_empty() {
        return "[]\n".into();
    }
    entries.iter().map(|e| format!("- {e}\n")).collect()
}

async fn write_inventory(
    kube: &Kube,
    bootstrap_namespace: &str,
    entries: &BTreeSet<ObjectRef>,
) -> Result<(), FluxError> {
    let api = objects::api(kube, &configmaps(), Some(bootstrap_namespace));
    let object = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": INVENTORY_CONFIGMAP, "namespace": bootstrap_namespace},
        "data": {"entries": render_inventory(entries)},
    });
    let what = format!("the inventory ConfigMap {bootstrap_namespace}/{INVENTORY_CONFIGMAP}");
    objects::apply(kube, &api, INVENTORY_CONFIGMAP, &object, &what)
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use crate::cluster::client::test_server::{Reply, handle, serve};

    fn server_error(code: u16) -> Reply {
        Reply::json(
            code,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "an error on the server (\"injected fault\") has prevented the request from succeeding",
                   "reason": "InternalError", "code": code}),
        )
    }

    /// A server answering `failures` times with `code`, then with the inventory ConfigMap.
    async fn inventory_after(code: u16, failures: usize) -> (Kube, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let url = serve(move |_, _| {
            if seen.fetch_add(1, Ordering::SeqCst) < failures {
                return server_error(code);
            }
            Reply::json(
                200,
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": INVENTORY_CONFIGMAP, "namespace": "flux-system"},
                       "data": {"entries": "- Secret/flux-system/flux-system\n"}}),
            )
        })
        .await;
        let kube = handle(&url, Duration::from_secs(10))
            .connect()
            .await
            .expect("connected");
        (kube, calls)
    }

    #[tokio::test]
    async fn a_burst_of_server_errors_on_the_inventory_is_retried() {
        let (kube, calls) = inventory_after(503, 2).await;
        let inventory = load_inventory(&kube, "flux-system")
            .await
            .expect("a transient 503 is retried, not the apply's failure");
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(
            inventory
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            vec!["Secret/flux-system/flux-system"]
        );
    }

    #[tokio::test]
    async fn a_refusal_is_not_retried_and_names_its_http_code() {
        let (kube, calls) = inventory_after(403, usize::MAX).await;
        let err = load_inventory(&kube, "flux-system")
            .await
            .expect_err("a 403 is an answer");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let message = err.to_string();
        assert!(message.contains("(HTTP 403)"), "{message}");
        assert!(message.contains("the inventory ConfigMap"), "{message}");
    }

    #[test]
    fn fingerprints_match_between_input_and_live_form() {
        let input = json!({"kind": "Secret", "metadata": {"name": "s", "labels": {"a": "1"}},
            "stringData": {"identity": "key"}, "data": {"known_hosts": "aG9zdA=="}});
        let live = json!({"kind": "Secret", "type": "Opaque",
            "metadata": {"name": "s", "labels": {"a": "1", "other": "x"}, "annotations": {"z": "1"}},
            "data": {"identity": "a2V5", "known_hosts": "aG9zdA==", "extra": "eA=="}});
        let keys = keys_of(&input);
        assert_eq!(keys.data, vec!["identity", "known_hosts"]);
        assert_eq!(
            fingerprint(b"salt", &input, &keys),
            fingerprint(b"salt", &live, &keys)
        );
        let edited = json!({"kind": "Secret", "metadata": {"name": "s", "labels": {"a": "1"}},
            "data": {"identity": "b3RoZXI=", "known_hosts": "aG9zdA=="}});
        assert_ne!(
            fingerprint(b"salt", &input, &keys),
            fingerprint(b"salt", &edited, &keys)
        );
        assert_ne!(
            fingerprint(b"salt", &input, &keys),
            fingerprint(b"pepper", &input, &keys),
            "the salt changes the fingerprint"
        );
    }

    #[test]
    fn inventory_format_is_the_modules() {
        let entries = parse_inventory(
            "- Secret/flux-system/flux-system\n- ConfigMap/flux-system/flux-runtime-info\nnoise\n",
        );
        assert_eq!(entries.len(), 2);
        let text = render_inventory(&entries);
        assert_eq!(
            text,
            "- ConfigMap/flux-system/flux-runtime-info\n- Secret/flux-system/flux-system\n"
        );
        assert_eq!(parse_inventory(&text), entries);
        assert_eq!(render_inventory(&BTreeSet::new()), "[]\n");
    }
}
