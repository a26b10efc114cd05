//! `check` blocks and preconditions reading `data.talosboot_helm_release` (OpenTofu 1.5+ /
//! Terraform 1.5+ for `check`; preconditions since 1.2): a failed check is a warning that names
//! the release, a failed precondition stops the plan before anything changes.

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

use crate::harness::{REQUIRED_PROVIDERS, TestCluster, Workspace};

// The CLI runs as a blocking child process while the simulator serves from this runtime.
on_both_clis!(async check_blocks_and_preconditions_read_helm_releases);
async fn check_blocks_and_preconditions_read_helm_releases() {
    let cluster = TestCluster::shared().await;
    let client = cluster.client().await;
    let namespace = super::unique("tb-check");
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
    let seed = |revision: i64, status: &'static str| {
        let secrets = secrets.clone();
        let namespace = namespace.clone();
        async move {
            let values = serde_json::json!({"rev": revision});
            secrets
                .create(
                    &PostParams::default(),
                    &super::release_secret("cilium", &namespace, revision, status, true, values),
                )
                .await
                .expect("seed release record");
        }
    };
    seed(1, "deployed").await;

    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
{provider}
check "cilium_deployed" {{
  data "talosboot_helm_release" "cilium_check" {{
    name      = "cilium"
    namespace = "{namespace}"
  }}
  assert {{
    condition     = data.talosboot_helm_release.cilium_check.status == "deployed"
    error_message = "Cilium is not deployed: its release is ${{data.talosboot_helm_release.cilium_check.status}}."
  }}
}}

check "flux_installed" {{
  data "talosboot_helm_release" "flux" {{
    name      = "flux-operator"
    namespace = "{namespace}"
  }}
  assert {{
    condition     = data.talosboot_helm_release.flux.exists
    error_message = "flux-operator is not installed yet."
  }}
}}

data "talosboot_helm_release" "cni" {{
  name      = "cilium"
  namespace = "{namespace}"
}}

resource "talosboot_test_object" "after_cni" {{
  name = "after-cni"
  lifecycle {{
    precondition {{
      condition     = data.talosboot_helm_release.cni.status == "deployed"
      error_message = "Install Cilium first: release cilium is ${{data.talosboot_helm_release.cni.status}}."
    }}
  }}
}}
"#,
        provider = cluster.provider_block()
    ))
    .with_test_resources();
    ws.init();
    let apply = ws.apply();
    let text = apply.flat();
    assert!(text.contains("1 added, 0 changed, 0 destroyed"), "{text}");
    assert!(
        text.contains("Check block assertion failed")
            && text.contains("flux-operator is not installed yet."),
        "a failed check is a warning:\n{}",
        apply.text()
    );
    assert!(!text.contains("Cilium is not deployed"), "{text}");

    // A newer record that failed: the check warns, the precondition refuses to plan.
    seed(2, "failed").await;
    let plan = ws.run(&["plan", "-no-color", "-input=false"]);
    assert!(!plan.success, "{}", plan.text());
    let text = plan.flat();
    assert!(
        text.contains("Resource precondition failed")
            && text.contains("Install Cilium first: release cilium is failed."),
        "{text}"
    );
    assert!(
        text.contains("Cilium is not deployed: its release is failed."),
        "{text}"
    );

    let _ = namespaces
        .delete(&namespace, &DeleteParams::default())
        .await;
}
