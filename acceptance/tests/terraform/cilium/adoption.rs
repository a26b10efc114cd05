//! Taking over a running Cilium: inline manifests adopted in place on Talos 1.12 (every uid kept,
//! no manifest inventory to edit), import, and `moved` from a `helm_release` state without
//! touching the cluster.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::Api;
use serde_json::json;

use crate::harness::TestCluster;

use super::*;

pub(super) async fn uids(client: &kube::Client) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let ds = Api::<DaemonSet>::namespaced(client.clone(), NS)
        .get("cilium")
        .await
        .expect("ds");
    out.insert(
        "DaemonSet/cilium".into(),
        ds.metadata.uid.unwrap_or_default(),
    );
    let d = Api::<Deployment>::namespaced(client.clone(), NS)
        .get("cilium-operator")
        .await
        .expect("deploy");
    out.insert(
        "Deployment/cilium-operator".into(),
        d.metadata.uid.unwrap_or_default(),
    );
    let cm = Api::<ConfigMap>::namespaced(client.clone(), NS)
        .get("cilium-config")
        .await
        .expect("cm");
    out.insert(
        "ConfigMap/cilium-config".into(),
        cm.metadata.uid.unwrap_or_default(),
    );
    for sa in ["cilium", "cilium-operator"] {
        let s = Api::<ServiceAccount>::namespaced(client.clone(), NS)
            .get(sa)
            .await
            .expect("sa");
        out.insert(
            format!("ServiceAccount/{sa}"),
            s.metadata.uid.unwrap_or_default(),
        );
    }
    out
}

on_both_clis!(async inline_manifest_cilium_is_adopted_in_place);
async fn inline_manifest_cilium_is_adopted_in_place() {
    // Talos 1.12: no manifest inventory (1.13 and 1.14 are in `talos_prune`).
    let cluster = TestCluster::start_with(talos_sim::talos::TalosConfig {
        inline_cilium: Some("1.19.7".into()),
        talos_version: talos_sim::talos::TalosVersion::V1_12,
        ..Default::default()
    })
    .await;
    if !cluster.nodes_are_emulated() {
        return; // needs a cluster whose Cilium came from inline manifests
    }
    let client = cluster.client().await;
    let before = uids(&client).await;
    let ws = workspace(&cluster, &cilium(""));
    let refused = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!refused.success);
    assert!(
        refused.flat().contains("set `adopt_existing = true`"),
        "{}",
        refused.text()
    );
    assert_eq!(
        uids(&client).await,
        before,
        "a refused install touches nothing"
    );
    // Both Helm majors adopt (harness::runs_helm3): Helm 3 by a client-side three-way merge,
    // Helm 4 by server-side apply with `--force-conflicts`, which the plan announces, naming
    // Talos' field manager.
    let helm3 = crate::harness::runs_helm3(ws.cli());
    let job = crate::harness::installer_job(ws.cli());
    ws.write(
        "main.tf",
        &root(
            &cluster,
            &cilium(&format!("  adopt_existing = true\n{job}")),
        ),
    );
    let plan = ws.ok(&["plan", "-no-color"]);
    let flat = plan.flat();
    assert_eq!(
        flat.contains("Helm 4 takes fields from other managers"),
        !helm3,
        "{}",
        plan.text()
    );
    if !helm3 {
        assert!(
            flat.contains("- talos: ") && flat.contains("DaemonSet kube-system/cilium"),
            "names Talos' field manager and its objects: {}",
            plan.text()
        );
    }
    let applied = ws.apply();
    assert!(
        !applied.flat().contains("manifest inventory"),
        "nothing to say about an inventory Talos 1.12 does not keep: {}",
        applied.text()
    );
    assert_eq!(uids(&client).await, before, "adoption keeps every object");
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
    let ds = Api::<DaemonSet>::namespaced(client.clone(), NS)
        .get("cilium")
        .await
        .expect("ds");
    let annotations = ds.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations
            .get("meta.helm.sh/release-name")
            .map(String::as_str),
        Some("cilium")
    );
    let methods = crate::harness::apply_methods(&client, NS, "cilium").await;
    let expected = if helm3 { None } else { Some("ssa".to_owned()) };
    assert_eq!(methods.get(&1), Some(&expected), "{methods:?}");
    assert!(!ws.plan_has_changes());
}

on_both_clis!(async an_imported_release_plans_empty_when_the_configuration_matches);
async fn an_imported_release_plans_empty_when_the_configuration_matches() {
    let cluster = TestCluster::start().await;
    let first = workspace(&cluster, &cilium(""));
    first.apply();
    let import = format!(
        "import {{\n  to = talosboot_cilium.this\n  id = \"kube-system/cilium\"\n}}\n{}",
        cilium("")
    );
    let second = workspace(&cluster, &import);
    let plan = second.ok(&["plan", "-no-color"]);
    assert!(
        plan.flat()
            .contains("1 to import, 0 to add, 0 to change, 0 to destroy"),
        "{}",
        plan.text()
    );
    second.apply();
    assert!(!second.plan_has_changes(), "empty plan after import");
    let bad = workspace(
        &cluster,
        "import {\n  to = talosboot_cilium.this\n  id = \"cilium\"\n}\nresource \"talosboot_cilium\" \"this\" {\n  version = \"1.18.4\"\n}\n",
    );
    let out = bad.run(&["plan", "-no-color"]);
    assert!(
        !out.success && out.flat().contains("use `<namespace>/<release name>`"),
        "{}",
        out.text()
    );
}

on_both_clis!(async a_helm_release_moves_to_talosboot_cilium_without_touching_the_cluster);
async fn a_helm_release_moves_to_talosboot_cilium_without_touching_the_cluster() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let ws = workspace(&cluster, &cilium(""));
    ws.apply();
    let revisions = release_history(&client, "cilium").await;
    // The state a helm_release root has today.
    ws.write(
        "terraform.tfstate",
        &helm_release_state(ws.cli(), &ws.state_text(), json!([]), json!([])),
    );
    stand_in_helm_provider(&ws);
    ws.write(
        "main.tf",
        &root(
            &cluster,
            &format!(
                "{}\nmoved {{\n  from = helm_release.cilium\n  to   = talosboot_cilium.this\n}}\n",
                cilium("")
            ),
        ),
    );
    ws.ok(&["init", "-no-color", "-upgrade"]);
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        plan.stdout
            .contains("helm_release.cilium has moved to talosboot_cilium.this"),
        "{}",
        plan.text()
    );
    assert!(
        plan.flat().contains("0 to add, 0 to change, 0 to destroy"),
        "{}",
        plan.text()
    );
    ws.apply();
    assert!(!ws.plan_has_changes(), "empty plan after the move");
    assert_eq!(
        release_history(&client, "cilium").await,
        revisions,
        "the cluster was not touched"
    );
}
