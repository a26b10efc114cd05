//! A fleet's imports and its `cluster` removed, from one root over two embedded clusters with a
//! provider block that connects nowhere. Cilium runs on both, installed by hand with Helm.
//! - `import` blocks with `for_each` and `cluster` per instance: an import receives only the ID
//!   (no configuration, so no `cluster`), so the plan reads each release through its instance's
//!   `cluster`. The plan shows two imports and no install or replacement, the apply makes no new
//!   revision, and the next plan is empty. State names each cluster and holds no credential.
//! - An import ID with no release on its cluster fails at plan naming that API server, and
//!   installs nothing. The `import` command (no plan follows) stores the ID only, never another
//!   cluster's release; the next plan reads it through `cluster`.
//! - With the provider pointed at cluster a, the import reads through it, and the plan reads
//!   b's release again through b's `cluster`: no replacement, each instance on its cluster.
//! - A bad `cluster` on a chart resource fails `validate` on its line, with no cluster.
//! - `cluster` removed: with the provider connecting nowhere, the plan fails on `cluster` naming
//!   the cluster. With the provider pointed at cluster a, instance a stays (no replacement) and
//!   instance b is replaced, with a warning naming both API servers: removing `cluster` never
//!   silently moves a resource. Instance a then applies through the provider without an
//!   upgrade, and its next plan is empty.

use std::collections::BTreeMap;

use crate::cilium::{CURRENT, NS, helm_by_hand, release_history};
use crate::fleet::{credential, server};
use crate::harness::{Cli, REQUIRED_PROVIDERS, TestCluster, Workspace};

const KEYS: [&str; 2] = ["a", "b"];

/// The root: kubeconfigs from one ephemeral map; `provider` is the provider block; `cluster` is
/// the instances' `cluster` line (empty: removed); `import` the import block, if any.
fn root(provider: &str, cluster: &str, import: &str) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
variable "kubeconfigs" {{
  type      = map(string)
  sensitive = true
  ephemeral = true
}}

{provider}

{import}

resource "talosboot_cilium" "this" {{
  for_each = toset({keys:?})
  version  = "{CURRENT}"
  {cluster}
}}

output "api_servers" {{
  value = {{ for k, c in talosboot_cilium.this : k => c.cluster_identity == null ? null : c.cluster_identity.api_server }}
}}
"#,
        keys = KEYS,
    )
}

const NOWHERE: &str = "provider \"talosboot\" {\n  api_retry_timeout = \"5s\"\n}";
const CLUSTER: &str = "cluster = { kubeconfig_raw = var.kubeconfigs[each.key] }";

fn import_block(id: &str) -> String {
    format!(
        "import {{\n  for_each = toset({KEYS:?})\n  to       = talosboot_cilium.this[each.key]\n  id       = \"{id}\"\n}}"
    )
}

/// Cilium with Talos' values (what `talosboot_cilium` would install), as a platform team's
/// bootstrap would have installed it before talosboot.
async fn cilium_by_hand(client: &kube::Client) {
    helm_by_hand(
        client,
        &[
            "install",
            "cilium",
            "cilium",
            "--repo",
            "https://helm.cilium.io",
            "--version",
            CURRENT,
            "-n",
            NS,
            "--set",
            "ipam.mode=kubernetes",
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
        ],
    )
    .await;
}

