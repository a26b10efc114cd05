//! The guide `docs/guides/migrating-cilium.md`, replayed step by step with the real OpenTofu CLI:
//! a Cilium installed by Helm by hand with values that are not the Talos defaults (no
//! `ipam.mode`, so the chart's `cluster-pool` runs) and a sensitive value, a `helm_release` state
//! for it moved with `moved {}`; the first plan names every value path the upgrade would change
//! (the sensitive one as `(sensitive)`), the guide's "keep exactly the running values"
//! (`talos_defaults = false` plus what `helm get values` shows) plans bookkeeping only (no
//! upgrade), the apply keeps the release as it was (an output reading `metadata.app_version`, as
//! `helm_release` roots do, works), and the next plan is empty. An import whose values leave out
//! settings the running Cilium has (native routing, a cluster name and id) is refused at plan,
//! naming each with the chart default that would replace it.

use serde_json::json;

use crate::cilium::{NS, helm_by_hand, helm_release_state, root, stand_in_helm_provider};
use crate::harness::{TestCluster, Workspace, history};

/// What `helm get values -n kube-system cilium` shows of the running release, less the sensitive
/// value: the Talos values except `ipam.mode`.
const RUNNING_VALUES: &str = "\
cgroup:
  autoMount:
    enabled: false
  hostRoot: /sys/fs/cgroup
k8sServiceHost: localhost
k8sServicePort: 7445
kubeProxyReplacement: true
securityContext:
  capabilities:
    ciliumAgent: [CHOWN, KILL, NET_ADMIN, NET_RAW, IPC_LOCK, SYS_ADMIN, SYS_RESOURCE, DAC_OVERRIDE, FOWNER, SETGID, SETUID]
    cleanCiliumState: [NET_ADMIN, SYS_ADMIN, SYS_RESOURCE]
";

const SENSITIVE_PATH: &str = "extraConfig.mesh-id";
const RUNNING_SECRET: &str = "marker-running-7f3a91";
const ROTATED_SECRET: &str = "marker-rotated-7f3a91";

/// The running release, installed as a platform team's bootstrap Job would, with `extra` `helm`
/// arguments (`--set`s) after the running values.
async fn install_by_hand(client: &kube::Client, extra: &[&str]) {
    let sensitive = format!("{SENSITIVE_PATH}={RUNNING_SECRET}");
    let mut args = vec![
        "upgrade",
        "--install",
        "cilium",
        "cilium",
        "--repo",
        "https://helm.cilium.io",
        "--version",
        "1.18.4",
        "-n",
        NS,
        "--set",
        "cgroup.autoMount.enabled=false",
        "--set",
        "cgroup.hostRoot=/sys/fs/cgroup",
        "--set",
        "k8sServiceHost=localhost",
        "--set",
        "k8sServicePort=7445",
        "--set",
        "kubeProxyReplacement=true",
        "--set",
        "securityContext.capabilities.ciliumAgent={CHOWN,KILL,NET_ADMIN,NET_RAW,IPC_LOCK,SYS_ADMIN,SYS_RESOURCE,DAC_OVERRIDE,FOWNER,SETGID,SETUID}",
        "--set",
        "securityContext.capabilities.cleanCiliumState={NET_ADMIN,SYS_ADMIN,SYS_RESOURCE}",
        "--set",
        &sensitive,
    ];
    args.extend(extra);
    helm_by_hand(client, &args).await;
}

fn migration_root(cluster: &TestCluster, arguments: &str, secret: &str) -> String {
    root(
        cluster,
        &format!(
            r#"resource "talosboot_cilium" "this" {{
  version = "1.18.4"
{arguments}
  values  = [file("${{path.module}}/cilium-values.yaml")]
  set_sensitive = [{{ name = "{}", value = "{secret}" }}]
}}

moved {{
  from = helm_release.cilium
  to   = talosboot_cilium.this
}}

# Was helm_release.cilium.metadata.app_version: the same object, at the new address.
output "app_version" {{
  value = talosboot_cilium.this.metadata.app_version
}}
"#,
            SENSITIVE_PATH,
        ),
    )
}

