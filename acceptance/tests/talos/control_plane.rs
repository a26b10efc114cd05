//! The real control plane: what it is, what it costs, and that refusals are the real server's.

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, PostParams};
use serde_json::json;

use super::common::{self, from_json};

#[tokio::test(flavor = "multi_thread")]
async fn the_apiserver_is_the_real_one_and_starts_in_seconds() {
    let (cluster, client) = common::start().await;
    let version = client.apiserver_version().await.expect("version");
    assert_eq!(version.git_version, "v1.37.2");
    let (ok, out, err) = common::run_kubectl(&cluster, &["get", "--raw", "/version"]);
    assert!(ok, "{err}");
    assert!(out.contains("\"gitVersion\": \"v1.37.2\""), "{out}");
    let rss: u64 = cluster.plane.rss_kib().iter().map(|(_, kib)| kib).sum();
    eprintln!(
        "control plane: started in {:?} (with nodes {:?}); RSS {} MiB: {:?}",
        cluster.plane.started_in,
        cluster.started_in,
        rss / 1024,
        cluster.plane.rss_kib()
    );
    // Every node registered, NotReady with the CNI message until a CNI runs.
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let list = nodes.list(&Default::default()).await.expect("nodes");
    let names: Vec<_> = list
        .items
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    assert_eq!(names, ["talos-cp-1", "talos-worker-1"]);
    for node in &list.items {
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .expect("a Ready condition");
        assert_eq!(ready.status, "False");
        assert!(
            ready
                .message
                .as_deref()
                .unwrap_or("")
                .contains("cni plugin not initialized")
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pod_security_refusals_are_the_real_servers() {
    let (_cluster, client) = common::shared().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = from_json(json!({
        "metadata": {"name": "host"},
        "spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "alpine/helm:3.18.4"}]},
    }));
    let err = pods
        .create(&PostParams::default(), &pod)
        .await
        .expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains(
            "violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)"
        ),
        "{text}"
    );
    // kube-system is exempt, as on Talos.
    let system: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    system
        .create(&PostParams::default(), &pod)
        .await
        .expect("kube-system is exempt");
}

#[tokio::test(flavor = "multi_thread")]
async fn rbac_refusals_are_the_real_servers() {
    let (cluster, _client) = common::shared().await;
    let sa = cluster
        .plane
        .client_as(
            "system:serviceaccount:default:default",
            &["system:serviceaccounts", "system:authenticated"],
        )
        .await
        .expect("client");
    let secrets: Api<Secret> = Api::namespaced(sa, "kube-system");
    let err = secrets
        .list(&Default::default())
        .await
        .expect_err("forbidden");
    assert!(
        err.to_string().contains("secrets is forbidden: User \"system:serviceaccount:default:default\" cannot list resource \"secrets\" in API group \"\" in the namespace \"kube-system\""),
        "{err}"
    );
}
