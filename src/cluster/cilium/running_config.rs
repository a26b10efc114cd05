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
    /// What the chart renders when the values leave the setting unset (Cilium's `values.yaml`
    /// and `cilium-configmap.yaml`, the same in every chart 1.16-1.20): values that drop a
    /// setting the running CNI has change it to this. `None`: not compared when unset.
    pub chart_default: Option<&'static str>,
}

const fn setting(value_path: &'static str, config_key: &'static str, critical: bool) -> Setting {
    Setting {
        value_path,
        config_key,
        critical,
        chart_default: None,
    }
}

/// A critical setting, with what the chart renders when the values leave it unset.
const fn critical(
    value_path: &'static str,
    config_key: &'static str,
    chart_default: &'static str,
) -> Setting {
    Setting {
        value_path,
        config_key,
        critical: true,
        chart_default: Some(chart_default),
    }
}

/// The settings compared, critical ones first.
pub const SETTINGS: &[Setting] = &[
    critical("kubeProxyReplacement", "kube-proxy-replacement", "false"),
    critical("ipam.mode", "ipam", "cluster-pool"),
    // `routingMode: ""` renders `tunnel`, `tunnelProtocol: ""` the agent's `vxlan`.
    critical("routingMode", "routing-mode", "tunnel"),
    critical("tunnelProtocol", "tunnel-protocol", "vxlan"),
    // Cilium's chart passes these to the agents as environment variables, not through the
    // ConfigMap: a `k8s-service-host` there comes from `extraConfig`, whose own value an unset
    // one does not say.
    setting("k8sServiceHost", "k8s-service-host", true),
    setting("k8sServicePort", "k8s-service-port", true),
    critical("cluster.name", "cluster-name", "default"),
    critical("cluster.id", "cluster-id", "0"),
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
    /// The values leave it unset: `planned` is the chart's default.
    pub by_default: bool,
}

impl SettingChange {
    /// `kubeProxyReplacement (cilium-config kube-proxy-replacement): "false" -> "true"`, with
    /// `(the chart's default: the values do not set it)` when they leave it unset.
    pub fn describe(&self) -> String {
        format!(
            "{} (cilium-config `{}`): {:?} -> {:?}{}",
            self.setting.value_path,
            self.setting.config_key,
            self.running,
            self.planned,
            match self.by_default {
                true => " (the chart's default: the values do not set it)",
                false => "",
            }
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

/// How the chart renders `setting` from `values`: what they set, else its default
/// ([`Setting::chart_default`]); `None` when neither says. The flag: from the default. An empty
/// string is unset too: Cilium's own `values.yaml` has `routingMode: ""` and `tunnelProtocol: ""`,
/// which its templates render as their defaults (`default "tunnel"`), so values pasted from
/// `helm show values` mean the defaults.
fn planned_value(setting: &Setting, values: &Json) -> Option<(String, bool)> {
    let set = lookup(values, setting.value_path).and_then(|v| rendered(setting, v));
    match (set, setting.chart_default) {
        (Some(v), Some(default)) if v.is_empty() => Some((default.to_owned(), true)),
        (Some(v), _) => Some((v, false)),
        (None, default) => default.map(|d| (d.to_owned(), true)),
    }
}

/// The settings the planned `values` render to something other than what `config` (the data of
/// the running `cilium-config`) has: a setting the values leave unset renders the chart's default
/// ([`Setting::chart_default`]; one without a known default is not compared), and one the
/// ConfigMap does not carry is not compared.
pub fn changes(config: &BTreeMap<String, String>, values: &Json) -> Vec<SettingChange> {
    SETTINGS
        .iter()
        .filter_map(|s| {
            let raw = config.get(s.config_key)?;
            let (planned, by_default) = planned_value(s, values)?;
            let running = running_value(s, raw);
            (running != planned).then_some(SettingChange {
                setting: *s,
                running,
                planned,
                by_default,
            })
        })
        .collect()
}

/// Whether `planned` renders `setting` to something other than `applied` does (each unset one
/// as the chart's default): `(applied, planned)`, or `None` when both render it alike.
pub fn changes_from(applied: &Json, planned: &Json, setting: Setting) -> Option<(String, String)> {
    let render = |v: &Json| planned_value(&setting, v).map(|(v, _)| v);
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
            changes(&running, &json!({"kubeProxyReplacement": true, "k8sServicePort": "7445", "routingMode": null})).is_empty(),
            "left to the chart, whose default is what runs"
        );
        assert!(
            changes(&config(&[]), &planned).is_empty(),
            "not in the ConfigMap"
        );
    }

    #[test]
    fn values_that_leave_a_running_setting_unset_change_it_to_the_charts_default() {
        let running = config(&[
            ("routing-mode", "native"),
            ("cluster-name", "prod-eu1"),
            ("cluster-id", "7"),
            ("ipam", "kubernetes"),
            ("k8s-service-host", "localhost"),
            ("enable-hubble", "true"),
        ]);
        let found = changes(&running, &json!({"hubble": {"relay": {"enabled": true}}}));
        let described: Vec<String> = found.iter().map(SettingChange::describe).collect();
        let unset = " (the chart's default: the values do not set it)";
        assert_eq!(
            described,
            [
                format!(
                    "ipam.mode (cilium-config `ipam`): \"kubernetes\" -> \"cluster-pool\"{unset}"
                ),
                format!(
                    "routingMode (cilium-config `routing-mode`): \"native\" -> \"tunnel\"{unset}"
                ),
                format!(
                    "cluster.name (cilium-config `cluster-name`): \"prod-eu1\" -> \"default\"{unset}"
                ),
                format!("cluster.id (cilium-config `cluster-id`): \"7\" -> \"0\"{unset}"),
            ],
            "a setting with no known default (hubble.enabled, k8sServiceHost) is not compared when unset"
        );
        let pasted = json!({"routingMode": "", "tunnelProtocol": ""});
        assert!(
            changes(
                &config(&[("routing-mode", "tunnel"), ("tunnel-protocol", "vxlan")]),
                &pasted
            )
            .is_empty(),
            "the chart renders \"\" as its default"
        );
        assert!(found.iter().all(|c| c.setting.critical && c.by_default));
        let kept = json!({"routingMode": "native", "cluster": {"name": "prod-eu1", "id": 7},
            "ipam": {"mode": "kubernetes"}, "k8sServiceHost": "localhost"});
        assert!(changes(&running, &kept).is_empty(), "set to what runs");
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
        assert_eq!(
            changes_from(&json!({}), &json!({"kubeProxyReplacement": "false"}), kpr),
            None,
            "unset is the chart's default"
        );
        let ipam = SETTINGS[1];
        assert_eq!(
            changes_from(&json!({"ipam": {"mode": "kubernetes"}}), &json!({}), ipam),
            Some(("kubernetes".into(), "cluster-pool".into()))
        );
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
