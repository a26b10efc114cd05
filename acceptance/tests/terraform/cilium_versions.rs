//! Chart versions with the real OpenTofu CLI: Cilium 1.20.2 with `gatewayAPI.enabled` is refused
//! at plan, and at apply before any Job runs, while the Gateway API v1.6.1 CRDs its operator needs
//! are missing (or serve an older version), naming each, and installs once they exist; a value
//! key the chart version no longer has is a plan warning naming it and its replacement; node-port
//! features without the kube-proxy replacement on 1.19 are a plan error on the attribute; a Flux
//! Operator chart too old for the FluxInstance's Flux is a plan error naming the minimum chart.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::json;

use crate::cilium::{MANAGED, NS, current_status, workspace};
use crate::harness::{REQUIRED_PROVIDERS, TestCluster, Workspace};

const MISSING: &str = "Gateway API CRDs missing";

/// The Gateway API v1.6.1 standard-channel CRDs Cilium 1.20 needs: (kind, plural, served
/// versions). TLSRoute from an older release serves only `v1alpha2`.
const GATEWAY_API_CRDS: [(&str, &str, &[&str]); 7] = [
    ("GatewayClass", "gatewayclasses", &["v1"]),
    ("Gateway", "gateways", &["v1"]),
    ("HTTPRoute", "httproutes", &["v1"]),
    ("GRPCRoute", "grpcroutes", &["v1"]),
    ("ReferenceGrant", "referencegrants", &["v1beta1"]),
    ("BackendTLSPolicy", "backendtlspolicies", &["v1"]),
    ("TLSRoute", "tlsroutes", &["v1"]),
];

fn crd(kind: &str, plural: &str, served: &[&str]) -> CustomResourceDefinition {
    let versions: Vec<_> = served
        .iter()
        .enumerate()
        .map(|(i, name)| {
            json!({
                "name": name, "served": true, "storage": i == 0,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            })
        })
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.gateway.networking.k8s.io"),
                     "annotations": {"gateway.networking.k8s.io/bundle-version": "v1.6.1",
                                     // As upstream: `*.k8s.io` groups need it.
                                     "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api/pull/3328"}},
        "spec": {
            "group": "gateway.networking.k8s.io",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
            "scope": if kind == "GatewayClass" { "Cluster" } else { "Namespaced" },
            "versions": versions,
        },
    }))
    .expect("a CRD")
}

async fn bootstrap_jobs(client: &kube::Client) -> usize {
    Api::<Job>::namespaced(client.clone(), NS)
        .list_metadata(&ListParams::default().labels(MANAGED))
        .await
        .expect("jobs")
        .items
        .len()
}

fn cilium_1_20_with_gateway_api() -> String {
    "resource \"talosboot_cilium\" \"this\" {\n  version = \"1.20.2\"\n  values  = [yamlencode({ gatewayAPI = { enabled = true } })]\n}\n".to_owned()
}

