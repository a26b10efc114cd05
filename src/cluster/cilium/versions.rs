//! Cilium's chart versions as pure tables, each with the function that reads it:
//! - [`REMOVED_KEYS`] / [`removed_keys_in`]: value keys a chart minor no longer has. The chart
//!   accepts unknown keys without a word (no closed `values.schema.json`), so a key that was
//!   removed does nothing: the feature it set is silently off;
//! - [`NODE_PORT_FEATURES`] / [`node_port_features_without_replacement`]: from 1.19 the agent
//!   flags `--enable-node-port`, `--enable-host-port` and `--enable-external-ips` are gone, and
//!   those features exist only with `kubeProxyReplacement=true`;
//! - [`gateway_api_requirements`]: the Gateway API release and CRDs a minor's operator needs
//!   with `gatewayAPI.enabled` (the 1.20 operator turns its Gateway controller off, with no
//!   error, when one is missing at its start).
//!
//! Sources (upstream `Documentation/operations/upgrade.rst` "1.19 Upgrade Notes", the Gateway
//! API installation page of each minor, the 1.20 release notes as users quote them) are listed
//! in `docs/guides/versions.md`.

use std::fmt;

use serde_json::Value as Json;

/// A chart's `major.minor`: what decides which keys and CRDs apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Minor {
    pub major: u64,
    pub minor: u64,
}

impl Minor {
    pub const fn new(major: u64, minor: u64) -> Minor {
        Minor { major, minor }
    }

    /// The minor of a chart version.
    pub fn of(version: &crate::cluster::helm::chart_version::ChartVersion) -> Minor {
        Minor::new(version.major, version.minor)
    }

    /// `1.20.2`, `v1.19.0-rc.1` -> 1.20, 1.19; `None` for anything without two numbers.
    pub fn parse(version: &str) -> Option<Minor> {
        let v = version.trim().strip_prefix('v').unwrap_or(version.trim());
        let mut parts = v.split(['.', '-', '+']);
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some(Minor { major, minor })
    }
}

impl fmt::Display for Minor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The minor from which node-port features need the kube-proxy replacement.
pub const REPLACEMENT_REQUIRED_FROM: Minor = Minor::new(1, 19);

/// What takes a removed key's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replacement {
    /// Another key says the same.
    Key(&'static str),
    /// `kubeProxyReplacement: true` turns the feature on (and nothing else does).
    KubeProxyReplacement,
    /// No key: why, and what to do instead.
    Nothing(&'static str),
}

impl fmt::Display for Replacement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Replacement::Key(key) => write!(f, "use `{key}` instead"),
            Replacement::KubeProxyReplacement => write!(
                f,
                "the feature is on exactly when `kubeProxyReplacement` is true (`kube_proxy_replacement = true`); drop the key"
            ),
            Replacement::Nothing(why) => write!(f, "nothing replaces it: {why}"),
        }
    }
}

/// A value key the chart no longer has from `removed_in` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemovedKey {
    /// The dotted path, as `set` names it.
    pub path: &'static str,
    pub removed_in: Minor,
    pub replacement: Replacement,
}

const fn removed(path: &'static str, removed_in: Minor, replacement: Replacement) -> RemovedKey {
    RemovedKey {
        path,
        removed_in,
        replacement,
    }
}

const V1_19: Minor = Minor::new(1, 19);
const V1_20: Minor = Minor::new(1, 20);
const CLUSTERMESH_TLS: Replacement = Replacement::Nothing(
    "let the chart generate the certificates (`clustermesh.apiserver.tls.auto`) or create the Secrets before the install",
);
const KAFKA: Replacement =
    Replacement::Nothing("Kafka-aware L7 policy and proxylib were removed in 1.20");

