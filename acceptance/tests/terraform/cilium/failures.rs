//! Failures and their diagnoses: a value restoring SYS_MODULE (capabilities, tainted); a broken
//! upgrade until fixed; the Service IP before the CNI (i/o timeout), on Talos' Service CIDR and on
//! another; a stuck `pending-install`
//! release repaired.

use std::io::Write;

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use crate::harness::TestCluster;

use super::*;

on_both_clis!(async a_user_value_restoring_sys_module_fails_with_the_capabilities_diagnosis_and_taints);
async fn a_user_value_restoring_sys_module_fails_with_the_capabilities_diagnosis_and_taints() {
    let cluster = TestCluster::start().await;
    let ws = workspace(
        &cluster,
        &cilium(&format!("  timeout = \"2m\"\n{RESTORES_SYS_MODULE}")),
    );
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success);
    let text = out.flat();
    assert!(
        text.contains("unable to apply caps: operation not permitted"),
        "{text}"
    );
    assert!(
        text.contains("Diagnosis: a container requested the SYS_MODULE capability"),
        "{text}"
    );
    assert!(text.contains("Fix: remove SYS_MODULE"), "{text}");
    assert!(
        ws.state_text().contains("\"status\": \"tainted\""),
        "failed create is kept, tainted:\n{}",
        ws.state_text()
    );
    // Fixing the configuration repairs it on the next apply.
    ws.write("main.tf", &root(&cluster, &cilium("")));
    ws.apply();
    assert!(!ws.plan_has_changes());
}

on_both_clis!(async a_broken_upgrade_fails_until_fixed_and_the_fix_waits_for_its_own_pods);
async fn a_broken_upgrade_fails_until_fixed_and_the_fix_waits_for_its_own_pods() {
    // The real controllers roll out as a real cluster does: the broken revision's agents are
    // still crashing when the fix's wait starts.
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let good = cilium("  timeout = \"2m\"");
    let bad = cilium(&format!("  timeout = \"2m\"\n{RESTORES_SYS_MODULE}"));
    let ws = workspace(&cluster, &good);
    ws.apply();
    ws.write("main.tf", &root(&cluster, &bad));
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success, "{}", out.text());
    assert!(
        out.flat().contains("Fix: remove SYS_MODULE"),
        "{}",
        out.text()
    );
    // The same broken configuration again (a CI retry): it must not turn green.
    let plan = ws.run(&["plan", "-no-color", "-detailed-exitcode"]);
    assert_eq!(
        plan.code,
        Some(2),
        "the unready release plans a new wait:\n{}",
        plan.text()
    );
    let retry = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(
        !retry.success,
        "a retry of the broken apply fails again:\n{}",
        retry.text()
    );
    assert!(retry.flat().contains("SYS_MODULE"), "{}", retry.text());
    // The fix: the old revision's agents still crash while they are replaced; the wait is for the
    // new ones.
    ws.write("main.tf", &root(&cluster, &good));
    let fixed = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(fixed.success, "the fix applies:\n{}", fixed.text());
    assert!(!ws.plan_has_changes());
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
}

on_both_clis!(async the_service_ip_before_the_cni_gets_the_io_timeout_diagnosis);
async fn the_service_ip_before_the_cni_gets_the_io_timeout_diagnosis() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let ws = workspace(
        &cluster,
        &cilium(
            r#"  job = { env = { KUBERNETES_SERVICE_HOST = "10.96.0.1", KUBERNETES_SERVICE_PORT = "443" } }"#,
        ),
    );
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success);
    let text = out.flat();
    assert!(
        text.contains("dial tcp 10.96.0.1:443: i/o timeout"),
        "{text}"
    );
    assert!(
        text.contains(
            "Fix: point the client at an API endpoint outside the Service CIDR: `api_endpoint`"
        ),
        "{text}"
    );
    if cluster.nodes_are_emulated() {
        assert!(
            text.contains("kube-proxy is disabled in this cluster"),
            "the test cluster runs no kube-proxy: {text}"
        );
    }
    assert!(
        text.contains("kubectl -n kube-system logs job/"),
        "names the kept Job for kubectl logs: {text}"
    );
    assert_eq!(current_status(&client).await, None, "nothing was installed");
    assert!(
        !ws.state_text().contains("talosboot_cilium"),
        "nothing in state: nothing exists"
    );
}