on_both_clis!(async gateway_api_crds_missing_are_refused_naming_them_then_cilium_1_20_installs);
async fn gateway_api_crds_missing_are_refused_naming_them_then_cilium_1_20_installs() {
    let cluster = TestCluster::start().await;
    if !cluster.nodes_are_emulated() {
        return; // creates and deletes cluster-wide CRDs
    }
    let client = cluster.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let ws = workspace(&cluster, &cilium_1_20_with_gateway_api());

    // No Gateway API at all: every CRD named, with the release to install, on the attribute.
    let plan = ws.run(&["plan", "-no-color"]);
    assert!(!plan.success, "{}", plan.text());
    let text = plan.flat();
    assert!(text.contains(MISSING), "{text}");
    for (kind, plural, _) in GATEWAY_API_CRDS {
        assert!(
            text.contains(&format!(
                "{kind} ({plural}.gateway.networking.k8s.io): missing"
            )),
            "{kind} named: {text}"
        );
    }
    assert!(
        text.contains("Gateway API v1.6.1")
            && text.contains("/v1.6.1/standard-install.yaml")
            && text.contains("21: values = [yamlencode({ gatewayAPI"),
        "the release to install, on the value that enabled it: {text}"
    );

    // An older Gateway API: TLSRoute serves only v1alpha2, BackendTLSPolicy is absent.
    for (kind, plural, served) in GATEWAY_API_CRDS {
        let served = match kind {
            "BackendTLSPolicy" => continue,
            "TLSRoute" => &["v1alpha2"][..],
            _ => served,
        };
        crds.create(&PostParams::default(), &crd(kind, plural, served))
            .await
            .expect("create CRD");
    }
    let plan = ws.run(&["plan", "-no-color"]);
    assert!(!plan.success, "{}", plan.text());
    let text = plan.flat();
    assert!(
        text.contains("BackendTLSPolicy (backendtlspolicies.gateway.networking.k8s.io): missing")
            && text.contains(
                "TLSRoute (tlsroutes.gateway.networking.k8s.io): serves v1alpha2, not v1"
            ),
        "{text}"
    );
    assert!(
        !text.contains("HTTPRoute (httproutes"),
        "present CRDs are not named: {text}"
    );

    // The v1.6.1 CRDs: the plan passes. One removed again before the apply: refused before any Job.
    crds.delete(
        "tlsroutes.gateway.networking.k8s.io",
        &DeleteParams::default(),
    )
    .await
    .expect("delete old TLSRoute");
    for (kind, plural, served) in &GATEWAY_API_CRDS[5..] {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(30), async {
            while crds
                .get_opt(&format!("{plural}.gateway.networking.k8s.io"))
                .await
                .ok()
                .flatten()
                .is_some()
            {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        })
        .await;
        crds.create(&PostParams::default(), &crd(kind, plural, served))
            .await
            .expect("create CRD");
    }
    let plan = ws.run(&["plan", "-no-color", "-out=tfplan"]);
    assert!(
        plan.success && !plan.flat().contains(MISSING),
        "{}",
        plan.text()
    );
    crds.delete(
        "backendtlspolicies.gateway.networking.k8s.io",
        &DeleteParams::default(),
    )
    .await
    .expect("delete BackendTLSPolicy CRD");
    let apply = ws.run(&["apply", "-auto-approve", "-no-color", "tfplan"]);
    let text = apply.flat();
    assert!(!apply.success && text.contains(MISSING), "{}", apply.text());
    // Refused by the plan OpenTofu makes again during the apply, or by the apply's own check.
    assert!(
        text.contains("BackendTLSPolicy (backendtlspolicies.gateway.networking.k8s.io): missing"),
        "{text}"
    );
    assert_eq!(bootstrap_jobs(&client).await, 0, "no Job ran");
    assert_eq!(current_status(&client).await, None, "nothing was installed");

    // All there: Cilium 1.20.2 installs with its Gateway API controller on, then nothing to do.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while crds
            .get_opt("backendtlspolicies.gateway.networking.k8s.io")
            .await
            .ok()
            .flatten()
            .is_some()
        {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    })
    .await;
    let (kind, plural, served) = GATEWAY_API_CRDS[5];
    crds.create(&PostParams::default(), &crd(kind, plural, served))
        .await
        .expect("create CRD");
    let applied = ws.apply();
    assert!(!applied.flat().contains(MISSING), "{}", applied.text());
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
    let config = Api::<ConfigMap>::namespaced(client.clone(), NS)
        .get("cilium-config")
        .await
        .expect("cilium-config");
    assert_eq!(
        config
            .data
            .unwrap_or_default()
            .get("enable-gateway-api")
            .map(String::as_str),
        Some("true")
    );
    assert!(!ws.plan_has_changes());
}

