//! The model of `talosboot_cilium`: its configuration and state as plain structs, the values it
//! installs (Talos defaults under the user's documents and `set` entries), and the checks that
//! need no I/O.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use crate::cluster::bootstrap::{ApiEndpoint, BootstrapNamespace, JobSettings, KUBEPRISM};
use crate::cluster::helm_install::{ChartInstall, DEFAULT_HELM_IMAGE};
use crate::framework::Diagnostics;
use crate::resources::duration::parse_go_duration;
use crate::values::AttributePath;

pub const DEFAULT_NAME: &str = "cilium";
pub const DEFAULT_NAMESPACE: &str = "kube-system";
pub const DEFAULT_REPOSITORY: &str = "https://helm.cilium.io";
pub const DEFAULT_CHART: &str = "cilium";
pub const DEFAULT_TIMEOUT: &str = "10m";

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
pub struct SetValue {
    pub name: String,
    pub value: String,
    #[serde(rename = "type")]
    pub kind: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
pub struct Toleration {
    pub key: Option<String>,
    pub operator: Option<String>,
    pub value: Option<String>,
    pub effect: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
pub struct JobInput {
    pub image: Option<String>,
    pub pull_policy: Option<String>,
    pub node_selector: Option<BTreeMap<String, String>>,
    pub tolerations: Option<Vec<Toleration>>,
    pub env: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
pub struct Agents {
    pub ready: i64,
    pub desired: i64,
}

/// Configuration, plan and state share one shape.
#[derive(Clone, Deserialize, Serialize, PartialEq, Default)]
pub struct Cilium {
    pub id: Option<String>,
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub version: Option<String>,
    pub repository: Option<String>,
    pub chart: Option<String>,
    pub values: Option<Vec<String>>,
    pub set: Option<Vec<SetValue>>,
    pub set_sensitive: Option<Vec<SetValue>>,
    pub timeout: Option<String>,
    pub wait: Option<bool>,
    pub talos_defaults: Option<bool>,
    pub api_endpoint: Option<String>,
    pub adopt_existing: Option<bool>,
    pub job: Option<JobInput>,
    pub deletion_policy: Option<String>,
    pub status: Option<String>,
    pub revision: Option<i64>,
    pub chart_version: Option<String>,
    pub app_version: Option<String>,
    pub values_sha256: Option<String>,
    pub agents: Option<Agents>,
    pub nodes_ready: Option<bool>,
}

/// Never prints values: `set_sensitive` and values documents can hold secrets.
impl std::fmt::Debug for Cilium {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cilium")
            .field("id", &self.id)
            .field("version", &self.version)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl Cilium {
    pub fn release_name(&self) -> &str {
        self.name.as_deref().unwrap_or(DEFAULT_NAME)
    }
    pub fn release_namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE)
    }
    pub fn timeout(&self) -> Duration {
        self.timeout
            .as_deref()
            .and_then(|t| parse_go_duration(t).ok())
            .unwrap_or(Duration::from_secs(600))
    }
    pub fn endpoint(&self) -> ApiEndpoint {
        ApiEndpoint::parse(self.api_endpoint.as_deref().unwrap_or(KUBEPRISM))
            .or_else(|_| ApiEndpoint::parse(KUBEPRISM))
            .expect("the default endpoint parses")
    }
    pub fn talos_defaults(&self) -> bool {
        self.talos_defaults.unwrap_or(true)
    }
    pub fn keep_on_destroy(&self) -> bool {
        self.deletion_policy.as_deref() == Some("keep")
    }

    /// Fills the defaults of optional+computed inputs the configuration leaves unset.
    pub fn with_defaults(mut self) -> Cilium {
        self.name.get_or_insert_with(|| DEFAULT_NAME.into());
        self.namespace
            .get_or_insert_with(|| DEFAULT_NAMESPACE.into());
        self.repository
            .get_or_insert_with(|| DEFAULT_REPOSITORY.into());
        self.chart.get_or_insert_with(|| DEFAULT_CHART.into());
        self.timeout.get_or_insert_with(|| DEFAULT_TIMEOUT.into());
        self.wait.get_or_insert(true);
        self.talos_defaults.get_or_insert(true);
        self.api_endpoint.get_or_insert_with(|| KUBEPRISM.into());
        self.adopt_existing.get_or_insert(false);
        self.deletion_policy
            .get_or_insert_with(|| "uninstall".into());
        self.id = Some(format!(
            "{}/{}",
            self.release_namespace(),
            self.release_name()
        ));
        self
    }

