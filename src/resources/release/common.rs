//! [`ReleaseCommon`]: the inputs and computed attributes every chart-installing resource shares
//! (`talosboot_cilium`, `talosboot_helm_release`), embedded in each model with `#[serde(flatten)]`,
//! with what follows from them alone (the release's name, its values, the chart install, the
//! bootstrap pod) and their checks without I/O.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use crate::cluster::endpoint::{ApiEndpoint, KUBEPRISM};
use crate::cluster::engine::JobSettings;
use crate::cluster::helm::install::ChartInstall;
use crate::cluster::helm::release::ReleaseStatus;
use crate::cluster::helm::values::{SetValue, apply_set, merged, parse_values, values_parts};
use crate::framework::Diagnostics;
use crate::resources::choice::DeletionPolicy;
use crate::resources::connection::{ClusterSettings, IdentityState};
pub use crate::resources::duration::parse_timeout;
use crate::resources::job::{self, Flavor, JobDefaults, JobInput};
use crate::resources::names::{check_namespace, check_release_name};
use crate::resources::rbac::{self, Rbac};
use crate::values::AttributePath;

/// Configuration, plan and state of what every chart-installing resource shares (one shape for
/// all three; computed attributes are `None` in configuration, inputs the schema defaults are
/// set in plan and state).
#[derive(Clone, Deserialize, Serialize, PartialEq, Default)]
pub struct ReleaseCommon {
    pub id: Option<String>,
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub version: Option<String>,
    pub repository: Option<String>,
    pub chart: Option<String>,
    pub values: Option<Vec<String>>,
    pub set: Option<Vec<SetValue>>,
    pub set_sensitive: Option<Vec<SetValue>>,
    /// Write-only: only in the configuration (apply puts it back into the planned model).
    pub set_wo: Option<Vec<SetValue>>,
    /// Write-only values documents, merged after `values` into the Secret part.
    pub values_wo: Option<Vec<String>>,
    /// Bumped to roll a change of `values_wo` on purpose.
    pub values_wo_version: Option<i64>,
    /// The resource's own connection (write-only leaves; `crate::resources::connection`).
    pub cluster: Option<ClusterSettings>,
    /// The cluster the resource was applied to through `cluster`.
    pub cluster_identity: Option<IdentityState>,
    pub timeout: Option<String>,
    pub wait: Option<bool>,
    pub api_endpoint: Option<String>,
    pub adopt_existing: Option<bool>,
    pub job: Option<JobInput>,
    pub rbac: Option<Rbac>,
    pub deletion_policy: Option<DeletionPolicy>,
    pub status: Option<ReleaseStatus>,
    pub revision: Option<i64>,
    pub chart_version: Option<String>,
    pub app_version: Option<String>,
    /// Salted hash of the values the release records.
    pub values_sha256: Option<String>,
    /// hashicorp/helm's `metadata` object (without the values).
    pub metadata: Option<ReleaseMetadata>,
}

/// `helm_release`'s `metadata` output, so references such as `metadata.app_version` keep working
/// after a `moved`; the values are left out (they can hold secrets: `values_sha256` stands for
/// them).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
pub struct ReleaseMetadata {
    pub name: String,
    pub revision: i64,
    pub namespace: String,
    pub chart: String,
    pub version: String,
    pub app_version: String,
    /// Unix seconds, as `helm_release` has them.
    pub first_deployed: i64,
    pub last_deployed: i64,
    pub notes: String,
}

impl ReleaseMetadata {
    /// The attribute's type, for the schemas.
    pub fn value_type() -> crate::values::Type {
        use crate::values::Type;
        Type::object([
            ("name", Type::String),
            ("revision", Type::Number),
            ("namespace", Type::String),
            ("chart", Type::String),
            ("version", Type::String),
            ("app_version", Type::String),
            ("first_deployed", Type::Number),
            ("last_deployed", Type::Number),
            ("notes", Type::String),
        ])
    }
}

/// Unix seconds of an RFC 3339 time as Helm records it (`0` when there is none).
pub fn unix_seconds(rfc3339: &str) -> i64 {
    rfc3339
        .parse::<k8s_openapi::jiff::Timestamp>()
        .map(|t| t.as_second())
        .unwrap_or_default()
}

/// Never prints values: `set_sensitive` and values documents can hold secrets.
impl std::fmt::Debug for ReleaseCommon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReleaseCommon")
            .field("id", &self.id)
            .field("chart", &self.chart)
            .field("version", &self.version)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

/// The release record's fields every model keeps, as a refresh writes them.
#[derive(Debug, Clone, PartialEq)]
pub struct ReleaseFields {
    pub status: ReleaseStatus,
    pub revision: i64,
    pub chart_version: String,
    pub app_version: String,
    /// Salted hash of the recorded values.
    pub values_sha256: String,
    /// The configured version, unless the cluster runs another one.
    pub version: String,
    pub metadata: ReleaseMetadata,
}

