//! The model of `talosboot_cilium`: its configuration and state as plain structs, the values it
//! installs (Talos defaults, in the variant `kube_proxy_replacement` chooses, under the user's
//! documents and `set` entries), and the checks that need no I/O.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use crate::cluster::bootstrap::{ApiEndpoint, BootstrapNamespace, JobSettings, KUBEPRISM};
use crate::cluster::helm_install::ChartInstall;
pub use crate::cluster::helm_values::{
    SetValue, apply_set, merge, merged, parse_values, values_parts,
};
use crate::framework::Diagnostics;
use crate::resources::duration::parse_go_duration;
pub use crate::resources::release::inputs::{CommonInputs, JobInput, Toleration, validate_common};
use crate::values::AttributePath;

pub const DEFAULT_NAME: &str = "cilium";
pub const DEFAULT_NAMESPACE: &str = "kube-system";
pub const DEFAULT_REPOSITORY: &str = "https://helm.cilium.io";
pub const DEFAULT_CHART: &str = "cilium";
pub const DEFAULT_TIMEOUT: &str = "10m";

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
pub struct Agents {
    pub ready: i64,
    pub desired: i64,
}

/// One workload of the release (`components` in the state), as a refresh or apply saw it.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
pub struct Component {
    /// `DaemonSet` or `Deployment`.
    pub kind: String,
    /// DaemonSets: the nodes it is scheduled on; Deployments: the replicas asked for.
    pub desired: i64,
    pub ready: i64,
    /// Updated, ready and available at the current generation (`cilium status --wait`).
    pub rolled_out: bool,
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
    pub set_wo: Option<Vec<SetValue>>,
    pub timeout: Option<String>,
    pub wait: Option<bool>,
    pub talos_defaults: Option<bool>,
    pub kube_proxy_replacement: Option<bool>,
    pub api_endpoint: Option<String>,
    pub adopt_existing: Option<bool>,
    pub job: Option<JobInput>,
    pub rbac: Option<String>,
    pub deletion_policy: Option<String>,
    pub status: Option<String>,
    pub revision: Option<i64>,
    pub chart_version: Option<String>,
    pub app_version: Option<String>,
    pub values_sha256: Option<String>,
    pub agents: Option<Agents>,
    pub components: Option<BTreeMap<String, Component>>,
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
    /// The input (default `true`, as before the input existed).
    pub fn kube_proxy_replacement(&self) -> bool {
        self.kube_proxy_replacement.unwrap_or(true)
    }

    /// Whether the installed Cilium will replace kube-proxy, and whether the input says so (or
    /// the user's values or `talos_defaults = false` decide it).
    ///
    /// # Errors
    /// The values do not merge (a document that is not YAML, a bad `set` path).
    pub fn replacement_choice(&self) -> Result<ReplacementChoice, String> {
        let values = self.merged_values()?;
        let on = match values.get("kubeProxyReplacement") {
            Some(Json::Bool(b)) => *b,
            Some(Json::String(s)) => matches!(s.as_str(), "true" | "strict"),
            // Absent: the chart's default, `false`.
            _ => false,
        };
        Ok(ReplacementChoice {
            on,
            from_input: self.talos_defaults() && on == self.kube_proxy_replacement(),
        })
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
        self.kube_proxy_replacement.get_or_insert(true);
        self.api_endpoint.get_or_insert_with(|| KUBEPRISM.into());
        self.adopt_existing.get_or_insert(false);
        self.deletion_policy
            .get_or_insert_with(|| "uninstall".into());
        self.rbac
            .get_or_insert_with(|| crate::resources::rbac::DEFAULT.into());
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
        self.values_parts().map(merged)
    }

    /// Non-sensitive values (ConfigMap) and sensitive ones (Secret), merged each.
    pub fn values_parts(&self) -> Result<(Json, Json), String> {
        values_parts(
            match (self.talos_defaults(), self.kube_proxy_replacement()) {
                (true, true) => talos_values(&self.endpoint()),
                (true, false) => crate::cluster::talos::talos_cilium_values_with_kube_proxy(),
                (false, _) => json!({}),
            },
            self.values.as_deref(),
            self.set.as_deref(),
            self.set_sensitive
                .iter()
                .flatten()
                .chain(self.set_wo.iter().flatten()),
        )
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
            ..Default::default()
        })
    }

    /// The bootstrap pod: Talos defaults plus the user's `job`.
    pub fn job_settings(&self) -> JobSettings {
        let mut settings =
            crate::resources::release::inputs::job_settings(self.job.as_ref(), self.endpoint());
        settings.rbac = crate::resources::rbac::policy(self.rbac.as_deref());
        settings
    }

    /// Cilium's bootstrap Job runs in the release namespace (`kube-system` is exempt from Pod
    /// Security on Talos).
    pub fn bootstrap_namespace(&self) -> BootstrapNamespace {
        BootstrapNamespace::named(self.release_namespace())
    }
}

/// Whether Cilium will replace kube-proxy (`kubeProxyReplacement` of the merged values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplacementChoice {
    pub on: bool,
    /// `kube_proxy_replacement` decides it (with `talos_defaults`, not overridden by the values).
    pub from_input: bool,
}

/// The Talos values of field notes §2 with kube-proxy replacement, for an agent endpoint.
pub fn talos_values(endpoint: &ApiEndpoint) -> Json {
    crate::cluster::talos::talos_cilium_values(&endpoint.host, endpoint.port)
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
    crate::resources::rbac::validate(c.rbac.as_deref(), at("rbac"), d);
    validate_common(
        &CommonInputs {
            name: c.name.as_deref(),
            namespace: c.namespace.as_deref(),
            api_endpoint: c.api_endpoint.as_deref(),
            deletion_policy: c.deletion_policy.as_deref(),
            repository: c.repository.as_deref(),
            values: c.values.as_deref(),
            set: c.set.as_deref(),
            set_sensitive: c.set_sensitive.as_deref(),
            job: c.job.as_ref(),
        },
        d,
    );
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
            value: Some("cluster-pool".into()),
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
    fn without_replacement_the_values_are_talos_values_for_kube_proxy() {
        let mut c = cilium();
        assert_eq!(
            c.replacement_choice(),
            Ok(ReplacementChoice {
                on: true,
                from_input: true
            })
        );
        c.kube_proxy_replacement = Some(false);
        let v = c.merged_values().expect("values");
        assert_eq!(v["kubeProxyReplacement"], json!(false));
        assert!(
            v.get("k8sServiceHost").is_none(),
            "kube-proxy routes the Service"
        );
        assert_eq!(v["cgroup"]["autoMount"]["enabled"], json!(false));
        assert_eq!(
            c.replacement_choice(),
            Ok(ReplacementChoice {
                on: false,
                from_input: true
            })
        );
        c.values = Some(vec!["kubeProxyReplacement: \"true\"\n".into()]);
        assert_eq!(
            c.replacement_choice(),
            Ok(ReplacementChoice {
                on: true,
                from_input: false
            }),
            "the user's values win, and decide"
        );
        c.talos_defaults = Some(false);
        c.values = None;
        assert_eq!(
            c.replacement_choice(),
            Ok(ReplacementChoice {
                on: false,
                from_input: false
            }),
            "the chart's default"
        );
    }

    #[test]
    fn sensitive_values_never_reach_the_configmap_document() {
        let mut c = cilium();
        c.set_sensitive = Some(vec![SetValue {
            name: "hubble.tls.key".into(),
            value: Some("s3cr3t".into()),
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