/// Keys removed by minor (the 1.19 ones rendered agent flags 1.19 removed; the 1.20 ones were
/// deprecated in 1.19 and removed from the chart in 1.20).
pub const REMOVED_KEYS: &[RemovedKey] = &[
    removed("nodePort.enabled", V1_19, Replacement::KubeProxyReplacement),
    removed("hostPort.enabled", V1_19, Replacement::KubeProxyReplacement),
    removed(
        "externalIPs.enabled",
        V1_19,
        Replacement::KubeProxyReplacement,
    ),
    removed(
        "l2podAnnouncements.interface",
        V1_19,
        Replacement::Key("l2podAnnouncements.interfacePattern"),
    ),
    removed(
        "encryption.strictMode.enabled",
        V1_20,
        Replacement::Key("encryption.strictMode.egress.enabled"),
    ),
    removed(
        "encryption.strictMode.cidr",
        V1_20,
        Replacement::Key("encryption.strictMode.egress.cidr"),
    ),
    removed(
        "encryption.strictMode.allowRemoteNodeIdentities",
        V1_20,
        Replacement::Key("encryption.strictMode.egress.allowRemoteNodeIdentities"),
    ),
    removed(
        "encryption.ipsec.encryptedOverlay",
        V1_20,
        Replacement::Nothing("IPsec always encrypts after the overlay encapsulation since 1.18"),
    ),
    removed(
        "encryption.ipsec.interface",
        V1_20,
        Replacement::Nothing("the chart no longer takes an IPsec interface"),
    ),
    removed(
        "clustermesh.enableMCSAPISupport",
        V1_20,
        Replacement::Key("clustermesh.mcsapi.enabled"),
    ),
    removed(
        "clustermesh.apiserver.tls.server.cert",
        V1_20,
        CLUSTERMESH_TLS,
    ),
    removed(
        "clustermesh.apiserver.tls.server.key",
        V1_20,
        CLUSTERMESH_TLS,
    ),
    removed(
        "clustermesh.apiserver.tls.admin.cert",
        V1_20,
        CLUSTERMESH_TLS,
    ),
    removed(
        "clustermesh.apiserver.tls.admin.key",
        V1_20,
        CLUSTERMESH_TLS,
    ),
    removed(
        "clustermesh.apiserver.tls.remote.cert",
        V1_20,
        CLUSTERMESH_TLS,
    ),
    removed(
        "clustermesh.apiserver.tls.remote.key",
        V1_20,
        CLUSTERMESH_TLS,
    ),
    removed(
        "clustermesh.apiserver.tls.enableSecrets",
        V1_20,
        CLUSTERMESH_TLS,
    ),
    removed("hubble.redact.kafka.apiKey", V1_20, KAFKA),
    removed(
        "preflight.tofqdnsPreCache",
        V1_20,
        Replacement::Nothing("the preflight FQDN poller was removed in 1.20"),
    ),
    removed(
        "hubble.ui.backend.livenessProbe.enabled",
        V1_20,
        Replacement::Nothing("the probes are always on"),
    ),
    removed(
        "hubble.ui.backend.readinessProbe.enabled",
        V1_20,
        Replacement::Nothing("the probes are always on"),
    ),
];

/// The value at a dotted path (`a.b.c`) of a values object.
pub fn lookup<'a>(values: &'a Json, path: &str) -> Option<&'a Json> {
    path.split('.').try_fold(values, |v, key| v.get(key))
}

/// Whether a dotted path is set (present and not null: Helm drops null keys) in `values`.
pub fn is_set(values: &Json, path: &str) -> bool {
    lookup(values, path).is_some_and(|v| !v.is_null())
}

/// The keys of [`REMOVED_KEYS`] that `values` sets and chart minor `chart` no longer has, in
/// table order.
pub fn removed_keys_in(values: &Json, chart: Minor) -> Vec<&'static RemovedKey> {
    REMOVED_KEYS
        .iter()
        .filter(|k| chart >= k.removed_in && is_set(values, k.path))
        .collect()
}

/// Values turning on a feature that Cilium 1.19 and later provide only with the kube-proxy
/// replacement.
pub const NODE_PORT_FEATURES: &[&str] = &[
    "nodePort.enabled",
    "hostPort.enabled",
    "externalIPs.enabled",
];

/// A boolean value as Helm templates read it (`true`, `"true"`).
pub fn truthy(v: Option<&Json>) -> bool {
    match v {
        Some(Json::Bool(b)) => *b,
        Some(Json::String(s)) => s == "true",
        _ => false,
    }
}

/// The [`NODE_PORT_FEATURES`] `values` turns on while the kube-proxy replacement is off, on a
/// chart minor that needs the replacement for them (empty otherwise): the features would be
/// silently absent.
pub fn node_port_features_without_replacement(
    values: &Json,
    chart: Minor,
    replacement_on: bool,
) -> Vec<&'static str> {
    if replacement_on || chart < REPLACEMENT_REQUIRED_FROM {
        return Vec::new();
    }
    NODE_PORT_FEATURES
        .iter()
        .copied()
        .filter(|path| truthy(lookup(values, path)))
        .collect()
}

/// Whether the values turn on Cilium's Gateway API support.
pub fn gateway_api_enabled(values: &Json) -> bool {
    truthy(lookup(values, "gatewayAPI.enabled"))
}

