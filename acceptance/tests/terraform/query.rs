//! Resource identity and `terraform query` with HashiCorp Terraform 1.16 (Terraform-only by
//! design: OpenTofu 1.12 has neither list resources nor `terraform query`, opentofu#3787):
//! - releases installed by Helm directly (a Cilium and a podinfo with a password) are listed with
//!   their identities; `-generate-config-out` writes a `talosboot_cilium` and a
//!   `talosboot_helm_release` block with an import block by identity each, credentials left out;
//!   after the user fills in the repository and the password, the apply imports both without a new
//!   Helm revision, and the next plan is empty;
//! - `import { identity = {...} }` imports like the import ID, and plans stay stable.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams};

use crate::cilium::{NS, helm_by_hand, root};
use crate::harness::{Cli, TestCluster, TfOutput, Workspace};

/// The password given to the podinfo release by hand: it must never reach a generated file.
const PASSWORD: &str = "QUERY-PASSWORD-must-not-leak";

/// The newest revision of each Helm release in the cluster, by `namespace/name`.
async fn revisions(client: &kube::Client) -> BTreeMap<String, i64> {
    let secrets: Api<Secret> = Api::all(client.clone());
    let records = secrets
        .list_metadata(&ListParams::default().labels("owner=helm"))
        .await
        .expect("list records");
    let mut newest = BTreeMap::new();
    for r in records.items {
        let labels = r.metadata.labels.unwrap_or_default();
        let key = format!(
            "{}/{}",
            r.metadata.namespace.unwrap_or_default(),
            labels["name"]
        );
        let revision: i64 = labels["version"].parse().expect("revision label");
        let entry = newest.entry(key).or_insert(revision);
        *entry = (*entry).max(revision);
    }
    newest
}

fn terraform(cluster: &TestCluster, body: &str) -> Workspace {
    let ws = Workspace::with_cli(Cli::Terraform, &root(cluster, body));
    ws.init();
    ws
}