on_both_clis!(async a_value_key_the_chart_version_dropped_is_a_plan_warning_naming_its_replacement);
async fn a_value_key_the_chart_version_dropped_is_a_plan_warning_naming_its_replacement() {
    // Plan only: reads the cluster, installs nothing.
    let cluster = TestCluster::shared().await;
    let body = "resource \"talosboot_cilium\" \"this\" {\n  version = \"1.20.2\"\n  values  = [yamlencode({ hubble = { relay = { enabled = true } } }), yamlencode({ encryption = { strictMode = { enabled = true } } })]\n}\n";
    let ws = workspace(&cluster, body);
    let plan = ws.ok(&["plan", "-no-color"]);
    let text = plan.flat();
    assert!(
        text.contains("Cilium value the chart no longer has")
            && text.contains("`encryption.strictMode.enabled` was removed from the Cilium chart in 1.20 and chart 1.20.2 ignores it")
            && text.contains("use `encryption.strictMode.egress.enabled` instead")
            && text.contains("21: values = [yamlencode({ hubble"),
        "{text}"
    );
    // The same values on 1.19, which still has the key: no warning.
    ws.write(
        "main.tf",
        &crate::cilium::root(&cluster, &body.replace("1.20.2", "1.19.7")),
    );
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        !plan.flat().contains("Cilium value the chart no longer has"),
        "{}",
        plan.text()
    );
}

on_both_clis!(async node_port_without_the_replacement_on_1_19_is_a_plan_error_on_the_input);
async fn node_port_without_the_replacement_on_1_19_is_a_plan_error_on_the_input() {
    let cluster = TestCluster::shared().await;
    let body = "resource \"talosboot_cilium\" \"this\" {\n  version                = \"1.19.7\"\n  kube_proxy_replacement = false\n  values                 = [yamlencode({ nodePort = { enabled = true } })]\n}\n";
    let ws = workspace(&cluster, body);
    let plan = ws.run(&["plan", "-no-color"]);
    assert!(!plan.success, "{}", plan.text());
    let text = plan.flat();
    assert!(
        text.contains("Node-port features need the kube-proxy replacement")
            && text.contains("`nodePort.enabled`")
            && text.contains("kube_proxy_replacement = false"),
        "{text}"
    );
    // 1.18 still has the flag: no such error (the cluster check may still complain about
    // kube-proxy; that is another diagnostic).
    ws.write(
        "main.tf",
        &crate::cilium::root(&cluster, &body.replace("1.19.7", "1.18.4")),
    );
    let plan = ws.run(&["plan", "-no-color"]);
    assert!(
        !plan
            .flat()
            .contains("Node-port features need the kube-proxy replacement"),
        "{}",
        plan.text()
    );
}

on_both_clis!(async an_operator_chart_too_old_for_flux_2_9_is_a_plan_error_naming_the_minimum);
async fn an_operator_chart_too_old_for_flux_2_9_is_a_plan_error_naming_the_minimum() {
    let cluster = TestCluster::shared().await;
    let root = |chart: &str| {
        format!(
            r#"{REQUIRED_PROVIDERS}
{provider}
resource "talosboot_flux_bootstrap" "flux" {{
  revision = 1
  gitops_resources = {{
    instance_yaml = yamlencode({{
      apiVersion = "fluxcd.controlplane.io/v1"
      kind       = "FluxInstance"
      metadata   = {{ name = "flux", namespace = "flux-system" }}
      spec       = {{ distribution = {{ version = "2.9.x", registry = "ghcr.io/fluxcd" }} }}
    }})
    operator_chart = {{ version = "{chart}" }}
  }}
}}
"#,
            provider = cluster.provider_block()
        )
    };
    let ws = Workspace::new(&root("0.33.0"));
    ws.init();
    let plan = ws.run(&["plan", "-no-color"]);
    assert!(!plan.success, "{}", plan.text());
    let text = plan.flat();
    assert!(
        text.contains("Flux Operator chart too old for the FluxInstance")
            && text.contains("operator chart 0.33.0 can install Flux up to 2.7.3")
            && text.contains("Use operator chart 0.53.0 or later")
            && text.contains("operator_chart"),
        "{text}"
    );
    ws.write("main.tf", &root("0.59.0"));
    let plan = ws.run(&["plan", "-no-color"]);
    assert!(
        !plan.flat().contains("too old for the FluxInstance"),
        "{}",
        plan.text()
    );
}
