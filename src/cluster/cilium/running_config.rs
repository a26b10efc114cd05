//! What a running Cilium is configured with, and which of it an install would change, pure. The
//! chart renders its settings into ConfigMap `kube-system/cilium-config` (kebab-case keys), which
//! the agents read: comparing the planned values with it shows what an adoption or upgrade flips
//! on a live CNI, whatever installed it (Talos inline manifests, `helm template | kubectl apply`,
//! another Helm client). A few settings cannot change on a running CNI without a migration
//! (field notes §11, Cilium's upgrade and migration guides): those are [`Setting::critical`].

use std::collections::BTreeMap;

use serde_json::Value as Json;

use super::versions::lookup;

/// The ConfigMap the chart renders the agent's settings into.
pub const CONFIG_MAP: &str = "cilium-config";

/// One setting: the value path users set and the `cilium-config` key the chart renders it to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    pub value_path: &'static str,
    pub config_key: &'static str,
    /// Changing it on a running CNI breaks the pod network or the agents' API access until every
    /// node is migrated: refused unless accepted (`accept_running_config_changes`).
    pub critical: bool,
}

const fn setting(value_path: &'static str, config_key: &'static str, critical: bool) -> Setting {
    Setting {
        value_path,
        config_key,
        critical,
    }
}

/// The settings compared, critical ones first.
pub const SETTINGS: &[Setting] = &[
    setting("kubeProxyReplacement", "kube-proxy-replacement", true),
    setting("ipam.mode", "ipam", true),
    setting("routingMode", "routing-mode", true),
    setting("tunnelProtocol", "tunnel-protocol", true),
    setting("k8sServiceHost", "k8s-service-host", true),
    setting("k8sServicePort", "k8s-service-port", true),
    setting("cluster.name", "cluster-name", true),
    setting("cluster.id", "cluster-id", true),
    setting("ipv4.enabled", "enable-ipv4", false),
    setting("ipv6.enabled", "enable-ipv6", false),
    setting("cni.exclusive", "cni-exclusive", false),
    setting("l7Proxy", "enable-l7-proxy", false),
    setting("hubble.enabled", "enable-hubble", false),
    setting("gatewayAPI.enabled", "enable-gateway-api", false),
    setting("cgroup.hostRoot", "cgroup-root", false),
    setting("debug.enabled", "debug", false),
];

/// The value paths `accept_running_config_changes` may name.
pub fn critical_paths() -> impl Iterator<Item = &'static str> {
    SETTINGS.iter().filter(|s| s.critical).map(|s| s.value_path)
}

/// A running setting the planned values change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingChange {
    pub setting: Setting,
    pub running: String,
    pub planned: String,
}

impl SettingChange {
    /// `kubeProxyReplacement (cilium-config kube-proxy-replacement): "false" -> "true"`.
    pub fn describe(&self) -> String {
        format!(
            "{} (cilium-config `{}`): {:?} -> {:?}",
            self.setting.value_path, self.setting.config_key, self.running, self.planned
        )
    }
}

/// `kubeProxyReplacement` as the chart and the agent read it: `true`, `"true"`, and the
/// pre-1.14 `"strict"` mean on; anything else (`false`, `"partial"`, `"disabled"`, absent) off.
pub fn kube_proxy_replacement_on(v: Option<&Json>) -> bool {
    match v {
        Some(Json::Bool(b)) => *b,
        Some(Json::String(s)) => matches!(s.as_str(), "true" | "strict"),
        _ => false,
    }
}

/// A value as the chart renders it into the ConfigMap (`quote`/`toString`).
fn rendered(setting: &Setting, v: &Json) -> Option<String> {
    if setting.value_path == "kubeProxyReplacement" {
        return Some(kube_proxy_replacement_on(Some(v)).to_string());
    }
    match v {
        Json::Null => None,
        Json::String(s) => Some(s.clone()),
        Json::Bool(b) => Some(b.to_string()),
        Json::Number(n) => Some(n.to_string()),
        other => Some(other.to_string()),
    }
}

