//! Cilium installed by Talos from inline manifests (`SimConfig::inline_cilium`): the chart's
//! objects without Helm's ownership metadata and without a release record, agents running and
//! nodes Ready; then taken under a Helm release in place with `helm upgrade --take-ownership`.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use talos_sim::SimConfig;
use talos_sim::programs::charts::talos_cilium_values;
use talos_sim::programs::release::Release;

use crate::common::*;

async fn start_inline() -> (talos_sim::SimCluster, Client) {
    start_with(SimConfig {
        inline_cilium: Some("1.16.3".into()),
        ..SimConfig::default()
    })
    .await
}

/// uid of every object the chart renders (and of the agent pods), by kind/name.
async fn uids(client: &Client) -> BTreeMap<String, String> {
    let ns = "kube-system";
    let mut out = BTreeMap::new();
    let mut put = |k: &str, meta: &kube::api::ObjectMeta| {
        out.insert(
            format!("{k}/{}", meta.name.clone().unwrap_or_default()),
            meta.uid.clone().unwrap_or_default(),
        );
    };
    let ds: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
    put("DaemonSet", &ds.get("cilium").await.unwrap().metadata);
    let dep: Api<Deployment> = Api::namespaced(client.clone(), ns);
    put(
        "Deployment",
        &dep.get("cilium-operator").await.unwrap().metadata,
    );
    let cm: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    put(
        "ConfigMap",
        &cm.get("cilium-config").await.unwrap().metadata,
    );
    let sa: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    for n in ["cilium", "cilium-operator"] {
        put("ServiceAccount", &sa.get(n).await.unwrap().metadata);
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    for p in pods
        .list(&ListParams::default().labels("k8s-app=cilium"))
        .await
        .unwrap()
    {
        put("Pod", &p.metadata);
    }
    out
}

#[tokio::test]
async fn inline_manifest_cilium_runs_without_helm_metadata_or_release() {
    let (_sim, client) = start_inline().await;
    wait_nodes_ready(&client).await;
    let ds: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    let d = ds.get("cilium").await.unwrap();
    let labels = d.metadata.labels.clone().unwrap_or_default();
    assert!(!labels.contains_key("app.kubernetes.io/managed-by"));
    assert!(
        d.metadata
            .annotations
            .unwrap_or_default()
            .keys()
            .all(|k| !k.starts_with("meta.helm.sh/"))
    );
    let spec = d.spec.unwrap().template.spec.unwrap();
    assert_eq!(
        spec.containers[0].image.as_deref(),
        Some("quay.io/cilium/cilium:v1.16.3")
    );
    let inits: Vec<String> = spec
        .init_containers
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert!(
        !inits.contains(&"mount-cgroup".to_string()),
        "cgroup autoMount off: {inits:?}"
    );
    let cm: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let data = cm.get("cilium-config").await.unwrap().data.unwrap();
    assert_eq!(data["kube-proxy-replacement"], "true");
    assert_eq!(data["k8s-service-host"], "localhost");
    assert_eq!(data["k8s-service-port"], "7445");
    assert_eq!(data["ipam"], "kubernetes");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    let records = secrets
        .list(&ListParams::default().labels("owner=helm"))
        .await
        .unwrap();
    assert!(records.items.is_empty(), "no Helm release record");
}

fn helm_adopt_job(name: &str, take_ownership: bool) -> k8s_openapi::api::batch::v1::Job {
    let mut argv: Vec<String> = [
        "helm",
        "upgrade",
        "--install",
        "cilium",
        "cilium",
        "--repo",
        "https://helm.cilium.io",
        "--version",
        "1.16.3",
        "-n",
        "kube-system",
        "-f",
        "/values/values.yaml",
        "--wait",
        "--timeout",
        "5m",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if take_ownership {
        argv.push("--take-ownership".into());
    }
    let mut job = serde_json::to_value(bootstrap_job(
        name,
        "alpine/helm:3.18.4",
        &argv,
        kubeprism_env(),
    ))
    .unwrap();
    let spec = &mut job["spec"]["template"]["spec"];
    spec["volumes"] = json!([{"name": "values", "configMap": {"name": "cilium-values"}}]);
    spec["containers"][0]["volumeMounts"] = json!([{"name": "values", "mountPath": "/values"}]);
    from_json(job)
}

#[tokio::test]
async fn take_ownership_adopts_inline_cilium_in_place() {
    let (_sim, client) = start_inline().await;
    wait_nodes_ready(&client).await;
    let before = uids(&client).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let values = serde_saphyr::to_string(&talos_cilium_values()).unwrap();
    cms.create(
        &PostParams::default(),
        &from_json(json!({"metadata": {"name": "cilium-values"}, "data": {"values.yaml": values}})),
    )
    .await
    .unwrap();

    // Without --take-ownership: Helm's ownership error, nothing changed.
    let done = run_job(&client, "kube-system", &helm_adopt_job("plain", false), 20).await;
    assert!(job_condition(&done, "Failed").is_some());
    let log = job_log(&client, "kube-system", "plain").await;
    assert!(
        log.contains("Error: INSTALLATION FAILED: Unable to continue with install: ServiceAccount \"cilium\" in namespace \"kube-system\" exists and cannot be imported into the current release: invalid ownership metadata; label validation error: missing key \"app.kubernetes.io/managed-by\": must be set to \"Helm\""),
        "{log}"
    );

    let done = run_job(&client, "kube-system", &helm_adopt_job("adopt", true), 20).await;
    assert!(
        job_condition(&done, "Complete").is_some(),
        "{}",
        job_log(&client, "kube-system", "adopt").await
    );
    assert_eq!(uids(&client).await, before, "every object kept its uid");
    let ds: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    let d = ds.get("cilium").await.unwrap();
    let labels = d.metadata.labels.unwrap();
    assert_eq!(labels["app.kubernetes.io/managed-by"], "Helm");
    assert_eq!(labels["k8s-app"], "cilium", "existing labels are kept");
    let ann = d.metadata.annotations.unwrap();
    assert_eq!(ann["meta.helm.sh/release-name"], "cilium");
    assert_eq!(ann["meta.helm.sh/release-namespace"], "kube-system");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    // The refused attempt recorded nothing (Helm checks ownership first): this is revision 1.
    let s = secrets.get("sh.helm.release.v1.cilium.v1").await.unwrap();
    let rel = Release::from_secret(&serde_json::to_value(s).unwrap()).unwrap();
    assert_eq!(rel.status, "deployed");
    assert_eq!(rel.chart_version, "1.16.3");
    assert!(
        secrets
            .get_opt("sh.helm.release.v1.cilium.v2")
            .await
            .unwrap()
            .is_none()
    );
}
