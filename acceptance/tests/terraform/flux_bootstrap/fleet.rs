//! A Flux bootstrap per cluster from one root: `for_each` over two embedded clusters, each
//! instance of `talosboot_flux_bootstrap` reaching its own cluster through its write-only
//! `cluster` (fed from an ephemeral map, as `ephemeral "talos_cluster_kubeconfig"` would feed it),
//! with a provider block that points at neither. Both bootstrap real Flux and the next plan is
//! empty; no credential (the kubeconfigs' keys, the deploy keys) is in state, the plan file, its
//! JSON or a `TF_LOG=trace` log; `-refresh-only` keeps each state (refresh has no configuration);
//! a managed Secret deleted on one cluster shows in `plan` on that instance only (the plan reads
//! each cluster) and apply creates it again. After `state rm`, `import` blocks with `for_each`
//! check each FluxInstance through its instance's `cluster` (an import gets no configuration):
//! a wrong ID fails naming that cluster's API server, the right one imports both without
//! bootstrapping or replacing anything, and the next plan is empty. A destroy with the provider block pointed at one
//! cluster goes through it there (the bootstrap namespace is deleted) and forgets the other
//! instance with a warning naming its API server (`deletion_policy = "keep"`: Flux and the
//! bootstrap namespace stay there).

use std::collections::BTreeMap;

use kube::api::DeleteParams;

use super::{
    APPLY, DEPLOY_KEY_SECRET, FluxCluster, INSTANCE, NAMESPACE, OPERATOR_CHART, SECRET, SOURCE,
    SYNC_PATH, api, assert_no_changes, condition, get, install_cilium, instances,
};
use crate::fleet::{credential, server};
use crate::harness::{REQUIRED_PROVIDERS, Workspace};
use crate::write_only::plan_file_contents;

const KEYS: [&str; 2] = ["a", "b"];

/// The root: the kubeconfigs are one ephemeral map, each cluster's deploy key Secret is read
/// from its own files; the provider block only sets the retry budget and connects nowhere.
fn root(deploy_keys: &BTreeMap<&str, String>, provider: &str) -> String {
    let deploy_keys = deploy_keys
        .iter()
        .map(|(k, secret)| format!("    {k} = {secret}"))
        .collect::<Vec<_>>()
        .join("\n");
    let instance = INSTANCE
        .lines()
        .map(|l| format!("      {l}"))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("${", "$${");
    format!(
        r#"{REQUIRED_PROVIDERS}
variable "kubeconfigs" {{
  type      = map(string)
  sensitive = true
  ephemeral = true
}}

locals {{
  deploy_keys = {{
{deploy_keys}
  }}
}}

{provider}

resource "talosboot_flux_bootstrap" "this" {{
  for_each = toset({keys:?})
  revision = 1
  timeout  = "3m"
  gitops_resources = {{
    instance_yaml = <<-EOT
{instance}
    EOT
    {OPERATOR_CHART}
  }}
  sync              = {{ url = "{SOURCE}", path = "{SYNC_PATH}", pull_secret = "{DEPLOY_KEY_SECRET}" }}
  managed_resources = {{ secrets_yaml = local.deploy_keys[each.key] }}
  cluster = {{
    kubeconfig_raw = var.kubeconfigs[each.key]
  }}
}}

output "api_servers" {{
  value = {{ for k, f in talosboot_flux_bootstrap.this : k => f.cluster_identity.api_server }}
}}
"#,
        keys = KEYS,
    )
}

