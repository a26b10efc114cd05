//! Talos' manifest handling by version (`talos_sim::talos::manifests`): on 1.13 and 1.14 the node
//! records its objects in the inventory ConfigMap and annotates what it creates, and the
//! `upgrade-k8s` sync prunes what leaves the desired set (annotated or not), keeps it with
//! `--manifests-no-prune`, never prunes what the inventory does not list, and stops at an object
//! another inventory owns; on 1.12 nothing has an inventory and nothing is pruned. 1.13 goes
//! through the `talos-sim upgrade-k8s` CLI, 1.14 through the library call.

use std::collections::BTreeSet;
use std::path::Path;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use talos_sim::talos::manifests::{
    self, INVENTORY_NAME, INVENTORY_NAMESPACE, InlineManifest, Inventory, OWNING_INVENTORY,
    UpgradeOptions,
};
use talos_sim::talos::{TalosConfig, TalosVersion};

use super::common;

const NS: &str = "prune-test";

/// `base` stays in the machine config; `extra` leaves it. `kept-by-hand` exists before the node
/// applies (so the node only records it), `foreign` is claimed by another inventory later.
fn manifests() -> Vec<InlineManifest> {
    let base = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NS}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: base\n  namespace: {NS}\ndata:\n  a: \"1\"\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: prune-test:reader\nrules: []\n"
    );
    let extra = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: {NS}\ndata:\n  b: \"2\"\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept-by-hand\n  namespace: {NS}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: pre-existing\n  namespace: {NS}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: foreign\n  namespace: {NS}\n"
    );
    vec![
        InlineManifest {
            name: "base".into(),
            contents: base,
        },
        InlineManifest {
            name: "extra".into(),
            contents: extra,
        },
    ]
}

async fn inventory_keys(client: &kube::Client) -> Option<BTreeSet<String>> {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), INVENTORY_NAMESPACE)
        .get_opt(INVENTORY_NAME)
        .await
        .expect("read the inventory")?;
    Some(cm.data.unwrap_or_default().into_keys().collect())
}

async fn config_map(client: &kube::Client, name: &str) -> Option<ConfigMap> {
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .get_opt(name)
        .await
        .expect("read a ConfigMap")
}

fn owning_inventory(cm: &ConfigMap) -> Option<String> {
    cm.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(OWNING_INVENTORY).cloned())
}

/// Whether a ConfigMap is gone (deletion is asynchronous only for finalizers: none here).
async fn gone(client: &kube::Client, name: &str) -> bool {
    config_map(client, name).await.is_none()
}

/// The sync through the CLI or the library, as `via_cli` says; the CLI's exit status and output.
async fn upgrade(
    client: &kube::Client,
    kubeconfig: &Path,
    via_cli: bool,
    listed: &[&str],
    no_prune: bool,
) -> Result<String, String> {
    if via_cli {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_talos-sim"));
        cmd.arg("upgrade-k8s")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--inline-manifests", &listed.join(",")]);
        if no_prune {
            cmd.arg("--manifests-no-prune");
        }
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .expect("join")
            .expect("run talos-sim");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        return if out.status.success() {
            Ok(text)
        } else {
            Err(text)
        };
    }
    let listed: Vec<String> = listed.iter().map(|s| (*s).to_owned()).collect();
    manifests::upgrade_k8s(
        client,
        &listed,
        UpgradeOptions {
            no_prune,
            ..Default::default()
        },
    )
    .await
    .map(|report| format!("{report:?}"))
    .map_err(|e| e.to_string())
}