/// The timeout when state carries none (states are planned with the schema's default).
const FALLBACK_TIMEOUT: Duration = Duration::from_secs(300);

impl ReleaseCommon {
    pub fn release_name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }
    pub fn release_namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or("default")
    }
    /// `<namespace>/<name>`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.release_namespace(), self.release_name())
    }
    pub fn timeout(&self) -> Duration {
        self.timeout
            .as_deref()
            .and_then(|t| parse_timeout(t).ok())
            .unwrap_or(FALLBACK_TIMEOUT)
    }
    pub fn wait(&self) -> bool {
        self.wait.unwrap_or(true)
    }
    pub fn keep_on_destroy(&self) -> bool {
        self.deletion_policy == Some(DeletionPolicy::Keep)
    }
    pub fn endpoint(&self) -> ApiEndpoint {
        ApiEndpoint::parse(self.api_endpoint.as_deref().unwrap_or(KUBEPRISM))
            .or_else(|_| ApiEndpoint::parse(KUBEPRISM))
            .expect("the default endpoint parses")
    }

    /// Non-sensitive values (ConfigMap) and sensitive ones (Secret), merged each: `base` (the
    /// resource's own defaults), then each `values` document, then `set`; apart, each
    /// `values_wo` document, then `set_sensitive` and `set_wo`.
    ///
    /// # Errors
    /// A document that is not YAML, a bad `set` path.
    pub fn values_parts(&self, base: Json) -> Result<(Json, Json), String> {
        values_parts(
            base,
            self.values.as_deref(),
            self.set.as_deref(),
            self.values_wo.as_deref().unwrap_or_default(),
            self.set_sensitive
                .iter()
                .flatten()
                .chain(self.set_wo.iter().flatten()),
        )
    }

    /// The values Helm will record as the release's user-supplied values.
    ///
    /// # Errors
    /// As [`ReleaseCommon::values_parts`].
    pub fn merged_values(&self, base: Json) -> Result<Json, String> {
        self.values_parts(base).map(merged)
    }

    /// The chart install of these inputs, with `base` under the user's values; a resource adds
    /// what is its own (a description, a local chart's archive).
    ///
    /// # Errors
    /// As [`ReleaseCommon::values_parts`].
    pub fn chart_install(&self, base: Json) -> Result<ChartInstall, String> {
        let (plain, sensitive) = self.values_parts(base)?;
        let empty = sensitive.as_object().is_some_and(|o| o.is_empty());
        Ok(ChartInstall {
            release: self.release_name().into(),
            namespace: self.release_namespace().into(),
            repository: self.repository.clone(),
            chart: self.chart.clone().unwrap_or_default(),
            version: self.version.clone().unwrap_or_default(),
            values_yaml: vec![plain.to_string()],
            sensitive_values_yaml: if empty {
                Vec::new()
            } else {
                vec![sensitive.to_string()]
            },
            take_ownership: self.adopt_existing.unwrap_or(false),
            apply_method: JobInput::apply_method(self.job.as_ref()),
            ..Default::default()
        })
    }

    /// The bootstrap pod: the provider's `defaults`, the Talos defaults (host network,
    /// `api_endpoint`), the user's `job` ([`job::resolve`]), and what the run may do (`rbac`).
    pub fn job_settings(&self, defaults: &JobDefaults) -> JobSettings {
        JobSettings {
            rbac: rbac::policy(self.rbac.as_ref()),
            ..job::resolve(self.job.as_ref(), defaults, Flavor::Chart, &self.endpoint())
        }
    }

    /// Writes what a refresh read of the release record.
    pub fn record(&mut self, f: &ReleaseFields) {
        self.status = Some(f.status.clone());
        self.revision = Some(f.revision);
        self.chart_version = Some(f.chart_version.clone());
        self.app_version = Some(f.app_version.clone());
        self.values_sha256 = Some(f.values_sha256.clone());
        self.version = Some(f.version.clone());
        self.metadata = Some(f.metadata.clone());
    }

    /// Copies the computed attributes of `prior` (a release GitOps owns is not touched).
    pub fn keep_computed(&mut self, prior: &ReleaseCommon) {
        self.status = prior.status.clone();
        self.revision = prior.revision;
        self.chart_version = prior.chart_version.clone();
        self.app_version = prior.app_version.clone();
        self.values_sha256 = prior.values_sha256.clone();
        self.metadata = prior.metadata.clone();
    }

    /// The checks every chart-installing resource makes the same way, without I/O; unknown
    /// values (decoded as absent) are skipped. A resource checks `version` and `timeout` itself.
    pub fn validate(&self, d: &mut Diagnostics) {
        let at = AttributePath::attr;
        if let Some(name) = &self.name {
            check_release_name(name, at("name"), d);
        }
        if let Some(ns) = &self.namespace {
            check_namespace(ns, at("namespace"), d);
        }
        if let Some(e) = &self.api_endpoint {
            if let Err(m) = ApiEndpoint::parse(e) {
                d.error_at(at("api_endpoint"), "Invalid API endpoint", format!("{m}. Use HOST:PORT outside the Service CIDR, e.g. Talos KubePrism `localhost:7445` or `<control-plane-ip>:6443`."));
            }
        }
        if let Some(DeletionPolicy::Other(p)) = &self.deletion_policy {
            d.error_at(
                at("deletion_policy"),
                "Invalid deletion policy",
                format!("{p:?}: use `uninstall` or `keep`."),
            );
        }
        rbac::validate(self.rbac.as_ref(), at("rbac"), d);
        if let Some(r) = &self.repository {
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
        for (i, doc) in self.values.iter().flatten().enumerate() {
            if let Err(e) = parse_values(doc) {
                d.error_at(
                    at("values").then_index(i as i64),
                    "Invalid values document",
                    format!("values[{i}] is {e}."),
                );
            }
        }
        for (i, doc) in self.values_wo.iter().flatten().enumerate() {
            if let Err(e) = parse_values(doc) {
                // The position only: the document is a secret.
                d.error_at(
                    at("values_wo").then_index(i as i64),
                    "Invalid values document",
                    format!("values_wo[{i}] is {e}."),
                );
            }
        }
        for (attr, list) in [("set", &self.set), ("set_sensitive", &self.set_sensitive)] {
            // A name not known yet (built from a variable) is checked once it is.
            for (i, s) in list
                .iter()
                .flatten()
                .enumerate()
                .filter(|(_, s)| s.name.is_some())
            {
                if let Err(e) = apply_set(&mut json!({}), s) {
                    d.error_at(at(attr).then_index(i as i64), "Invalid set entry", e);
                }
            }
        }
        if let Some(j) = &self.job {
            j.validate(d);
        }
    }
}

