//! The values `talosboot_cilium` will install, checked against its chart `version` at plan
//! ([`crate::cluster::cilium::versions`] holds the knowledge): a value key the version no longer
//! has is a warning (the chart ignores it without a word), node-port features asked for without
//! the kube-proxy replacement on 1.19 or later are an error. Each diagnostic is on the attribute
//! that sets the key (`values[i]`, `set[i]`, ...), or on `kube_proxy_replacement` when that input
//! decides the replacement; keys from the Talos defaults have no attribute.

use serde_json::Value as Json;

use super::model::Cilium;
use crate::cluster::cilium::versions::{
    Minor, is_set, node_port_features_without_replacement, removed_keys_in,
};
use crate::cluster::helm::values::parse_values;
use crate::framework::{Diagnostic, Diagnostics};
use crate::values::AttributePath;

/// The first attribute of the configuration that sets the dotted `path`: a `values` document
/// holding it, else a `set`-style entry naming it (or a parent of it); `None`: the Talos
/// defaults (or nothing) set it.
pub fn origin(c: &Cilium, path: &str) -> Option<AttributePath> {
    let common = &c.common;
    for (i, doc) in common.values.iter().flatten().enumerate() {
        if parse_values(doc).is_ok_and(|v| is_set(&v, path)) {
            return Some(AttributePath::attr("values").then_index(i as i64));
        }
    }
    let lists = [
        ("set", &common.set),
        ("set_sensitive", &common.set_sensitive),
        ("set_wo", &common.set_wo),
    ];
    for (attr, list) in lists {
        for (i, entry) in list.iter().flatten().enumerate() {
            let Some(name) = entry.name.as_deref() else {
                continue;
            };
            if name == path || path.starts_with(&format!("{name}.")) {
                return Some(AttributePath::attr(attr).then_index(i as i64));
            }
        }
    }
    None
}

fn located(d: Diagnostic, at: Option<AttributePath>) -> Diagnostic {
    match at {
        Some(path) => d.at(path),
        None => d,
    }
}

/// The plan's version checks of a model whose values are known (see the module docs).
pub fn check(c: &Cilium) -> Diagnostics {
    let mut out = Diagnostics::new();
    let Some(version) = c.common.version.as_deref() else {
        return out;
    };
    let Some(chart) = Minor::parse(version) else {
        return out;
    };
    let (Ok(values), Ok(choice)) = (c.merged_values(), c.replacement_choice()) else {
        return out;
    };
    let features = node_port_features_without_replacement(&values, chart, choice.on);
    if !features.is_empty() {
        out.push(node_port_error(c, version, &features, choice.from_input));
    }
    for key in removed_keys_in(&values, chart) {
        if features.contains(&key.path) {
            continue;
        }
        let d = Diagnostic::warning(
            "Cilium value the chart no longer has",
            format!(
                "`{}` was removed from the Cilium chart in {} and chart {version} ignores it without an error, so what it set is not applied: {}.",
                key.path, key.removed_in, key.replacement
            ),
        );
        out.push(located(d, origin(c, key.path)));
    }
    out
}

fn node_port_error(c: &Cilium, version: &str, features: &[&str], from_input: bool) -> Diagnostic {
    let keys = features
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let decided_by = match from_input {
        true => "`kube_proxy_replacement = false`".to_owned(),
        false => "`kubeProxyReplacement: false` in the values".to_owned(),
    };
    let (asks, a_feature, ignored) = match features.len() {
        1 => (
            "asks",
            "a feature",
            "the key would be ignored and the feature absent",
        ),
        _ => (
            "ask",
            "features",
            "the keys would be ignored and the features absent",
        ),
    };
    let d = Diagnostic::error(
        "Node-port features need the kube-proxy replacement",
        format!(
            "{keys} {asks} Cilium {version} for {a_feature} that Cilium 1.19 and later provide only with the kube-proxy replacement (the `--enable-node-port`, `--enable-host-port` and `--enable-external-ips` agent flags are gone), but {decided_by} turns it off: {ignored}. Either set `kube_proxy_replacement = true` (Talos: kube-proxy disabled, `cluster.proxy.disabled: true`, or on Talos 1.14+ a `KubeProxyConfig` document with `enabled: false`) or remove {keys} and let kube-proxy handle those Services."
        ),
    );
    let at = match from_input {
        true => Some(AttributePath::attr("kube_proxy_replacement")),
        false => features.iter().find_map(|k| origin(c, k)),
    };
    located(d, at)
}

