//! The helm program: release records as Helm writes them, and Helm's own errors.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;
use talos_sim::programs::release::Release;

use crate::common::*;

const BOOTSTRAP_IMAGE: &str = "ghcr.io/controlplaneio-fluxcd/flux-operator-bootstrap:v0.8.0";

fn helm(args: &[&str]) -> Vec<String> {
    std::iter::once("helm")
        .chain(args.iter().copied())
        .map(String::from)
        .collect()
}

async fn run_helm(client: &Client, job: &str, args: &[&str]) -> (bool, String) {
    let done = run_job(
        client,
        "default",
        &bootstrap_job(job, BOOTSTRAP_IMAGE, &helm(args), kubeprism_env()),
        20,
    )
    .await;
    (
        job_condition(&done, "Complete").is_some(),
        job_log(client, "default", job).await,
    )
}

fn record(version: i64, status: &str) -> Secret {
    let rel = Release {
        name: "foo".into(),
        namespace: "default".into(),
        version,
        status: status.into(),
        description: "Initial install underway".into(),
        first_deployed: "2026-01-01T00:00:00Z".into(),
        last_deployed: "2026-01-01T00:00:00Z".into(),
        chart: "foo".into(),
        chart_version: "0.1.0".into(),
        app_version: "0.1.0".into(),
        config: json!({}),
        manifest: String::new(),
    };
    from_json(rel.to_secret())
}

async fn release_of(client: &Client, name: &str) -> Release {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let s = secrets.get(name).await.unwrap();
    Release::from_secret(&serde_json::to_value(s).unwrap()).expect("a Helm record")
}

#[tokio::test]
async fn install_over_a_pending_install_cannot_reuse_the_name() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    secrets
        .create(&PostParams::default(), &record(1, "pending-install"))
        .await
        .unwrap();
    let (ok, log) = run_helm(
        &client,
        "helm-install",
        &[
            "install",
            "foo",
            "oci://example.com/charts/foo",
            "-n",
            "default",
        ],
    )
    .await;
    assert!(!ok);
    assert!(
        log.contains("Error: INSTALLATION FAILED: cannot re-use a name that is still in use"),
        "{log}"
    );
}

#[tokio::test]
async fn upgrade_over_a_pending_upgrade_is_blocked() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    secrets
        .create(&PostParams::default(), &record(1, "deployed"))
        .await
        .unwrap();
    secrets
        .create(&PostParams::default(), &record(2, "pending-upgrade"))
        .await
        .unwrap();
    let (ok, log) = run_helm(
        &client,
        "helm-upgrade",
        &[
            "upgrade",
            "--install",
            "foo",
            "oci://example.com/charts/foo",
            "-n",
            "default",
        ],
    )
    .await;
    assert!(!ok);
    assert!(
        log.contains(
            "Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress"
        ),
        "{log}"
    );
}

#[tokio::test]
async fn upgrade_install_twice_supersedes_the_first_revision() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let args = [
        "upgrade",
        "--install",
        "foo",
        "oci://example.com/charts/foo",
        "-n",
        "default",
        "--version",
        "1.2.3",
        "--set",
        "replicas=2",
    ];
    let (ok, log) = run_helm(&client, "helm-1", &args).await;
    assert!(ok, "{log}");
    assert!(
        log.contains("Release \"foo\" does not exist. Installing it now."),
        "{log}"
    );
    let (ok, log) = run_helm(&client, "helm-2", &args).await;
    assert!(ok, "{log}");
    assert!(
        log.contains("Release \"foo\" has been upgraded. Happy Helming!"),
        "{log}"
    );
    let v1 = release_of(&client, "sh.helm.release.v1.foo.v1").await;
    let v2 = release_of(&client, "sh.helm.release.v1.foo.v2").await;
    assert_eq!(
        (v1.status.as_str(), v2.status.as_str()),
        ("superseded", "deployed")
    );
    assert_eq!((v2.version, v2.chart_version.as_str()), (2, "1.2.3"));
    assert_eq!(v2.config, json!({"replicas": 2}));
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let labels = secrets
        .get("sh.helm.release.v1.foo.v1")
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap();
    assert_eq!(labels["status"], "superseded");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let rendered = cms.get("foo-rendered").await.unwrap();
    assert_eq!(
        rendered.metadata.labels.unwrap()["app.kubernetes.io/managed-by"],
        "Helm"
    );
}

#[tokio::test]
async fn values_file_is_read_from_a_mounted_config_map() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = from_json(
        json!({"metadata": {"name": "inputs"}, "data": {"values.yaml": "replicas: 3\nnested:\n  key: v\n"}}),
    );
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let mut job = bootstrap_job(
        "helm-values",
        BOOTSTRAP_IMAGE,
        &helm(&[
            "upgrade",
            "--install",
            "foo",
            "oci://example.com/charts/foo",
            "-f",
            "/inputs/values.yaml",
        ]),
        kubeprism_env(),
    );
    let spec = job.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    spec.volumes = Some(vec![from_json(
        json!({"name": "inputs", "configMap": {"name": "inputs"}}),
    )]);
    spec.containers[0].volume_mounts = Some(vec![from_json(
        json!({"name": "inputs", "mountPath": "/inputs"}),
    )]);
    let done = run_job(&client, "default", &job, 20).await;
    assert!(
        job_condition(&done, "Complete").is_some(),
        "{}",
        job_log(&client, "default", "helm-values").await
    );
    let rel = release_of(&client, "sh.helm.release.v1.foo.v1").await;
    assert_eq!(rel.config, json!({"replicas": 3, "nested": {"key": "v"}}));
}