on_both_clis!(async a_flux_bootstrap_per_cluster_in_one_root_converges_and_repairs_drift_on_its_own_cluster);
async fn a_flux_bootstrap_per_cluster_in_one_root_converges_and_repairs_drift_on_its_own_cluster() {
    let mut clusters = Vec::new();
    for _ in KEYS {
        let Some(cluster) = FluxCluster::start().await else {
            return;
        };
        install_cilium(&cluster.client().await).await;
        clusters.push(cluster);
    }
    let kubeconfigs: BTreeMap<&str, String> = KEYS
        .iter()
        .zip(&clusters)
        .map(|(k, c)| {
            let text = std::fs::read_to_string(&c.kubeconfig_path).expect("read the kubeconfig");
            (*k, text)
        })
        .collect();
    let deploy_keys: BTreeMap<&str, String> = KEYS
        .iter()
        .zip(&clusters)
        .map(|(k, c)| (*k, c.deploy_key_secret()))
        .collect();
    let servers: BTreeMap<&str, String> =
        kubeconfigs.iter().map(|(k, v)| (*k, server(v))).collect();
    let mut secrets: Vec<String> = kubeconfigs.values().map(|k| credential(k)).collect();
    for c in &clusters {
        // The key's base64 body, a line of it (the PEM armour is checked apart).
        let key = c.deploy_private_key();
        let body = key.lines().nth(1).expect("an OpenSSH key body").to_owned();
        secrets.push(body);
    }
    let var = serde_json::to_string(&kubeconfigs).expect("json");
    let nowhere = "provider \"talosboot\" {\n  api_retry_timeout = \"5s\"\n}\n";
    let ws = Workspace::new(&root(&deploy_keys, nowhere)).env("TF_VAR_kubeconfigs", &var);
    ws.init();

    // Apply bootstraps Flux on both; the next plan is empty.
    ws.ok(&["plan", "-no-color", "-input=false", "-out=tfplan"]);
    let plan_file = plan_file_contents(&ws, "tfplan");
    let plan_json = ws.ok(&["show", "-json", "tfplan"]).stdout;
    let mut apply_args = APPLY.to_vec();
    apply_args.push("tfplan");
    let apply = ws.ok(&apply_args);
    for c in &clusters {
        let fi = get(&instances(&c.client().await), "flux")
            .await
            .expect("FluxInstance");
        assert_eq!(
            condition(&fi, "Ready").as_deref(),
            Some("True"),
            "{fi}\n{}",
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
    assert_no_changes(&ws);
    let mut traced = ws.command(&["plan", "-no-color", "-input=false"]);
    traced.env("TF_LOG", "trace");
    let out = traced.output().expect("run a traced plan");
    let trace = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{trace}");
    assert!(
        trace.contains("PlanResourceChange"),
        "a trace log was written"
    );

    // No credential in state, the plan file, its JSON, a trace log or the apply's output.
    let state = ws.state_text();
    for (what, text) in [
        ("state", &state),
        ("plan file", &plan_file),
        ("plan JSON", &plan_json),
        ("trace log", &trace),
        ("apply output", &apply.text()),
    ] {
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "a credential in the {what}"
            );
        }
        assert!(!text.contains("BEGIN"), "key material in the {what}");
    }

    // The deploy key's Secret deleted on cluster b: refresh keeps each state, the plan names
    // instance b only, and apply creates it again.
    let b = clusters[1].client().await;
    let b_secrets = api(&b, SECRET, "secrets", Some("flux-system"));
    b_secrets
        .delete(DEPLOY_KEY_SECRET, &DeleteParams::default())
        .await
        .expect("delete the deploy key Secret");
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
            .contains(r#"talosboot_flux_bootstrap.this["b"] will be updated in-place"#),
        "the drifted instance is planned:\n{}",
        plan.text()
    );
    assert!(
        !plan
            .stdout
            .contains(r#"talosboot_flux_bootstrap.this["a"] will be"#),
        "only the drifted instance is planned:\n{}",
        plan.text()
    );
    assert!(
        plan.flat().contains(&format!(
            "Secret/flux-system/{DEPLOY_KEY_SECRET}: creates it again"
        )),
        "the plan says what apply repairs:\n{}",
        plan.text()
    );
    assert!(plan.stdout.contains("1 to change"), "{}", plan.stdout);
    ws.ok(APPLY);
    assert!(
        get(&b_secrets, DEPLOY_KEY_SECRET).await.is_some(),
        "apply created the Secret again on cluster b"
    );
    assert_no_changes(&ws);

    // The fleet's imports, after `state rm`: an import receives only the ID (no `cluster`), so
    // the plan checks each FluxInstance through its instance's `cluster`. An ID with no
    // FluxInstance on b fails the plan naming b's API server; the right IDs plan two imports,
    // nothing created or replaced, and the apply adopts each Flux where it runs.
    let uids: Vec<serde_json::Value> = {
        let mut uids = Vec::new();
        for c in &clusters {
            let fi = get(&instances(&c.client().await), "flux")
                .await
                .expect("fi");
            uids.push(fi["metadata"]["uid"].clone());
        }
        uids
    };
    ws.ok(&["state", "rm", "-no-color", "talosboot_flux_bootstrap.this"]);
    let with_import = |id: &str| {
        format!(
            "{}\nimport {{\n  for_each = toset({KEYS:?})\n  to       = talosboot_flux_bootstrap.this[each.key]\n  id       = {id}\n}}\n",
            root(&deploy_keys, nowhere)
        )
    };
    ws.write(
        "main.tf",
        &with_import(r#"each.key == "b" ? "elsewhere" : "flux-system""#),
    );
    let wrong = ws.run(&["plan", "-no-color", "-input=false"]);
    assert!(
        !wrong.success
            && wrong.flat().contains(&format!(
                "Cannot import: no FluxInstance elsewhere/flux on {}",
                servers["b"]
            )),
        "the wrong ID fails on b's cluster, named:\n{}",
        wrong.text()
    );
    ws.write("main.tf", &with_import("\"flux-system\""));
    let plan = ws.ok(&["plan", "-no-color", "-input=false"]);
    assert!(
        plan.flat().contains("2 to import, 0 to add,")
            && plan.flat().contains("0 to destroy")
            && !plan.stdout.contains("must be replaced"),
        "two imports, nothing bootstrapped or replaced:\n{}",
        plan.text()
    );
    let imported = ws.ok(APPLY);
    assert!(
        imported.flat().contains("2 imported, 0 added"),
        "{}",
        imported.text()
    );
    for (c, uid) in clusters.iter().zip(&uids) {
        let fi = get(&instances(&c.client().await), "flux")
            .await
            .expect("fi");
        assert_eq!(
            &fi["metadata"]["uid"], uid,
            "the import adopts the running FluxInstance"
        );
        assert_eq!(condition(&fi, "Ready").as_deref(), Some("True"), "{fi}");
    }
    let outputs = ws.outputs();
    for (k, s) in &servers {
        assert_eq!(
            outputs["api_servers"]["value"][k],
            *s.as_str(),
            "each import is stored on its own cluster"
        );
    }
    assert_no_changes(&ws);

    // Destroy with the provider block pointed at cluster a: instance a is destroyed through it,
    // instance b (the provider cannot reach it) is forgotten with a warning naming its server.
    ws.write(
        "main.tf",
        &root(&deploy_keys, &clusters[0].provider_block()),
    );
    let destroy = ws.ok(&["destroy", "-auto-approve", "-no-color", "-input=false"]);
    assert!(
        destroy.flat().contains("left running") && destroy.flat().contains(&servers["b"]),
        "the instance on b is forgotten, naming its API server:\n{}",
        destroy.text()
    );
    assert!(
        !destroy
            .flat()
            .contains(&format!("stays on {}", servers["a"])),
        "a was reached:\n{}",
        destroy.text()
    );
    assert!(
        !ws.state_text().contains("talosboot_flux_bootstrap"),
        "both left the state"
    );
    let namespaces = |c: &kube::Client| api(c, NAMESPACE, "namespaces", None);
    let a = clusters[0].client().await;
    let gone = get(&namespaces(&a), "flux-operator-bootstrap").await;
    assert!(
        gone.is_none() || gone.is_some_and(|n| n["metadata"]["deletionTimestamp"].is_string()),
        "the bootstrap namespace of a is deleted"
    );
    assert!(
        get(&namespaces(&b), "flux-operator-bootstrap")
            .await
            .is_some(),
        "b keeps its bootstrap namespace"
    );
    assert!(
        get(&instances(&b), "flux").await.is_some(),
        "Flux keeps running on b"
    );
}
