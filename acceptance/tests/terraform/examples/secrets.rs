//! No example puts a secret in state or in a plan file: each example's secret inputs get marker
//! values, and what the run leaves where a user (or anyone with the state bucket) can read it is
//! scanned for the markers, plain and base64-encoded ([`crate::secrets_scan::forms`]): the state
//! and its backup, `show -json` of the state, the plan file (raw and unzipped), `show -json` of
//! the plan, and the CLI's output.
//!
//! The quickstart is applied against a cluster of its own (Cilium, then the Flux bootstrap with
//! the deploy key); the registry snippet of `talosboot_flux_bootstrap` is planned against the
//! shared cluster; `examples/talos-cilium-flux` is applied against the real Flux in
//! `real_flux` and planned in `talos_cilium_flux_root_plans_without_secrets_in_the_plan`, both of
//! which call [`places_holding`] too. A secret input is a variable the example declares
//! `sensitive` or `ephemeral` ([`secret_variables`]): every one must be fed from an ephemeral
//! source, so an example whose secret variable is not ephemeral fails here.

use std::path::Path;

use super::{files, planned_skip, read, root_workspace, snippet_root};
use crate::harness::{TestCluster, Workspace};

/// The variables `text` declares with `sensitive = true` or `ephemeral = true`: (name, whether
/// ephemeral).
pub(super) fn secret_variables(text: &str) -> Vec<(String, bool)> {
    let mut found = Vec::new();
    for part in text.split("variable \"").skip(1) {
        let Some((name, rest)) = part.split_once('"') else {
            continue;
        };
        let body = rest.split("\n}").next().unwrap_or_default();
        let set = |key: &str| {
            body.lines().any(|l| {
                let l = l.split('#').next().unwrap_or_default().replace(' ', "");
                l == format!("{key}=true")
            })
        };
        if set("sensitive") || set("ephemeral") {
            found.push((name.to_owned(), set("ephemeral")));
        }
    }
    found
}

/// A marker secret for variable `name`: an OpenSSH private key for a key, a password otherwise,
/// unique per test run.
pub(super) fn marker(name: &str) -> String {
    let nonce = format!(
        "{:x}{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default()
    );
    let core = format!("TbExampleSecret{}{nonce}Zq", name.replace('_', ""));
    if name.ends_with("_key") {
        format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{core}\n-----END OPENSSH PRIVATE KEY-----\n")
    } else {
        core
    }
}

/// The line of a marker that identifies it (the key's body, not its armour).
fn needle(secret: &str) -> &str {
    secret
        .lines()
        .find(|l| !l.starts_with("-----") && !l.is_empty())
        .unwrap_or(secret)
}