#[tokio::test]
async fn existing_object_without_helm_ownership_blocks_the_install() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &from_json(json!({"metadata": {"name": "foo-rendered"}})),
    )
    .await
    .unwrap();
    let (ok, log) = run_helm(
        &client,
        "helm-owned",
        &[
            "upgrade",
            "--install",
            "foo",
            "oci://example.com/charts/foo",
        ],
    )
    .await;
    assert!(!ok);
    assert!(
        log.contains("Error: INSTALLATION FAILED: Unable to continue with install: ConfigMap \"foo-rendered\" in namespace \"default\" exists and cannot be imported into the current release: invalid ownership metadata; label validation error: missing key \"app.kubernetes.io/managed-by\": must be set to \"Helm\""),
        "{log}"
    );
    // Helm checks before it records the release: no revision is left behind.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    assert!(
        secrets
            .get_opt("sh.helm.release.v1.foo.v1")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn killed_install_leaves_a_pending_install_that_blocks_the_next_one() {
    let (sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    // Before the CNI the operator's pod cannot start, so `--wait` keeps the install pending.
    let chart = "oci://ghcr.io/controlplaneio-fluxcd/charts/flux-operator";
    let args = [
        "upgrade",
        "--install",
        "flux-operator",
        chart,
        "-n",
        "flux-system",
        "--create-namespace",
        "--wait",
        "--timeout",
        "10m",
    ];
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &bootstrap_job("first", BOOTSTRAP_IMAGE, &helm(&args), kubeprism_env()),
    )
    .await
    .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "flux-system");
    eventually(10, "pending-install record", || async {
        let s = secrets
            .get("sh.helm.release.v1.flux-operator.v1")
            .await
            .ok()?;
        (s.metadata.labels?.get("status")? == "pending-install").then_some(())
    })
    .await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "default");
    let pod = pods
        .list(&kube::api::ListParams::default().labels("job-name=first"))
        .await
        .unwrap()
        .items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    talos_sim::cluster::kill_pod(sim.store(), "default", &pod).unwrap();
    eventually(10, "first job failed", || async {
        job_condition(&jobs.get("first").await.ok()?, "Failed")
    })
    .await;
    let labels = secrets
        .get("sh.helm.release.v1.flux-operator.v1")
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap();
    assert_eq!(
        labels["status"], "pending-install",
        "the killed run never finished its record"
    );

    let (ok, log) = run_helm(
        &client,
        "second",
        &["install", "flux-operator", chart, "-n", "flux-system"],
    )
    .await;
    assert!(!ok);
    assert!(
        log.contains("Error: INSTALLATION FAILED: cannot re-use a name that is still in use"),
        "{log}"
    );
}

#[tokio::test]
async fn upgrade_supersedes_the_deployed_revision_and_leaves_a_failed_one_failed() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    for (v, status) in [(1, "superseded"), (2, "deployed"), (3, "failed")] {
        secrets
            .create(&PostParams::default(), &record(v, status))
            .await
            .unwrap();
    }
    let (ok, log) = run_helm(
        &client,
        "helm-after-failure",
        &[
            "upgrade",
            "--install",
            "foo",
            "oci://example.com/charts/foo",
            "-n",
            "default",
        ],
    )
    .await;
    assert!(ok, "{log}");
    let mut statuses = Vec::new();
    for v in 1..=4 {
        let name = format!("sh.helm.release.v1.foo.v{v}");
        let rel = release_of(&client, &name).await;
        let label = secrets.get(&name).await.unwrap().metadata.labels.unwrap()["status"].clone();
        assert_eq!(rel.status, label, "record and label agree for v{v}");
        statuses.push(rel.status);
    }
    assert_eq!(
        statuses,
        ["superseded", "superseded", "failed", "deployed"],
        "the deployed v2 is superseded, the failed v3 stays failed"
    );
}

#[tokio::test]
async fn an_upgrade_keeps_the_service_cluster_ip_the_server_assigned() {
    use k8s_openapi::api::core::v1::Service;
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let install = |version: &'static str| {
        [
            "upgrade",
            "--install",
            "flux-operator",
            "oci://ghcr.io/controlplaneio-fluxcd/charts/flux-operator",
            "-n",
            "default",
            "--version",
            version,
        ]
    };
    let (ok, log) = run_helm(&client, "helm-1", &install("0.33.0")).await;
    assert!(ok, "{log}");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let listed = services.list(&Default::default()).await.unwrap();
    let before: Vec<(String, Option<String>)> = listed
        .items
        .iter()
        .map(|s| {
            (
                s.metadata.name.clone().unwrap_or_default(),
                s.spec.as_ref().and_then(|s| s.cluster_ip.clone()),
            )
        })
        .collect();
    assert!(!before.is_empty(), "the chart renders a Service");
    assert!(before.iter().all(|(_, ip)| ip.is_some()), "{before:?}");
    // Helm's three-way merge keeps fields the API server set: no `clusterIP` immutability error.
    let (ok, log) = run_helm(&client, "helm-2", &install("0.34.0")).await;
    assert!(ok, "{log}");
    let after = services.list(&Default::default()).await.unwrap();
    for (name, ip) in before {
        let now = after
            .items
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(name.as_str()))
            .and_then(|s| s.spec.as_ref().and_then(|s| s.cluster_ip.clone()));
        assert_eq!(now, ip, "{name}");
    }
}