/// `set`, `set_sensitive` and `set_wo` entries of the configuration whose `value` is null (not
/// merely unknown): an error on each, since Helm would set the key to an empty value, replacing
/// what runs (a credential, for the sensitive ones). `terraform query -generate-config-out` writes
/// `value = null` for every value it cannot read back, to be filled in. Read from the
/// configuration itself: its model cannot tell null from unknown at validate.
pub fn validate_null_set_values(config: &crate::values::Value, d: &mut Diagnostics) {
    use crate::values::Value;
    for attr in ["set", "set_sensitive", "set_wo"] {
        let entries = match config.attr(attr) {
            Some(Value::List(items) | Value::Set(items) | Value::Tuple(items)) => items,
            _ => continue,
        };
        for (i, entry) in entries.iter().enumerate() {
            if entry.attr("value").is_some_and(Value::is_null) && !entry.is_unknown() {
                let name = match entry.attr("name") {
                    Some(Value::String(n)) => format!(" (`{n}`)"),
                    _ => String::new(),
                };
                d.error_at(
                    AttributePath::attr(attr).then_index(i as i64).then_attr("value"),
                    "Missing set value",
                    format!("{attr}[{i}].value{name} is null: Helm would set the key to an empty value, replacing what runs. Give the value (for a secret, from an ephemeral variable or a write-only source), or remove the entry to leave the key as the chart and `values` have it."),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_null_set_value_is_an_error_on_its_path_and_an_unknown_one_is_not() {
        use crate::values::Value;
        let entry = |value: Value| {
            Value::object([("name", Value::from("auth.password")), ("value", value)])
        };
        let config = Value::object([
            (
                "set_wo",
                Value::List(vec![entry(Value::unknown()), entry(Value::Null)]),
            ),
            ("set", Value::List(vec![entry(Value::from("x"))])),
        ]);
        let mut d = Diagnostics::new();
        validate_null_set_values(&config, &mut d);
        let found: Vec<_> = d.iter().collect();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            found[0].attribute,
            Some(
                AttributePath::attr("set_wo")
                    .then_index(1)
                    .then_attr("value")
            )
        );
        assert!(
            found[0]
                .detail
                .starts_with("set_wo[1].value (`auth.password`) is null"),
            "{}",
            found[0].detail
        );
    }

    #[test]
    fn helm_times_become_unix_seconds() {
        assert_eq!(unix_seconds("2026-11-29T10:00:00Z"), 1_795_946_400);
        assert_eq!(
            unix_seconds("2026-11-29T11:00:00.123456789+01:00"),
            1_795_946_400
        );
        assert_eq!(unix_seconds(""), 0);
    }

    #[test]
    fn words_outside_the_lists_are_reported_on_their_attribute() {
        let c = ReleaseCommon {
            rbac: Some(Rbac::from("admin")),
            deletion_policy: Some(DeletionPolicy::from("orphan")),
            name: Some("Cilium_1".into()),
            ..Default::default()
        };
        let mut d = Diagnostics::new();
        c.validate(&mut d);
        let paths: Vec<String> = d
            .iter()
            .filter_map(|d| d.attribute.as_ref())
            .map(|p| p.describe())
            .collect();
        assert_eq!(paths, ["name", "deletion_policy", "rbac"]);
    }
}
