//! Helm release records, read natively (no helm binary, no chart download).
//!
//! Helm 3/4 stores each revision as Secret `sh.helm.release.v1.<name>.v<revision>` (type
//! `helm.sh/release.v1`, labels `owner=helm`, `name`, `status`, `version`), whose `data.release` is
//! base64(gzip(JSON)); gzip may be absent in old records. The current release is the highest revision.

use std::io::Read;

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::client::ClusterError;

/// What talosboot exposes about a release. Values are summarised by a hash: they can hold secrets.
#[derive(Debug, Clone, PartialEq)]
pub struct HelmRelease {
    pub name: String,
    pub namespace: String,
    pub revision: i64,
    pub status: String,
    pub chart: String,
    pub chart_version: String,
    pub app_version: String,
    pub last_deployed: String,
    pub description: String,
    /// SHA-256 of the user-supplied values as canonical JSON (sorted keys), hex.
    pub values_sha256: String,
}

/// Helm refuses releases over 1 MiB (the Secret size limit); a record that inflates far beyond that
/// is not a Helm record, and must not be allowed to exhaust memory.
const MAX_RELEASE_JSON: u64 = 32 * 1024 * 1024;

/// Decoding errors never quote the record: its values can hold secrets.
#[derive(Debug, thiserror::Error)]
pub enum HelmDecodeError {
    #[error("failed to decode the release record's base64")]
    Base64,
    #[error("failed to decompress the release record: {0}")]
    Gzip(std::io::ErrorKind),
    #[error("the release record inflates beyond {MAX_RELEASE_JSON} bytes")]
    TooLarge,
    #[error("failed to parse the release record's JSON (line {line}, column {column})")]
    Json { line: usize, column: usize },
}

#[derive(Deserialize)]
struct Record {
    name: String,
    #[serde(default)]
    namespace: String,
    version: i64,
    #[serde(default)]
    info: Info,
    #[serde(default)]
    chart: Option<Chart>,
    #[serde(default)]
    config: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
struct Info {
    #[serde(default)]
    status: String,
    #[serde(default)]
    last_deployed: String,
    #[serde(default)]
    description: String,
}

#[derive(Deserialize)]
struct Chart {
    metadata: Option<ChartMetadata>,
}

#[derive(Deserialize, Default)]
struct ChartMetadata {
    #[serde(default)]
    name: String,
    #[serde(default)]
    version: String,
    #[serde(default, rename = "appVersion")]
    app_version: String,
}

/// Decodes `data.release` (already un-base64'd once by the Secret API): base64, optional gzip, JSON.
pub fn decode_release(release_field: &[u8]) -> Result<HelmRelease, HelmDecodeError> {
    let compressed = base64::engine::general_purpose::STANDARD
        .decode(release_field.trim_ascii())
        .map_err(|_| HelmDecodeError::Base64)?;
    let json = if compressed.starts_with(&[0x1f, 0x8b, 0x08]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(compressed.as_slice())
            .take(MAX_RELEASE_JSON + 1)
            .read_to_end(&mut out)
            .map_err(|e| HelmDecodeError::Gzip(e.kind()))?;
        if out.len() as u64 > MAX_RELEASE_JSON {
            return Err(HelmDecodeError::TooLarge);
        }
        out
    } else {
        compressed
    };
    let record: Record = serde_json::from_slice(&json).map_err(|e| HelmDecodeError::Json {
        line: e.line(),
        column: e.column(),
    })?;
    let metadata = record.chart.and_then(|c| c.metadata).unwrap_or_default();
    Ok(HelmRelease {
        name: record.name,
        namespace: record.namespace,
        revision: record.version,
        status: record.info.status,
        chart: metadata.name,
        chart_version: metadata.version,
        app_version: metadata.app_version,
        last_deployed: record.info.last_deployed,
        description: record.info.description,
        values_sha256: values_digest(record.config.as_ref()),
    })
}

/// Null, absent and `{}` values all hash as `{}`: Helm treats them alike.
pub fn values_digest(values: Option<&serde_json::Value>) -> String {
    let empty = serde_json::Value::Object(Default::default());
    let values = match values {
        Some(serde_json::Value::Null) | None => &empty,
        Some(v) => v,
    };
    let mut canonical = Vec::new();
    write_canonical(values, &mut canonical);
    sha256_hex(&canonical)
}

/// JSON with object keys sorted at every level, whatever map order serde_json was built with.
fn write_canonical(value: &serde_json::Value, out: &mut Vec<u8>) {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend(serde_json::to_vec(key).unwrap_or_default());
                out.push(b':');
                write_canonical(item, out);
            }
            out.push(b'}');
        }
        serde_json::Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => out.extend(serde_json::to_vec(scalar).unwrap_or_default()),
    }
}

