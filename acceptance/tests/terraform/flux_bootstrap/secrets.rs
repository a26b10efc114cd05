//! Write-only `managed_resources` with a client that supports them: secret material in no state
//! file, plan file, provider log (`TF_LOG=trace`) or diagnostic; deleted Secrets are drift; a
//! Secret retired from the input is deleted. Older clients: the refusal naming the versions.

use kube::api::DeleteParams;

use crate::harness::Cli;

use super::*;

/// True when the CLI under test supports write-only attributes (Terraform/OpenTofu 1.11+).
fn supports_write_only(ws: &Workspace) -> bool {
    client_version(ws) >= (1, 11)
}

on_both_clis!(async write_only_secrets_never_leak);
async fn write_only_secrets_never_leak() {
    let Some(cluster) = FluxCluster::start().await else {
        return;
    };
    let secret = "hunter2-deploy-key-must-not-leak";
    let managed = format!(
        "  timeout = \"2m\"\n  managed_resources = {{\n    secrets_yaml = join(\"\\n---\\n\", [{deploy_key}, yamlencode({{ apiVersion = \"v1\", kind = \"Secret\", metadata = {{ name = \"flux-system\" }}, stringData = {{ identity = \"{secret}\" }} }})])\n    runtime_info = {{ data = {{ FLUX_SYNC_PATH = \"clusters/staging\" }} }}\n  }}\n",
        deploy_key = cluster.deploy_key_secret()
    );
    let mut ws = Workspace::new(&root(&cluster, &managed));
    ws.init();
    if !supports_write_only(&ws) {
        // Older clients get a clear error naming the versions that have write-only attributes.
        let out = ws.run(&["plan", "-no-color", "-input=false"]);
        assert!(
            !out.success && out.flat().contains("1.11"),
            "{}",
            out.text()
        );
        eprintln!(
            "write_only_secrets_never_leak: the client has no write-only support; only the refusal was tested"
        );
        return;
    }
    let client = cluster.client().await;
    install_cilium(&client).await;
    let plan = ws.run(&["plan", "-no-color", "-input=false", "-out=tfplan"]);
    let apply = ws.ok(&[
        "apply",
        "-auto-approve",
        "-no-color",
        "-input=false",
        "tfplan",
    ]);
    // The plan file is a zip: read what it holds through the CLI.
    let plan_file = ws.ok(&["show", "-json", "tfplan"]);
    for (what, text) in [
        ("plan output", plan.text()),
        ("plan file", plan_file.stdout),
        ("apply output", apply.text()),
        ("state", ws.state_text()),
    ] {
        assert!(!text.contains(secret), "secret material in {what}");
    }
    let secrets = api(&client, SECRET, "secrets", Some("flux-system"));
    assert!(get(&secrets, "flux-system").await.is_some());
    // Deleted: drift named on plan, repaired by apply.
    secrets
        .delete("flux-system", &DeleteParams::default())
        .await
        .expect("delete");
    let drift = assert_plans(&ws, "Secret/flux-system/flux-system: deleted");
    assert!(!drift.text().contains(secret));
    // The repair with the provider's most verbose logging: nothing secret in the log either.
    ws.set_env("TF_LOG", "trace");
    let traced = ws.ok(APPLY);
    ws.set_env("TF_LOG", "off");
    assert!(
        traced.stderr.contains("talosboot"),
        "TF_LOG=trace should log"
    );
    assert!(
        !traced.text().contains(secret),
        "secret material in the trace log"
    );
    assert!(get(&secrets, "flux-system").await.is_some());
    // A Secret outside the FluxInstance's namespace: rejected at plan, the value not echoed.
    let elsewhere = managed.replace(
        "name = \"flux-system\" }",
        "name = \"flux-system\", namespace = \"default\" }",
    );
    ws.write("main.tf", &root(&cluster, &elsewhere));
    let rejected = ws.run(&["plan", "-no-color", "-input=false"]);
    assert!(
        !rejected.success
            && rejected
                .flat()
                .contains("managed Secrets live in the FluxInstance's namespace"),
        "{}",
        rejected.text()
    );
    // The provider's diagnostic never holds the value. Where the CLI points differs by design:
    // Terraform 1.16 follows the attribute path to the `secrets_yaml` line and quotes it (the
    // user's own configuration, here with the literal in it), OpenTofu 1.12 points at the
    // resource block.
    let text = rejected.text();
    let (quoted, message): (Vec<&str>, Vec<&str>) = text.lines().partition(|line| {
        line.trim_start()
            .split_once(": ")
            .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    });
    assert!(
        !message.concat().contains(secret),
        "secret material in a diagnostic:\n{text}"
    );
    let pointed_at = match ws.cli() {
        Cli::OpenTofu => "resource \"talosboot_flux_bootstrap\"",
        _ => "secrets_yaml = join(",
    };
    assert!(
        quoted.len() == 1 && quoted[0].contains(pointed_at),
        "{:?} points at {pointed_at}:\n{text}",
        ws.cli()
    );
    // Retired from the input: deleted.
    // (The deploy key stays: Flux still needs it.)
    let retired = format!(
        "  timeout = \"2m\"\n  managed_resources = {{ secrets_yaml = {}, runtime_info = {{ data = {{ FLUX_SYNC_PATH = \"clusters/staging\" }} }} }}\n",
        cluster.deploy_key_secret()
    );
    ws.write("main.tf", &root(&cluster, &retired));
    // The write-only diff cannot show it: the plan names what apply deletes.
    let plan = ws.ok(&["plan", "-no-color", "-input=false"]);
    assert!(
        plan.flat().contains("Managed Secrets will be deleted")
            && plan.flat().contains("Secret/flux-system/flux-system"),
        "{}",
        plan.text()
    );
    ws.ok(APPLY);
    assert!(
        get(&secrets, "flux-system").await.is_none(),
        "a Secret retired from the input is deleted"
    );
}
