//! talosboot's bootstrap engine installing Cilium on the real control plane: the real Helm pulls
//! the chart from the repository users name, through the node's network, and the emulated agents
//! bring the nodes' CNI up; the real controller-manager then lifts the not-ready taints. With
//! Hubble relay and UI on, every component rolls out and the real scheduler honours the
//! operator's required anti-affinity (one operator per node).

use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::Api;
use talosboot::cluster::Kube;
use talosboot::cluster::engine::{BootstrapNamespace, JobSettings};
use talosboot::cluster::helm::{
    self,
    install::{ChartInstall, DEFAULT_HELM_IMAGE},
};
use talosboot::cluster::talos::talos_cilium_values;
use tokio_util::sync::CancellationToken;

use super::common;

fn clients(client: &kube::Client) -> Kube {
    Kube {
        client: client.clone(),
        stream: client.clone(),
        endpoint: "talos-sim".into(),
        retry_budget: talosboot::cluster::RetryBudget::default(),
    }
}

pub fn cilium_chart(version: &str) -> ChartInstall {
    ChartInstall {
        release: "cilium".into(),
        namespace: "kube-system".into(),
        repository: Some("https://helm.cilium.io".into()),
        chart: "cilium".into(),
        version: version.into(),
        // JSON is YAML: the Talos values as one values document.
        values_yaml: vec![talos_cilium_values("localhost", 7445).to_string()],
        ..Default::default()
    }
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn not_ready_taint(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == "node.kubernetes.io/not-ready"))
}

/// Installs `chart` with the engine as talosboot does on Talos (host network, KubePrism).
pub async fn install(client: &kube::Client, chart: &ChartInstall) -> helm::install::Installed {
    helm::install::install_or_upgrade(
        &clients(client),
        &BootstrapNamespace::named("kube-system"),
        &JobSettings::talos(DEFAULT_HELM_IMAGE),
        chart,
        Duration::from_secs(180),
        &CancellationToken::new(),
    )
    .await
    .unwrap_or_else(|e| panic!("the install failed: {e}\n{:?}\n{:?}", e.diagnosis, e.report))
}

#[tokio::test(flavor = "multi_thread")]
async fn cilium_installed_by_the_engine_makes_every_node_ready() {
    let (_cluster, client) = common::start().await;
    let installed = install(&client, &cilium_chart("1.18.4")).await;
    let log = installed.run.log_tail.join("\n");
    assert!(
        log.contains("STATUS: deployed"),
        "the real Helm's output: {log}"
    );
    // The engine leaves nothing behind after a success (the real garbage collector removes the pods).
    let jobs: Api<k8s_openapi::api::batch::v1::Job> =
        Api::namespaced(client.clone(), "kube-system");
    let left = jobs
        .list(&kube::api::ListParams::default().labels("app.kubernetes.io/managed-by=talosboot"))
        .await
        .expect("jobs");
    assert!(
        left.items.is_empty(),
        "bootstrap Jobs left: {:?}",
        left.items
            .iter()
            .map(|j| j.metadata.name.clone())
            .collect::<Vec<_>>()
    );
    let release = helm::release::current_release(client.clone(), "talos", "kube-system", "cilium")
        .await
        .expect("reads")
        .expect("the release");
    assert_eq!(
        (release.status.as_str(), release.chart_version.as_str()),
        ("deployed", "1.18.4")
    );
    let nodes: Api<Node> = Api::all(client.clone());
    common::eventually(120, "every node Ready and untainted", || async {
        let list = nodes.list(&Default::default()).await.ok()?;
        (list.items.len() == 2
            && list
                .items
                .iter()
                .all(|n| node_ready(n) && !not_ready_taint(n)))
        .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn with_hubble_relay_and_ui_every_component_rolls_out_one_operator_per_node() {
    let (_cluster, client) = common::start().await;
    let mut chart = cilium_chart("1.18.4");
    chart
        .values_yaml
        .push(r#"{"hubble": {"relay": {"enabled": true}, "ui": {"enabled": true}}}"#.into());
    install(&client, &chart).await;

    let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    for name in ["cilium", "cilium-envoy"] {
        common::eventually(
            120,
            &format!("DaemonSet {name} ready on both nodes"),
            || async {
                let s = daemon_sets.get(name).await.ok()?.status?;
                (s.desired_number_scheduled == 2
                    && s.number_ready == 2
                    && s.number_available == Some(2))
                .then_some(())
            },
        )
        .await;
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "kube-system");
    for (name, replicas) in [
        ("cilium-operator", 2),
        ("hubble-relay", 1),
        ("hubble-ui", 1),
    ] {
        common::eventually(120, &format!("Deployment {name} available"), || async {
            let s = deployments.get(name).await.ok()?.status?;
            (s.available_replicas == Some(replicas)).then_some(())
        })
        .await;
    }
    let services: Api<Service> = Api::namespaced(client.clone(), "kube-system");
    for name in ["hubble-peer", "hubble-relay", "hubble-ui"] {
        assert!(services.get(name).await.is_ok(), "Service {name}");
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let operators = pods
        .list(&kube::api::ListParams::default().labels("io.cilium/app=operator"))
        .await
        .expect("operator pods");
    let mut nodes: Vec<String> = operators
        .items
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    nodes.sort();
    nodes.dedup();
    assert_eq!(
        nodes.len(),
        2,
        "the required anti-affinity puts one operator on each node: {:?}",
        operators
            .items
            .iter()
            .map(|p| (
                p.metadata.name.clone(),
                p.spec.as_ref().and_then(|s| s.node_name.clone())
            ))
            .collect::<Vec<_>>()
    );
}