/// `terraform query` with `args`, expected to succeed.
fn query(ws: &Workspace, args: &[&str]) -> TfOutput {
    let mut all = vec!["query", "-no-color"];
    all.extend(args);
    ws.ok(&all)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn query_lists_releases_installed_by_helm_and_the_generated_config_adopts_them() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    helm_by_hand(
        &client,
        &[
            "install",
            "cilium",
            "cilium",
            "--repo",
            "https://helm.cilium.io",
            "--version",
            "1.18.4",
            "-n",
            NS,
            // Talos' values, so that this Cilium runs and gives the pods their network.
            "--set",
            "cgroup.autoMount.enabled=false",
            "--set",
            "cgroup.hostRoot=/sys/fs/cgroup",
            "--set",
            "k8sServiceHost=localhost",
            "--set",
            "k8sServicePort=7445",
            "--set",
            "kubeProxyReplacement=true",
            "--set",
            "securityContext.capabilities.ciliumAgent={CHOWN,KILL,NET_ADMIN,NET_RAW,IPC_LOCK,SYS_ADMIN,SYS_RESOURCE,DAC_OVERRIDE,FOWNER,SETGID,SETUID}",
            "--set",
            "securityContext.capabilities.cleanCiliumState={NET_ADMIN,SYS_ADMIN,SYS_RESOURCE}",
            "--set",
            "hubble.relay.enabled=true",
        ],
    )
    .await;
    let password = format!("auth.password={PASSWORD}");
    helm_by_hand(
        &client,
        &[
            "install",
            "podinfo",
            "oci://ghcr.io/stefanprodan/charts/podinfo",
            "--version",
            "6.8.0",
            "-n",
            "apps",
            "--create-namespace",
            "--set",
            "replicaCount=2",
            "--set",
            "auth.user=admin",
            "--set",
            &password,
        ],
    )
    .await;
    let before = revisions(&client).await;
    assert_eq!(before.get("apps/podinfo"), Some(&1), "{before:?}");
    assert_eq!(before.get("kube-system/cilium"), Some(&1), "{before:?}");

    let ws = terraform(&cluster, "");
    // The registry examples as a user copies them, the Helm one widened to every namespace.
    let examples = crate::harness::repo_root().join("examples/list-resources");
    let example = |name: &str| {
        std::fs::read_to_string(examples.join(name).join("list-resource.tfquery.hcl"))
            .expect("list-resource example")
    };
    let releases = example("talosboot_helm_release");
    let every_namespace = releases.replace("    namespace = \"apps\"\n", "");
    assert_ne!(releases, every_namespace, "the example sets a namespace");
    ws.write("releases.tfquery.hcl", &every_namespace);
    ws.write("cilium.tfquery.hcl", &example("talosboot_cilium"));

    // Every namespace when `namespace` is unset; Cilium is listed by its own type.
    let listed = query(&ws, &[]);
    let text = listed.flat();
    assert!(
        text.contains("apps/podinfo (podinfo 6.8.0, revision 1)"),
        "{}",
        listed.text()
    );
    assert!(
        text.contains("kube-system/cilium (cilium 1.18.4, revision 1)"),
        "{}",
        listed.text()
    );
    assert!(
        text.contains("Releases listed by another list type")
            && text.contains("kube-system/cilium (`list \"talosboot_cilium\"`)"),
        "the helm_release list says where the Cilium release went:\n{}",
        listed.text()
    );
    let json = query(&ws, &["-json"]);
    let identities: Vec<serde_json::Value> = json
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["type"] == "list_resource_found")
        .map(|m| m["list_resource_found"]["identity"].clone())
        .collect();
    assert!(
        identities.contains(&serde_json::json!({"namespace": "apps", "name": "podinfo"}))
            && identities
                .contains(&serde_json::json!({"namespace": "kube-system", "name": "cilium"})),
        "identities: {identities:?}\n{}",
        json.stdout
    );

    query(&ws, &["-generate-config-out=generated.tf"]);
    let generated = ws.read("generated.tf");
    let flat = generated.split_whitespace().collect::<Vec<_>>().join(" ");
    for expected in [
        r#"resource "talosboot_helm_release" "releases_0""#,
        r#"chart = "podinfo""#,
        r#"version = "6.8.0""#,
        r#"name = "podinfo""#,
        r#"namespace = "apps""#,
        "replicaCount: 2",
        "user: admin",
        "Left out, as they may be credentials (give each in set_wo): auth.password",
        r#"name = "auth.password""#,
        "value = null # sensitive",
        "FILL IN the chart repository",
        r#"resource "talosboot_cilium" "cni_0""#,
        r#"version = "1.18.4""#,
        "talos_defaults = false",
        "relay:",
        r#"to = talosboot_helm_release.releases_0"#,
        r#"to = talosboot_cilium.cni_0"#,
        "identity = {",
    ] {
        assert!(
            flat.contains(expected),
            "{expected:?} missing:\n{generated}"
        );
    }
    assert!(
        !generated.contains(PASSWORD),
        "a credential reached the generated file:\n{generated}"
    );
    assert!(
        !generated.contains("id = \""),
        "imports use identity, not the import ID:\n{generated}"
    );

    // As generated, plan refuses the one line a Helm record cannot fill in.
    let refused = ws.run(&["plan", "-no-color", "-input=false"]);
    assert!(!refused.success, "{}", refused.text());
    assert!(
        refused.flat().contains("Invalid repository") && refused.flat().contains("repository"),
        "{}",
        refused.text()
    );

    // The user fills in the repository and gives the password from a variable.
    let filled = generated
        .replace(
            &format!(
                "\"{}\"",
                talosboot::resources::release::list::REPOSITORY_TO_FILL_IN
            ),
            "\"oci://ghcr.io/stefanprodan/charts\"",
        )
        .replace("value = null # sensitive", "value = var.podinfo_password");
    ws.write("generated.tf", &filled);
    ws.write(
        "variables.tf",
        "variable \"podinfo_password\" {\n  type      = string\n  sensitive = true\n  ephemeral = true\n}\n",
    );
    let var = format!("podinfo_password={PASSWORD}");
    let plan = ws.ok(&["plan", "-no-color", "-input=false", "-var", &var]);
    assert!(
        plan.stdout.contains("2 to import, 0 to add") && plan.stdout.contains("0 to destroy"),
        "{}",
        plan.text()
    );
    // The repository the user filled in is recorded, not planned as an upgrade (a release
    // record never keeps it): no new revision is promised.
    assert!(
        !plan
            .stdout
            .lines()
            .any(|l| l.contains("revision") && l.contains("(known after apply)")),
        "the import plans no Helm upgrade:\n{}",
        plan.text()
    );
    let apply = ws.ok(&[
        "apply",
        "-auto-approve",
        "-no-color",
        "-input=false",
        "-var",
        &var,
    ]);
    assert!(
        apply.stdout.contains("2 imported, 0 added"),
        "{}",
        apply.text()
    );
    assert_eq!(
        revisions(&client).await,
        before,
        "adopting changes nothing running: no new Helm revision"
    );
    let again = ws.ok(&[
        "plan",
        "-no-color",
        "-input=false",
        "-var",
        &var,
        "-detailed-exitcode",
    ]);
    assert_eq!(
        again.code,
        Some(0),
        "the next plan is empty:\n{}",
        again.text()
    );
    let state = ws.state_text();
    assert!(!state.contains(PASSWORD), "the password reached the state");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn import_by_identity_adopts_a_release_and_plans_stay_stable() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    helm_by_hand(
        &client,
        &[
            "install",
            "podinfo",
            "oci://ghcr.io/stefanprodan/charts/podinfo",
            "--version",
            "6.8.0",
            "-n",
            "apps",
            "--create-namespace",
            "--set",
            "replicaCount=2",
        ],
    )
    .await;
    let ws = terraform(
        &cluster,
        r#"
import {
  to       = talosboot_helm_release.podinfo
  identity = {
    namespace = "apps"
    name      = "podinfo"
  }
}

resource "talosboot_helm_release" "podinfo" {
  name       = "podinfo"
  namespace  = "apps"
  repository = "oci://ghcr.io/stefanprodan/charts"
  chart      = "podinfo"
  version    = "6.8.0"
  values     = [yamlencode({ replicaCount = 2 })]
  # No CNI runs in this cluster: the pods never start, and readiness is not what is tested.
  wait = false
}
"#,
    );
    let plan = ws.ok(&["plan", "-no-color", "-input=false"]);
    assert!(plan.stdout.contains("1 to import"), "{}", plan.text());
    let apply = ws.apply();
    assert!(apply.stdout.contains("1 imported"), "{}", apply.text());
    assert_eq!(revisions(&client).await.get("apps/podinfo"), Some(&1));

    // The identity Terraform stored is the release's, and two plans in a row keep it.
    let identity = |ws: &Workspace| {
        let show = ws.ok(&["show", "-json"]).json();
        show["values"]["root_module"]["resources"][0]["identity"].clone()
    };
    let stored = identity(&ws);
    assert_eq!(
        stored,
        serde_json::json!({"namespace": "apps", "name": "podinfo"}),
        "{stored}"
    );
    for _ in 0..2 {
        let again = ws.ok(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]);
        assert_eq!(again.code, Some(0), "{}", again.text());
        ws.ok(&["apply", "-refresh-only", "-auto-approve", "-no-color"]);
        assert_eq!(identity(&ws), stored);
    }

    // An identity without the name is refused at the attribute, before any cluster call.
    let missing = terraform(
        &cluster,
        r#"
import {
  to       = talosboot_helm_release.other
  identity = {
    namespace = "apps"
  }
}

resource "talosboot_helm_release" "other" {
  name  = "other"
  chart = "podinfo"
}
"#,
    );
    let refused = missing.run(&["plan", "-no-color", "-input=false"]);
    assert!(!refused.success, "{}", refused.text());
    assert!(refused.flat().contains("name"), "{}", refused.text());
}