/// A CRD a Cilium operator needs for its Gateway API controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatewayApiCrd {
    /// `<plural>.<group>`, the CRD's name.
    pub name: &'static str,
    pub kind: &'static str,
    /// An API version the CRD must serve (`None`: any).
    pub served: Option<&'static str>,
}

/// The Gateway API release a Cilium minor is built against, and the CRDs its operator needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatewayApiRelease {
    /// The Cilium minors it applies to, from this one until the next entry.
    pub from: Minor,
    /// The upstream release (`v1.6.1`) whose standard channel holds the CRDs.
    pub release: &'static str,
    pub crds: &'static [GatewayApiCrd],
}

impl GatewayApiRelease {
    /// How to install the CRDs (the standard channel of the release, server-side: the bundle's
    /// CRDs exceed the client-side apply annotation limit).
    pub fn install_command(&self) -> String {
        format!(
            "kubectl apply --server-side -f https://github.com/kubernetes-sigs/gateway-api/releases/download/{}/standard-install.yaml",
            self.release
        )
    }
}

const fn crd(
    name: &'static str,
    kind: &'static str,
    served: Option<&'static str>,
) -> GatewayApiCrd {
    GatewayApiCrd { name, kind, served }
}

const CORE_CRDS: [GatewayApiCrd; 5] = [
    crd(
        "gatewayclasses.gateway.networking.k8s.io",
        "GatewayClass",
        None,
    ),
    crd("gateways.gateway.networking.k8s.io", "Gateway", None),
    crd("httproutes.gateway.networking.k8s.io", "HTTPRoute", None),
    crd("grpcroutes.gateway.networking.k8s.io", "GRPCRoute", None),
    crd(
        "referencegrants.gateway.networking.k8s.io",
        "ReferenceGrant",
        None,
    ),
];

/// 1.20 adds BackendTLSPolicy and TLSRoute at `v1` (TLSRoute left `v1alpha2` in the standard
/// channel of Gateway API 1.6).
const CRDS_1_20: [GatewayApiCrd; 7] = [
    CORE_CRDS[0],
    CORE_CRDS[1],
    CORE_CRDS[2],
    CORE_CRDS[3],
    CORE_CRDS[4],
    crd(
        "backendtlspolicies.gateway.networking.k8s.io",
        "BackendTLSPolicy",
        Some("v1"),
    ),
    crd(
        "tlsroutes.gateway.networking.k8s.io",
        "TLSRoute",
        Some("v1"),
    ),
];

/// By Cilium minor, oldest first (TLSRoute before 1.20 and TCPRoute/UDPRoute are optional: the
/// operator only turns those routes off).
pub const GATEWAY_API_RELEASES: &[GatewayApiRelease] = &[
    GatewayApiRelease {
        from: Minor::new(1, 16),
        release: "v1.1.0",
        crds: &CORE_CRDS,
    },
    GatewayApiRelease {
        from: Minor::new(1, 17),
        release: "v1.2.0",
        crds: &CORE_CRDS,
    },
    GatewayApiRelease {
        from: Minor::new(1, 18),
        release: "v1.3.0",
        crds: &CORE_CRDS,
    },
    GatewayApiRelease {
        from: V1_19,
        release: "v1.4.1",
        crds: &CORE_CRDS,
    },
    GatewayApiRelease {
        from: V1_20,
        release: "v1.6.1",
        crds: &CRDS_1_20,
    },
];

