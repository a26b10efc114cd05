//! Both Talos configurations: with `--kube-proxy` the cluster has the `kube-proxy` DaemonSet
//! Talos deploys, whose Ready pods route the Service IP before any CNI; without it there is none.
//! A kube-proxy that does not run leaves the Service IP unrouted.

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use talos_sim::SimConfig;

use crate::common::*;

const CILIUM_CLI: &str = "quay.io/cilium/cilium-cli:v0.18.7";

fn with_kube_proxy() -> SimConfig {
    SimConfig {
        kube_proxy: true,
        ..SimConfig::default()
    }
}

#[tokio::test]
async fn with_kube_proxy_talos_deploys_its_daemonset_on_every_node() {
    let (_sim, client) = start_with(with_kube_proxy()).await;
    let dss: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    let status = eventually(10, "kube-proxy ready on every node", || async {
        let s = dss.get("kube-proxy").await.ok()?.status?;
        (s.desired_number_scheduled == 2 && s.number_ready == 2).then_some(s)
    })
    .await;
    assert_eq!(status.updated_number_scheduled, Some(2));
    let ds = dss.get("kube-proxy").await.expect("kube-proxy");
    let spec = ds.spec.and_then(|s| s.template.spec).expect("pod spec");
    assert_eq!(spec.host_network, Some(true));
    assert!(
        spec.containers[0]
            .image
            .as_deref()
            .is_some_and(|i| i.starts_with("registry.k8s.io/kube-proxy:")),
        "{:?}",
        spec.containers[0].image
    );
}

#[tokio::test]
async fn without_kube_proxy_there_is_none() {
    let (_sim, client) = start().await;
    let dss: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    assert!(
        dss.get_opt("kube-proxy").await.expect("get").is_none(),
        "cluster.proxy.disabled: true"
    );
}

#[tokio::test]
async fn a_kube_proxy_that_does_not_run_leaves_the_service_ip_unrouted() {
    let (_sim, client) = start_with(with_kube_proxy()).await;
    let dss: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    let broken = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy-typo:v1.33.0"}]}}}});
    dss.patch(
        "kube-proxy",
        &PatchParams::default(),
        &Patch::Strategic(&broken),
    )
    .await
    .expect("patch kube-proxy");
    eventually(10, "kube-proxy pods replaced and not ready", || async {
        let ds = dss.get("kube-proxy").await.ok()?;
        let s = ds.status?;
        (s.observed_generation == ds.metadata.generation && s.number_ready == 0).then_some(())
    })
    .await;
    let job = bootstrap_job(
        "cilium-install",
        CILIUM_CLI,
        &cilium_install(&talos_cilium_sets()),
        json!([]),
    );
    let done = run_job(&client, "kube-system", &job, 20).await;
    assert!(
        job_condition(&done, "Failed").is_some(),
        "{:?}",
        done.status
    );
    let log = job_log(&client, "kube-system", "cilium-install").await;
    assert!(log.contains("dial tcp 10.96.0.1:443: i/o timeout"), "{log}");
}