    /// The values Helm will record as the release's user-supplied values: Talos defaults, then
    /// each `values` document, then `set`, then `set_sensitive`.
    pub fn merged_values(&self) -> Result<Json, String> {
        let (mut plain, sensitive) = self.values_parts()?;
        merge(&mut plain, &sensitive);
        Ok(plain)
    }

    /// Non-sensitive values (ConfigMap) and sensitive ones (Secret), merged each.
    pub fn values_parts(&self) -> Result<(Json, Json), String> {
        let mut plain = if self.talos_defaults() {
            talos_values(&self.endpoint())
        } else {
            json!({})
        };
        for (i, doc) in self.values.iter().flatten().enumerate() {
            let v = parse_values(doc).map_err(|e| format!("values[{i}]: {e}"))?;
            merge(&mut plain, &v);
        }
        for s in self.set.iter().flatten() {
            apply_set(&mut plain, s)?;
        }
        let mut sensitive = json!({});
        for s in self.set_sensitive.iter().flatten() {
            apply_set(&mut sensitive, s)?;
        }
        Ok((plain, sensitive))
    }

    /// The chart install the bootstrap Job runs.
    pub fn chart_install(&self) -> Result<ChartInstall, String> {
        let (plain, sensitive) = self.values_parts()?;
        let is_empty = sensitive.as_object().is_some_and(|o| o.is_empty());
        Ok(ChartInstall {
            release: self.release_name().into(),
            namespace: self.release_namespace().into(),
            repository: Some(
                self.repository
                    .clone()
                    .unwrap_or_else(|| DEFAULT_REPOSITORY.into()),
            ),
            chart: self.chart.clone().unwrap_or_else(|| DEFAULT_CHART.into()),
            version: self.version.clone().unwrap_or_default(),
            values_yaml: vec![plain.to_string()],
            sensitive_values_yaml: if is_empty {
                Vec::new()
            } else {
                vec![sensitive.to_string()]
            },
            create_namespace: false,
            take_ownership: self.adopt_existing.unwrap_or(false),
            description: Some(format!(
                "talosboot: Cilium {}",
                self.version.clone().unwrap_or_default()
            )),
        })
    }

    /// The bootstrap pod: Talos defaults plus the user's `job`.
    pub fn job_settings(&self) -> JobSettings {
        let job = self.job.clone().unwrap_or_default();
        let mut settings = JobSettings::talos(job.image.as_deref().unwrap_or(DEFAULT_HELM_IMAGE));
        settings.api_endpoint = Some(self.endpoint());
        settings.pull_policy = job.pull_policy;
        settings.node_selector = job.node_selector.unwrap_or_default();
        settings.tolerations = job
            .tolerations
            .iter()
            .flatten()
            .map(|t| serde_json::to_value(t).unwrap_or_default())
            .map(|mut t| {
                if let Some(o) = t.as_object_mut() {
                    o.retain(|_, v| !v.is_null());
                }
                t
            })
            .collect();
        settings.env = job.env.unwrap_or_default();
        settings
    }