/// The Gateway API a chart minor needs (`None` before 1.16: not in the table).
pub fn gateway_api_requirements(chart: Minor) -> Option<&'static GatewayApiRelease> {
    GATEWAY_API_RELEASES.iter().rev().find(|r| chart >= r.from)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn minors_parse_from_chart_versions() {
        for (version, want) in [
            ("1.20.2", Some(Minor::new(1, 20))),
            ("v1.19.0-rc.1", Some(Minor::new(1, 19))),
            ("1.18", Some(Minor::new(1, 18))),
            ("1", None),
            ("latest", None),
            ("", None),
        ] {
            assert_eq!(Minor::parse(version), want, "{version}");
        }
        assert!(Minor::new(1, 9) < Minor::new(1, 10));
        assert_eq!(Minor::new(1, 20).to_string(), "1.20");
    }

    #[test]
    fn removed_keys_are_found_only_from_the_minor_that_removed_them() {
        let values = json!({
            "encryption": {"strictMode": {"enabled": true, "cidr": "10.0.0.0/8", "egress": {"enabled": true}}},
            "clustermesh": {"enableMCSAPISupport": false},
            "nodePort": {"enabled": true, "range": "30000,32767"},
            "hubble": {"redact": {"kafka": {"apiKey": null}}},
        });
        let paths = |chart: Minor| -> Vec<&str> {
            removed_keys_in(&values, chart)
                .iter()
                .map(|k| k.path)
                .collect()
        };
        let table: [(Minor, &[&str]); 4] = [
            (Minor::new(1, 18), &[]),
            (Minor::new(1, 19), &["nodePort.enabled"]),
            (
                Minor::new(1, 20),
                &[
                    "nodePort.enabled",
                    "encryption.strictMode.enabled",
                    "encryption.strictMode.cidr",
                    "clustermesh.enableMCSAPISupport",
                ],
            ),
            (
                Minor::new(1, 21),
                &[
                    "nodePort.enabled",
                    "encryption.strictMode.enabled",
                    "encryption.strictMode.cidr",
                    "clustermesh.enableMCSAPISupport",
                ],
            ),
        ];
        for (chart, want) in table {
            assert_eq!(paths(chart), want, "{chart}");
        }
        let replaced = removed_keys_in(&values, Minor::new(1, 20))[1];
        assert_eq!(
            replaced.replacement,
            Replacement::Key("encryption.strictMode.egress.enabled")
        );
        assert!(
            replaced
                .replacement
                .to_string()
                .contains("`encryption.strictMode.egress.enabled`")
        );
    }

    #[test]
    fn the_table_has_one_entry_per_key_and_no_replacement_is_itself_removed() {
        let mut seen = std::collections::BTreeSet::new();
        for key in REMOVED_KEYS {
            assert!(seen.insert(key.path), "{} twice", key.path);
            if let Replacement::Key(new) = key.replacement {
                assert!(
                    REMOVED_KEYS.iter().all(|k| k.path != new),
                    "{new} replaces {} but is removed too",
                    key.path
                );
            }
        }
    }

    #[test]
    fn node_port_features_need_the_replacement_from_1_19() {
        let values = json!({"nodePort": {"enabled": true}, "hostPort": {"enabled": "true"},
            "externalIPs": {"enabled": false}});
        let table = [
            (Minor::new(1, 18), false, vec![]),
            (Minor::new(1, 19), true, vec![]),
            (
                Minor::new(1, 19),
                false,
                vec!["nodePort.enabled", "hostPort.enabled"],
            ),
            (
                Minor::new(1, 20),
                false,
                vec!["nodePort.enabled", "hostPort.enabled"],
            ),
        ];
        for (chart, replacement, want) in table {
            assert_eq!(
                node_port_features_without_replacement(&values, chart, replacement),
                want,
                "{chart} replacement={replacement}"
            );
        }
        assert!(
            node_port_features_without_replacement(&json!({}), Minor::new(1, 20), false).is_empty()
        );
    }

    #[test]
    fn gateway_api_needs_by_minor() {
        let names = |chart: Minor| -> Option<(&str, Vec<&str>)> {
            gateway_api_requirements(chart)
                .map(|r| (r.release, r.crds.iter().map(|c| c.kind).collect()))
        };
        assert_eq!(names(Minor::new(1, 15)), None);
        let core = vec![
            "GatewayClass",
            "Gateway",
            "HTTPRoute",
            "GRPCRoute",
            "ReferenceGrant",
        ];
        assert_eq!(names(Minor::new(1, 18)), Some(("v1.3.0", core.clone())));
        assert_eq!(names(Minor::new(1, 19)), Some(("v1.4.1", core.clone())));
        let mut with_tls = core;
        with_tls.extend(["BackendTLSPolicy", "TLSRoute"]);
        assert_eq!(names(Minor::new(1, 20)), Some(("v1.6.1", with_tls)));
        let r = gateway_api_requirements(Minor::new(1, 20)).unwrap();
        assert!(
            r.install_command()
                .contains("/v1.6.1/standard-install.yaml")
        );
        assert!(gateway_api_enabled(
            &json!({"gatewayAPI": {"enabled": true}})
        ));
        assert!(gateway_api_enabled(
            &json!({"gatewayAPI": {"enabled": "true"}})
        ));
        assert!(!gateway_api_enabled(
            &json!({"gatewayAPI": {"enabled": false}})
        ));
        assert!(!gateway_api_enabled(&json!({})));
    }
}
