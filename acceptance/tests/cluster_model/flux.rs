//! The Flux Operator: installed by Helm after Cilium, it turns a FluxInstance into controllers.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

use crate::common::*;

fn fluxinstances(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("fluxcd.controlplane.io", "v1", "FluxInstance"),
        "fluxinstances",
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}

fn instance(url: &str) -> DynamicObject {
    from_json(
        json!({"apiVersion": "fluxcd.controlplane.io/v1", "kind": "FluxInstance", "metadata": {"name": "flux"},
        "spec": {"distribution": {"version": "2.x", "registry": "ghcr.io/fluxcd"},
            "components": ["source-controller", "kustomize-controller", "helm-controller"],
            "sync": {"kind": "GitRepository", "url": url, "ref": "refs/heads/main", "path": "clusters/prod"}}}),
    )
}

async fn ready_condition(api: &Api<DynamicObject>, want: &str) -> Value {
    eventually(20, &format!("FluxInstance Ready={want}"), || async {
        let fi = api.get("flux").await.ok()?;
        let conds = fi.data.pointer("/status/conditions")?.as_array()?.clone();
        conds
            .into_iter()
            .find(|c| c["type"] == "Ready" && c["status"] == want)
    })
    .await
}

#[tokio::test]
async fn flux_operator_after_cilium_makes_a_flux_instance_ready() {
    let (sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    bootstrap_cilium(&client).await;
    let helm: Vec<String> = [
        "helm",
        "upgrade",
        "--install",
        "flux-operator",
        "oci://ghcr.io/controlplaneio-fluxcd/charts/flux-operator",
        "--namespace",
        "flux-system",
        "--create-namespace",
        "--wait",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let job = bootstrap_job(
        "flux-operator-bootstrap",
        "ghcr.io/controlplaneio-fluxcd/flux-operator-bootstrap:v0.8.0",
        &helm,
        kubeprism_env(),
    );
    let done = run_job(&client, "default", &job, 30).await;
    assert!(
        job_condition(&done, "Complete").is_some(),
        "{}",
        job_log(&client, "default", "flux-operator-bootstrap").await
    );

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.get("fluxinstances.fluxcd.controlplane.io")
        .await
        .expect("FluxInstance CRD installed");
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "flux-system");
    let op = deploys.get("flux-operator").await.unwrap();
    assert_eq!(
        op.status.and_then(|s| s.available_replicas),
        Some(1),
        "--wait waited for the operator"
    );
    eventually(10, "Flux CRDs served", || async {
        crds.get("gitrepositories.source.toolkit.fluxcd.io")
            .await
            .ok()
    })
    .await;

    let fis = fluxinstances(&client, "flux-system");
    fis.create(
        &PostParams::default(),
        &instance("https://github.com/example/infra.git"),
    )
    .await
    .unwrap();
    let ready = ready_condition(&fis, "True").await;
    assert_eq!(ready["reason"], "ReconciliationSucceeded");
    for c in [
        "source-controller",
        "kustomize-controller",
        "helm-controller",
    ] {
        let d = deploys.get(c).await.unwrap();
        assert_eq!(
            d.metadata.labels.unwrap()["app.kubernetes.io/managed-by"],
            "flux-operator"
        );
    }
    assert!(
        deploys
            .get_opt("notification-controller")
            .await
            .unwrap()
            .is_none(),
        "not in spec.components"
    );
    let gr = talos_sim::store::GroupResource::new("apps", "deployments");
    talos_sim::cluster::mark_adopted_by_flux(sim.store(), &gr, "flux-system", "flux-operator")
        .unwrap();
    let labels = deploys
        .get("flux-operator")
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap();
    assert_eq!(labels["kustomize.toolkit.fluxcd.io/name"], "flux-system");
    assert_eq!(
        labels["kustomize.toolkit.fluxcd.io/namespace"],
        "flux-system"
    );

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": "flux-other"}})),
        )
        .await
        .unwrap();
    let other = fluxinstances(&client, "flux-other");
    other
        .create(
            &PostParams::default(),
            &instance("https://unreachable.example.com/infra.git"),
        )
        .await
        .unwrap();
    let failed = ready_condition(&other, "False").await;
    assert_eq!(failed["reason"], "ArtifactFailed");
    assert!(
        failed["message"]
            .as_str()
            .unwrap_or("")
            .contains("unable to clone 'https://unreachable.example.com/infra.git'"),
        "{failed}"
    );
}
