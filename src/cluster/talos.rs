//! Facts about Talos that more than one part of the provider needs: KubePrism, and the Cilium
//! Helm values Talos requires (field notes §2), in the two variants of Talos' Cilium guide: with
//! kube-proxy replacement (`cluster.proxy.disabled: true`: the agents reach the API at KubePrism)
//! and with kube-proxy running (Talos' default: the agents use the `kubernetes` Service, which
//! kube-proxy routes). `talosboot_cilium` merges them under the user's values;
//! `provider::talosboot::cilium_talos_values` and `cilium_talos_values_with_kube_proxy` return
//! them to roots that keep `helm_release`.

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
