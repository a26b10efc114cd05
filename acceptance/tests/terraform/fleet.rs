//! A fleet in one root: one provider, `for_each` over three embedded clusters, each instance of
//! `talosboot_cilium` reaching its own cluster through its write-only `cluster` attribute (fed,
//! as `ephemeral "talos_cluster_kubeconfig"` would feed it, from an ephemeral value). Cilium is
//! installed on all three and the next plan is empty; no credential is in state, the plan file,
//! its JSON or a `TF_LOG=trace` log; drift made on one cluster by hand shows in `plan` on that
//! instance only (refresh has no configuration; the plan reads each cluster) and apply repairs
//! it; `values_wo` stays out of state, plan and logs, and a change of it is named `(write-only)`
//! in the plan's values diff; with one cluster unreachable its instance fails naming its API server while the others
//! apply, and nothing leaves the state.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::cilium::{CURRENT, NS, current_status, helm_by_hand};
use crate::harness::{REQUIRED_PROVIDERS, TestCluster, Workspace};
use crate::write_only::plan_file_contents;

const KEYS: [&str; 3] = ["a", "b", "c"];

/// The root: the kubeconfigs are one ephemeral map; the provider block only sets the retry
/// budget (an unreachable cluster fails in seconds), and connects nowhere itself.
fn root(values: &str) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
variable "kubeconfigs" {{
  type      = map(string)
  sensitive = true
  ephemeral = true
}}

# A chart secret, as a vault's ephemeral resource would give it.
variable "ca_key" {{
  type      = string
  sensitive = true
  ephemeral = true
}}

provider "talosboot" {{
  api_retry_timeout = "5s"
}}

resource "talosboot_cilium" "this" {{
  for_each = toset({keys:?})
  version  = "{CURRENT}"
  values   = [yamlencode({values})]
  values_wo = [yamlencode({{ hubble = {{ tls = {{ ca = {{ key = var.ca_key }} }} }} }})]
  cluster = {{
    kubeconfig_raw = var.kubeconfigs[each.key]
  }}
}}

output "api_servers" {{
  value = {{ for k, c in talosboot_cilium.this : k => c.cluster_identity.api_server }}
}}
"#,
        keys = KEYS,
    )
}

/// The credential of a kubeconfig (its client key, or its token), which must never leave it.
pub(crate) fn credential(kubeconfig: &str) -> String {
    kubeconfig
        .lines()
        .filter_map(|line| line.trim().split_once(':'))
        .find(|(key, _)| matches!(*key, "client-key-data" | "token"))
        .map(|(_, value)| value.trim().trim_matches('"').to_owned())
        .filter(|value| !value.is_empty())
        .unwrap_or_else(|| panic!("the kubeconfig holds no credential"))
}

pub(crate) fn server(kubeconfig: &str) -> String {
    kubeconfig
        .lines()
        .filter_map(|line| line.trim().strip_prefix("server:"))
        .map(|s| s.trim().trim_matches('"').trim_end_matches('/').to_owned())
        .next()
        .expect("the kubeconfig names its server")
}