/// Lower-case hex SHA-256, the form talosboot exposes for hashes of secrets and values.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The current (highest-revision) record of release `name` in `namespace`, or `None`.
pub async fn current_release(
    client: kube::Client,
    endpoint: &str,
    namespace: &str,
    name: &str,
) -> Result<Option<HelmRelease>, ClusterError> {
    let secrets: Api<Secret> = Api::namespaced(client, namespace);
    let params = ListParams::default().labels(&format!("owner=helm,name={name}"));
    // Only the metadata of every revision: records of charts like Cilium are hundreds of KiB each.
    let revisions = secrets
        .list_metadata(&params)
        .await
        .map_err(|e| ClusterError::from_kube(e, endpoint))?;
    let newest = revisions
        .items
        .iter()
        .filter_map(|m| Some((revision_of(&m.metadata.labels)?, m.metadata.name.clone()?)))
        .max_by_key(|(revision, _)| *revision);
    let Some((_, secret_name)) = newest else {
        return Ok(None);
    };
    let secret = secrets
        .get(&secret_name)
        .await
        .map_err(|e| ClusterError::from_kube(e, endpoint))?;
    let record_error = |cause: String| ClusterError::InvalidRecord {
        what: format!("Helm release record {namespace}/{secret_name}"),
        cause,
    };
    if secret.type_.as_deref() != Some("helm.sh/release.v1") {
        return Err(record_error(format!(
            "it has type {:?}, not helm.sh/release.v1",
            secret.type_.unwrap_or_default()
        )));
    }
    let field = secret
        .data
        .as_ref()
        .and_then(|d| d.get("release"))
        .ok_or_else(|| record_error("it has no `release` data".into()))?;
    decode_release(&field.0)
        .map(Some)
        .map_err(|e| record_error(e.to_string()))
}

fn revision_of(labels: &Option<std::collections::BTreeMap<String, String>>) -> Option<i64> {
    labels.as_ref()?.get("version")?.parse().ok()
}

/// Encodes a release record the way Helm does.
#[cfg(test)]
fn encode_release_for_tests(json: &serde_json::Value) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let _ = gz.write_all(&serde_json::to_vec(json).unwrap_or_default());
    let compressed = gz.finish().unwrap_or_default();
    base64::engine::general_purpose::STANDARD
        .encode(compressed)
        .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> serde_json::Value {
        serde_json::json!({
            "name": "cilium", "namespace": "kube-system", "version": 3,
            "info": {"status": "deployed", "last_deployed": "2026-11-29T10:00:00Z", "description": "Upgrade complete"},
            "chart": {"metadata": {"name": "cilium", "version": "1.18.4", "appVersion": "1.18.4"}},
            "config": {"k8sServicePort": 7445, "ipam": {"mode": "kubernetes"}},
            "manifest": "---\n"
        })
    }

    #[test]
    fn gzip_record_decodes_with_chart_and_status() {
        let release = decode_release(&encode_release_for_tests(&record())).expect("decodes");
        assert_eq!(release.revision, 3);
        assert_eq!(release.status, "deployed");
        assert_eq!(release.chart_version, "1.18.4");
        assert_eq!(release.values_sha256.len(), 64);
    }

    #[test]
    fn record_without_gzip_decodes_too() {
        let plain = base64::engine::general_purpose::STANDARD
            .encode(serde_json::to_vec(&record()).expect("json"));
        let release = decode_release(plain.as_bytes()).expect("decodes");
        assert_eq!(release.name, "cilium");
    }

    #[test]
    fn values_hash_ignores_key_order_but_not_content() {
        let a = values_digest(Some(&serde_json::json!({"a": 1, "b": {"c": true}})));
        let b = values_digest(Some(&serde_json::json!({"b": {"c": true}, "a": 1})));
        let c = values_digest(Some(&serde_json::json!({"a": 2, "b": {"c": true}})));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(
            values_digest(None),
            values_digest(Some(&serde_json::json!({})))
        );
    }

    #[test]
    fn decode_errors_never_quote_the_record() {
        let json = br#"{"name": "cilium", "version": "hunter2"}"#;
        let encoded = base64::engine::general_purpose::STANDARD.encode(json);
        let err = decode_release(encoded.as_bytes()).expect_err("version is not a number");
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    #[test]
    fn a_gzip_bomb_is_refused() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![b' '; 1 << 20];
        for _ in 0..40 {
            gz.write_all(&zeros).expect("gzip");
        }
        let encoded = base64::engine::general_purpose::STANDARD.encode(gz.finish().expect("gzip"));
        assert!(matches!(
            decode_release(encoded.as_bytes()),
            Err(HelmDecodeError::TooLarge)
        ));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode_release(b"not base64 !!").is_err());
        let not_json = base64::engine::general_purpose::STANDARD.encode(b"\x1f\x8b\x08garbage");
        assert!(decode_release(not_json.as_bytes()).is_err());
    }
}
