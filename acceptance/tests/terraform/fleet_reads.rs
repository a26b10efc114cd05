//! Reads of a fleet: the data source and the list resources through their own `cluster`, the
//! provider block pointing at another cluster.
//! - `data "talosboot_helm_release"` with a `cluster { config_path, config_context,
//!   api_retry_timeout }` block reads the release record of a second embedded cluster, beside one read
//!   through the provider's connection (the first cluster holds a record of the same name with
//!   another revision, so a read of the wrong cluster shows); the state keeps none of the
//!   `cluster` settings and no credential, nor does the plan JSON;
//! - a credential in a read's `cluster` (here an ephemeral token, as a vault would give it) is
//!   refused at validation, naming `cluster.token`, on both CLIs; the token appears nowhere;
//! - a transient API error (500) on the data source's read of the release records is retried
//!   within the connection's budget, not the plan's failure;
//! - `terraform query` (Terraform 1.16 only: OpenTofu 1.12 has no list resources) lists the
//!   second cluster's releases through the list's `cluster`, warns that generated import blocks
//!   use the provider's connection, and refuses a credential before `query -json` could print
//!   it (it prints a list's whole `config` as `input_config`).

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ObjectMeta, PostParams};

use talos_sim::faults::Matcher;

use crate::fleet::credential;
use crate::harness::{Cli, REQUIRED_PROVIDERS, TestCluster, Workspace};

/// The token a user might put in a read's `cluster`: it must never reach any output.
const TOKEN: &str = "READ-TOKEN-MARKER-must-not-leak";

/// Creates `namespace` on `client`'s cluster with a record of release `podinfo` (chart
/// `podinfo`) at `revision`, `status`.
async fn seed(client: &kube::Client, namespace: &str, revision: i64, status: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let record = crate::chart_release_secret(
        "podinfo",
        "podinfo",
        namespace,
        revision,
        status,
        true,
        serde_json::json!({"replicaCount": revision}),
    );
    secrets
        .create(&PostParams::default(), &record)
        .await
        .expect("seed release record");
}

/// The current context a kubeconfig names.
fn current_context(kubeconfig: &str) -> String {
    kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("current-context:"))
        .map(|c| c.trim().trim_matches('"').to_owned())
        .expect("the kubeconfig names its current context")
}

/// Two clusters: the provider's (shared) and a second one, each with its own `podinfo` record in
/// one namespace: revision 1 (`failed`) on the first, 3 (`deployed`) on the second.
struct TwoClusters {
    first: TestCluster,
    second: TestCluster,
    namespace: String,
    second_kubeconfig: String,
}

async fn two_clusters() -> TwoClusters {
    let first = TestCluster::shared().await;
    let second = TestCluster::start().await;
    let namespace = crate::unique("tb-reads");
    seed(&first.client().await, &namespace, 1, "failed").await;
    seed(&second.client().await, &namespace, 3, "deployed").await;
    let second_kubeconfig =
        std::fs::read_to_string(&second.kubeconfig_path).expect("read the kubeconfig");
    TwoClusters {
        first,
        second,
        namespace,
        second_kubeconfig,
    }
}

on_both_clis!(async the_data_source_reads_a_second_cluster_through_its_kubeconfig_file);
async fn the_data_source_reads_a_second_cluster_through_its_kubeconfig_file() {
    let clusters = two_clusters().await;
    let (namespace, path) = (
        &clusters.namespace,
        clusters.second.kubeconfig_path.display(),
    );
    let context = current_context(&clusters.second_kubeconfig);
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
{provider}
data "talosboot_helm_release" "first" {{
  name      = "podinfo"
  namespace = "{namespace}"
}}

data "talosboot_helm_release" "second" {{
  name      = "podinfo"
  namespace = "{namespace}"
  cluster {{
    config_path       = "{path}"
    config_context    = "{context}"
    api_retry_timeout = "10s"
  }}
}}

output "first"  {{ value = "${{data.talosboot_helm_release.first.status}}/${{data.talosboot_helm_release.first.revision}}" }}
output "second" {{ value = "${{data.talosboot_helm_release.second.status}}/${{data.talosboot_helm_release.second.revision}}" }}
"#,
        provider = clusters.first.provider_block()
    ));
    ws.init();
    let plan = ws.ok(&["plan", "-no-color", "-input=false", "-out=tfplan"]);
    let plan_json = ws.ok(&["show", "-json", "tfplan"]).stdout;
    // Values only: the plan JSON's `configuration` echoes the source's literal expressions as
    // written (this path, and the provider block's own).
    let mut plan_values: serde_json::Value = serde_json::from_str(&plan_json).expect("plan json");
    plan_values
        .as_object_mut()
        .and_then(|p| p.remove("configuration"))
        .expect("the plan JSON has a configuration");
    let plan_values = plan_values.to_string();
    let apply = ws.ok(&[
        "apply",
        "-auto-approve",
        "-no-color",
        "-input=false",
        "tfplan",
    ]);
    let outputs = ws.outputs();
    assert_eq!(
        outputs["first"]["value"],
        "failed/1",
        "the provider's cluster:\n{}",
        apply.text()
    );
    assert_eq!(
        outputs["second"]["value"],
        "deployed/3",
        "the second cluster, through `cluster`:\n{}",
        apply.text()
    );
    let state = ws.state_text();
    let secret = credential(&clusters.second_kubeconfig);
    assert!(
        !plan_json.contains(&secret),
        "a credential in the plan JSON"
    );
    let path = path.to_string();
    for (what, text) in [
        ("state", state.as_str()),
        ("plan JSON's values", plan_values.as_str()),
        ("plan output", &plan.text()),
    ] {
        assert!(!text.contains(&secret), "a credential in the {what}");
        assert!(
            !text.contains(&path),
            "the write-only `cluster.config_path` in the {what}"
        );
    }
    let stored: serde_json::Value = serde_json::from_str(&state).expect("state json");
    let second = stored["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "second"))
        .expect("the second data source in state");
    let settings = second["instances"][0]["attributes"]["cluster"]
        .as_object()
        .expect("`cluster` keeps its shape");
    assert!(
        settings.values().all(serde_json::Value::is_null),
        "every `cluster` setting is null in state: {settings:?}"
    );

    // A credential is refused at validation, on its path, and never echoed.
    ws.write(
        "credential.tf",
        &format!(
            r#"variable "token" {{
  type      = string
  sensitive = true
  ephemeral = true
}}

data "talosboot_helm_release" "with_token" {{
  name      = "podinfo"
  namespace = "{namespace}"
  cluster {{
    host  = "https://127.0.0.1:6443"
    token = var.token
  }}
}}
"#
        ),
    );
    let refused = ws.run(&[
        "plan",
        "-no-color",
        "-input=false",
        &format!("-var=token={TOKEN}"),
    ]);
    let text = refused.flat();
    assert!(!refused.success, "{text}");
    assert!(
        text.contains("Connection setting not accepted by a read")
            && text.contains("`cluster.token` is refused here")
            && text.contains("`cluster.host` is refused here"),
        "{text}"
    );
    assert!(!text.contains(TOKEN), "the refused token is echoed: {text}");
}

