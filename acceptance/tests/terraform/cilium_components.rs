//! `talosboot_cilium` waits for and watches every component the release's manifest contains, as
//! `cilium status --wait` does: a broken `cilium-envoy` fails the apply naming it (tainted), a
//! refresh after it breaks warns naming it, and Hubble relay, when enabled, is waited for.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::cilium::{NS, assert_no_leftovers, cilium, current_status, root, workspace};
use crate::harness::TestCluster;

const COMPONENTS_OUTPUT: &str =
    "output \"components\" { value = talosboot_cilium.this.components }";

fn with_components_output(extra: &str) -> String {
    format!("{}\n{COMPONENTS_OUTPUT}\n", cilium(extra))
}

/// Waits until DaemonSet `name` has seen its current spec and has no ready pod.
async fn wait_daemonset_broken(client: &kube::Client, name: &str) {
    let dss: Api<DaemonSet> = Api::namespaced(client.clone(), NS);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ds = dss.get(name).await.expect("get DaemonSet");
        let status = ds.status.clone().unwrap_or_default();
        if status.observed_generation == ds.metadata.generation && status.number_ready == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} did not break: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

on_both_clis!(async a_broken_cilium_envoy_fails_the_apply_naming_it_and_taints);
async fn a_broken_cilium_envoy_fails_the_apply_naming_it_and_taints() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let broken = r#"  timeout = "5m"
  values  = [yamlencode({ envoy = { image = { repository = "quay.io/cilium/cilium-envoy-typo" } } })]"#;
    let ws = workspace(&cluster, &with_components_output(broken));
    let started = Instant::now();
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success, "{}", out.text());
    assert!(
        started.elapsed() < Duration::from_secs(150),
        "an image that cannot be pulled fails the apply at once, not at the 5m timeout ({:?})",
        started.elapsed()
    );
    let text = out.flat();
    // (at once: the agents may still be starting, and then they are listed too)
    let not_rolled_out = text.split("Not rolled out:").nth(1).unwrap_or_default();
    assert!(
        not_rolled_out
            .split("Pods not ready:")
            .next()
            .is_some_and(|list| list.contains("- DaemonSet kube-system/cilium-envoy: 0 of")),
        "the failure names the component among those not rolled out: {text}"
    );
    assert!(text.contains("cilium-envoy-typo"), "and its image: {text}");
    assert!(
        text.contains("Diagnosis: the image cannot be pulled"),
        "{text}"
    );
    assert!(
        ws.state_text().contains("\"status\": \"tainted\""),
        "the release exists: kept, tainted:\n{}",
        ws.state_text()
    );
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
    // The fix: the chart's own Envoy image.
    ws.write(
        "main.tf",
        &root(&cluster, &with_components_output("  timeout = \"2m\"")),
    );
    ws.apply();
    let components = &ws.outputs()["components"]["value"];
    assert_eq!(components["cilium-envoy"]["kind"], "DaemonSet");
    assert_eq!(
        components["cilium-envoy"]["rolled_out"], true,
        "{components}"
    );
    assert_eq!(components["cilium"]["rolled_out"], true, "{components}");
    assert_eq!(components["cilium-operator"]["ready"], 2, "{components}");
    assert!(!ws.plan_has_changes());
    assert_no_leftovers(&client).await;
}

on_both_clis!(async a_refresh_after_cilium_envoy_breaks_warns_naming_it);
async fn a_refresh_after_cilium_envoy_breaks_warns_naming_it() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let ws = workspace(&cluster, &with_components_output(""));
    ws.apply();
    assert!(!ws.plan_has_changes());
    // Someone points Envoy at an image the nodes cannot pull.
    let broken = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "cilium-envoy", "image": "quay.io/cilium/cilium-envoy-typo:v1.34.10"}]}}}});
    Api::<DaemonSet>::namespaced(client.clone(), NS)
        .patch(
            "cilium-envoy",
            &PatchParams::default(),
            &Patch::Strategic(&broken),
        )
        .await
        .expect("patch cilium-envoy");
    wait_daemonset_broken(&client, "cilium-envoy").await;
    let plan = ws.run(&["plan", "-no-color", "-detailed-exitcode"]);
    let text = plan.flat();
    assert!(
        text.contains("Cilium 1.20.2 (kube-system/cilium) is not healthy"),
        "{text}"
    );
    assert!(
        text.contains("DaemonSet kube-system/cilium-envoy: 0 of"),
        "the warning names the component: {text}"
    );
    assert!(
        !text.contains("DaemonSet kube-system/cilium:"),
        "the agents are fine: {text}"
    );
    assert!(
        !plan.stdout.contains("talosboot_cilium.this will be")
            && !plan.stdout.contains("talosboot_cilium.this must be"),
        "not drift an upgrade fixes (only the output changes): {}",
        plan.text()
    );
    ws.ok(&["apply", "-refresh-only", "-auto-approve", "-no-color"]);
    let components = &ws.outputs()["components"]["value"];
    assert_eq!(
        components["cilium-envoy"]["rolled_out"], false,
        "{components}"
    );
    assert_eq!(components["cilium-envoy"]["ready"], 0, "{components}");
    assert_eq!(components["cilium"]["rolled_out"], true, "{components}");
}

on_both_clis!(async hubble_relay_enabled_is_waited_for_and_reported);
async fn hubble_relay_enabled_is_waited_for_and_reported() {
    let cluster = TestCluster::start().await;
    let relay = |image: &str| {
        with_components_output(&format!(
            r#"  timeout = "5m"
  values  = [yamlencode({{ hubble = {{ relay = {{ enabled = true{image} }} }} }})]"#
        ))
    };
    let ws = workspace(
        &cluster,
        &relay(", image = { repository = \"quay.io/cilium/hubble-relay-typo\" }"),
    );
    let started = Instant::now();
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success, "{}", out.text());
    assert!(
        started.elapsed() < Duration::from_secs(150),
        "the relay's image pull failure ends the wait at once, not at the 5m timeout ({:?})",
        started.elapsed()
    );
    let text = out.flat();
    // (at once: the agents may still be starting, and then they are listed first)
    let not_rolled_out = text.split("Not rolled out:").nth(1).unwrap_or_default();
    assert!(
        not_rolled_out
            .split("Pods not ready:")
            .next()
            .is_some_and(|list| list.contains("- Deployment kube-system/hubble-relay:")),
        "the wait covers the relay: {text}"
    );
    assert!(
        text.contains("A workload fails in a way that will not fix itself")
            && text.contains("Diagnosis: the image cannot be pulled"),
        "at once, with the cause the relay's pod shows now (not its wait for the CNI): {text}"
    );
    ws.write("main.tf", &root(&cluster, &relay("")));
    ws.apply();
    let components = &ws.outputs()["components"]["value"];
    assert_eq!(components["hubble-relay"]["kind"], "Deployment");
    assert_eq!(components["hubble-relay"]["desired"], 1, "{components}");
    assert_eq!(components["hubble-relay"]["ready"], 1, "{components}");
    assert_eq!(
        components["hubble-relay"]["rolled_out"], true,
        "{components}"
    );
    assert!(
        components.get("hubble-ui").is_none(),
        "only what the manifest contains: {components}"
    );
    assert!(!ws.plan_has_changes());
}
