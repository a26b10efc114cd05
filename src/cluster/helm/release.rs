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

pub use super::major::ApplyMethod;
pub use super::status::ReleaseStatus;
use crate::cluster::ClusterError;

/// What talosboot exposes about a release. Values are summarised by a hash: they can hold secrets.
#[derive(Debug, Clone, PartialEq)]
pub struct HelmRelease {
    pub name: String,
    pub namespace: String,
    pub revision: i64,
    pub status: ReleaseStatus,
    pub chart: String,
    pub chart_version: String,
    pub app_version: String,
    pub last_deployed: String,
    /// When the first revision was deployed (RFC 3339, as Helm records it).
    pub first_deployed: String,
    pub description: String,
    /// The chart's rendered NOTES.txt.
    pub notes: String,
    /// SHA-256 of the user-supplied values as canonical JSON (sorted keys), hex.
    pub values_sha256: String,
    /// The workloads of the rendered manifest (Deployments, DaemonSets, StatefulSets, Jobs), whose
    /// readiness says whether the release is up.
    pub workloads: Vec<ManifestWorkload>,
    /// `(apiVersion, kind)` of every object of the manifest and the hooks, sorted, once each:
    /// what an upgrade may delete and an uninstall deletes.
    pub kinds: Vec<(String, String)>,
    /// Every object of the manifest (not the hooks): what the release owns.
    pub objects: Vec<ManifestObject>,
    /// How this revision's objects were applied (Helm 4's `apply_method`); `None` in a record
    /// Helm 3 wrote (Helm 4 upgrades those client-side) or with a method talosboot does not know.
    pub apply_method: Option<ApplyMethod>,
    /// The user-supplied `upgradeCompatibility` value (Cilium's chart: the minor first
    /// installed), the one value read by name: not a secret, and what an import or move keeps.
    pub upgrade_compatibility: Option<String>,
    /// The user-supplied `kubeProxyReplacement` value (Cilium's chart), `None` when the values do
    /// not set it: read by name like `upgradeCompatibility`, not a secret, what an import of
    /// Cilium records as `kube_proxy_replacement`.
    pub kube_proxy_replacement: Option<serde_json::Value>,
}

/// An object of a release's manifest, as the manifest names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestObject {
    pub api_version: String,
    pub kind: String,
    /// `None`: not in the manifest (the release namespace for a namespaced kind).
    pub namespace: Option<String>,
    pub name: String,
}

/// The dynamic APIs of manifest objects, each kind discovered once: a release's objects are
/// read by kind (apiVersion and kind as the manifest names them), whatever the chart holds.
#[derive(Default)]
pub struct ManifestApis {
    /// `None`: the kind is not served (a CRD the chart has not installed yet).
    resources: std::collections::HashMap<(String, String), Option<(kube::core::ApiResource, bool)>>,
}

impl ManifestApis {
    /// The API of `object` (in `release_namespace` when the manifest names no namespace and the
    /// kind is namespaced); `None` when the cluster does not serve its kind.
    pub async fn api_for(
        &mut self,
        kube: &crate::cluster::Kube,
        object: &ManifestObject,
        release_namespace: &str,
    ) -> Result<Option<ObjectApi>, ClusterError> {
        let key = (object.api_version.clone(), object.kind.clone());
        if !self.resources.contains_key(&key) {
            let (group, version) = object
                .api_version
                .rsplit_once('/')
                .unwrap_or(("", object.api_version.as_str()));
            let gvk = kube::core::GroupVersionKind::gvk(group, version, &object.kind);
            let found = kube
                .retry("discover a kind of the release", || {
                    kube::discovery::pinned_kind(&kube.client, &gvk)
                })
                .await;
            let resolved = match found {
                Ok((resource, caps)) => {
                    Some((resource, caps.scope == kube::discovery::Scope::Namespaced))
                }
                Err(kube::Error::Api(s)) if s.code == 404 => None,
                Err(kube::Error::Discovery(_)) => None,
                Err(e) => return Err(kube.cluster_error(e)),
            };
            self.resources.insert(key.clone(), resolved);
        }
        let Some((resource, namespaced)) = &self.resources[&key] else {
            return Ok(None);
        };
        let namespace = object.namespace.as_deref().unwrap_or(release_namespace);
        Ok(Some(match namespaced {
            true => ObjectApi {
                api: Api::namespaced_with(kube.client.clone(), namespace, resource),
                label: format!("{} {namespace}/{}", object.kind, object.name),
            },
            false => ObjectApi {
                api: Api::all_with(kube.client.clone(), resource),
                label: format!("{} {}", object.kind, object.name),
            },
        }))
    }
}

/// The API of one manifest object, and how messages name it (`Kind namespace/name`).
pub struct ObjectApi {
    pub api: Api<kube::api::DynamicObject>,
    pub label: String,
}

