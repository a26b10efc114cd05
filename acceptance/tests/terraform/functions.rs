//! Provider-defined functions with the real CLI (protocol 6.5; OpenTofu 1.7+ / Terraform 1.8+):
//! `provider::talosboot::cilium_talos_values(api_endpoint)` and
//! `provider::talosboot::cilium_talos_values_with_kube_proxy()`.

use crate::harness::{REQUIRED_PROVIDERS, Workspace};

on_both_clis!(cilium_talos_values_in_outputs);
fn cilium_talos_values_in_outputs() {
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
output "kubeprism" {{ value = provider::talosboot::cilium_talos_values(null) }}
output "endpoint"  {{ value = provider::talosboot::cilium_talos_values("https://10.5.0.2:6443") }}
output "yaml"      {{ value = yamlencode(provider::talosboot::cilium_talos_values("localhost:7445")) }}
output "merged"    {{ value = merge(provider::talosboot::cilium_talos_values(""), {{ hubble = {{ enabled = false }} }}) }}
"#
    ));
    ws.init();
    let apply = ws.apply();
    let outputs = ws.outputs();
    let kubeprism = &outputs["kubeprism"]["value"];
    assert_eq!(kubeprism["k8sServiceHost"], "localhost", "{}", apply.text());
    assert_eq!(kubeprism["k8sServicePort"], 7445);
    assert_eq!(kubeprism["ipam"]["mode"], "kubernetes");
    assert_eq!(kubeprism["kubeProxyReplacement"], true);
    assert_eq!(kubeprism["cgroup"]["autoMount"]["enabled"], false);
    assert_eq!(kubeprism["cgroup"]["hostRoot"], "/sys/fs/cgroup");
    assert_eq!(
        kubeprism["securityContext"]["capabilities"]["cleanCiliumState"],
        serde_json::json!(["NET_ADMIN", "SYS_ADMIN", "SYS_RESOURCE"])
    );
    assert_eq!(
        kubeprism["securityContext"]["capabilities"]["ciliumAgent"],
        serde_json::json!([
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
            "SETUID"
        ])
    );
    let endpoint = &outputs["endpoint"]["value"];
    assert_eq!(endpoint["k8sServiceHost"], "10.5.0.2");
    assert_eq!(endpoint["k8sServicePort"], 6443);
    let yaml = outputs["yaml"]["value"].as_str().unwrap_or_default();
    assert!(yaml.contains("\"k8sServicePort\": 7445"), "{yaml}");
    assert_eq!(outputs["merged"]["value"]["hubble"]["enabled"], false);
    assert_eq!(outputs["merged"]["value"]["k8sServicePort"], 7445);

    // The CLI documents the function from GetProviderSchema.
    let schema = ws.ok(&["providers", "schema", "-json"]).json();
    let function = &schema["provider_schemas"][ws.cli().provider_address()]["functions"]["cilium_talos_values"];
    assert_eq!(
        function["parameters"][0]["name"], "api_endpoint",
        "{schema}"
    );
    assert_eq!(function["parameters"][0]["is_nullable"], true, "{function}");
    assert_eq!(function["return_type"][0], "object", "{function}");
}

on_both_clis!(cilium_talos_values_blames_a_bad_endpoint);
fn cilium_talos_values_blames_a_bad_endpoint() {
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
output "values" {{
  value = provider::talosboot::cilium_talos_values("10.5.0.2")
}}
"#
    ));
    ws.init();
    let plan = ws.run(&["plan", "-no-color", "-input=false"]);
    assert!(!plan.success, "{}", plan.text());
    let text = plan.flat();
    assert!(text.contains("expected host:port"), "{text}");
    assert!(
        text.contains("api_endpoint"),
        "the error names the parameter: {text}"
    );
}

on_both_clis!(cilium_talos_values_with_kube_proxy_is_talos_variant_for_kube_proxy);
fn cilium_talos_values_with_kube_proxy_is_talos_variant_for_kube_proxy() {
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
output "values" {{ value = provider::talosboot::cilium_talos_values_with_kube_proxy() }}
output "merged" {{ value = merge(provider::talosboot::cilium_talos_values_with_kube_proxy(), {{ hubble = {{ relay = {{ enabled = true }} }} }}) }}
"#
    ));
    ws.init();
    let apply = ws.apply();
    let outputs = ws.outputs();
    let values = &outputs["values"]["value"];
    assert_eq!(values["kubeProxyReplacement"], false, "{}", apply.text());
    assert!(
        values.get("k8sServiceHost").is_none() && values.get("k8sServicePort").is_none(),
        "kube-proxy routes the Service the agents use: {values}"
    );
    assert_eq!(values["ipam"]["mode"], "kubernetes");
    assert_eq!(values["cgroup"]["autoMount"]["enabled"], false);
    assert!(
        !values["securityContext"].to_string().contains("SYS_MODULE"),
        "{values}"
    );
    assert_eq!(
        outputs["merged"]["value"]["hubble"]["relay"]["enabled"],
        true
    );
}