/// Whether the installed values turn Gateway API on (the prerequisites check then reads its CRDs).
pub fn gateway_api_on(values: &Json) -> bool {
    crate::cluster::cilium::versions::gateway_api_enabled(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Severity;
    use crate::resources::cilium::model::SetValue;
    use crate::resources::release::{ChartResource, ReleaseCommon};

    fn cilium(version: &str) -> Cilium {
        Cilium {
            common: ReleaseCommon {
                version: Some(version.into()),
                ..Default::default()
            },
            ..Default::default()
        }
        .with_defaults()
    }

    fn found(d: &Diagnostics) -> Vec<(Severity, String, String)> {
        d.iter()
            .map(|d| {
                (
                    d.severity,
                    d.attribute
                        .as_ref()
                        .map(|p| p.describe())
                        .unwrap_or_default(),
                    d.detail.clone(),
                )
            })
            .collect()
    }

    #[test]
    fn a_removed_key_is_a_warning_on_the_attribute_that_sets_it() {
        let mut c = cilium("1.20.2");
        c.common.values = Some(vec![
            "hubble:\n  relay:\n    enabled: true\n".into(),
            "encryption:\n  strictMode:\n    enabled: true\n".into(),
        ]);
        c.common.set = Some(vec![SetValue {
            name: Some("clustermesh.enableMCSAPISupport".into()),
            value: Some("true".into()),
            kind: None,
        }]);
        let d = found(&check(&c));
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(d[0].0, Severity::Warning);
        assert!(d[0].1.contains("values[1]"), "{d:?}");
        assert!(d[0].2.contains("`encryption.strictMode.enabled`"), "{d:?}");
        assert!(d[0].2.contains("in 1.20 and chart 1.20.2"), "{d:?}");
        assert!(
            d[0].2.contains("`encryption.strictMode.egress.enabled`"),
            "{d:?}"
        );
        assert!(d[1].1.contains("set[0]"), "{d:?}");
        assert!(d[1].2.contains("`clustermesh.mcsapi.enabled`"), "{d:?}");
        // The same values on 1.19: the keys still exist.
        c.common.version = Some("1.19.7".into());
        assert!(check(&c).is_empty());
        // An unparsable version or none at all: nothing to compare with.
        c.common.version = Some("stable".into());
        assert!(check(&c).is_empty());
    }

    #[test]
    fn node_port_features_without_the_replacement_are_an_error_from_1_19() {
        let mut c = cilium("1.19.7");
        c.kube_proxy_replacement = Some(false);
        c.common.values = Some(vec!["nodePort:\n  enabled: true\n".into()]);
        let d = found(&check(&c));
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].0, Severity::Error);
        assert_eq!(d[0].1, "kube_proxy_replacement");
        assert!(d[0].2.contains("`nodePort.enabled`"), "{d:?}");
        // The replacement from the values instead: the error is on the key's document.
        c.kube_proxy_replacement = Some(true);
        c.common.values = Some(vec![
            "kubeProxyReplacement: false\nhostPort:\n  enabled: true\n".into(),
        ]);
        let d = found(&check(&c));
        assert_eq!(d[0].0, Severity::Error);
        assert!(d[0].1.contains("values[0]"), "{d:?}");
        // With the replacement on, the key is only redundant: a warning.
        c.common.values = Some(vec!["nodePort:\n  enabled: true\n".into()]);
        let d = found(&check(&c));
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].0, Severity::Warning);
        assert!(d[0].2.contains("`kube_proxy_replacement = true`"), "{d:?}");
        // 1.18 still has the flags.
        c.common.version = Some("1.18.4".into());
        c.kube_proxy_replacement = Some(false);
        assert!(check(&c).is_empty());
    }

    #[test]
    fn the_talos_defaults_trip_nothing_on_any_version() {
        for version in ["1.16.3", "1.17.9", "1.18.4", "1.19.7", "1.20.2"] {
            for replacement in [true, false] {
                let mut c = cilium(version);
                c.kube_proxy_replacement = Some(replacement);
                assert!(check(&c).is_empty(), "{version} {replacement}");
            }
        }
    }
}
