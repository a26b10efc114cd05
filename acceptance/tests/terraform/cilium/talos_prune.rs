//! The guide's inline-manifest path on Talos 1.13 and 1.14, replayed with the real OpenTofu CLI
//! to Talos' prune: Cilium from an inline manifest (recorded in Talos' inventory, annotated by
//! the node), `adopt_existing` (the plan names the inventory ConfigMap and the annotation; the
//! apply takes Cilium's entries out and removes the annotation), the inline manifest removed from
//! the machine config, and `talosctl upgrade-k8s` with its default prune: Cilium keeps running
//! (same uids, agents Ready, nodes Ready), the release is deployed, the next plan is empty. On
//! 1.14 a node also re-records Cilium before the removal (a reboot while the machine config still
//! lists it): the plan warns and the `kubectl patch` it gives takes the entries out again.
//! The negative control adopts with a plain `helm upgrade --take-ownership` and removes the
//! annotation from the DaemonSet by hand: the same prune deletes Cilium, annotated or not.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use talos_sim::talos::manifests::{
    self, INVENTORY_NAME, INVENTORY_NAMESPACE, OWNING_INVENTORY, UpgradeOptions,
};
use talos_sim::talos::{TalosConfig, TalosVersion};

use crate::harness::TestCluster;

use super::adoption::uids;
use super::*;

/// A cluster whose Cilium 1.19.7 came from an inline manifest named `cilium`, as `version` does it.
async fn inline_cilium(version: TalosVersion) -> Option<TestCluster> {
    let cluster = TestCluster::start_with(TalosConfig {
        inline_cilium: Some("1.19.7".into()),
        talos_version: version,
        ..Default::default()
    })
    .await;
    cluster.nodes_are_emulated().then_some(cluster)
}

/// The inventory's keys that name Cilium's objects (the test cluster has no other manifest).
async fn inventory(client: &kube::Client) -> BTreeSet<String> {
    Api::<ConfigMap>::namespaced(client.clone(), INVENTORY_NAMESPACE)
        .get(INVENTORY_NAME)
        .await
        .expect("Talos' inventory")
        .data
        .unwrap_or_default()
        .into_keys()
        .collect()
}

async fn daemonset(client: &kube::Client) -> Option<DaemonSet> {
    Api::<DaemonSet>::namespaced(client.clone(), NS)
        .get_opt("cilium")
        .await
        .expect("read the DaemonSet")
}

fn owning_inventory(ds: &DaemonSet) -> Option<&str> {
    ds.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(OWNING_INVENTORY))
        .map(String::as_str)
}

/// Every agent Ready on every node, for at least a moment.
async fn agents_ready(client: &kube::Client) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = daemonset(client).await.and_then(|d| d.status);
        if let Some(s) = status {
            if s.desired_number_scheduled > 0 && s.number_ready == s.desired_number_scheduled {
                return;
            }
        }
        assert!(Instant::now() < deadline, "the Cilium agents are not Ready");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The machine config no longer lists any inline manifest: `talosctl upgrade-k8s`' manifest sync
/// with its defaults (prune on, `AdoptIfNoInventory`).
async fn upgrade_k8s_without_the_inline_manifest(
    client: &kube::Client,
) -> manifests::UpgradeReport {
    manifests::upgrade_k8s(client, &[], UpgradeOptions::default())
        .await
        .expect("upgrade-k8s' manifest sync")
}

/// A control plane reboots before the inline manifest left the machine config: the node records
/// Cilium's existing objects again; the plan warns, and the command it gives takes them out.
async fn rebooted_before_the_removal(cluster: &TestCluster, ws: &crate::harness::Workspace) {
    let client = cluster.client().await;
    let (version, recorded) = manifests::read_machine_config(&client)
        .await
        .expect("the machine config record");
    manifests::node_apply(&client, version, &recorded)
        .await
        .expect("the node's manifest run");
    assert!(
        inventory(&client)
            .await
            .contains("kube-system_cilium_apps_DaemonSet"),
        "the node recorded the existing objects again"
    );
    let plan = ws.ok(&["plan", "-no-color"]);
    let said = plan.flat();
    let start = "kubectl -n kube-system patch configmap talos-bootstrap-manifests-inventory --type=json -p '";
    assert!(
        said.contains("Talos' manifest inventory lists objects of this release")
            && said.contains("DaemonSet.apps kube-system/cilium")
            && said.contains(start),
        "{}",
        plan.text()
    );
    let json = said[said.find(start).expect("command") + start.len()..]
        .split('\'')
        .next()
        .expect("the patch")
        .to_owned();
    let kubectl = std::env::var_os("TALOSBOOT_KUBECTL")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join(".work/kubectl/usr/bin/kubectl")
        });
    let out = std::process::Command::new(kubectl)
        .arg(format!(
            "--kubeconfig={}",
            cluster.kubeconfig_path.display()
        ))
        .args([
            "-n",
            INVENTORY_NAMESPACE,
            "patch",
            "configmap",
            INVENTORY_NAME,
            "--type=json",
            "-p",
            &json,
        ])
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        inventory(&client).await.is_empty(),
        "the plan's command took them out"
    );
}

