//! Facts about Talos that more than one part of the provider needs: KubePrism, and the Cilium
//! Helm values Talos requires (field notes §2), in the two variants of Talos' Cilium guide: with
//! kube-proxy replacement (kube-proxy disabled: the agents reach the API at KubePrism)
//! and with kube-proxy running (Talos' default: the agents use the `kubernetes` Service, which
//! kube-proxy routes). `talosboot_cilium` merges them under the user's values;
//! `provider::talosboot::cilium_talos_values` and `cilium_talos_values_with_kube_proxy` return
//! them to roots that keep `helm_release`. And how a machine config says the settings users are
//! told to make, in the forms of Talos 1.13 and earlier and of Talos 1.14's documents.

// How a Talos machine config says each setting the provider's diagnoses, warnings and docs tell
// users to make, in both forms Talos reads: the v1alpha1 field (Talos 1.13 and earlier; deprecated
// but still read by 1.14) and the document Talos 1.14 moved it into (field notes §10; siderolabs/talos
// release-1.14 `hack/release.toml` "Kubernetes Multi-document Configuration",
// `pkg/machinery/config/types/k8s/`, `hack/test/patches/cilium-*.yaml`). Macros, not consts, so the
// diagnosis table can `concat!` them into its `&'static str` rows; one wording everywhere.

/// kube-proxy off (Cilium replaces it).
macro_rules! kube_proxy_disabled {
    () => {
        "`cluster.proxy.disabled: true` (Talos 1.13 and earlier; deprecated, still read, in 1.14) or a `KubeProxyConfig` document with `enabled: false` (Talos 1.14+)"
    };
}
/// kube-proxy on (Talos' default).
macro_rules! kube_proxy_enabled {
    () => {
        "remove `cluster.proxy.disabled: true` (Talos 1.13 and earlier) or set `enabled: true` in the `KubeProxyConfig` document (Talos 1.14+)"
    };
}
/// Manifests Talos applies at bootstrap and on `talosctl upgrade-k8s`.
macro_rules! inline_manifests {
    () => {
        "`cluster.inlineManifests` (Talos 1.13 and earlier) or one `KubeInlineManifestConfig` document per manifest (Talos 1.14+); from URLs: `cluster.extraManifests` or `KubeExternalManifestConfig`"
    };
}
/// KubePrism off.
macro_rules! kubeprism_disabled {
    () => {
        "`machine.features.kubePrism.enabled: false` (Talos 1.6 to 1.13), or no `KubePrismConfig` document (Talos 1.14+: removing the document disables KubePrism)"
    };
}
/// KubePrism on, on its default port.
macro_rules! kubeprism_enabled {
    () => {
        "`machine.features.kubePrism: { enabled: true, port: 7445 }` (Talos 1.6 to 1.13, on by default) or a `KubePrismConfig` document with `port: 7445` (Talos 1.14+, in generated configs by default)"
    };
}
pub(crate) use {
    inline_manifests, kube_proxy_disabled, kube_proxy_enabled, kubeprism_disabled,
    kubeprism_enabled,
};

/// KubePrism, the API endpoint every Talos node serves locally (Talos 1.6+ default): reachable
/// from host-network pods before any CNI exists.
pub const KUBEPRISM_HOST: &str = "localhost";
pub const KUBEPRISM_PORT: u16 = 7445;

/// Capabilities of the `cilium-agent` container on Talos (no `SYS_MODULE`: Talos does not allow
/// loading kernel modules).
pub const CILIUM_AGENT_CAPABILITIES: [&str; 11] = [
    "CHOWN",
    "KILL",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "SYS_ADMIN",
    "SYS_RESOURCE",
    "DAC_OVERRIDE",
    "FOWNER",
    "SETGID",
    "SETUID",
];
/// Capabilities of the `clean-cilium-state` init container on Talos.
pub const CLEAN_CILIUM_STATE_CAPABILITIES: [&str; 3] = ["NET_ADMIN", "SYS_ADMIN", "SYS_RESOURCE"];

/// The Talos-correct Cilium Helm values with kube-proxy replacement, for an API server at
/// `host:port` (Talos' guide, "without kube-proxy").
pub fn talos_cilium_values(host: &str, port: u16) -> serde_json::Value {
    let mut values = talos_cilium_values_with_kube_proxy();
    values["kubeProxyReplacement"] = serde_json::json!(true);
    values["k8sServiceHost"] = serde_json::json!(host);
    values["k8sServicePort"] = serde_json::json!(port);
    values
}

/// The Talos-correct Cilium Helm values for a cluster that runs kube-proxy (Talos' guide, "with
/// kube-proxy"): no kube-proxy replacement and no `k8sServiceHost`/`k8sServicePort`, since
/// kube-proxy routes the `kubernetes` Service the agents use.
pub fn talos_cilium_values_with_kube_proxy() -> serde_json::Value {
    serde_json::json!({
        "ipam": { "mode": "kubernetes" },
        "kubeProxyReplacement": false,
        "cgroup": {
            "autoMount": { "enabled": false },
            "hostRoot": "/sys/fs/cgroup",
        },
        "securityContext": {
            "capabilities": {
                "ciliumAgent": CILIUM_AGENT_CAPABILITIES,
                "cleanCiliumState": CLEAN_CILIUM_STATE_CAPABILITIES,
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_follows_talos_guide() {
        let without = talos_cilium_values("localhost", 7445);
        assert_eq!(without["kubeProxyReplacement"], true);
        assert_eq!(without["k8sServiceHost"], "localhost");
        assert_eq!(without["k8sServicePort"], 7445);
        let with = talos_cilium_values_with_kube_proxy();
        assert_eq!(with["kubeProxyReplacement"], false);
        assert!(with.get("k8sServiceHost").is_none() && with.get("k8sServicePort").is_none());
        for v in [&without, &with] {
            assert_eq!(v["ipam"]["mode"], "kubernetes");
            assert_eq!(v["cgroup"]["autoMount"]["enabled"], false);
            assert_eq!(v["cgroup"]["hostRoot"], "/sys/fs/cgroup");
            assert!(!v["securityContext"].to_string().contains("SYS_MODULE"));
        }
    }
}
