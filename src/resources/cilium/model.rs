//! The model of `talosboot_cilium`: its configuration and state as plain structs, the values it
//! installs (Talos defaults, in the variant `kube_proxy_replacement` chooses, under the user's
//! documents and `set` entries), and the checks that need no I/O.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use crate::cluster::cilium::running_config::{critical_paths, kube_proxy_replacement_on};
use crate::cluster::endpoint::ApiEndpoint;
pub use crate::cluster::helm::values::SetValue;
use crate::framework::Diagnostics;
use crate::resources::duration::parse_timeout;
use crate::resources::release::ReleaseCommon;
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

/// Configuration, plan and state share one shape: [`ReleaseCommon`] and Cilium's own.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
pub struct Cilium {
    #[serde(flatten)]
    pub common: ReleaseCommon,
    pub talos_defaults: Option<bool>,
    pub kube_proxy_replacement: Option<bool>,
    /// The minor first installed (`1.19`), passed as `upgradeCompatibility` so that defaults a
    /// newer chart changed do not flip on the running cluster.
    pub upgrade_compatibility: Option<String>,
    /// One minor at a time, checked at plan (`false`: the user knows better).
    pub upgrade_path_check: Option<bool>,
    /// Cilium's pre-flight DaemonSet before a version upgrade.
    pub preflight: Option<bool>,
    /// A version upgrade that does not roll out is rolled back to the revision that ran.
    pub rollback_on_failure: Option<bool>,
    /// Critical running settings (value paths) this configuration may change on purpose.
    pub accept_running_config_changes: Option<Vec<String>>,
    pub agents: Option<Agents>,
    pub components: Option<BTreeMap<String, Component>>,
    pub nodes_ready: Option<bool>,
}

impl Cilium {
    pub fn talos_defaults(&self) -> bool {
        self.talos_defaults.unwrap_or(true)
    }
    /// The input (default `true`, as before the input existed).
    pub fn kube_proxy_replacement(&self) -> bool {
        self.kube_proxy_replacement.unwrap_or(true)
    }

    pub fn upgrade_path_check(&self) -> bool {
        self.upgrade_path_check.unwrap_or(true)
    }
    pub fn preflight(&self) -> bool {
        self.preflight.unwrap_or(true)
    }
    pub fn rollback_on_failure(&self) -> bool {
        self.rollback_on_failure.unwrap_or(false)
    }

    /// The Talos values under the user's, in the variant `kube_proxy_replacement` chooses.
    pub fn talos_values(&self) -> Json {
        match (self.talos_defaults(), self.kube_proxy_replacement()) {
            (true, true) => talos_values(&self.common.endpoint()),
            (true, false) => crate::cluster::talos::talos_cilium_values_with_kube_proxy(),
            (false, _) => json!({}),
        }
    }

    /// What goes under the user's values: the Talos values, and `upgradeCompatibility` once the
    /// first installed minor is known (the user's values still win over both).
    pub fn base_values(&self) -> Json {
        let mut values = self.talos_values();
        if let (Some(minor), Json::Object(map)) = (&self.upgrade_compatibility, &mut values) {
            map.insert("upgradeCompatibility".into(), Json::String(minor.clone()));
        }
        values
    }

    /// The values Helm will record as the release's user-supplied values: the base values, then
    /// each `values` document, then `set`, then `set_sensitive`.
    pub fn merged_values(&self) -> Result<Json, String> {
        self.common.merged_values(self.base_values())
    }