async fn the_guide_survives_the_prune(version: TalosVersion, reboot_before_removal: bool) {
    let Some(cluster) = inline_cilium(version).await else {
        return; // needs a cluster whose Cilium came from inline manifests
    };
    let client = cluster.client().await;
    let listed = inventory(&client).await;
    assert!(
        listed.contains("kube-system_cilium_apps_DaemonSet")
            && listed.contains("_cilium_rbac.authorization.k8s.io_ClusterRole"),
        "the node recorded Cilium: {listed:?}"
    );
    let ds = daemonset(&client).await.expect("the inline Cilium");
    assert_eq!(owning_inventory(&ds), Some(INVENTORY_NAME));
    agents_ready(&client).await;
    let before = uids(&client).await;

    let ws = workspace(&cluster, &cilium("  adopt_existing = true"));
    let plan = ws.ok(&["plan", "-no-color"]);
    let said = plan.flat();
    for needle in [
        "Adoption will edit Talos' manifest inventory",
        "kube-system/talos-bootstrap-manifests-inventory",
        &format!("{} entries now", listed.len()),
        "config.k8s.io/owning-inventory",
    ] {
        assert!(
            said.contains(needle),
            "plan lacks {needle:?}:\n{}",
            plan.text()
        );
    }
    let applied = ws.apply();
    let said = applied.flat();
    assert!(
        said.contains("Took the release's objects out of Talos' manifest inventory")
            && said.contains(&format!("took {} entries out", listed.len()))
            && said.contains("DaemonSet.apps kube-system/cilium"),
        "{}",
        applied.text()
    );
    assert!(
        inventory(&client).await.is_empty(),
        "every Cilium entry left the inventory"
    );
    let ds = daemonset(&client).await.expect("adopted");
    assert_eq!(owning_inventory(&ds), None, "Talos' annotation removed");
    assert_eq!(uids(&client).await, before, "adoption keeps every object");
    if reboot_before_removal {
        rebooted_before_the_removal(&cluster, &ws).await;
    }

    // The inline manifest leaves the machine config; the next Kubernetes upgrade prunes.
    let report = upgrade_k8s_without_the_inline_manifest(&client).await;
    assert_eq!(report.pruned, [], "nothing of Cilium is Talos' any more");
    assert_eq!(uids(&client).await, before, "Cilium survived the prune");
    agents_ready(&client).await;
    assert!(nodes_ready(&client).await, "every node keeps its CNI");
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
    assert!(!ws.plan_has_changes(), "the next plan is empty");
}

on_both_clis!(async talos_1_13_adopted_inline_cilium_survives_upgrade_k8s_prune);
async fn talos_1_13_adopted_inline_cilium_survives_upgrade_k8s_prune() {
    the_guide_survives_the_prune(TalosVersion::V1_13, false).await;
}

on_both_clis!(async talos_1_14_adopted_inline_cilium_survives_upgrade_k8s_prune);
async fn talos_1_14_adopted_inline_cilium_survives_upgrade_k8s_prune() {
    the_guide_survives_the_prune(TalosVersion::V1_14, true).await;
}

on_both_clis!(async without_talosboot_the_same_prune_deletes_an_adopted_cilium);
async fn without_talosboot_the_same_prune_deletes_an_adopted_cilium() {
    let Some(cluster) = inline_cilium(TalosVersion::V1_13).await else {
        return;
    };
    let client = cluster.client().await;
    let listed = inventory(&client).await;
    helm_by_hand(
        &client,
        &[
            "upgrade", "--install", "cilium", "cilium",
            "--repo", "https://helm.cilium.io", "--version", "1.19.7", "-n", NS,
            "--take-ownership",
            "--set", "ipam.mode=kubernetes",
            "--set", "cgroup.autoMount.enabled=false",
            "--set", "cgroup.hostRoot=/sys/fs/cgroup",
            "--set", "k8sServiceHost=localhost",
            "--set", "k8sServicePort=7445",
            "--set", "kubeProxyReplacement=true",
            "--set", "securityContext.capabilities.ciliumAgent={CHOWN,KILL,NET_ADMIN,NET_RAW,IPC_LOCK,SYS_ADMIN,SYS_RESOURCE,DAC_OVERRIDE,FOWNER,SETGID,SETUID}",
            "--set", "securityContext.capabilities.cleanCiliumState={NET_ADMIN,SYS_ADMIN,SYS_RESOURCE}",
        ],
    )
    .await;
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
    assert_eq!(
        inventory(&client).await,
        listed,
        "Helm's adoption leaves Talos' inventory as it was"
    );
    // Removing the annotation alone does not protect an object the inventory lists.
    Api::<DaemonSet>::namespaced(client.clone(), NS)
        .patch(
            "cilium",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {OWNING_INVENTORY: null}}})),
        )
        .await
        .expect("drop the annotation");
    let report = upgrade_k8s_without_the_inline_manifest(&client).await;
    let pruned: Vec<String> = report.pruned.iter().map(|e| e.to_string()).collect();
    assert!(
        pruned.contains(&"DaemonSet.apps kube-system/cilium".to_owned())
            && pruned.contains(&"Deployment.apps kube-system/cilium-operator".to_owned()),
        "{pruned:?}"
    );
    assert_eq!(pruned.len(), listed.len(), "every Cilium object pruned");
    assert!(daemonset(&client).await.is_none(), "Cilium is gone");
}
