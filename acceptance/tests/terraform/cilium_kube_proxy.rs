//! `kube_proxy_replacement` against both Talos configurations, on embedded clusters with and
//! without the `kube-proxy` DaemonSet: a warning at plan and apply when both would handle
//! Services; Talos' values for clusters with kube-proxy when the replacement is off; an error at
//! plan, and at apply before any Job runs, when nothing would route Service IPs; the plan-time
//! check skipped when the cluster cannot be reached; the Service-IP diagnosis worded for the
//! cluster it happened in.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use talos_sim::faults::Matcher;

use crate::cilium::{MANAGED, NS, cilium, current_status, nodes_ready, workspace};
use crate::harness::{TestCluster, Workspace};

const BOTH: &str = "kube-proxy and Cilium would both handle Services";
const NOTHING: &str = "Nothing would route Service IPs";

async fn with_kube_proxy() -> TestCluster {
    TestCluster::start_with(talos_sim::talos::TalosConfig {
        kube_proxy: true,
        ..Default::default()
    })
    .await
}

async fn bootstrap_jobs(client: &kube::Client) -> usize {
    Api::<Job>::namespaced(client.clone(), NS)
        .list_metadata(&ListParams::default().labels(MANAGED))
        .await
        .expect("jobs")
        .items
        .len()
}

on_both_clis!(async kube_proxy_with_replacement_on_is_warned_at_plan_and_apply);
async fn kube_proxy_with_replacement_on_is_warned_at_plan_and_apply() {
    let cluster = with_kube_proxy().await;
    if !cluster.nodes_are_emulated() {
        return; // needs a cluster that runs kube-proxy
    }
    let ws = workspace(&cluster, &cilium(""));
    let plan = ws.ok(&["plan", "-no-color"]);
    let text = plan.flat();
    assert!(text.contains(BOTH), "{text}");
    assert!(
        text.contains("set `kube_proxy_replacement = false`")
            && text.contains("`cluster.proxy.disabled: true` (Talos 1.13 and earlier")
            && text.contains("a `KubeProxyConfig` document with `enabled: false` (Talos 1.14+)"),
        "says how to choose, in the machine-config form of each Talos version: {text}"
    );
    assert!(text.contains("kube_proxy_replacement"), "{text}");
    let applied = ws.apply();
    assert!(applied.flat().contains(BOTH), "{}", applied.text());
}

on_both_clis!(async replacement_off_with_kube_proxy_installs_talos_values_for_kube_proxy);
async fn replacement_off_with_kube_proxy_installs_talos_values_for_kube_proxy() {
    let cluster = with_kube_proxy().await;
    if !cluster.nodes_are_emulated() {
        return; // needs a cluster that runs kube-proxy
    }
    let client = cluster.client().await;
    let ws = workspace(&cluster, &cilium("  kube_proxy_replacement = false"));
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(!plan.flat().contains(BOTH), "{}", plan.text());
    let applied = ws.apply();
    assert!(
        !applied.flat().contains(BOTH) && !applied.flat().contains(NOTHING),
        "{}",
        applied.text()
    );
    assert!(
        nodes_ready(&client).await,
        "the agents came up over kube-proxy"
    );
    let config = Api::<ConfigMap>::namespaced(client.clone(), NS)
        .get("cilium-config")
        .await
        .expect("cilium-config");
    let data = config.data.unwrap_or_default();
    assert_eq!(
        data.get("kube-proxy-replacement").map(String::as_str),
        Some("false")
    );
    assert_eq!(
        data.get("k8s-service-host").map(String::as_str),
        Some(""),
        "the agents use the `kubernetes` Service, which kube-proxy routes"
    );
    assert!(!ws.plan_has_changes());

    // Imported again, the state says what the release's values say: no `true -> false` that
    // would read as a flip of the Service dataplane.
    ws.ok(&["state", "rm", "talosboot_cilium.this"]);
    ws.ok(&[
        "import",
        "-no-color",
        "talosboot_cilium.this",
        "kube-system/cilium",
    ]);
    let state = ws.state_text();
    assert!(
        state.contains("\"kube_proxy_replacement\": false"),
        "{state}"
    );
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        !plan.flat().contains("kube_proxy_replacement"),
        "{}",
        plan.text()
    );
}

on_both_clis!(async replacement_off_without_kube_proxy_is_an_error_at_plan_naming_the_input);
async fn replacement_off_without_kube_proxy_is_an_error_at_plan_naming_the_input() {
    let cluster = TestCluster::shared().await;
    if !cluster.nodes_are_emulated() {
        return; // needs a cluster without kube-proxy
    }
    let client = cluster.client().await;
    let ws = workspace(&cluster, &cilium("  kube_proxy_replacement = false"));
    let plan = ws.run(&["plan", "-no-color"]);
    assert!(!plan.success, "{}", plan.text());
    let text = plan.flat();
    assert!(text.contains(NOTHING), "{text}");
    assert!(
        text.contains("kube_proxy_replacement = false")
            && text.contains("Set `kube_proxy_replacement = true`")
            && text.contains("`enabled: true` in the `KubeProxyConfig` document (Talos 1.14+)"),
        "points at the input and says what to do: {text}"
    );
    let apply = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(
        !apply.success && apply.flat().contains(NOTHING),
        "{}",
        apply.text()
    );
    assert_eq!(bootstrap_jobs(&client).await, 0, "no Job ran");
    assert_eq!(current_status(&client).await, None, "nothing was installed");
}

