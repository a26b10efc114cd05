//! Failures of `talosboot_flux_bootstrap`: what the diagnostic says, and that the state tells the
//! truth afterwards.

use super::*;

on_both_clis!(async pre_cni_order_mistake_is_diagnosed);
async fn pre_cni_order_mistake_is_diagnosed() {
    let Some(cluster) = FluxCluster::start().await else {
        return;
    };
    let ws = Workspace::new(&root(&cluster, "  timeout = \"20s\"\n"));
    ws.init();
    let out = ws.run(APPLY);
    assert!(!out.success, "{}", out.text());
    let text = out.flat();
    assert!(
        text.contains("Flux bootstrap ran before the CNI"),
        "{}",
        out.text()
    );
    assert!(text.contains("depends_on"), "{}", out.text());
    // The failed create stays in state (tainted): state tells the truth.
    assert!(
        ws.state_text().contains("talosboot_flux_bootstrap"),
        "{}",
        ws.state_text()
    );
}

on_both_clis!(async operator_install_failure_is_relayed_with_diagnosis);
async fn operator_install_failure_is_relayed_with_diagnosis() {
    // KubePrism off (Talos before 1.6): the installer's API endpoint refuses connections.
    let config = talos_sim::talos::TalosConfig {
        kubeprism: None,
        ..Default::default()
    };
    let Some(cluster) = FluxCluster::start_with(config).await else {
        return;
    };
    if !cluster.nodes_are_emulated() {
        return; // needs nodes without KubePrism
    }
    let provider = cluster.provider_block();
    let ws = Workspace::new(&root_with_provider(
        &provider,
        "  timeout = \"30s\"\n  debug_on_failure = true\n",
    ));
    ws.init();
    let out = ws.run(APPLY);
    assert!(!out.success, "{}", out.text());
    let text = out.flat();
    assert!(text.contains("Failed to install chart oci://ghcr.io/controlplaneio-fluxcd/charts/flux-operator 0.59.0"), "{}", out.text());
    assert!(
        text.contains("connection refused"),
        "the Job's log is relayed:\n{}",
        out.text()
    );
    assert!(
        text.contains("Diagnosis:") && text.contains("KubePrism"),
        "{}",
        out.text()
    );
}

on_both_clis!(async api_faults_during_apply_fail_cleanly_and_the_next_apply_converges);
async fn api_faults_during_apply_fail_cleanly_and_the_next_apply_converges() {
    let Some(cluster) = FluxCluster::start().await else {
        return;
    };
    let Some(faults) = cluster.faults() else {
        return; // an external cluster: no fault proxy
    };
    let client = cluster.client().await;
    install_cilium(&client).await;
    let ws = Workspace::new(&root(&cluster, "  timeout = \"2m\"\n"));
    ws.init();
    // A refusal is an answer, not retried: the apply fails and says what and why.
    let runtime_info = || talos_sim::faults::Matcher::path("/configmaps/flux-runtime-info");
    faults.fail_requests(403, 2, runtime_info());
    let out = ws.run(APPLY);
    assert!(!out.success, "{}", out.text());
    assert!(
        out.flat().contains("flux-runtime-info") && out.flat().contains("HTTP 403"),
        "the error names what failed and the API's answer:\n{}",
        out.text()
    );
    faults.clear();
    // A burst of server errors is retried within `api_retry_timeout`: the next apply converges
    // through it.
    faults.fail_requests(500, 2, runtime_info());
    ws.ok(APPLY);
    faults.clear();
    assert_eq!(
        condition(
            &get(&instances(&client), "flux").await.expect("fi"),
            "Ready"
        )
        .as_deref(),
        Some("True")
    );
    assert_no_changes(&ws);
}

on_both_clis!(async a_failing_flux_instance_names_its_reason);
async fn a_failing_flux_instance_names_its_reason() {
    let Some(cluster) = FluxCluster::start().await else {
        return;
    };
    let client = cluster.client().await;
    install_cilium(&client).await;
    // A Git host that does not answer. The real operator reports it after its health-check
    // wait (`reconcileTimeout`, 5 minutes by default): 20 s here.
    let extra = "  timeout = \"1m\"\n  debug_on_failure = true\n  sync = { url = \"ssh://git@unreachable.example/infra.git\", path = \"clusters/staging\", pull_secret = \"flux-git\" }\n";
    let text = root(&cluster, extra).replace(
        "        name: flux\n",
        "        name: flux\n        annotations:\n          fluxcd.controlplane.io/reconcileTimeout: 20s\n",
    );
    assert!(text.contains("reconcileTimeout"), "{text}");
    let ws = Workspace::new(&text);
    ws.init();
    let out = ws.run(APPLY);
    assert!(!out.success, "{}", out.text());
    let text = out.flat();
    assert!(text.contains("FluxInstance failed"), "{}", out.text());
    assert!(
        text.contains("ReconciliationFailed")
            && text.contains("GitRepository/flux-system/flux-system"),
        "the reason and the failing sync source are named, as the real operator gives them:\n{}",
        out.text()
    );
    assert!(
        text.contains("FluxInstance conditions:"),
        "debug_on_failure adds the conditions:\n{}",
        out.text()
    );
    // The failed run shows as drift, so the next plan retries it.
    let plan = ws.run(&["plan", "-no-color", "-input=false"]);
    assert!(
        plan.flat().contains("bootstrap run: failed") || plan.flat().contains("must be replaced"),
        "{}",
        plan.text()
    );
}

on_both_clis!(async a_partial_job_block_before_the_cni_is_warned_at_plan_and_fails_fast);
/// A `job` block that sets only the image (a mirror) turns host networking and the KubePrism
/// environment off, as in the module; before the CNI that Job could never run: the plan warns
/// with the fix, and the apply stops before the Job with the diagnosis instead of waiting for
/// `timeout`.
async fn a_partial_job_block_before_the_cni_is_warned_at_plan_and_fails_fast() {
    let Some(cluster) = FluxCluster::start().await else {
        return;
    };
    let ws = Workspace::new(&root(
        &cluster,
        "  timeout = \"5m\"\n  job = { image = { repository = \"alpine/helm:3.18.4\" } }\n",
    ));
    ws.init();
    let plan = ws.ok(&["plan", "-no-color", "-input=false"]);
    let text = plan.flat();
    assert!(
        text.contains("Bootstrap Job cannot run before the CNI")
            && text.contains("would use the pod network and the `kubernetes` Service IP")
            && text.contains("set `host_network = true`")
            // The module's default the partial block turned on is in the plan, not only in docs.
            && text.contains("host_network = false"),
        "{}",
        plan.text()
    );
    let started = std::time::Instant::now();
    let out = ws.run(APPLY);
    let elapsed = started.elapsed();
    assert!(!out.success, "{}", out.text());
    assert!(
        out.flat()
            .contains("Bootstrap Job cannot run before the CNI")
            && out.flat().contains("KUBERNETES_SERVICE_HOST"),
        "{}",
        out.text()
    );
    assert!(
        elapsed < Duration::from_secs(60),
        "fails fast, not at the 5m timeout: {elapsed:?}"
    );
}