on_both_clis!(async another_service_cidr_gets_the_io_timeout_diagnosis_with_its_own_address);
/// On a cluster whose Service CIDR is not Talos' default, the diagnosis follows the `kubernetes`
/// Service's ClusterIP read from the cluster: a dial to it is the Service-IP timeout, a dial to
/// the default `10.96.0.1` (no Service here) is the endpoint's own.
async fn another_service_cidr_gets_the_io_timeout_diagnosis_with_its_own_address() {
    let cluster = TestCluster::start_with(talos_sim::talos::TalosConfig {
        service_cidr: "10.100.0.0/16".into(),
        ..Default::default()
    })
    .await;
    let client = cluster.client().await;
    let service = Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), "default")
        .get("kubernetes")
        .await
        .expect("the kubernetes Service");
    let ip = service
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a ClusterIP");
    if cluster.nodes_are_emulated() {
        assert_eq!(ip, "10.100.0.1", "the first address of the configured CIDR");
    }
    let job_env = |host: &str| {
        format!(
            "  job = {{ env = {{ KUBERNETES_SERVICE_HOST = \"{host}\", KUBERNETES_SERVICE_PORT = \"443\" }} }}"
        )
    };
    let ws = workspace(&cluster, &cilium(&job_env(&ip)));
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success, "{}", out.text());
    let text = out.flat();
    assert!(
        text.contains(&format!("dial tcp {ip}:443: i/o timeout")),
        "{text}"
    );
    assert!(
        text.contains(&format!("the `kubernetes` Service IP ({ip})")),
        "the cause names this cluster's Service address: {text}"
    );
    assert!(
        text.contains(
            "Fix: point the client at an API endpoint outside the Service CIDR: `api_endpoint`"
        ),
        "{text}"
    );
    assert_eq!(current_status(&client).await, None, "nothing was installed");
    if cluster.nodes_are_emulated() {
        // The default address is no Service in this cluster: the endpoint itself is wrong.
        ws.write("main.tf", &root(&cluster, &cilium(&job_env("10.96.0.1"))));
        let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
        assert!(!out.success, "{}", out.text());
        let text = out.flat();
        assert!(
            text.contains("dial tcp 10.96.0.1:443: i/o timeout")
                && text.contains("the pod could not reach the API endpoint it was given"),
            "{text}"
        );
        assert!(
            !text.contains("the `kubernetes` Service IP"),
            "not this cluster's Service: {text}"
        );
    }
    assert!(
        !ws.state_text().contains("talosboot_cilium"),
        "nothing in state: nothing exists"
    );
}

/// A Helm record as a killed `helm install` leaves it.
async fn pending_install_record(client: &kube::Client) {
    let record = json!({"name": "cilium", "namespace": NS, "version": 1,
        "info": {"status": "pending-install", "description": "Initial install underway"},
        "chart": {"metadata": {"name": "cilium", "version": "1.18.4", "appVersion": "1.18.4"}},
        "config": {}, "manifest": ""});
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(record.to_string().as_bytes()).expect("gzip");
    let field = base64::engine::general_purpose::STANDARD.encode(gz.finish().expect("gzip"));
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "sh.helm.release.v1.cilium.v1", "labels": {"owner": "helm", "name": "cilium", "status": "pending-install", "version": "1"}},
        "type": "helm.sh/release.v1",
        "stringData": {"release": field},
    }))
    .expect("secret");
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create record");
}

on_both_clis!(async a_release_stuck_in_pending_install_is_repaired);
async fn a_release_stuck_in_pending_install_is_repaired() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    pending_install_record(&client).await;
    let ws = workspace(&cluster, &cilium(""));
    let out = ws.apply();
    assert!(
        out.flat().contains("pending-install"),
        "says what it repaired: {}",
        out.text()
    );
    let history = release_history(&client, "cilium").await;
    // Unlocked (marked failed), then superseded by the upgrade from it, as Helm does.
    assert_eq!(
        history.get(&1).map(String::as_str),
        Some("superseded"),
        "{history:?}"
    );
    assert_eq!(
        history.values().last().map(String::as_str),
        Some("deployed"),
        "{history:?}"
    );
    assert!(!ws.plan_has_changes());
}