    /// Whether the installed Cilium will replace kube-proxy, and whether the input says so (or
    /// the user's values or `talos_defaults = false` decide it).
    ///
    /// # Errors
    /// The values do not merge (a document that is not YAML, a bad `set` path).
    pub fn replacement_choice(&self) -> Result<ReplacementChoice, String> {
        let values = self.merged_values()?;
        // Absent: the chart's default, `false`.
        let on = kube_proxy_replacement_on(values.get("kubeProxyReplacement"));
        Ok(ReplacementChoice {
            on,
            from_input: self.talos_defaults() && on == self.kube_proxy_replacement(),
        })
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

/// Checks of Cilium's own rules without I/O (an exact `version`, a `timeout` of 30s or more);
/// unknown values (decoded as absent) are skipped.
pub fn validate(c: &Cilium, d: &mut Diagnostics) {
    let at = AttributePath::attr;
    for (i, path) in c.accept_running_config_changes.iter().flatten().enumerate() {
        if !critical_paths().any(|p| p == path) {
            let known: Vec<&str> = critical_paths().collect();
            d.error_at(
                at("accept_running_config_changes").then_index(i as i64),
                "Not a setting that needs accepting",
                format!("{path:?} is not one of the settings a running Cilium refuses to change: {}. Other settings change with a warning.", known.join(", ")),
            );
        }
    }
    if let Some(minor) = &c.upgrade_compatibility {
        use crate::cluster::cilium::versions::Minor;
        match Minor::parse(minor).filter(|m| m.to_string() == *minor) {
            None => d.error_at(
                at("upgrade_compatibility"),
                "Not a Cilium minor",
                format!(
                    "{minor:?} is not a minor such as `1.19` (the release line first installed)."
                ),
            ),
            // Newer than the chart: only after a rollback, else a typo (`1.91`); the chart's
            // templates know no defaults of a minor after their own.
            Some(first) => {
                if let Some(running) = c.common.version.as_deref().and_then(Minor::parse) {
                    if first > running {
                        d.push(crate::framework::Diagnostic::warning(
                            "Compatibility minor newer than the version",
                            format!("`upgrade_compatibility = {minor:?}` names the minor first installed on this cluster, but `version` is {running}: a cluster first installed on {minor} runs {running} only after rolling back. If that is not what happened, set the minor the cluster started on (or leave it unset: talosboot records it at the first install)."),
                        ).at(at("upgrade_compatibility")));
                    }
                }
            }
        }
    }
    let c = &c.common;
    if let Some(v) = &c.version {
        if !exact_version(v) {
            d.error_at(at("version"), "Version must be exact", format!("{v:?} is not an exact chart version such as `1.18.4`. Floating versions are refused: Cilium would change with the image."));
        }
    }
    if let Some(t) = &c.timeout {
        match parse_timeout(t) {
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
    use crate::resources::choice::DeletionPolicy;
    use crate::resources::release::ChartResource;

    fn cilium() -> Cilium {
        Cilium {
            common: ReleaseCommon {
                version: Some("1.18.4".into()),
                ..Default::default()
            },
            ..Default::default()
        }
        .with_defaults()
    }

    fn validate(c: &Cilium, d: &mut Diagnostics) {
        crate::resources::release::validate(c, d);
    }

    #[test]
    fn a_compatibility_minor_newer_than_the_version_is_warned_on_its_attribute() {
        let with = |minor: &str| {
            let mut c = cilium();
            c.upgrade_compatibility = Some(minor.into());
            let mut d = Diagnostics::new();
            validate(&c, &mut d);
            d
        };
        for ok in ["1.16", "1.18"] {
            assert!(with(ok).is_empty(), "{ok}: {:?}", with(ok));
        }
        let typo = with("1.81");
        let warning = typo.iter().next().expect("a warning");
        assert_eq!(warning.severity, crate::framework::Severity::Warning);
        assert_eq!(
            warning.attribute,
            Some(AttributePath::attr("upgrade_compatibility"))
        );
        assert!(
            warning.detail.contains("`version` is 1.18"),
            "{}",
            warning.detail
        );
        assert!(
            !typo.has_errors(),
            "a rollback may leave it newer: {typo:?}"
        );
    }

    #[test]
    fn the_user_always_wins_over_the_talos_defaults() {
        let mut c = cilium();
        c.common.values = Some(vec![
            "kubeProxyReplacement: false\nhubble:\n  relay:\n    enabled: true\n".into(),
        ]);
        c.common.set = Some(vec![SetValue {
            name: Some("ipam.mode".into()),
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
        c.common.values = Some(vec!["kubeProxyReplacement: \"true\"\n".into()]);
        assert_eq!(
            c.replacement_choice(),
            Ok(ReplacementChoice {
                on: true,
                from_input: false
            }),
            "the user's values win, and decide"
        );
        c.talos_defaults = Some(false);
        c.common.values = None;
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
        c.common.set_sensitive = Some(vec![SetValue {
            name: Some("hubble.tls.key".into()),
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
        c.common.version = Some("1.18.x".into());
        c.common.timeout = Some("10 minutes".into());
        c.common.api_endpoint = Some("localhost".into());
        c.common.values = Some(vec!["a: [1".into()]);
        c.common.deletion_policy = Some(DeletionPolicy::from("orphan"));
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