    /// Cilium's bootstrap Job runs in the release namespace (`kube-system` is exempt from Pod
    /// Security on Talos).
    pub fn bootstrap_namespace(&self) -> BootstrapNamespace {
        BootstrapNamespace::named(self.release_namespace())
    }
}

/// The Talos values of field notes §2, for an agent endpoint.
pub fn talos_values(endpoint: &ApiEndpoint) -> Json {
    json!({
        "ipam": {"mode": "kubernetes"},
        "kubeProxyReplacement": true,
        "k8sServiceHost": endpoint.host,
        "k8sServicePort": endpoint.port,
        "cgroup": {"autoMount": {"enabled": false}, "hostRoot": "/sys/fs/cgroup"},
        "securityContext": {"capabilities": {
            "ciliumAgent": ["CHOWN", "KILL", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "SYS_ADMIN", "SYS_RESOURCE", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID"],
            "cleanCiliumState": ["NET_ADMIN", "SYS_ADMIN", "SYS_RESOURCE"],
        }},
    })
}

/// Helm's coalescing of user values: maps merge, everything else is replaced by the later value.
pub fn merge(base: &mut Json, over: &Json) {
    match (base.as_object_mut(), over.as_object()) {
        (Some(b), Some(o)) => {
            for (k, v) in o {
                merge(b.entry(k.clone()).or_insert(Json::Null), v);
            }
        }
        _ => *base = over.clone(),
    }
}

/// A values document: YAML (JSON is YAML too); empty is `{}`. Errors give the position only, never
/// the text (values can hold secrets).
pub fn parse_values(doc: &str) -> Result<Json, String> {
    if doc.trim().is_empty() {
        return Ok(json!({}));
    }
    let v: Json = serde_saphyr::from_str(doc).map_err(|e| match e.location() {
        Some(at) => format!(
            "not a valid YAML document (line {}, column {})",
            at.line(),
            at.column()
        ),
        None => "not a valid YAML document".to_owned(),
    })?;
    match v {
        Json::Null => Ok(json!({})),
        Json::Object(_) => Ok(v),
        _ => Err("must be a YAML mapping of values (key: value)".into()),
    }
}

/// One `--set` assignment: dotted path (`\.` escapes a dot, `[n]` indexes a list).
pub fn apply_set(values: &mut Json, s: &SetValue) -> Result<(), String> {
    let value = match s.kind.as_deref().unwrap_or("auto") {
        "string" => Json::String(s.value.clone()),
        "auto" => typed_value(&s.value),
        other => {
            return Err(format!(
                "set {:?}: type must be `auto` or `string`, not {other:?}",
                s.name
            ));
        }
    };
    let path = split_path(&s.name).map_err(|e| format!("set {:?}: {e}", s.name))?;
    let mut cur = values;
    for (i, step) in path.iter().enumerate() {
        let last = i + 1 == path.len();
        cur = match step {
            PathPart::Key(k) => {
                if !cur.is_object() {
                    *cur = json!({});
                }
                let map = cur.as_object_mut().expect("made an object");
                if last {
                    map.insert(k.clone(), value);
                    return Ok(());
                }
                map.entry(k.clone()).or_insert(Json::Null)
            }
            PathPart::Index(n) => {
                if !cur.is_array() {
                    *cur = json!([]);
                }
                let list = cur.as_array_mut().expect("made a list");
                if list.len() <= *n {
                    list.resize(*n + 1, Json::Null);
                }
                if last {
                    list[*n] = value;
                    return Ok(());
                }
                &mut list[*n]
            }
        };
    }
    Ok(())
}

#[derive(Debug, PartialEq)]
enum PathPart {
    Key(String),
    Index(usize),
}

fn split_path(name: &str) -> Result<Vec<PathPart>, String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => cur.extend(chars.next()),
            '.' => {
                if !cur.is_empty() {
                    parts.push(PathPart::Key(std::mem::take(&mut cur)));
                }
            }
            '[' => {
                if !cur.is_empty() {
                    parts.push(PathPart::Key(std::mem::take(&mut cur)));
                }
                let index: String = chars.by_ref().take_while(|c| *c != ']').collect();
                let n = index
                    .parse()
                    .map_err(|_| format!("[{index}] is not a list index"))?;
                parts.push(PathPart::Index(n));
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        parts.push(PathPart::Key(cur));
    }
    if parts.is_empty() {
        return Err("empty name".into());
    }
    Ok(parts)
}

/// `--set` typing: `true`/`false`, integers, `null`, `{a,b}` lists, else a string.
fn typed_value(raw: &str) -> Json {
    if let Some(inner) = raw.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
        return Json::Array(
            inner
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|s| typed_value(s.trim()))
                .collect(),
        );
    }
    match raw {
        "true" => Json::Bool(true),
        "false" => Json::Bool(false),
        "null" => Json::Null,
        _ => raw
            .parse::<i64>()
            .map(Json::from)
            .unwrap_or_else(|_| Json::String(raw.to_owned())),
    }
}