async fn prune_by_version(version: TalosVersion, via_cli: bool) {
    let (cluster, client) = common::start_with(TalosConfig {
        talos_version: version,
        ..Default::default()
    })
    .await;
    let kubeconfig = tempfile::NamedTempFile::new().expect("temp file");
    cluster
        .write_kubeconfig(kubeconfig.path())
        .expect("kubeconfig");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &common::from_json(json!({"metadata": {"name": NS}})),
        )
        .await
        .expect("namespace");
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .create(
            &PostParams::default(),
            &common::from_json(json!({"metadata": {"name": "pre-existing"}})),
        )
        .await
        .expect("an object that exists before the node applies");
    let created = manifests::boot(&client, version, &manifests())
        .await
        .expect("the node applies the manifests");
    assert_eq!(created.len(), 5, "all but the two that exist: {created:?}");

    let all: BTreeSet<String> = [
        "_prune-test__Namespace",
        "prune-test_base__ConfigMap",
        "_prune-test__reader_rbac.authorization.k8s.io_ClusterRole",
        "prune-test_extra__ConfigMap",
        "prune-test_kept-by-hand__ConfigMap",
        "prune-test_pre-existing__ConfigMap",
        "prune-test_foreign__ConfigMap",
    ]
    .map(String::from)
    .into();
    assert_eq!(
        inventory_keys(&client).await,
        Some(all.clone()),
        "the namespace existed too: recorded, as every object"
    );
    let extra = config_map(&client, "extra").await.expect("extra");
    assert_eq!(
        owning_inventory(&extra).as_deref(),
        Some(INVENTORY_NAME),
        "what the node creates carries the annotation"
    );
    assert!(
        extra
            .metadata
            .managed_fields
            .unwrap_or_default()
            .iter()
            .any(|m| m.manager.as_deref() == Some("talos")
                && m.operation.as_deref() == Some("Apply")),
        "server-side apply as `talos`"
    );
    let pre = config_map(&client, "pre-existing").await.expect("pre");
    assert_eq!(
        owning_inventory(&pre),
        None,
        "an existing object is recorded untouched"
    );
    let base_uid = config_map(&client, "base")
        .await
        .expect("base")
        .metadata
        .uid;

    // Another tool claims `foreign`; `kept-by-hand` leaves the inventory by hand.
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .patch(
            "foreign",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {OWNING_INVENTORY: "someone-else"}}})),
        )
        .await
        .expect("annotate");
    Api::<ConfigMap>::namespaced(client.clone(), INVENTORY_NAMESPACE)
        .patch(
            INVENTORY_NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"prune-test_kept-by-hand__ConfigMap": null}})),
        )
        .await
        .expect("drop an entry");

    // `--manifests-no-prune`: nothing leaves.
    upgrade(&client, kubeconfig.path(), via_cli, &["base"], true)
        .await
        .expect("the sync without prune succeeds");
    for name in ["extra", "pre-existing", "foreign", "kept-by-hand"] {
        assert!(!gone(&client, name).await, "{name} kept with no-prune");
    }

    // The default prune stops at the object another inventory owns: an error, nothing of it gone.
    let refused = upgrade(&client, kubeconfig.path(), via_cli, &["base"], false)
        .await
        .expect_err("another inventory's object stops the prune");
    assert!(
        refused.contains("inventory policy prevented actuation"),
        "{refused}"
    );
    assert!(!gone(&client, "foreign").await);

    // Once that object is released, the prune deletes whatever the inventory lists and the desired
    // set does not: annotated or not, and only that.
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .patch(
            "foreign",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {OWNING_INVENTORY: null}}})),
        )
        .await
        .expect("release it");
    let out = upgrade(&client, kubeconfig.path(), via_cli, &["base"], false)
        .await
        .expect("the sync prunes");
    for name in ["extra", "pre-existing", "foreign"] {
        assert!(gone(&client, name).await, "{name} pruned ({out})");
    }
    assert!(
        !gone(&client, "kept-by-hand").await,
        "what the inventory does not list is never pruned"
    );
    assert_eq!(
        config_map(&client, "base")
            .await
            .expect("base")
            .metadata
            .uid,
        base_uid,
        "the desired set stays in place"
    );
    assert!(
        Api::<ClusterRole>::all(client.clone())
            .get_opt("prune-test:reader")
            .await
            .expect("read")
            .is_some()
    );
    let left: BTreeSet<String> = [
        "_prune-test__Namespace",
        "prune-test_base__ConfigMap",
        "_prune-test__reader_rbac.authorization.k8s.io_ClusterRole",
    ]
    .map(String::from)
    .into();
    assert_eq!(inventory_keys(&client).await, Some(left));
    let inventory = Inventory::read(&client).await.expect("read").expect("some");
    assert_eq!(inventory.entries.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn talos_1_13_prunes_what_leaves_the_desired_set_through_the_cli() {
    prune_by_version(TalosVersion::V1_13, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn talos_1_14_prunes_what_leaves_the_desired_set() {
    prune_by_version(TalosVersion::V1_14, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn talos_1_12_keeps_no_inventory_and_never_prunes() {
    let (_cluster, client) = common::start_with(TalosConfig {
        talos_version: TalosVersion::V1_12,
        ..Default::default()
    })
    .await;
    manifests::boot(&client, TalosVersion::V1_12, &manifests())
        .await
        .expect("the node applies the manifests");
    assert_eq!(inventory_keys(&client).await, None, "no inventory on 1.12");
    let extra = config_map(&client, "extra").await.expect("extra");
    assert_eq!(owning_inventory(&extra), None);
    let report = manifests::upgrade_k8s(&client, &[], UpgradeOptions::default())
        .await
        .expect("the 1.12 sync");
    assert!(report.pruned.is_empty());
    for name in ["base", "extra", "pre-existing"] {
        assert!(!gone(&client, name).await, "{name} kept on 1.12");
    }
    assert_eq!(inventory_keys(&client).await, None);
}
