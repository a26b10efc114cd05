//! Runs that meet other runs and faults: a Lease held by another client, API faults and a dropped
//! watch during apply, a hung installer (deadline diagnosis), an interrupt during apply, a CLI
//! killed while a create waits.

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;
use talos_sim::faults::Matcher;

use crate::harness::TestCluster;

use super::*;

on_both_clis!(async a_lease_held_by_another_run_is_waited_for_and_taken_over_once_expired);
async fn a_lease_held_by_another_run_is_waited_for_and_taken_over_once_expired() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let now = k8s_openapi::jiff::Timestamp::now();
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "talosboot-helm-kube-system-cilium"},
        "spec": {"holderIdentity": "talosboot@other-runner/pid-1/run-killed", "leaseDurationSeconds": 4,
                 "acquireTime": now, "renewTime": now, "leaseTransitions": 0},
    }))
    .expect("lease");
    Api::<Lease>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &lease)
        .await
        .expect("create lease");
    let ws = workspace(&cluster, &cilium(""));
    let started = Instant::now();
    let out = ws.apply();
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "waited for the other holder"
    );
    assert!(
        out.flat()
            .contains("talosboot@other-runner/pid-1/run-killed"),
        "says whom it waited for: {}",
        out.text()
    );
    assert_no_leftovers(&client).await;
}

on_both_clis!(async api_faults_and_a_dropped_watch_during_apply_do_not_fail_it);
async fn api_faults_and_a_dropped_watch_during_apply_do_not_fail_it() {
    let cluster = TestCluster::start().await;
    let Some(faults) = cluster.faults() else {
        return; // an external cluster: no fault proxy
    };
    let client = cluster.client().await;
    let ws = workspace(&cluster, &cilium(""));
    faults.throttle(3, 1, Matcher::path("/jobs"));
    faults.fail_requests(503, 2, Matcher::path("/configmaps"));
    faults.fail_requests(500, 2, Matcher::path("/leases"));
    faults.drop_connections(2, Matcher::path("watch"));
    ws.apply();
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
    assert!(!ws.plan_has_changes());
}

on_both_clis!(async a_hung_installer_ends_at_the_deadline_with_its_diagnosis);
async fn a_hung_installer_ends_at_the_deadline_with_its_diagnosis() {
    let Some((cluster, ws)) = hung_installer("30s").await else {
        return; // the hang is the node layer's pod-level fault
    };
    let client = cluster.client().await;
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success);
    let text = out.flat();
    assert!(text.contains("DeadlineExceeded"), "{text}");
    assert!(
        text.contains("Diagnosis: the bootstrap did not finish within `timeout`"),
        "{text}"
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    assert!(
        leases
            .list_metadata(&ListParams::default().labels(MANAGED))
            .await
            .expect("leases")
            .items
            .is_empty(),
        "Lease released"
    );
}

on_both_clis!(async an_interrupt_during_apply_deletes_the_job_and_frees_the_lease);
async fn an_interrupt_during_apply_deletes_the_job_and_frees_the_lease() {
    let Some((cluster, ws)) = hung_installer("1h").await else {
        return; // the hang is the node layer's pod-level fault
    };
    let client = cluster.client().await;
    let child = ws.start_apply();
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    let deadline = Instant::now() + Duration::from_secs(60);
    while jobs
        .list_metadata(&ListParams::default().labels(MANAGED))
        .await
        .expect("jobs")
        .items
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the bootstrap Job never appeared"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("wait");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&exit.stdout),
        String::from_utf8_lossy(&exit.stderr)
    );
    assert!(!exit.status.success());
    assert!(
        text.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .contains("interrupted"),
        "says what was interrupted: {text}"
    );
    assert_no_leftovers(&client).await;
}

on_both_clis!(async a_cli_killed_while_a_create_waits_leaves_a_release_the_next_apply_resumes);
/// A runner killed (SIGKILL) while a create waits for agents that never become ready (a value
/// restoring SYS_MODULE): the CLI writes no state, yet the release runs. The orphaned provider
/// still ends the create through its failure path (it sees its parent gone and cancels the
/// wait) and marks the release, so the next apply, the configuration fixed, resumes it in place:
/// not refused as somebody else's, never uninstalled.
async fn a_cli_killed_while_a_create_waits_leaves_a_release_the_next_apply_resumes() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let broken = cilium(&format!("  timeout = \"5m\"\n{RESTORES_SYS_MODULE}"));
    let ws = workspace(&cluster, &broken);
    let child = ws.start_apply();
    let deadline = Instant::now() + Duration::from_secs(120);
    while current_status(&client).await.as_deref() != Some("deployed") {
        assert!(Instant::now() < deadline, "the release was never installed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The install is done; the create waits for agents that crash.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    // An API slow to answer, as a loaded one or one behind faults is: the failure path's reads
    // and its mark then take seconds, which the orphaned provider must wait for before it exits.
    if let Some(faults) = cluster.faults() {
        faults.delay_for(
            Duration::from_millis(1000),
            Duration::from_secs(30),
            Matcher::any(),
        );
    }
    let _ = tokio::task::spawn_blocking(move || child.wait_with_output()).await;

    // What lets the next create resume the release: talosboot's mark on its record.
    let records: Api<Secret> = Api::namespaced(client.clone(), NS);
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let record = records
            .get("sh.helm.release.v1.cilium.v1")
            .await
            .expect("the release record");
        let marked = record
            .metadata
            .annotations
            .is_some_and(|a| a.contains_key("talosboot.dev/failed-create"));
        if marked {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the orphaned provider never ended the create through its failure path (no mark on the release)"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_no_leftovers(&client).await;

    ws.write("main.tf", &root(&cluster, &cilium("  timeout = \"2m\"")));
    let out = ws.apply();
    assert!(
        !out.flat().contains("already exists"),
        "the release is resumed, not refused: {}",
        out.text()
    );
    assert_eq!(
        release_history(&client, "cilium").await,
        BTreeMap::from([(1, "superseded".to_owned()), (2, "deployed".to_owned())]),
        "upgraded in place, never uninstalled"
    );
    assert!(!ws.plan_has_changes());
}

/// A fresh cluster and a Cilium root whose installer hangs (the node layer's pod-level fault),
/// with `timeout`; `None` on a real cluster, which has no such fault.
async fn hung_installer(timeout: &str) -> Option<(TestCluster, Workspace)> {
    let cluster = TestCluster::start().await;
    if !cluster.nodes_are_emulated() {
        return None;
    }
    let ws = workspace(
        &cluster,
        &cilium(&format!(
            "  timeout = \"{timeout}\"\n  job = {{ annotations = {{ \"talos-sim.dev/hang\" = \"true\" }} }}"
        )),
    );
    Some((cluster, ws))
}
