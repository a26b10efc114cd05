//! Values and inputs: out-of-band drift planned and repaired; write-only values kept out of
//! state; `talos_defaults = false` without a service host warned at plan; edits that change
//! nothing in the release are bookkeeping; `timeout` in seconds or a Go duration.

use crate::harness::{REQUIRED_PROVIDERS, TestCluster, Workspace};

use super::*;

on_both_clis!(async values_changed_out_of_band_show_as_an_update_and_apply_converges);
async fn values_changed_out_of_band_show_as_an_update_and_apply_converges() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let ws = workspace(
        &cluster,
        &cilium("  values = [yamlencode({ hubble = { relay = { enabled = true } } })]"),
    );
    ws.apply();
    assert!(!ws.plan_has_changes());
    helm_by_hand(
        &client,
        &[
            "upgrade",
            "cilium",
            "cilium",
            "--repo",
            "https://helm.cilium.io",
            "--version",
            crate::cilium::CURRENT,
            "-n",
            NS,
            "--set",
            "hubble.relay.enabled=false",
        ],
    )
    .await;
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        plan.stdout.contains("will be updated in-place"),
        "{}",
        plan.text()
    );
    assert!(
        plan.stdout.contains("values_sha256"),
        "the diff names the drifted values hash:\n{}",
        plan.stdout
    );
    assert!(
        plan.flat()
            .contains("Release values differ from the configuration")
            && plan
                .flat()
                .contains("helm get values -n kube-system cilium"),
        "the plan says the cluster's values get replaced:\n{}",
        plan.text()
    );
    ws.apply();
    assert!(!ws.plan_has_changes(), "converged");
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
}

on_both_clis!(async write_only_values_stay_out_of_state_and_a_changed_one_plans_an_update);
async fn write_only_values_stay_out_of_state_and_a_changed_one_plans_an_update() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    // As users feed secrets: from an ephemeral variable (a literal would be in the configuration).
    let body = format!(
        "variable \"ca_key\" {{\n  type      = string\n  sensitive = true\n  ephemeral = true\n}}\n{}",
        cilium("  set_wo = [{ name = \"hubble.tls.ca.key\", value = var.ca_key }]")
    );
    let ws = workspace(&cluster, &body);
    ws.ok(&[
        "plan",
        "-no-color",
        "-out",
        "tfplan",
        "-var",
        "ca_key=WO-MARKER-ONE",
    ]);
    ws.ok(&[
        "apply",
        "-auto-approve",
        "-no-color",
        "-var",
        "ca_key=WO-MARKER-ONE",
        "tfplan",
    ]);
    let plan_json = ws.ok(&["show", "-json", "tfplan"]).stdout;
    assert!(!ws.state_text().contains("WO-MARKER-ONE"), "not in state");
    assert!(!plan_json.contains("WO-MARKER-ONE"), "not in the plan file");
    let same = ws.run(&[
        "plan",
        "-no-color",
        "-detailed-exitcode",
        "-var",
        "ca_key=WO-MARKER-ONE",
    ]);
    assert_eq!(
        same.code,
        Some(0),
        "same write-only value: no change\n{}",
        same.text()
    );
    let plan = ws.run(&[
        "plan",
        "-no-color",
        "-detailed-exitcode",
        "-var",
        "ca_key=WO-MARKER-TWO",
    ]);
    assert_eq!(
        plan.code,
        Some(2),
        "a changed write-only value plans an update:\n{}",
        plan.text()
    );
    assert!(plan.stdout.contains("values_sha256"), "{}", plan.stdout);
    assert!(!plan.text().contains("WO-MARKER-TWO"));
    ws.ok(&[
        "apply",
        "-auto-approve",
        "-no-color",
        "-var",
        "ca_key=WO-MARKER-TWO",
    ]);
    assert!(!ws.state_text().contains("WO-MARKER-TWO"));
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
}