on_both_clis!(async replacement_off_is_refused_at_apply_before_any_job_once_kube_proxy_is_gone);
async fn replacement_off_is_refused_at_apply_before_any_job_once_kube_proxy_is_gone() {
    let cluster = with_kube_proxy().await;
    let Some(faults) = cluster.faults() else {
        return; // deletes kube-proxy, injects faults
    };
    let client = cluster.client().await;
    let ws = workspace(&cluster, &cilium("  kube_proxy_replacement = false"));
    let plan = ws.ok(&["plan", "-no-color", "-out=tfplan"]);
    assert!(
        !plan.flat().contains(NOTHING),
        "kube-proxy runs at plan: {}",
        plan.text()
    );
    Api::<DaemonSet>::namespaced(client.clone(), NS)
        .delete("kube-proxy", &DeleteParams::default())
        .await
        .expect("delete kube-proxy");
    // The CLI plans again while applying; that best-effort check (one try) cannot read the
    // cluster this time and is skipped, so the apply's own check, before any Job, is the one
    // that refuses (it retries past the second error).
    faults.fail_requests(500, 2, Matcher::path("/daemonsets/kube-proxy"));
    let apply = ws.run(&["apply", "-auto-approve", "-no-color", "tfplan"]);
    assert!(!apply.success, "{}", apply.text());
    let text = apply.flat();
    assert!(
        text.contains(NOTHING) && text.contains("no Job ran"),
        "{text}"
    );
    assert_eq!(bootstrap_jobs(&client).await, 0, "no Job ran");
    assert_eq!(current_status(&client).await, None, "nothing was installed");
    assert!(
        !ws.state_text().contains("talosboot_cilium"),
        "nothing in state: nothing exists"
    );
}

on_both_clis!(async the_plan_time_check_is_skipped_when_the_cluster_cannot_be_reached);
async fn the_plan_time_check_is_skipped_when_the_cluster_cannot_be_reached() {
    let cluster = TestCluster::shared().await;
    let kubeconfig = std::fs::read_to_string(&cluster.kubeconfig_path).expect("kubeconfig");
    let unreachable = with_server(&kubeconfig, "https://127.0.0.1:1");
    let ws = Workspace::new("");
    ws.write("unreachable.kubeconfig", &unreachable);
    let body = format!(
        "{}\nprovider \"talosboot\" {{\n  config_path = \"{}\"\n}}\n{}",
        crate::harness::REQUIRED_PROVIDERS,
        ws.path().join("unreachable.kubeconfig").display(),
        cilium("  kube_proxy_replacement = false"),
    );
    ws.write("main.tf", &body);
    ws.init();
    let plan = ws.run(&["plan", "-no-color", "-detailed-exitcode"]);
    assert_eq!(
        plan.code,
        Some(2),
        "plan works with no cluster: {}",
        plan.text()
    );
    assert!(!plan.flat().contains(NOTHING), "{}", plan.text());
}

/// The kubeconfig with its `server:` replaced.
fn with_server(kubeconfig: &str, server: &str) -> String {
    kubeconfig
        .lines()
        .map(|l| match l.trim_start().strip_prefix("server:") {
            Some(_) => {
                let indent = &l[..l.len() - l.trim_start().len()];
                format!("{indent}server: {server}")
            }
            None => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

on_both_clis!(async a_service_ip_timeout_with_kube_proxy_deployed_has_another_cause);
async fn a_service_ip_timeout_with_kube_proxy_deployed_has_another_cause() {
    let cluster = with_kube_proxy().await;
    if !cluster.nodes_are_emulated() {
        return; // breaks kube-proxy
    }
    let client = cluster.client().await;
    // kube-proxy deployed but not running: its pods cannot pull their image.
    let broken = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy-typo:v1.33.0"}]}}}});
    let dss: Api<DaemonSet> = Api::namespaced(client.clone(), NS);
    dss.patch(
        "kube-proxy",
        &PatchParams::default(),
        &Patch::Strategic(&broken),
    )
    .await
    .expect("patch kube-proxy");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let ds = dss.get("kube-proxy").await.expect("kube-proxy");
        let s = ds.status.clone().unwrap_or_default();
        if s.observed_generation == ds.metadata.generation && s.number_ready == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "kube-proxy did not stop: {s:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let ws = workspace(
        &cluster,
        &cilium(
            r#"  kube_proxy_replacement = false
  job = { env = { KUBERNETES_SERVICE_HOST = "10.96.0.1", KUBERNETES_SERVICE_PORT = "443" } }"#,
        ),
    );
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success, "{}", out.text());
    let text = out.flat();
    assert!(
        text.contains("dial tcp 10.96.0.1:443: i/o timeout"),
        "{text}"
    );
    assert!(
        text.contains("although kube-proxy is deployed")
            && text.contains("k8s-app=kube-proxy")
            && !text.contains("kube-proxy is disabled"),
        "{text}"
    );
    // The same failure on a cluster without kube-proxy says it is disabled: see
    // `cilium::failures::the_service_ip_before_the_cni_gets_the_io_timeout_diagnosis`.
}
