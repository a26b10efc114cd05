//! The values a Helm release runs with, read from its current record (`config`: the user-supplied
//! values, as `helm get values` shows them), and the value paths talosboot marked secret on it.
//! Read at plan, only to say which value paths an upgrade changes: the values never go to state,
//! logs or errors (nothing here implements `Debug` with them, and errors never quote the record).
//!
//! The secret paths are an annotation talosboot writes on the record Secret after an install
//! ([`SENSITIVE_PATHS_ANNOTATION`], the `set_sensitive`/`set_wo` names, never their values), so a
//! later plan, from this state or another one (an import), hides what came from those inputs.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value as Json, json};

use super::release::{HelmDecodeError, newest_record, record_json};
use crate::cluster::client::ClusterError;

/// Annotation on a release record Secret: a JSON list of the `--set`-style value paths that came
/// from sensitive inputs.
pub const SENSITIVE_PATHS_ANNOTATION: &str = "talosboot.dev/sensitive-values";

/// What the current record says about the values.
#[derive(Clone, PartialEq, Default)]
pub struct RecordedValues {
    pub revision: i64,
    /// The user-supplied values (`{}` when none).
    pub values: Json,
    /// Value paths marked secret on the record ([`SENSITIVE_PATHS_ANNOTATION`]).
    pub sensitive_paths: Vec<String>,
}

/// Never prints the values.
impl std::fmt::Debug for RecordedValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordedValues")
            .field("revision", &self.revision)
            .field("sensitive_paths", &self.sensitive_paths)
            .finish_non_exhaustive()
    }
}

/// The values of the current record of release `namespace/name`, or `None` without a record.
///
/// # Errors
/// The API refused or could not be reached; the record is not a Helm record.
pub async fn current_values(
    client: kube::Client,
    endpoint: &str,
    namespace: &str,
    name: &str,
) -> Result<Option<RecordedValues>, ClusterError> {
    let secrets: Api<Secret> = Api::namespaced(client, namespace);
    let Some((revision, secret_name)) = newest_record(&secrets, endpoint, name).await? else {
        return Ok(None);
    };
    let Some(secret) = secrets
        .get_opt(&secret_name)
        .await
        .map_err(|e| ClusterError::from_kube(e, endpoint))?
    else {
        return Ok(None);
    };
    let invalid = |cause: &str| ClusterError::InvalidRecord {
        what: format!("Helm release record {namespace}/{secret_name}"),
        cause: cause.to_owned(),
    };
    let field = secret
        .data
        .as_ref()
        .and_then(|d| d.get("release"))
        .ok_or_else(|| invalid("it has no `release` data"))?;
    let values = record_config(&field.0).map_err(|e| invalid(&e.to_string()))?;
    let sensitive_paths = secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SENSITIVE_PATHS_ANNOTATION))
        .and_then(|text| serde_json::from_str::<Vec<String>>(text).ok())
        .unwrap_or_default();
    Ok(Some(RecordedValues {
        revision,
        values,
        sensitive_paths,
    }))
}

/// `config` of a record's `data.release` (base64, optional gzip, JSON); `{}` when it has none.
fn record_config(release_field: &[u8]) -> Result<Json, HelmDecodeError> {
    /// Only `config`: the rest of the record (the manifest, hundreds of KiB) is skipped.
    #[derive(serde::Deserialize)]
    struct Config {
        #[serde(default)]
        config: Option<Json>,
    }
    let record: Config = serde_json::from_slice(&record_json(release_field)?)?;
    Ok(match record.config {
        None | Some(Json::Null) => json!({}),
        Some(config) => config,
    })
}

/// Marks `paths` secret on the current record of release `namespace/name` (nothing to do without
/// paths).
///
/// # Errors
/// The API refused or could not be reached.
pub async fn mark_sensitive_paths(
    client: kube::Client,
    endpoint: &str,
    namespace: &str,
    name: &str,
    paths: &[String],
) -> Result<(), ClusterError> {
    if paths.is_empty() {
        return Ok(());
    }
    let secrets: Api<Secret> = Api::namespaced(client, namespace);
    let Some((_, secret_name)) = newest_record(&secrets, endpoint, name).await? else {
        return Ok(());
    };
    let listed = serde_json::to_string(paths).unwrap_or_default();
    let patch = json!({"metadata": {"annotations": {SENSITIVE_PATHS_ANNOTATION: listed}}});
    secrets
        .patch(&secret_name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| ClusterError::from_kube(e, endpoint))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use std::io::Write;

    fn encoded(record: &Json, gzip: bool) -> Vec<u8> {
        let json = serde_json::to_vec(record).expect("json");
        let payload = if gzip {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gz.write_all(&json).expect("gzip");
            gz.finish().expect("gzip")
        } else {
            json
        };
        base64::engine::general_purpose::STANDARD
            .encode(payload)
            .into_bytes()
    }

    #[test]
    fn the_config_of_a_record_is_read_with_or_without_gzip() {
        let record =
            json!({"name": "cilium", "version": 2, "config": {"ipam": {"mode": "cluster-pool"}}});
        for gzip in [true, false] {
            assert_eq!(
                record_config(&encoded(&record, gzip)).ok(),
                Some(json!({"ipam": {"mode": "cluster-pool"}}))
            );
        }
        let without = json!({"name": "cilium", "version": 1, "config": null});
        assert_eq!(
            record_config(&encoded(&without, true)).ok(),
            Some(json!({}))
        );
        assert!(record_config(b"not base64 !").is_err());
    }

    #[test]
    fn recorded_values_never_print_their_values() {
        let recorded = RecordedValues {
            revision: 3,
            values: json!({"token": "hunter2"}),
            sensitive_paths: vec!["token".into()],
        };
        assert!(!format!("{recorded:?}").contains("hunter2"));
    }
}