on_both_clis!(async a_fleet_imports_each_release_from_its_own_cluster_and_removing_cluster_never_moves_one_silently);
async fn a_fleet_imports_each_release_from_its_own_cluster_and_removing_cluster_never_moves_one_silently()
 {
    let clusters = [TestCluster::start().await, TestCluster::start().await];
    for c in &clusters {
        cilium_by_hand(&c.client().await).await;
    }
    let kubeconfigs: BTreeMap<&str, String> = KEYS
        .iter()
        .zip(&clusters)
        .map(|(k, c)| {
            let text = std::fs::read_to_string(&c.kubeconfig_path).expect("read the kubeconfig");
            (*k, text)
        })
        .collect();
    let servers: BTreeMap<&str, String> =
        kubeconfigs.iter().map(|(k, v)| (*k, server(v))).collect();
    let secrets: Vec<String> = kubeconfigs.values().map(|k| credential(k)).collect();
    let var = serde_json::to_string(&kubeconfigs).expect("json");

    // An import ID with no release on its cluster: an error at plan naming the cluster.
    let missing = Workspace::new(&root(
        NOWHERE,
        CLUSTER,
        &import_block("kube-system/not-installed"),
    ))
    .env("TF_VAR_kubeconfigs", &var);
    missing.init();
    let failed = missing.run(&["plan", "-no-color", "-input=false"]);
    assert!(!failed.success, "{}", failed.text());
    for s in servers.values() {
        assert!(
            failed
                .flat()
                .contains(&format!("no Helm release kube-system/not-installed on {s}")),
            "the error names the release and the cluster {s}:\n{}",
            failed.text()
        );
    }

    // The `import` command (ImportResourceState, then a refresh, and no plan): the state is
    // the ID only, marked unread, never another cluster's release; the next plan reads it
    // through `cluster` and installs nothing on it.
    let command = Workspace::new(&root(NOWHERE, CLUSTER, "")).env("TF_VAR_kubeconfigs", &var);
    command.init();
    command.ok(&[
        "import",
        "-no-color",
        "-input=false",
        r#"talosboot_cilium.this["a"]"#,
        "kube-system/cilium",
    ]);
    let skeleton: serde_json::Value =
        serde_json::from_str(&command.state_text()).expect("state JSON");
    let attributes = &skeleton["resources"][0]["instances"][0]["attributes"];
    assert_eq!(attributes["id"], "kube-system/cilium", "{skeleton}");
    assert!(
        attributes["revision"].is_null() && attributes["cluster_identity"].is_null(),
        "nothing read from any cluster yet: {skeleton}"
    );
    let after = command.ok(&["plan", "-no-color", "-input=false"]);
    assert!(
        after
            .stdout
            .contains(r#"talosboot_cilium.this["a"] will be updated in-place"#)
            && after
                .stdout
                .contains(&format!(r#"api_server = "{}""#, servers["a"])),
        "the plan reads the release on cluster a:\n{}",
        after.text()
    );
    assert!(
        after.flat().contains("1 to add, 1 to change, 0 to destroy"),
        "only b, not imported, is created:\n{}",
        after.text()
    );

    // The provider pointed at cluster a: the import reads through it, and the plan reads b's
    // release again from b, its `cluster` (never a's, and never a replacement).
    let at_a = format!(
        "provider \"talosboot\" {{\n  config_path       = {:?}\n  api_retry_timeout = \"5s\"\n}}",
        clusters[0].kubeconfig_path.display().to_string()
    );
    let through_a = Workspace::new(&root(&at_a, CLUSTER, &import_block("kube-system/cilium")))
        .env("TF_VAR_kubeconfigs", &var);
    through_a.init();
    let plan = through_a.ok(&["plan", "-no-color", "-input=false"]);
    assert!(
        plan.flat().contains("Plan: 2 to import, 0 to add,")
            && plan.flat().contains("0 to destroy"),
        "{}",
        plan.text()
    );
    assert!(!plan.stdout.contains("must be replaced"), "{}", plan.text());
    for s in servers.values() {
        assert!(
            plan.stdout.contains(&format!(r#"api_server = "{s}""#)),
            "each instance planned on its own cluster {s}:\n{}",
            plan.text()
        );
    }

    // The fleet's imports: two imports, no install, no replacement.
    let ws = Workspace::new(&root(NOWHERE, CLUSTER, &import_block("kube-system/cilium")))
        .env("TF_VAR_kubeconfigs", &var);
    ws.init();
    let plan = ws.ok(&["plan", "-no-color", "-input=false"]);
    assert!(
        plan.flat().contains("Plan: 2 to import, 0 to add,")
            && plan.flat().contains("0 to destroy"),
        "two imports, nothing installed or replaced:\n{}",
        plan.text()
    );
    assert!(!plan.stdout.contains("must be replaced"), "{}", plan.text());
    let apply = ws.ok(&["apply", "-auto-approve", "-no-color", "-input=false"]);
    assert!(
        apply.flat().contains("2 imported, 0 added"),
        "{}",
        apply.text()
    );
    for c in &clusters {
        let history = release_history(&c.client().await, "cilium").await;
        assert_eq!(
            history.len(),
            1,
            "the import changes nothing in the cluster: {history:?}\n{}",
            apply.text()
        );
    }
    let next = ws.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]);
    assert_eq!(
        next.code,
        Some(0),
        "the next plan is empty:\n{}",
        next.text()
    );
    let outputs = ws.outputs();
    for (k, s) in &servers {
        assert_eq!(
            outputs["api_servers"]["value"][k],
            *s.as_str(),
            "state names each cluster"
        );
    }
    let state = ws.state_text();
    for (what, text) in [
        ("state", &state),
        ("plan", &plan.text()),
        ("apply", &apply.text()),
    ] {
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "a credential in the {what}"
            );
        }
    }

    // `cluster` removed, the provider connecting nowhere: which cluster is not known, an error.
    ws.write("main.tf", &root(NOWHERE, "", ""));
    let unknown = ws.run(&["plan", "-no-color", "-input=false"]);
    assert!(!unknown.success, "{}", unknown.text());
    assert!(
        unknown
            .flat()
            .contains("Cannot tell which cluster this resource moves to")
            && unknown.flat().contains(&servers["a"])
            && unknown.flat().contains("Put `cluster` back"),
        "{}",
        unknown.text()
    );

    // The provider pointed at cluster a: a stays, b is replaced and the plan says why.
    ws.write("main.tf", &root(&at_a, "", ""));
    let moved = ws.ok(&["plan", "-no-color", "-input=false"]);
    let flat = moved.flat();
    assert!(
        moved
            .stdout
            .contains(r#"talosboot_cilium.this["b"] must be replaced"#),
        "{}",
        moved.text()
    );
    assert!(
        !moved
            .stdout
            .contains(r#"talosboot_cilium.this["a"] must be replaced"#),
        "{}",
        moved.text()
    );
    assert!(
        flat.contains("Resource moves to another cluster")
            && flat.contains(&format!("applied to {}", servers["b"]))
            && flat.contains(&format!("reaches {}", servers["a"])),
        "the warning names both API servers:\n{}",
        moved.text()
    );
    // Instance a applied through the provider: no Helm upgrade, and from then on refresh reads
    // it through the provider (its `cluster_identity` is null): the next plan of it is empty.
    let a = r#"-target=talosboot_cilium.this["a"]"#;
    let applied = ws.ok(&["apply", "-auto-approve", "-no-color", "-input=false", a]);
    assert_eq!(
        release_history(&clusters[0].client().await, "cilium")
            .await
            .len(),
        1,
        "no upgrade:\n{}",
        applied.text()
    );
    let again = ws.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode", a]);
    assert_eq!(again.code, Some(0), "{}", again.text());
}

on_both_clis!(a_bad_cluster_on_a_chart_resource_fails_validate_on_its_line_with_no_cluster);
fn a_bad_cluster_on_a_chart_resource_fails_validate_on_its_line_with_no_cluster() {
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
{NOWHERE}

resource "talosboot_cilium" "this" {{
  version = "{CURRENT}"
  cluster = {{ host = "10.0.0.10:6443", token = "fleet-t0ken" }}
}}
"#
    ));
    ws.init();
    let out = ws.run(&["validate", "-no-color"]);
    assert!(!out.success, "validate must fail:\n{}", out.text());
    assert!(
        out.flat().contains(
            "`cluster.host`: `host` must be a URL such as `https://10.0.0.10:6443`, got \"10.0.0.10:6443\""
        ),
        "{}",
        out.text()
    );
    // Terraform quotes the line of `cluster`; OpenTofu cannot point at a nested attribute and
    // quotes the resource's first line (the detail names `cluster.host` on both).
    let quoted = match ws.cli() {
        Cli::OpenTofu => r#"resource "talosboot_cilium" "this" {"#,
        _ => r#"cluster = { host = "10.0.0.10:6443""#,
    };
    assert!(out.text().contains(quoted), "{}", out.text());
}