on_both_clis!(async the_guide_moves_a_running_cilium_keeping_its_values_and_the_plan_names_each_change);
async fn the_guide_moves_a_running_cilium_keeping_its_values_and_the_plan_names_each_change() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    install_by_hand(&client, &[]).await;
    let revisions = history(&client, NS, "cilium").await;
    assert_eq!(revisions.len(), 1, "{revisions:?}");

    // A root that manages the release with helm_release today.
    let ws = Workspace::new(&root(&cluster, "resource \"null_resource\" \"seed\" {}"));
    ws.init();
    ws.apply();
    ws.write(
        "terraform.tfstate",
        &helm_release_state(
            ws.cli(),
            &ws.state_text(),
            json!([RUNNING_VALUES]),
            json!([{"name": SENSITIVE_PATH, "value": RUNNING_SECRET, "type": ""}]),
        ),
    );
    stand_in_helm_provider(&ws);
    ws.write("cilium-values.yaml", RUNNING_VALUES);

    // Step 1: the resource with the guide's defaults (Talos values merged under yours), and a
    // rotated sensitive value. The plan names what the upgrade changes, secrets hidden, and
    // refuses it: the Talos values would switch the running CNI's IPAM from `cluster-pool`.
    ws.write("main.tf", &migration_root(&cluster, "", ROTATED_SECRET));
    ws.ok(&["init", "-no-color", "-upgrade"]);
    let plan = ws.run(&["plan", "-no-color"]);
    let text = plan.flat();
    assert!(!plan.success, "{}", plan.text());
    assert!(
        text.contains("would change settings of the running Cilium")
            && text.contains(r#"ipam.mode (cilium-config `ipam`): "cluster-pool" -> "kubernetes""#)
            && text.contains(r#"accept_running_config_changes = ["ipam.mode"]"#),
        "{}",
        plan.text()
    );
    assert!(
        text.contains("Release values differ from the configuration")
            && text.contains(r#"ipam.mode: (unset) -> "kubernetes""#)
            && text.contains("extraConfig.mesh-id: (sensitive) -> (sensitive)")
            && text.contains("set `talos_defaults = false`"),
        "the plan names each value path the upgrade changes:\n{}",
        plan.text()
    );
    assert!(
        !text.contains("k8sServicePort:") && !text.contains("cgroup.hostRoot:"),
        "values that stay are not listed:\n{}",
        plan.text()
    );
    for secret in [RUNNING_SECRET, ROTATED_SECRET] {
        assert!(
            !plan.text().contains(secret),
            "{secret} leaked into the plan"
        );
    }

    // Step 2: keep exactly what runs: no Talos defaults, the values `helm get values` shows.
    ws.write(
        "main.tf",
        &migration_root(&cluster, "  talos_defaults = false", RUNNING_SECRET),
    );
    let plan = ws.ok(&["plan", "-no-color"]);
    // The move recorded the default `talos_defaults = true`: turning it off is bookkeeping (the
    // values are what runs: no upgrade, the revision stays known).
    assert!(
        plan.stdout.contains("(moved from helm_release.cilium)")
            && plan
                .stdout
                .contains("talos_defaults         = true -> false")
            && !plan.stdout.contains("(known after apply)")
            && !plan.stdout.contains("values_sha256")
            && !plan.flat().contains("Release values differ"),
        "{}",
        plan.text()
    );
    ws.apply();
    assert_eq!(
        ws.outputs()["app_version"]["value"],
        "1.18.4",
        "`metadata.app_version` references keep working"
    );
    assert_eq!(
        history(&client, NS, "cilium").await,
        revisions,
        "the release runs what it ran: no upgrade"
    );
    assert!(!ws.plan_has_changes(), "the next plan is empty");
}

on_both_clis!(async an_import_whose_values_leave_out_running_settings_is_refused_naming_each);
async fn an_import_whose_values_leave_out_running_settings_is_refused_naming_each() {
    // A Cilium installed by hand with settings a fleet sets per cluster (native routing, a
    // ClusterMesh name and id), imported by a root whose values leave them out: the chart's
    // defaults would replace them on the running CNI.
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    install_by_hand(
        &client,
        &[
            "--set",
            "routingMode=native",
            "--set",
            "ipv4NativeRoutingCIDR=10.244.0.0/16",
            "--set",
            "cluster.name=prod-eu1",
            "--set",
            "cluster.id=7",
        ],
    )
    .await;
    let revisions = history(&client, NS, "cilium").await;
    let import = |values: &str| {
        root(
            &cluster,
            &format!(
                r#"import {{
  to = talosboot_cilium.this
  id = "kube-system/cilium"
}}

resource "talosboot_cilium" "this" {{
  version        = "1.18.4"
  talos_defaults = false
  values         = [file("${{path.module}}/cilium-values.yaml"), {values}]
  set_sensitive  = [{{ name = "{SENSITIVE_PATH}", value = "{RUNNING_SECRET}" }}]
}}
"#
            ),
        )
    };
    let ws = Workspace::new(&import("\"{}\""));
    ws.write("cilium-values.yaml", RUNNING_VALUES);
    ws.init();
    let plan = ws.run(&["plan", "-no-color"]);
    let text = plan.flat();
    let unset = "(the chart's default: the values do not set it)";
    assert!(!plan.success, "{}", plan.text());
    assert!(
        text.contains("would change settings of the running Cilium")
            && text.contains(&format!(
                r#"routingMode (cilium-config `routing-mode`): "native" -> "tunnel" {unset}"#
            ))
            && text.contains(&format!(
                r#"cluster.name (cilium-config `cluster-name`): "prod-eu1" -> "default" {unset}"#
            ))
            && text.contains(&format!(
                r#"cluster.id (cilium-config `cluster-id`): "7" -> "0" {unset}"#
            )),
        "{}",
        plan.text()
    );
    // The values that say what runs: the import plans no upgrade.
    ws.write(
        "main.tf",
        &import(
            r#"yamlencode({ routingMode = "native", ipv4NativeRoutingCIDR = "10.244.0.0/16", cluster = { name = "prod-eu1", id = 7 } })"#,
        ),
    );
    ws.apply();
    assert_eq!(
        history(&client, NS, "cilium").await,
        revisions,
        "nothing was upgraded"
    );
}