on_both_clis!(async without_talos_defaults_a_missing_service_host_is_warned_at_plan);
async fn without_talos_defaults_a_missing_service_host_is_warned_at_plan() {
    let cluster = TestCluster::shared().await;
    // A typo users make when they write the Talos values themselves.
    let ws = workspace(
        &cluster,
        &cilium(
            r#"  talos_defaults = false
  values = [yamlencode({ kubeProxyReplacement = true, k8sServiceHots = "localhost", k8sServicePort = 7445 })]"#,
        ),
    );
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        plan.flat()
            .contains("Cilium would need the Service IP before it exists"),
        "{}",
        plan.text()
    );
    assert!(
        plan.flat().contains("`k8sServiceHost` is not set"),
        "{}",
        plan.text()
    );
    let fixed = workspace(
        &cluster,
        &cilium(
            r#"  talos_defaults = false
  values = [yamlencode({ kubeProxyReplacement = true, k8sServiceHost = "localhost", k8sServicePort = 7445 })]"#,
        ),
    );
    let plan = fixed.ok(&["plan", "-no-color"]);
    assert!(
        !plan.flat().contains("Service IP before it exists"),
        "{}",
        plan.text()
    );
}

on_both_clis!(async edits_that_change_nothing_in_the_release_are_bookkeeping);
async fn edits_that_change_nothing_in_the_release_are_bookkeeping() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let ws = workspace(&cluster, &cilium(""));
    ws.apply();
    let before = release_history(&client, "cilium").await;
    // The other spelling of the version, adoption switched on, the values written out as a
    // `set` that yields what the release already has (the Talos default `ipam.mode`), its name
    // from a variable as a module would take it: not known at validate, which must accept it.
    let edited = "variable \"ipam_key\" {\n  type    = string\n  default = \"ipam.mode\"\n}\n\nresource \"talosboot_cilium\" \"this\" {\n  version        = \"v1.20.2\"\n  adopt_existing = true\n  set            = [{ name = var.ipam_key, value = \"kubernetes\" }]\n}\n";
    ws.write("main.tf", &root(&cluster, edited));
    ws.ok(&["validate", "-no-color"]);
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        !plan.stdout.contains("(known after apply)"),
        "no upgrade planned:\n{}",
        plan.text()
    );
    ws.apply();
    assert_eq!(
        release_history(&client, "cilium").await,
        before,
        "no new revision"
    );
    assert!(!ws.plan_has_changes());
}

on_both_clis!(timeout_takes_seconds_and_go_durations_on_every_resource);
/// `timeout` takes what `helm_release` roots write (seconds, `timeout = 300`) and Go durations
/// (`1h30m`) on every resource; anything else fails validate on its attribute.
fn timeout_takes_seconds_and_go_durations_on_every_resource() {
    let instance = "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: flux\n  namespace: flux-system\n";
    let root = |timeout: &str| {
        format!(
            r#"{REQUIRED_PROVIDERS}
provider "talosboot" {{}}

resource "talosboot_cilium" "this" {{
  version = "1.20.2"
  timeout = {timeout}
}}

resource "talosboot_helm_release" "app" {{
  name    = "app"
  chart   = "app"
  timeout = {timeout}
}}

resource "talosboot_flux_bootstrap" "flux" {{
  revision         = 1
  timeout          = {timeout}
  gitops_resources = {{ instance_yaml = {instance:?} }}
}}
"#
        )
    };
    for timeout in ["300", "\"1h30m\""] {
        let ws = Workspace::new(&root(timeout));
        ws.init();
        ws.ok(&["validate", "-no-color"]);
    }
    let ws = Workspace::new(&root("\"five minutes\""));
    ws.init();
    let out = ws.run(&["validate", "-no-color"]);
    let text = out.flat();
    assert!(!out.success, "{text}");
    assert_eq!(
        text.matches("is not a duration: use seconds (`300`) or a Go duration")
            .count(),
        3,
        "each resource names the accepted forms:\n{}",
        out.text()
    );
}
