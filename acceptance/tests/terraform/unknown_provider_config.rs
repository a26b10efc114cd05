//! The `talos_cluster_kubeconfig` case in full: the provider's settings come from another
//! resource's outputs that are unknown at plan, and one `apply` still plans, creates that resource,
//! configures the provider and reads the cluster. (`plan_without_cluster` pins the plan alone.)

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

use crate::harness::{REQUIRED_PROVIDERS, TestCluster, Workspace};

on_both_clis!(async plans_and_applies_in_one_run, floor);
async fn plans_and_applies_in_one_run() {
    let cluster = TestCluster::shared().await;
    let client = cluster.client().await;
    let namespace = super::unique("tb-unknown");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(namespace.clone()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("create namespace");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let values = serde_json::json!({"k8sServicePort": 7445});
    secrets
        .create(
            &PostParams::default(),
            &super::release_secret("cilium", &namespace, 1, "deployed", true, values),
        )
        .await
        .expect("seed release record");

    // `kubeconfig_raw` is the file's content, but only once null_resource.cluster exists: its id
    // is unknown at plan, so the whole expression is.
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
resource "null_resource" "cluster" {{}}

provider "talosboot" {{
  kubeconfig_raw = trimprefix("${{null_resource.cluster.id}}${{file("{kubeconfig}")}}", null_resource.cluster.id)
}}

data "talosboot_helm_release" "cilium" {{
  name       = "cilium"
  namespace  = "{namespace}"
  depends_on = [null_resource.cluster]
}}

output "status" {{ value = data.talosboot_helm_release.cilium.status }}
"#,
        kubeconfig = cluster.kubeconfig_path.display(),
    ));
    ws.init();
    let apply = ws.apply();
    assert!(
        apply.stdout.contains("1 added, 0 changed, 0 destroyed"),
        "{}",
        apply.text()
    );
    assert_eq!(
        ws.outputs()["status"]["value"],
        "deployed",
        "{}",
        apply.text()
    );
    assert!(!ws.plan_has_changes(), "the second plan is empty");

    let _ = namespaces
        .delete(&namespace, &DeleteParams::default())
        .await;
}