/// How the running ConfigMap says a setting (the agent's older spellings normalised).
fn running_value(setting: &Setting, raw: &str) -> String {
    match setting.value_path {
        "kubeProxyReplacement" => {
            kube_proxy_replacement_on(Some(&Json::String(raw.to_owned()))).to_string()
        }
        _ => raw.to_owned(),
    }
}

/// The settings the planned `values` set to something other than what `config` (the data of the
/// running `cilium-config`) has. A setting the values leave to the chart's default is not
/// compared (the default is the chart's to say), nor one the ConfigMap does not carry.
pub fn changes(config: &BTreeMap<String, String>, values: &Json) -> Vec<SettingChange> {
    SETTINGS
        .iter()
        .filter_map(|s| {
            let raw = config.get(s.config_key)?;
            let planned = rendered(s, lookup(values, s.value_path)?)?;
            let running = running_value(s, raw);
            (running != planned).then_some(SettingChange {
                setting: *s,
                running,
                planned,
            })
        })
        .collect()
}

/// Whether `planned` sets `setting` to something other than `applied` does (as the chart
/// renders both): `(applied, planned)`, or `None` when both render it alike (or neither sets it).
pub fn changes_from(applied: &Json, planned: &Json, setting: Setting) -> Option<(String, String)> {
    let render = |v: &Json| lookup(v, setting.value_path).and_then(|x| rendered(&setting, x));
    let (a, p) = (render(applied), render(planned));
    (a != p).then(|| (a.unwrap_or_default(), p.unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_flip_of_the_kube_proxy_replacement_is_a_critical_change() {
        let running = config(&[
            ("kube-proxy-replacement", "false"),
            ("ipam", "kubernetes"),
            ("k8s-service-host", ""),
            ("enable-hubble", "false"),
        ]);
        let planned = json!({
            "kubeProxyReplacement": true,
            "ipam": {"mode": "kubernetes"},
            "k8sServiceHost": "localhost",
            "hubble": {"enabled": true},
        });
        let found = changes(&running, &planned);
        let described: Vec<String> = found.iter().map(SettingChange::describe).collect();
        assert_eq!(
            described,
            [
                "kubeProxyReplacement (cilium-config `kube-proxy-replacement`): \"false\" -> \"true\"",
                "k8sServiceHost (cilium-config `k8s-service-host`): \"\" -> \"localhost\"",
                "hubble.enabled (cilium-config `enable-hubble`): \"false\" -> \"true\"",
            ]
        );
        let critical: Vec<bool> = found.iter().map(|c| c.setting.critical).collect();
        assert_eq!(critical, [true, true, false]);
    }

    #[test]
    fn the_same_settings_in_other_spellings_are_no_change() {
        let running = config(&[
            ("kube-proxy-replacement", "strict"),
            ("k8s-service-port", "7445"),
            ("routing-mode", "tunnel"),
        ]);
        let planned = json!({"kubeProxyReplacement": "true", "k8sServicePort": 7445});
        assert!(changes(&running, &planned).is_empty());
        assert!(
            changes(&running, &json!({"routingMode": null})).is_empty(),
            "left to the chart"
        );
        assert!(
            changes(&config(&[]), &planned).is_empty(),
            "not in the ConfigMap"
        );
    }

    #[test]
    fn a_setting_is_compared_with_what_was_applied_as_the_chart_renders_it() {
        let kpr = SETTINGS[0];
        let applied = json!({"kubeProxyReplacement": true});
        assert_eq!(
            changes_from(&applied, &json!({"kubeProxyReplacement": "true"}), kpr),
            None
        );
        assert_eq!(
            changes_from(&applied, &json!({"kubeProxyReplacement": false}), kpr),
            Some(("true".into(), "false".into()))
        );
        assert_eq!(changes_from(&json!({}), &json!({}), kpr), None);
    }

    #[test]
    fn one_reading_of_the_kube_proxy_replacement() {
        for (v, on) in [
            (json!(true), true),
            (json!("true"), true),
            (json!("strict"), true),
            (json!(false), false),
            (json!("partial"), false),
            (json!("disabled"), false),
        ] {
            assert_eq!(kube_proxy_replacement_on(Some(&v)), on, "{v}");
        }
        assert!(!kube_proxy_replacement_on(None));
    }
}