on_both_clis!(async the_data_source_retries_a_transient_api_error_before_failing_the_plan);
async fn the_data_source_retries_a_transient_api_error_before_failing_the_plan() {
    let cluster = TestCluster::start().await;
    let Some(faults) = cluster.faults() else {
        return; // injects faults
    };
    let namespace = crate::unique("tb-reads");
    seed(&cluster.client().await, &namespace, 2, "deployed").await;
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
{provider}
data "talosboot_helm_release" "this" {{
  name      = "podinfo"
  namespace = "{namespace}"
}}

output "release" {{ value = "${{data.talosboot_helm_release.this.status}}/${{data.talosboot_helm_release.this.revision}}" }}
"#,
        provider = cluster.provider_block()
    ));
    ws.init();
    // An apiserver restarting behind a load balancer answers 500 for a moment (kube's client
    // retries 429, 503 and 504 by itself, never a 500): the read of the release records retries
    // within the connection's budget.
    faults.fail_requests(
        500,
        2,
        Matcher::path(&format!("/namespaces/{namespace}/secrets")),
    );
    let apply = ws.ok(&["apply", "-auto-approve", "-no-color", "-input=false"]);
    assert!(
        faults.active().is_empty(),
        "both 500s were answered: {:?}",
        faults.active()
    );
    assert_eq!(
        ws.outputs()["release"]["value"],
        "deployed/2",
        "{}",
        apply.text()
    );
}

/// `terraform query` with `args` in `ws`.
fn query(ws: &Workspace, args: &[&str]) -> crate::harness::TfOutput {
    let mut all = vec!["query", "-no-color"];
    all.extend(args);
    ws.run(&all)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn terraform_query_lists_a_second_cluster_through_the_lists_cluster() {
    let clusters = two_clusters().await;
    let (namespace, path) = (
        &clusters.namespace,
        clusters.second.kubeconfig_path.display(),
    );
    let ws = Workspace::with_cli(
        Cli::Terraform,
        &format!("{REQUIRED_PROVIDERS}\n{}", clusters.first.provider_block()),
    );
    ws.init();
    ws.write(
        "releases.tfquery.hcl",
        &format!(
            r#"list "talosboot_helm_release" "second" {{
  provider = talosboot
  config {{
    namespace = "{namespace}"
    cluster {{
      config_path = "{path}"
    }}
  }}
}}
"#
        ),
    );
    let listed = query(&ws, &[]);
    let text = listed.flat();
    assert!(listed.success, "{text}");
    assert!(
        text.contains(&format!("{namespace}/podinfo (podinfo 1.18.4, revision 3)")),
        "the second cluster's release (revision 3, not the first's 1): {text}"
    );
    let generated = query(&ws, &["-generate-config-out=adopt.tf"]);
    assert!(
        generated
            .flat()
            .contains("Generated import blocks use the provider's connection"),
        "{}",
        generated.text()
    );
    let as_json = ws.run(&["query", "-json"]);
    assert!(
        !as_json
            .stdout
            .contains(&credential(&clusters.second_kubeconfig)),
        "a credential in `query -json`"
    );

    // A credential in the list's `cluster` is refused before `query -json` prints the config.
    ws.write(
        "releases.tfquery.hcl",
        &format!(
            r#"variable "token" {{
  type      = string
  sensitive = true
  ephemeral = true
}}

list "talosboot_helm_release" "second" {{
  provider = talosboot
  config {{
    namespace = "{namespace}"
    cluster {{
      host  = "https://127.0.0.1:6443"
      token = var.token
    }}
  }}
}}
"#
        ),
    );
    let refused = ws.run(&["query", "-json", &format!("-var=token={TOKEN}")]);
    let text = refused.text();
    assert!(!refused.success, "{text}");
    assert!(text.contains("`cluster.token` is refused here"), "{text}");
    assert!(
        !text.contains(TOKEN),
        "the token reached the query's output: {text}"
    );
}
