//! The guide `docs/guides/migrating-cilium.md`, replayed step by step with the real OpenTofu CLI:
//! a Cilium installed by Helm by hand with values that are not the Talos defaults (no
//! `ipam.mode`, so the chart's `cluster-pool` runs) and a sensitive value, a `helm_release` state
//! for it moved with `moved {}`; the first plan names every value path the upgrade would change
//! (the sensitive one as `(sensitive)`), the guide's "keep exactly the running values"
//! (`talos_defaults = false` plus what `helm get values` shows) plans bookkeeping only (no
//! upgrade), the apply keeps the release as it was (an output reading `metadata.app_version`, as
//! `helm_release` roots do, works), and the next plan is empty.

use serde_json::json;

use crate::cilium::{NS, helm_by_hand, root};
use crate::harness::{TestCluster, Workspace, history, repo_root};

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

/// The running release, installed as a platform team's bootstrap Job would.
async fn install_by_hand(client: &kube::Client) {
    let sensitive = format!("{SENSITIVE_PATH}={RUNNING_SECRET}");
    helm_by_hand(
        client,
        &[
            "upgrade", "--install", "cilium", "cilium",
            "--repo", "https://helm.cilium.io", "--version", "1.18.4", "-n", NS,
            "--set", "cgroup.autoMount.enabled=false",
            "--set", "cgroup.hostRoot=/sys/fs/cgroup",
            "--set", "k8sServiceHost=localhost",
            "--set", "k8sServicePort=7445",
            "--set", "kubeProxyReplacement=true",
            "--set", "securityContext.capabilities.ciliumAgent={CHOWN,KILL,NET_ADMIN,NET_RAW,IPC_LOCK,SYS_ADMIN,SYS_RESOURCE,DAC_OVERRIDE,FOWNER,SETGID,SETUID}",
            "--set", "securityContext.capabilities.cleanCiliumState={NET_ADMIN,SYS_ADMIN,SYS_RESOURCE}",
            "--set", &sensitive,
        ],
    )
    .await;
}

/// The state a `helm_release.cilium` root has for that release (hashicorp/helm v3, schema
/// version 2), made from the state of a one-resource root (so its envelope is the CLI's own).
fn helm_release_state(seed_state: &str) -> String {
    let mut s: serde_json::Value = serde_json::from_str(seed_state).expect("state json");
    let resource = &mut s["resources"][0];
    resource["type"] = json!("helm_release");
    resource["name"] = json!("cilium");
    resource["provider"] = json!("provider[\"registry.opentofu.org/hashicorp/helm\"]");
    let instance = &mut resource["instances"][0];
    instance["schema_version"] = json!(2);
    instance
        .as_object_mut()
        .expect("instance")
        .remove("private");
    instance["attributes"] = json!({
        "id": "cilium", "name": "cilium", "namespace": NS, "chart": "cilium",
        "repository": "https://helm.cilium.io", "version": "1.18.4", "values": [RUNNING_VALUES],
        "set": [], "set_list": [],
        "set_sensitive": [{"name": SENSITIVE_PATH, "value": RUNNING_SECRET, "type": ""}],
        "status": "deployed", "wait": true, "timeout": 300,
        "atomic": false, "create_namespace": false, "max_history": 0,
        "metadata": {"name": "cilium", "revision": 1, "namespace": NS, "chart": "cilium", "version": "1.18.4",
                     "app_version": "1.18.4", "values": "{}", "first_deployed": 0, "last_deployed": 0, "notes": ""},
    });
    s.to_string()
}

/// hashicorp/helm cannot be installed here (no registry): a cross-type move needs the source
/// provider present, not its schema, so the Go null provider's binary stands in for it.
fn stand_in_helm_provider(ws: &Workspace) {
    let stand_in = repo_root().join(
        ".tools/mirror/registry.terraform.io/hashicorp/null/2.1.2/linux_amd64/terraform-provider-null_v2.1.2_x4",
    );
    let dir = ws
        .path()
        .join("mirror/registry.opentofu.org/hashicorp/helm/3.0.2/linux_amd64");
    std::fs::create_dir_all(&dir).expect("mirror dir");
    std::fs::copy(&stand_in, dir.join("terraform-provider-helm_v3.0.2")).expect("stand-in");
    let rc = ws.read("cli.tfrc").replacen(
        "include = [",
        "include = [\"registry.opentofu.org/hashicorp/helm\", ",
        1,
    );
    ws.write("cli.tfrc", &rc);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_guide_moves_a_running_cilium_keeping_its_values_and_the_plan_names_each_change() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    install_by_hand(&client).await;
    let revisions = history(&client, NS, "cilium").await;
    assert_eq!(revisions.len(), 1, "{revisions:?}");

    // A root that manages the release with helm_release today.
    let ws = Workspace::new(&root(&cluster, "resource \"null_resource\" \"seed\" {}"));
    ws.init();
    ws.apply();
    ws.write("terraform.tfstate", &helm_release_state(&ws.state_text()));
    stand_in_helm_provider(&ws);
    ws.write("cilium-values.yaml", RUNNING_VALUES);

    // Step 1: the resource with the guide's defaults (Talos values merged under yours), and a
    // rotated sensitive value. The plan names what the upgrade changes, secrets hidden.
    ws.write("main.tf", &migration_root(&cluster, "", ROTATED_SECRET));
    ws.ok(&["init", "-no-color", "-upgrade"]);
    let plan = ws.ok(&["plan", "-no-color"]);
    let text = plan.flat();
    assert!(
        plan.stdout.contains("(moved from helm_release.cilium)")
            && text.contains("0 to add, 1 to change, 0 to destroy"),
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
