//! talosboot's bootstrap engine installing Cilium on the real control plane: the real Helm pulls
//! the chart from the repository users name, through the node's network, and the emulated agents
//! bring the nodes' CNI up; the real controller-manager then lifts the not-ready taints.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
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

#[tokio::test(flavor = "multi_thread")]
async fn cilium_installed_by_the_engine_makes_every_node_ready() {
    let (_cluster, client) = common::start().await;
    let installed = helm::install::install_or_upgrade(
        &clients(&client),
        &BootstrapNamespace::named("kube-system"),
        &JobSettings::talos(DEFAULT_HELM_IMAGE),
        &cilium_chart("1.18.4"),
        Duration::from_secs(180),
        &CancellationToken::new(),
    )
    .await
    .unwrap_or_else(|e| panic!("the install failed: {e}\n{:?}\n{:?}", e.diagnosis, e.report));
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