/// The objects of a manifest (multi-document YAML as Helm stores it); documents that do not parse
/// or lack `apiVersion`, `kind` or `metadata.name` are skipped, as for [`manifest_workloads`].
pub fn manifest_objects(manifest: &str) -> Vec<ManifestObject> {
    let mut out = Vec::new();
    for doc in manifest.split("\n---") {
        let doc = doc.trim_start_matches("---");
        if doc.trim().is_empty() {
            continue;
        }
        let Ok(value) = serde_saphyr::from_str::<serde_json::Value>(doc) else {
            continue;
        };
        let text = |v: Option<&serde_json::Value>| {
            v.and_then(serde_json::Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let metadata = value.get("metadata");
        if let (Some(api_version), Some(kind), Some(name)) = (
            text(value.get("apiVersion")),
            text(value.get("kind")),
            text(metadata.and_then(|m| m.get("name"))),
        ) {
            out.push(ManifestObject {
                api_version,
                kind,
                namespace: text(metadata.and_then(|m| m.get("namespace"))),
                name,
            });
        }
    }
    out
}

/// A workload in a release's manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestWorkload {
    pub kind: String,
    /// `None`: the release namespace.
    pub namespace: Option<String>,
    pub name: String,
}

const WORKLOAD_KINDS: &[&str] = &["Deployment", "DaemonSet", "StatefulSet", "Job"];

/// The workloads of a manifest (multi-document YAML as Helm stores it): its objects of a
/// workload kind ([`manifest_objects`]); documents that do not parse are skipped, since readiness
/// of what the manifest names is best effort.
pub fn manifest_workloads(manifest: &str) -> Vec<ManifestWorkload> {
    manifest_objects(manifest)
        .into_iter()
        .filter(|o| WORKLOAD_KINDS.contains(&o.kind.as_str()))
        .map(|o| ManifestWorkload {
            kind: o.kind,
            namespace: o.namespace,
            name: o.name,
        })
        .collect()
}

/// `(apiVersion, kind)` of the documents of a manifest, sorted, once each. Reads the documents'
/// top-level `apiVersion:` and `kind:` lines (column 0 in block YAML, which is what Helm renders
/// and stores), so it works on a full manifest and on `helm template` output filtered down to
/// those lines; a document without both is skipped.
pub fn manifest_kinds(manifest: &str) -> Vec<(String, String)> {
    let mut kinds = std::collections::BTreeSet::new();
    let mut api_version: Option<String> = None;
    let mut kind: Option<String> = None;
    let mut flush = |api_version: &mut Option<String>, kind: &mut Option<String>| {
        if let (Some(v), Some(k)) = (api_version.take(), kind.take()) {
            kinds.insert((v, k));
        }
    };
    for line in manifest.lines() {
        if line.starts_with("---") {
            flush(&mut api_version, &mut kind);
        } else if let Some(v) = line.strip_prefix("apiVersion:") {
            api_version = Some(yaml_scalar(v));
        } else if let Some(k) = line.strip_prefix("kind:") {
            kind = Some(yaml_scalar(k));
        }
    }
    flush(&mut api_version, &mut kind);
    kinds
        .into_iter()
        .filter(|(v, k)| !v.is_empty() && !k.is_empty())
        .collect()
}

/// A plain or quoted one-line scalar, without a trailing comment.
fn yaml_scalar(s: &str) -> String {
    let s = s.trim();
    let s = match s.find(" #") {
        Some(i) if !s.starts_with(['"', '\'']) => &s[..i],
        _ => s,
    };
    s.trim().trim_matches(['"', '\'']).to_owned()
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
    #[serde(default)]
    manifest: String,
    #[serde(default)]
    hooks: Vec<Hook>,
    /// Helm 4: `csa` or `ssa`.
    #[serde(default)]
    apply_method: Option<String>,
}

#[derive(Deserialize)]
struct Hook {
    #[serde(default)]
    manifest: String,
}

#[derive(Deserialize, Default)]
struct Info {
    #[serde(default)]
    status: String,
    #[serde(default)]
    last_deployed: String,
    #[serde(default)]
    first_deployed: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    notes: String,
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

/// The JSON of a record's `data.release` (already un-base64'd once by the Secret API): base64,
/// then gzip when it has gzip's magic, bounded by [`MAX_RELEASE_JSON`].
pub(crate) fn record_json(release_field: &[u8]) -> Result<Vec<u8>, HelmDecodeError> {
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
    Ok(json)
}

impl From<serde_json::Error> for HelmDecodeError {
    fn from(e: serde_json::Error) -> Self {
        HelmDecodeError::Json {
            line: e.line(),
            column: e.column(),
        }
    }
}

/// Decodes `data.release` (already un-base64'd once by the Secret API): base64, optional gzip, JSON.
pub fn decode_release(release_field: &[u8]) -> Result<HelmRelease, HelmDecodeError> {
    let record: Record = serde_json::from_slice(&record_json(release_field)?)?;
    let metadata = record.chart.and_then(|c| c.metadata).unwrap_or_default();
    Ok(HelmRelease {
        name: record.name,
        namespace: record.namespace,
        revision: record.version,
        status: ReleaseStatus::from(record.info.status.as_str()),
        chart: metadata.name,
        chart_version: metadata.version,
        app_version: metadata.app_version,
        last_deployed: record.info.last_deployed,
        first_deployed: record.info.first_deployed,
        description: record.info.description,
        notes: record.info.notes,
        values_sha256: values_digest(record.config.as_ref()),
        workloads: manifest_workloads(&record.manifest),
        kinds: manifest_kinds(
            &std::iter::once(record.manifest.as_str())
                .chain(record.hooks.iter().map(|h| h.manifest.as_str()))
                .collect::<Vec<_>>()
                .join("\n---\n"),
        ),
        objects: manifest_objects(&record.manifest),
        apply_method: record.apply_method.as_deref().and_then(ApplyMethod::parse),
        upgrade_compatibility: record
            .config
            .as_ref()
            .and_then(|c| c.get("upgradeCompatibility"))
            .and_then(|v| v.as_str())
            .map(str::to_owned),
        kube_proxy_replacement: record
            .config
            .as_ref()
            .and_then(|c| c.get("kubeProxyReplacement"))
            .cloned(),
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

/// How many times listing then getting the newest revision is tried before giving up: Helm prunes
/// old revisions (`--history-max`) and replaces pending ones, so the newest Secret of a list can be
/// gone by the time it is fetched. Each retry lists again.
const GET_ATTEMPTS: usize = 5;

/// The current (highest-revision) record of release `name` in `namespace`, or `None`.
///
/// # Errors
/// [`ClusterError::Rejected`] / [`ClusterError::Unreachable`] from the API (a 404 on the newest
/// revision is retried up to [`GET_ATTEMPTS`] times, re-listing each time, and only then reported),
/// [`ClusterError::InvalidRecord`] when the record is not a Helm record.
pub async fn current_release(
    client: kube::Client,
    endpoint: &str,
    namespace: &str,
    name: &str,
) -> Result<Option<HelmRelease>, ClusterError> {
    let secrets: Api<Secret> = Api::namespaced(client, namespace);
    let mut attempt = 1;
    let (secret_name, secret) = loop {
        let Some(secret_name) = newest_revision(&secrets, endpoint, name).await? else {
            return Ok(None);
        };
        match secrets.get(&secret_name).await {
            Ok(secret) => break (secret_name, secret),
            Err(kube::Error::Api(status)) if status.code == 404 && attempt < GET_ATTEMPTS => {
                tracing::debug!(
                    namespace,
                    secret_name,
                    attempt,
                    "newest Helm revision vanished between list and get; listing again"
                );
                attempt += 1;
            }
            Err(e) => return Err(ClusterError::from_kube(e, endpoint)),
        }
    };
    decode_secret(namespace, &secret_name, &secret).map(Some)
}

/// The release record of `revision` when it is still the newest, found with two GETs issued
/// concurrently (that revision and the next); otherwise (a newer revision, or that one gone) the
/// current record as [`current_release`] finds it. A refresh knows the revision from state, so in
/// the steady state it costs two concurrent requests instead of a list then a get.
pub async fn release_from_revision(
    client: kube::Client,
    endpoint: &str,
    namespace: &str,
    name: &str,
    revision: i64,
) -> Result<Option<HelmRelease>, ClusterError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let known = format!("sh.helm.release.v1.{name}.v{revision}");
    let next = format!("sh.helm.release.v1.{name}.v{}", revision + 1);
    let (known_record, next_record) = tokio::join!(secrets.get_opt(&known), secrets.get_opt(&next));
    let map = |e| ClusterError::from_kube(e, endpoint);
    match (known_record.map_err(map)?, next_record.map_err(map)?) {
        (Some(secret), None) => decode_secret(namespace, &known, &secret).map(Some),
        _ => current_release(client, endpoint, namespace, name).await,
    }
}

fn decode_secret(
    namespace: &str,
    secret_name: &str,
    secret: &Secret,
) -> Result<HelmRelease, ClusterError> {
    let record_error = |cause: String| ClusterError::InvalidRecord {
        what: format!("Helm release record {namespace}/{secret_name}"),
        cause,
    };
    if secret.type_.as_deref() != Some("helm.sh/release.v1") {
        return Err(record_error(format!(
            "it has type {:?}, not helm.sh/release.v1",
            secret.type_.clone().unwrap_or_default()
        )));
    }
    let field = secret
        .data
        .as_ref()
        .and_then(|d| d.get("release"))
        .ok_or_else(|| record_error("it has no `release` data".into()))?;
    decode_release(&field.0).map_err(|e| record_error(e.to_string()))
}

/// The Secret name of the highest revision of release `name`.
async fn newest_revision(
    secrets: &Api<Secret>,
    endpoint: &str,
    name: &str,
) -> Result<Option<String>, ClusterError> {
    Ok(newest_record(secrets, endpoint, name)
        .await?
        .map(|(_, secret_name)| secret_name))
}

/// `(revision, Secret name)` of the highest revision of release `name`, listing only metadata
/// (records of charts like Cilium are hundreds of KiB each).
pub(super) async fn newest_record(
    secrets: &Api<Secret>,
    endpoint: &str,
    name: &str,
) -> Result<Option<(i64, String)>, ClusterError> {
    newest_labelled(secrets, endpoint, &format!("owner=helm,name={name}")).await
}

/// `(revision, Secret name)` of the highest revision among the records `selector` lists.
async fn newest_labelled(
    secrets: &Api<Secret>,
    endpoint: &str,
    selector: &str,
) -> Result<Option<(i64, String)>, ClusterError> {
    let params = ListParams::default().labels(selector);
    let revisions = secrets
        .list_metadata(&params)
        .await
        .map_err(|e| ClusterError::from_kube(e, endpoint))?;
    Ok(revisions
        .items
        .iter()
        .filter_map(|m| Some((revision_of(&m.metadata.labels)?, m.metadata.name.clone()?)))
        .max_by_key(|(revision, _)| *revision))
}

/// The newest record of release `name` that Helm labels `deployed`, below a newest one that is
/// not (`pending-*` after a killed run, `failed`): Helm keeps the revision that ran `deployed`
/// until an upgrade or rollback succeeds, so it is the version the workloads ran before.
/// Listed by labels (metadata only), then that one record read.
///
/// # Errors
/// The API refused or could not be reached, or the record is not a Helm record.
pub async fn deployed_release(
    client: kube::Client,
    endpoint: &str,
    namespace: &str,
    name: &str,
) -> Result<Option<HelmRelease>, ClusterError> {
    let secrets: Api<Secret> = Api::namespaced(client, namespace);
    let selector = format!("owner=helm,name={name},status=deployed");
    let Some((_, secret_name)) = newest_labelled(&secrets, endpoint, &selector).await? else {
        return Ok(None);
    };
    match secrets.get_opt(&secret_name).await {
        Ok(Some(secret)) => decode_secret(namespace, &secret_name, &secret).map(Some),
        Ok(None) => Ok(None),
        Err(e) => Err(ClusterError::from_kube(e, endpoint)),
    }
}

/// A release [`list_releases`] found.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ReleaseRef {
    pub namespace: String,
    pub name: String,
}

/// Every release in `namespace` (every namespace when `None`) whose newest record is not
/// `uninstalled` (kept by `helm uninstall --keep-history`), sorted by namespace and name, found
/// from record metadata only (the labels `owner=helm`, `name`, `version`, `status` that Helm 3
/// and 4 write on every `helm.sh/release.v1` Secret).
///
/// # Errors
/// The API refused or could not be reached.
pub async fn list_releases(
    client: kube::Client,
    endpoint: &str,
    namespace: Option<&str>,
) -> Result<Vec<ReleaseRef>, ClusterError> {
    let secrets: Api<Secret> = match namespace {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    };
    let records = secrets
        .list_metadata(&ListParams::default().labels("owner=helm"))
        .await
        .map_err(|e| ClusterError::from_kube(e, endpoint))?;
    // (namespace, name) -> (newest revision, its status label)
    let mut newest = std::collections::BTreeMap::<ReleaseRef, (i64, ReleaseStatus)>::new();
    for record in &records.items {
        let labels = &record.metadata.labels;
        let (Some(namespace), Some(name), Some(revision)) = (
            record.metadata.namespace.clone(),
            labels.as_ref().and_then(|l| l.get("name")).cloned(),
            revision_of(labels),
        ) else {
            continue;
        };
        let status = labels
            .as_ref()
            .and_then(|l| l.get("status"))
            .map(|s| ReleaseStatus::from(s.as_str()))
            .unwrap_or(ReleaseStatus::Other(String::new()));
        let entry = newest
            .entry(ReleaseRef { namespace, name })
            .or_insert((revision, status.clone()));
        if revision > entry.0 {
            *entry = (revision, status);
        }
    }
    Ok(newest
        .into_iter()
        .filter(|(_, (_, status))| *status != ReleaseStatus::Uninstalled)
        .map(|(release, _)| release)
        .collect())
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
mod tests;
