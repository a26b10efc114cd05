//! Helm release records, written as Helm 3/4 writes them: Secret
//! `sh.helm.release.v1.<name>.v<revision>` (type `helm.sh/release.v1`, labels `owner=helm`,
//! `name`, `status`, `version`, `modifiedAt`), `data.release` = base64(gzip(release JSON)).

use std::io::{Read, Write};

use base64::Engine;
use serde_json::{Value, json};

use crate::cluster::obj;
use crate::store::{ApiError, GroupResource, ListOptions, Store};

/// One revision of a release (the fields Helm's JSON carries that matter here).
#[derive(Clone, Debug, PartialEq)]
pub struct Release {
    pub name: String,
    pub namespace: String,
    pub version: i64,
    pub status: String,
    pub description: String,
    pub first_deployed: String,
    pub last_deployed: String,
    pub chart: String,
    pub chart_version: String,
    pub app_version: String,
    /// User-supplied values only.
    pub config: Value,
    pub manifest: String,
}

fn secrets() -> GroupResource {
    GroupResource::core("secrets")
}

pub fn secret_name(name: &str, revision: i64) -> String {
    format!("sh.helm.release.v1.{name}.v{revision}")
}

impl Release {
    /// Helm's release JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "info": {"first_deployed": self.first_deployed, "last_deployed": self.last_deployed, "deleted": "",
                     "description": self.description, "status": self.status, "notes": ""},
            "chart": {"metadata": {"name": self.chart, "version": self.chart_version, "appVersion": self.app_version,
                                   "apiVersion": "v2", "description": format!("A Helm chart for {}", self.chart)},
                      "lock": null, "templates": [], "values": {}, "schema": null, "files": []},
            "config": self.config, "manifest": self.manifest, "hooks": [],
            "version": self.version, "namespace": self.namespace,
        })
    }

    fn from_json(v: &Value) -> Release {
        let s = |p: &str| obj::s(v, p).to_string();
        Release {
            name: s("/name"),
            namespace: s("/namespace"),
            version: obj::i64_at(v, "/version").unwrap_or(0),
            status: s("/info/status"),
            description: s("/info/description"),
            first_deployed: s("/info/first_deployed"),
            last_deployed: s("/info/last_deployed"),
            chart: s("/chart/metadata/name"),
            chart_version: s("/chart/metadata/version"),
            app_version: s("/chart/metadata/appVersion"),
            config: v.get("config").cloned().unwrap_or(json!({})),
            manifest: s("/manifest"),
        }
    }

    /// The storage Secret.
    pub fn to_secret(&self) -> Value {
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let _ = gz.write_all(self.to_json().to_string().as_bytes());
        let payload = b64.encode(gz.finish().unwrap_or_default());
        let modified = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        json!({
            "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": {"name": secret_name(&self.name, self.version), "namespace": self.namespace,
                "labels": {"owner": "helm", "name": self.name, "status": self.status,
                           "version": self.version.to_string(), "modifiedAt": modified.to_string()}},
            "data": {"release": b64.encode(payload)},
        })
    }

    /// Decodes a storage Secret (gzip optional). `None` when it is not a release record.
    pub fn from_secret(secret: &Value) -> Option<Release> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let wire = secret.pointer("/data/release")?.as_str()?;
        let payload = b64.decode(b64.decode(wire).ok()?).ok()?;
        let raw = if payload.starts_with(&[0x1f, 0x8b]) {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(payload.as_slice())
                .read_to_end(&mut out)
                .ok()?;
            out
        } else {
            payload
        };
        Some(Release::from_json(&serde_json::from_slice(&raw).ok()?))
    }
}

/// All revisions of `name` in `ns`, oldest first.
pub fn history(store: &Store, ns: &str, name: &str) -> Result<Vec<Release>, ApiError> {
    let opts = ListOptions::default().labels(&format!("owner=helm,name={name}"));
    let mut out: Vec<Release> = store
        .list(&secrets(), Some(ns), &opts)?
        .items
        .iter()
        .filter_map(Release::from_secret)
        .collect();
    out.sort_by_key(|r| r.version);
    Ok(out)
}

/// All releases (latest revision of each), in `ns` or everywhere.
pub fn list(store: &Store, ns: Option<&str>) -> Result<Vec<Release>, ApiError> {
    let opts = ListOptions::default().labels("owner=helm");
    let mut latest: std::collections::BTreeMap<(String, String), Release> = Default::default();
    for r in store
        .list(&secrets(), ns, &opts)?
        .items
        .iter()
        .filter_map(Release::from_secret)
    {
        let key = (r.namespace.clone(), r.name.clone());
        if latest.get(&key).is_none_or(|l| l.version < r.version) {
            latest.insert(key, r);
        }
    }
    Ok(latest.into_values().collect())
}

/// Creates or replaces the revision's Secret.
pub fn save(store: &Store, r: &Release) -> Result<(), ApiError> {
    let secret = r.to_secret();
    let opts = obj::manager("helm");
    match store.create(&secrets(), &r.namespace, secret.clone(), &opts) {
        Err(e) if e.code == 409 => store
            .update(&secrets(), &r.namespace, secret, &opts)
            .map(|_| ()),
        other => other.map(|_| ()),
    }
}

/// Deletes every revision's Secret (`helm uninstall` without `--keep-history`).
pub fn purge(store: &Store, ns: &str, name: &str) -> Result<(), ApiError> {
    for r in history(store, ns, name)? {
        match store.delete(
            &secrets(),
            ns,
            &secret_name(name, r.version),
            &Default::default(),
        ) {
            Err(e) if e.code != 404 => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_a_record() {
        let r = Release {
            name: "cilium".into(),
            namespace: "kube-system".into(),
            version: 2,
            status: "deployed".into(),
            description: "Upgrade complete".into(),
            first_deployed: "t".into(),
            last_deployed: "t".into(),
            chart: "cilium".into(),
            chart_version: "1.18.4".into(),
            app_version: "1.18.4".into(),
            config: json!({"a": 1}),
            manifest: "---\n".into(),
        };
        let s = r.to_secret();
        assert_eq!(s["metadata"]["name"], "sh.helm.release.v1.cilium.v2");
        assert_eq!(Release::from_secret(&s), Some(r));
    }
}
