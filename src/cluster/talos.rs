//! Facts about Talos that more than one part of the provider needs: KubePrism, and the Cilium
//! Helm values Talos requires (field notes §2). `talosboot_cilium` merges them under the user's
//! values; `provider::talosboot::cilium_talos_values` returns them to roots that keep `helm_release`.

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

/// The Talos-correct Cilium Helm values for an API server at `host:port`.
pub fn talos_cilium_values(host: &str, port: u16) -> serde_json::Value {
    serde_json::json!({
        "ipam": { "mode": "kubernetes" },
        "kubeProxyReplacement": true,
        "k8sServiceHost": host,
        "k8sServicePort": port,
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