/// Where in `ws` one of `secrets` can be read after the run (empty: nowhere): the state and its
/// backup, `show -json` of the state, the plan file `plan` (raw, unzipped, `show -json`) when
/// given, and `outputs` (what the CLI printed).
pub(crate) fn places_holding(
    ws: &Workspace,
    secrets: &[String],
    plan: Option<&str>,
    outputs: &[&str],
) -> Vec<String> {
    let mut places: Vec<(String, String)> = Vec::new();
    for file in ["terraform.tfstate", "terraform.tfstate.backup"] {
        if let Ok(text) = std::fs::read_to_string(ws.path().join(file)) {
            places.push((file.to_owned(), text));
        }
    }
    if ws.path().join("terraform.tfstate").exists() {
        places.push((
            "`show -json` of the state".into(),
            ws.ok(&["show", "-json"]).stdout,
        ));
    }
    if let Some(plan) = plan {
        let path = ws.path().join(plan);
        places.push((
            "the raw plan file".into(),
            String::from_utf8_lossy(&std::fs::read(&path).unwrap_or_default()).into_owned(),
        ));
        if let Ok(out) = std::process::Command::new("unzip")
            .arg("-p")
            .arg(&path)
            .output()
        {
            places.push((
                "the plan file's unzipped entries".into(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            ));
        }
        places.push((
            "`show -json` of the plan file".into(),
            ws.ok(&["show", "-json", plan]).stdout,
        ));
    }
    for (i, out) in outputs.iter().enumerate() {
        places.push((
            format!("the output of CLI run {}", i + 1),
            (*out).to_owned(),
        ));
    }
    let mut found = Vec::new();
    for secret in secrets {
        let forms = crate::secrets_scan::forms(needle(secret));
        for (place, text) in &places {
            if forms.iter().any(|f| text.contains(f.as_str())) {
                let shown: String = needle(secret).chars().take(12).collect();
                found.push(format!("a secret ({shown}...) is in {place}"));
            }
        }
    }
    found
}

/// Every secret variable of the root in `dir` is ephemeral, and the markers for them, as
/// `TF_VAR_` settings.
fn markers_for(dir: &Path) -> Vec<(String, String)> {
    let mut text = String::new();
    for file in files(dir, ".tf") {
        text.push_str(&read(&file));
    }
    let secrets = secret_variables(&text);
    let stored: Vec<&str> = secrets
        .iter()
        .filter(|(_, ephemeral)| !ephemeral)
        .map(|(n, _)| n.as_str())
        .collect();
    assert!(
        stored.is_empty(),
        "{}: sensitive variables that are not ephemeral land in plan files: {stored:?}",
        dir.display()
    );
    secrets
        .into_iter()
        .map(|(name, _)| (format!("TF_VAR_{name}"), marker(&name)))
        .collect()
}

on_both_clis!(async the_quickstart_applied_keeps_its_deploy_key_out_of_state_and_plan);
/// The quickstart as a user runs it, its repository served to the real Flux on loopback: planned
/// to a file, applied from it (Cilium, then the Flux
/// bootstrap with the deploy key in its Secret), planned again; the key is nowhere in the state,
/// the plan file or the output.
async fn the_quickstart_applied_keeps_its_deploy_key_out_of_state_and_plan() {
    let Some(ws) = root_workspace("quickstart", planned_skip("quickstart")) else {
        return;
    };
    let mut markers = markers_for(&super::examples().join("quickstart"));
    // The real Flux clones the quickstart's repository: the key is one its Git server accepts.
    let Some(cluster) = crate::flux_bootstrap::FluxCluster::start().await else {
        return;
    };
    let deploy_key = markers
        .iter_mut()
        .find(|(k, _)| k == "TF_VAR_deploy_key")
        .unwrap_or_else(|| panic!("the quickstart's deploy key is a secret variable"));
    deploy_key.1 = cluster.deploy_private_key();
    let mut ws = ws
        .env(
            "TF_VAR_kubeconfig_path",
            &cluster.kubeconfig_path.display().to_string(),
        )
        .env("TF_VAR_known_hosts", &cluster.known_hosts_line());
    for (key, value) in &markers {
        ws.set_env(key, value);
    }
    ws.init();
    let secrets: Vec<String> = markers.into_iter().map(|(_, v)| v).collect();
    let plan = ws.ok(&["plan", "-no-color", "-input=false", "-out=plan.tfplan"]);
    let found = places_holding(&ws, &secrets, Some("plan.tfplan"), &[&plan.text()]);
    assert!(found.is_empty(), "{}", found.join("\n"));
    let apply = ws.ok(&["apply", "-no-color", "-input=false", "plan.tfplan"]);
    let again = ws.ok(&["plan", "-no-color", "-input=false", "-out=again.tfplan"]);
    // The key reached the cluster (the bootstrap's Secret), so the apply did use it.
    let state = ws.state_text();
    assert!(
        state.contains("talosboot_flux_bootstrap") && state.contains("managed_resources_hash"),
        "the Flux bootstrap was applied: {state}"
    );
    let found = places_holding(
        &ws,
        &secrets,
        Some("again.tfplan"),
        &[&plan.text(), &apply.text(), &again.text()],
    );
    assert!(found.is_empty(), "{}", found.join("\n"));
    // The scan finds what is there: the release's ID is in the state, so it is reported.
    let control = places_holding(&ws, &["kube-system/cilium".to_owned()], None, &[]);
    assert!(
        control.iter().any(|p| p.ends_with("terraform.tfstate")),
        "the scan did not find a value the state holds: {control:?}"
    );
}

on_both_clis!(async the_flux_bootstrap_registry_example_plans_without_its_deploy_key);
/// The registry page's `talosboot_flux_bootstrap` example, planned with its ephemeral deploy key
/// against a reachable cluster: the key is in neither the plan file nor the output.
async fn the_flux_bootstrap_registry_example_plans_without_its_deploy_key() {
    let dir = super::examples().join("resources/talosboot_flux_bootstrap");
    let markers = markers_for(&dir);
    assert_eq!(
        markers.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        ["TF_VAR_flux_deploy_key"]
    );
    let cluster = TestCluster::shared().await;
    let mut ws = snippet_root(&dir);
    // The example alone: its page's `import` block by identity (Terraform's) would look for a
    // FluxInstance this cluster does not have.
    ws.write("main.tf", &read(&dir.join("resource.tf")));
    ws.write(
        "provider.tf",
        &format!(
            "provider \"talosboot\" {{\n  config_path = \"{}\"\n}}\n",
            cluster.kubeconfig_path.display()
        ),
    );
    for (key, value) in &markers {
        ws.set_env(key, value);
    }
    ws.init();
    let plan = ws.run(&["plan", "-no-color", "-input=false", "-out=plan.tfplan"]);
    assert!(plan.success, "{}", plan.text());
    let secrets: Vec<String> = markers.into_iter().map(|(_, v)| v).collect();
    let found = places_holding(&ws, &secrets, Some("plan.tfplan"), &[&plan.text()]);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn secret_variables_are_found_with_their_kind() {
    let text = "variable \"a\" {\n  type      = string\n  sensitive = true\n}\nvariable \"b\" {\n  sensitive = true\n  ephemeral = true\n}\nvariable \"c\" {\n  default = \"x\"\n}\nvariable \"d\" {\n  # sensitive = true\n}\n";
    assert_eq!(
        secret_variables(text),
        vec![("a".to_owned(), false), ("b".to_owned(), true)]
    );
    assert!(marker("deploy_key").starts_with("-----BEGIN OPENSSH PRIVATE KEY-----\n"));
    assert!(needle(&marker("deploy_key")).starts_with("TbExampleSecretdeploykey"));
    assert!(needle(&marker("password")).starts_with("TbExampleSecretpassword"));
}