const NAME_RULE: &str =
    "lower-case letters, digits and '-', starting and ending with a letter or digit";

fn dns_label(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// `1.18.4`, `v1.18.4`, `1.19.0-rc.1`: three numbers, an optional pre-release or build suffix.
fn exact_version(v: &str) -> bool {
    let v = v.strip_prefix('v').unwrap_or(v);
    let (core, suffix) = match v.find(['-', '+']) {
        Some(i) => (&v[..i], Some(&v[i + 1..])),
        None => (v, None),
    };
    let numbers: Vec<&str> = core.split('.').collect();
    numbers.len() == 3
        && numbers
            .iter()
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        && suffix.is_none_or(|s| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'+')
        })
}

/// Checks without I/O; unknown values (decoded as absent) are skipped.
pub fn validate(c: &Cilium, d: &mut Diagnostics) {
    let at = AttributePath::attr;
    if let Some(name) = &c.name {
        if !name.split('.').all(|l| dns_label(l, 53)) || name.len() > 53 {
            d.error_at(
                at("name"),
                "Invalid release name",
                format!(
                    "{name:?} is not a valid Helm release name: {NAME_RULE}, at most 53 characters."
                ),
            );
        }
    }
    if let Some(ns) = &c.namespace {
        if !dns_label(ns, 63) {
            d.error_at(
                at("namespace"),
                "Invalid namespace",
                format!(
                    "{ns:?} is not a valid namespace name: {NAME_RULE}, at most 63 characters."
                ),
            );
        }
    }
    if let Some(v) = &c.version {
        if !exact_version(v) {
            d.error_at(at("version"), "Version must be exact", format!("{v:?} is not an exact chart version such as `1.18.4`. Floating versions are refused: Cilium would change with the image."));
        }
    }
    if let Some(t) = &c.timeout {
        match parse_go_duration(t) {
            Ok(dur) if dur.as_secs() >= 30 => {}
            Ok(_) => d.error_at(
                at("timeout"),
                "Timeout too short",
                format!("{t:?} is under 30s; a Cilium install takes longer than that."),
            ),
            Err(e) => d.error_at(at("timeout"), "Invalid timeout", e),
        }
    }
    if let Some(e) = &c.api_endpoint {
        if let Err(m) = ApiEndpoint::parse(e) {
            d.error_at(at("api_endpoint"), "Invalid API endpoint", format!("{m}. Use HOST:PORT outside the Service CIDR, e.g. Talos KubePrism `localhost:7445` or `<control-plane-ip>:6443`."));
        }
    }
    if let Some(p) = &c.deletion_policy {
        if p != "uninstall" && p != "keep" {
            d.error_at(
                at("deletion_policy"),
                "Invalid deletion policy",
                format!("{p:?}: use `uninstall` or `keep`."),
            );
        }
    }
    if let Some(r) = &c.repository {
        if !(r.starts_with("https://") || r.starts_with("http://") || r.starts_with("oci://")) {
            d.error_at(
                at("repository"),
                "Invalid repository",
                format!(
                    "{r:?}: use an `https://` chart repository URL or an `oci://` registry path."
                ),
            );
        }
    }
    for (i, doc) in c.values.iter().flatten().enumerate() {
        if let Err(e) = parse_values(doc) {
            d.error_at(
                at("values").then_index(i as i64),
                "Invalid values document",
                format!("values[{i}] is {e}."),
            );
        }
    }
    for (attr, list) in [("set", &c.set), ("set_sensitive", &c.set_sensitive)] {
        for (i, s) in list.iter().flatten().enumerate() {
            if let Err(e) = apply_set(&mut json!({}), s) {
                d.error_at(at(attr).then_index(i as i64), "Invalid set entry", e);
            }
        }
    }
    if let Some(job) = &c.job {
        if let Some(p) = &job.pull_policy {
            if !["Always", "IfNotPresent", "Never"].contains(&p.as_str()) {
                d.error_at(
                    at("job").then_attr("pull_policy"),
                    "Invalid pull policy",
                    format!("{p:?}: use `Always`, `IfNotPresent` or `Never`."),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cilium() -> Cilium {
        Cilium {
            version: Some("1.18.4".into()),
            ..Default::default()
        }
        .with_defaults()
    }

    #[test]
    fn the_user_always_wins_over_the_talos_defaults() {
        let mut c = cilium();
        c.values = Some(vec![
            "kubeProxyReplacement: false\nhubble:\n  relay:\n    enabled: true\n".into(),
        ]);
        c.set = Some(vec![SetValue {
            name: "ipam.mode".into(),
            value: "cluster-pool".into(),
            kind: None,
        }]);
        let v = c.merged_values().expect("values");
        assert_eq!(v["kubeProxyReplacement"], json!(false));
        assert_eq!(v["ipam"]["mode"], json!("cluster-pool"));
        assert_eq!(v["hubble"]["relay"]["enabled"], json!(true));
        assert_eq!(v["k8sServiceHost"], json!("localhost"));
        assert_eq!(v["k8sServicePort"], json!(7445));
        let caps = v["securityContext"]["capabilities"]["ciliumAgent"]
            .as_array()
            .expect("caps");
        assert!(!caps.contains(&json!("SYS_MODULE")));
    }

    #[test]
    fn set_follows_helm_typing_and_paths() {
        let mut v = json!({});
        let set = |name: &str, value: &str, kind: Option<&str>| SetValue {
            name: name.into(),
            value: value.into(),
            kind: kind.map(Into::into),
        };
        apply_set(&mut v, &set("a.b", "true", None)).expect("set");
        apply_set(&mut v, &set("a.c", "12", Some("string"))).expect("set");
        apply_set(&mut v, &set("caps", "{NET_ADMIN,SYS_ADMIN}", None)).expect("set");
        apply_set(&mut v, &set("annotations.foo\\.io/x", "y", None)).expect("set");
        apply_set(&mut v, &set("list[1].name", "n", None)).expect("set");
        assert_eq!(v["a"]["b"], json!(true));
        assert_eq!(v["a"]["c"], json!("12"));
        assert_eq!(v["caps"], json!(["NET_ADMIN", "SYS_ADMIN"]));
        assert_eq!(v["annotations"]["foo.io/x"], json!("y"));
        assert_eq!(v["list"][1]["name"], json!("n"));
        assert!(apply_set(&mut v, &set("x", "1", Some("number"))).is_err());
    }

    #[test]
    fn sensitive_values_never_reach_the_configmap_document() {
        let mut c = cilium();
        c.set_sensitive = Some(vec![SetValue {
            name: "hubble.tls.key".into(),
            value: "s3cr3t".into(),
            kind: None,
        }]);
        let install = c.chart_install().expect("install");
        assert!(install.values_yaml.iter().all(|d| !d.contains("s3cr3t")));
        assert!(
            install
                .sensitive_values_yaml
                .iter()
                .any(|d| d.contains("s3cr3t"))
        );
        assert_eq!(
            c.merged_values().expect("merged")["hubble"]["tls"]["key"],
            json!("s3cr3t")
        );
    }

    #[test]
    fn bad_input_is_reported_on_its_attribute() {
        let mut c = cilium();
        c.version = Some("1.18.x".into());
        c.timeout = Some("10 minutes".into());
        c.api_endpoint = Some("localhost".into());
        c.values = Some(vec!["a: [1".into()]);
        c.deletion_policy = Some("orphan".into());
        let mut d = Diagnostics::new();
        validate(&c, &mut d);
        let paths: Vec<String> = d
            .iter()
            .filter_map(|d| d.attribute.as_ref())
            .map(|p| p.describe())
            .collect();
        for expected in [
            "version",
            "timeout",
            "api_endpoint",
            "values[0]",
            "deletion_policy",
        ] {
            assert!(
                paths.iter().any(|p| p.contains(expected)),
                "{expected} not in {paths:?}"
            );
        }
        let mut ok = Diagnostics::new();
        validate(&cilium(), &mut ok);
        assert!(ok.is_empty());
    }
}