on_both_clis!(async a_fleet_of_three_clusters_in_one_root_converges_each_on_its_own_cluster);
async fn a_fleet_of_three_clusters_in_one_root_converges_each_on_its_own_cluster() {
    let mut clusters = Vec::new();
    for _ in KEYS {
        clusters.push(TestCluster::start().await);
    }
    let kubeconfigs: BTreeMap<&str, String> = KEYS
        .iter()
        .zip(&clusters)
        .map(|(k, c)| {
            let text = std::fs::read_to_string(&c.kubeconfig_path).expect("read the kubeconfig");
            (*k, text)
        })
        .collect();
    let mut secrets: Vec<String> = kubeconfigs.values().map(|k| credential(k)).collect();
    secrets.push("WO-VALUES-MARKER".into());
    let servers: BTreeMap<&str, String> =
        kubeconfigs.iter().map(|(k, v)| (*k, server(v))).collect();
    // JSON is HCL: the map variable from the environment, as CI would pass it.
    let var = serde_json::to_string(&kubeconfigs).expect("json");
    let mut ws = Workspace::new(&root("{ hubble = { relay = { enabled = false } } }"))
        .env("TF_VAR_kubeconfigs", &var)
        .env("TF_VAR_ca_key", "WO-VALUES-MARKER-ONE");
    ws.init();

    // Apply installs Cilium on all three; the next plan is empty.
    ws.ok(&["plan", "-no-color", "-input=false", "-out=tfplan"]);
    let plan_file = plan_file_contents(&ws, "tfplan");
    let plan_json = ws.ok(&["show", "-json", "tfplan"]).stdout;
    let apply = ws.ok(&[
        "apply",
        "-auto-approve",
        "-no-color",
        "-input=false",
        "tfplan",
    ]);
    for c in &clusters {
        let client = c.client().await;
        assert_eq!(
            current_status(&client).await.as_deref(),
            Some("deployed"),
            "{}",
            apply.text()
        );
    }
    let outputs = ws.outputs();
    for (k, s) in &servers {
        assert_eq!(
            outputs["api_servers"]["value"][k],
            *s.as_str(),
            "state names each cluster"
        );
    }
    let mut trace = ws.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]);
    assert_eq!(
        trace.code,
        Some(0),
        "the plan after the apply is empty:\n{}",
        trace.text()
    );
    let mut traced = ws.command(&["plan", "-no-color", "-input=false"]);
    traced.env("TF_LOG", "trace");
    let out = traced.output().expect("run a traced plan");
    trace.stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{}", trace.stderr);
    assert!(
        trace.stderr.contains("PlanResourceChange"),
        "a trace log was written"
    );

    // No credential in state, the plan file, its JSON or a trace log.
    let state = ws.state_text();
    for (what, text) in [
        ("state", &state),
        ("plan file", &plan_file),
        ("plan JSON", &plan_json),
        ("trace log", &trace.stderr),
        ("apply output", &apply.text()),
    ] {
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "a credential in the {what}"
            );
        }
        assert!(!text.contains("BEGIN"), "PEM material in the {what}");
    }

    // Drift by hand on cluster b: its instance only is planned, and apply repairs it.
    let b = clusters[1].client().await;
    helm_by_hand(
        &b,
        &[
            "upgrade",
            "cilium",
            "cilium",
            "--repo",
            "https://helm.cilium.io",
            "--version",
            CURRENT,
            "-n",
            NS,
            "--reuse-values",
            "--set",
            "hubble.relay.enabled=true",
        ],
    )
    .await;
    let refresh_only = ws.run(&[
        "plan",
        "-refresh-only",
        "-no-color",
        "-input=false",
        "-detailed-exitcode",
    ]);
    assert_eq!(
        refresh_only.code,
        Some(0),
        "refresh has no configuration: it keeps each state as it is:\n{}",
        refresh_only.text()
    );
    let plan = ws.ok(&["plan", "-no-color", "-input=false"]);
    assert!(
        plan.stdout
            .contains(r#"talosboot_cilium.this["b"] will be updated in-place"#),
        "the drifted instance is planned:\n{}",
        plan.text()
    );
    for other in ["a", "c"] {
        assert!(
            !plan
                .stdout
                .contains(&format!(r#"talosboot_cilium.this["{other}"] will be"#)),
            "only the drifted instance is planned:\n{}",
            plan.text()
        );
    }
    assert!(plan.stdout.contains("1 to change"), "{}", plan.stdout);
    ws.apply();
    assert!(!ws.plan_has_changes(), "repaired");

    // Cluster c unreachable: its instance fails naming its API server; a and b apply; the
    // state keeps all three.
    clusters[2]
        .faults()
        .expect("an embedded cluster")
        .unreachable_for(Duration::from_secs(600));
    ws.write(
        "main.tf",
        &root("{ hubble = { relay = { enabled = false } }, debug = { enabled = true } }"),
    );
    // ... with a new `values_wo` value too: named `(write-only)` in the values diff, never shown.
    ws.set_env("TF_VAR_ca_key", "WO-VALUES-MARKER-TWO");
    let failed = ws.run(&["apply", "-auto-approve", "-no-color", "-input=false"]);
    assert!(
        failed
            .flat()
            .contains("hubble.tls.ca.key: (write-only) -> (write-only)"),
        "the values diff names the write-only key:\n{}",
        failed.text()
    );
    assert!(
        !failed.success,
        "the unreachable cluster fails its instance:\n{}",
        failed.text()
    );
    assert!(
        failed.flat().contains(&servers["c"]),
        "the error names the unreachable API server {}:\n{}",
        servers["c"],
        failed.text()
    );
    for s in &secrets {
        assert!(
            !failed.text().contains(s.as_str()),
            "no credential in the output"
        );
    }
    let state = ws.state_text();
    for k in KEYS {
        assert!(
            state.contains(&format!("\"index_key\": \"{k}\"")),
            "instance {k} is still in state:\n{state}"
        );
    }
    for (i, c) in clusters.iter().take(2).enumerate() {
        let client = c.client().await;
        let history = crate::cilium::release_history(&client, "cilium").await;
        assert!(
            history.len() >= 2 + usize::from(i == 1),
            "cluster {} was upgraded: {history:?}",
            KEYS[i]
        );
        assert_eq!(
            history.values().last().map(String::as_str),
            Some("deployed")
        );
    }
    // Cluster c back: its state says what runs there (the failed apply changed nothing), so
    // the next plan still proposes c's change, and c's only.
    clusters[2].faults().expect("an embedded cluster").clear();
    let pending = ws.ok(&["plan", "-no-color", "-input=false"]);
    assert!(
        pending
            .stdout
            .contains(r#"talosboot_cilium.this["c"] will be updated in-place"#)
            && pending.stdout.contains("1 to change"),
        "the change c never got is still planned:\n{}",
        pending.text()
    );
}

/// The other way to a fleet, OpenTofu's own (1.9+): a provider block with `for_each` over the
/// clusters (its keys known at plan), one instance per cluster, and each resource instance
/// choosing its provider instance. Nothing of the `cluster` attribute is involved, so refresh
/// reads every cluster as usual: `-refresh-only` sees drift made by hand, unlike with `cluster`.
fn provider_for_each_root(paths: &BTreeMap<&str, String>) -> String {
    let clusters = paths
        .iter()
        .map(|(k, p)| format!("    {k} = {p:?}\n"))
        .collect::<String>();
    format!(
        r#"{REQUIRED_PROVIDERS}
locals {{
  kubeconfig_paths = {{
{clusters}  }}
}}

provider "talosboot" {{
  alias             = "by_cluster"
  for_each          = local.kubeconfig_paths
  config_path       = each.value
  api_retry_timeout = "5s"
}}

resource "talosboot_cilium" "this" {{
  for_each = local.kubeconfig_paths
  provider = talosboot.by_cluster[each.key]
  version  = "{CURRENT}"
  values   = [yamlencode({{ hubble = {{ relay = {{ enabled = false }} }} }})]
}}

output "revisions" {{
  value = {{ for k, c in talosboot_cilium.this : k => c.revision }}
}}
"#
    )
}

// OpenTofu only: Terraform has no provider `for_each` (hashicorp/terraform#19932, #24476).
on_both_clis!(@async provider_for_each_over_two_clusters_converges_and_refreshes_each, opentofu => OpenTofu);
async fn provider_for_each_over_two_clusters_converges_and_refreshes_each() {
    let clusters = [TestCluster::start().await, TestCluster::start().await];
    let paths: BTreeMap<&str, String> = KEYS
        .iter()
        .zip(&clusters)
        .map(|(k, c)| (*k, c.kubeconfig_path.display().to_string()))
        .collect();
    let ws = Workspace::new(&provider_for_each_root(&paths));
    ws.init();
    ws.apply();
    for c in &clusters {
        assert_eq!(
            current_status(&c.client().await).await.as_deref(),
            Some("deployed"),
            "Cilium is installed on every cluster"
        );
    }
    assert!(!ws.plan_has_changes(), "the plan after the apply is empty");
    let outputs = ws.outputs();
    for k in paths.keys() {
        assert_eq!(outputs["revisions"]["value"][k], 1, "one install on {k}");
    }

    // Drift by hand on the second cluster: refresh reads it through its provider instance.
    helm_by_hand(
        &clusters[1].client().await,
        &[
            "upgrade",
            "cilium",
            "cilium",
            "--repo",
            "https://helm.cilium.io",
            "--version",
            CURRENT,
            "-n",
            NS,
            "--reuse-values",
            "--set",
            "hubble.relay.enabled=true",
        ],
    )
    .await;
    let plan = ws.ok(&["plan", "-no-color", "-input=false"]);
    assert!(
        plan.stdout
            .contains(r#"talosboot_cilium.this["b"] will be updated in-place"#),
        "the drifted instance is planned:\n{}",
        plan.text()
    );
    assert!(
        !plan
            .stdout
            .contains(r#"talosboot_cilium.this["a"] will be"#),
        "only the drifted instance is planned:\n{}",
        plan.text()
    );
    ws.apply();
    assert!(!ws.plan_has_changes(), "repaired");
}
