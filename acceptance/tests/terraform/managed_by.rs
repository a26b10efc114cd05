//! A release another tool took over is left to it, one test per tool and mark: Argo CD 3's
//! tracking annotation, Argo CD's instance label, Flux's helm-controller, a Flux Kustomization and
//! the Flux Operator. The marks land on the release's Deployment after talosboot installed it;
//! then a value changes in the root and `apply -refresh=false` (a plan made without reading the
//! cluster, which promised an upgrade) must still leave the release alone, deciding on its fresh
//! read: it fails naming the tool, with the state unchanged; the next plan (with a refresh) names
//! the tool too and records the configuration without an upgrade.

use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::harness::{REQUIRED_PROVIDERS, TestCluster, Workspace, history};

const LEFT_ALONE: &str = "Release managed by GitOps";

/// A podinfo release in `namespace`, not waited for (the shared cluster has no CNI, and only the
/// Deployment's marks matter here).
fn root(cluster: &TestCluster, namespace: &str, replicas: u32) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
{}
resource "talosboot_helm_release" "podinfo" {{
  name             = "podinfo"
  repository       = "oci://ghcr.io/stefanprodan/charts"
  chart            = "podinfo"
  version          = "6.9.2"
  namespace        = "{namespace}"
  create_namespace = true
  wait             = false
  values           = [yamlencode({{ replicaCount = {replicas} }})]
}}
"#,
        cluster.provider_block()
    )
}

/// Installs, marks the Deployment with `metadata` (labels and annotations), changes a value and
/// checks that neither a stale plan nor a fresh one upgrades, each naming `manager`.
async fn left_to(prefix: &str, metadata: impl Fn(&str) -> serde_json::Value, manager: &str) {
    // One namespace per run and CLI: both CLIs' variants share the cluster.
    let namespace = &crate::unique(prefix);
    let metadata = metadata(namespace);
    let cluster = TestCluster::shared().await;
    let client = cluster.client().await;
    let ws = Workspace::new(&root(&cluster, namespace, 1));
    ws.init();
    ws.apply();
    assert_eq!(history(&client, namespace, "podinfo").await.len(), 1);

    Api::<Deployment>::namespaced(client.clone(), namespace)
        .patch(
            "podinfo",
            &PatchParams::default(),
            &Patch::Merge(&json!({ "metadata": metadata })),
        )
        .await
        .expect("mark the Deployment");
    ws.write("main.tf", &root(&cluster, namespace, 2));

    // The plan behind this apply never read the cluster and promised an upgrade: the apply's
    // own read sees the tool and refuses, changing nothing, naming it.
    let stale = ws.run(&["apply", "-refresh=false", "-auto-approve", "-no-color"]);
    let text = stale.flat();
    assert!(!stale.success, "{text}");
    assert!(
        text.contains(LEFT_ALONE) && text.contains(manager) && text.contains("run `plan` again"),
        "names {manager}: {text}"
    );
    assert_eq!(
        history(&client, namespace, "podinfo").await.len(),
        1,
        "no Helm upgrade ran: {text}"
    );

    let plan = ws.ok(&["plan", "-no-color"]);
    let text = plan.flat();
    assert!(
        text.contains(LEFT_ALONE) && text.contains(manager),
        "the refreshed plan names {manager}: {text}"
    );
    let applied = ws.apply();
    assert_eq!(
        history(&client, namespace, "podinfo").await.len(),
        1,
        "still no upgrade: {}",
        applied.text()
    );
}

on_both_clis!(async argo_cd_3_tracking_annotation);
async fn argo_cd_3_tracking_annotation() {
    left_to(
        "owned-argocd3",
        |ns| {
            json!({"annotations": {
                "argocd.argoproj.io/tracking-id": format!("podinfo:apps/Deployment:{ns}/podinfo")
            }})
        },
        "Argo CD Application \"podinfo\"",
    )
    .await;
}

on_both_clis!(async argo_cd_instance_label);
async fn argo_cd_instance_label() {
    left_to(
        "owned-argocd-label",
        |_| json!({"labels": {"argocd.argoproj.io/instance": "apps"}}),
        "Argo CD Application \"apps\"",
    )
    .await;
}

on_both_clis!(async flux_helm_controller);
async fn flux_helm_controller() {
    left_to(
        "owned-helmrelease",
        |_| {
            json!({"labels": {
                "helm.toolkit.fluxcd.io/name": "podinfo",
                "helm.toolkit.fluxcd.io/namespace": "flux-system",
            }})
        },
        "Flux HelmRelease \"flux-system/podinfo\"",
    )
    .await;
}

on_both_clis!(async flux_kustomization);
async fn flux_kustomization() {
    left_to(
        "owned-kustomization",
        |_| {
            json!({"labels": {
                "kustomize.toolkit.fluxcd.io/name": "apps",
                "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
            }})
        },
        "Flux Kustomization \"flux-system/apps\"",
    )
    .await;
}

on_both_clis!(async flux_operator);
async fn flux_operator() {
    left_to(
        "owned-flux-operator",
        |_| {
            json!({"labels": {
                "fluxcd.controlplane.io/name": "flux",
                "fluxcd.controlplane.io/namespace": "flux-system",
            }})
        },
        "the Flux Operator (FluxInstance \"flux-system/flux\")",
    )
    .await;
}
