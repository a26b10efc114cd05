//! `talosboot_helm_release` (the resource) with the real OpenTofu CLI against the simulated cluster:
//! the seed 003 root (Argo CD right after Cilium) applies and plans empty; a chart whose pods cannot
//! start reports why and stays in state, tainted; a release left `pending-upgrade` is repaired.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use base64::Engine;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::harness::{REQUIRED_PROVIDERS, TestCluster, Workspace};

const CILIUM: &str = "resource \"talosboot_cilium\" \"this\" {\n  version = \"1.18.4\"\n}\n";

const ARGOCD: &str = r#"
resource "talosboot_helm_release" "argocd" {
  name             = "argocd"
  repository       = "https://argoproj.github.io/argo-helm"
  chart            = "argo-cd"
  version          = "9.4.15"
  namespace        = "argocd"
  create_namespace = true
  depends_on       = [talosboot_cilium.this]

  values = [yamlencode({
    global = {
      domain = "argocd.example.com"
    }
    configs = {
      params = {
        "server.insecure" = true
      }
    }
  })]
}
"#;

fn workspace(cluster: &TestCluster, body: &str) -> Workspace {
    let ws = Workspace::new(&format!(
        "{REQUIRED_PROVIDERS}\n{}\n{body}",
        cluster.provider_block()
    ));
    ws.init();
    ws
}

async fn history(client: &kube::Client, ns: &str, name: &str) -> BTreeMap<i64, String> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let list = secrets
        .list_metadata(&ListParams::default().labels(&format!("owner=helm,name={name}")))
        .await
        .expect("list records");
    list.items
        .into_iter()
        .filter_map(|s| {
            let l = s.metadata.labels?;
            Some((l.get("version")?.parse().ok()?, l.get("status")?.clone()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn argocd_right_after_cilium_applies_and_the_next_plan_is_empty() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let ws = workspace(&cluster, &format!("{CILIUM}{ARGOCD}"));
    ws.apply();
    assert_eq!(
        history(&client, "argocd", "argocd")
            .await
            .values()
            .last()
            .map(String::as_str),
        Some("deployed")
    );
    assert!(!ws.plan_has_changes(), "second plan is empty");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_chart_whose_pods_cannot_start_says_why_and_stays_in_state_tainted() {
    let cluster = TestCluster::start().await;
    if cluster.simulator().is_none() {
        return; // needs a cluster without a CNI
    }
    // No Cilium yet: the operator's pods need the pod network.
    let ws = workspace(
        &cluster,
        r#"
resource "talosboot_helm_release" "operator" {
  name             = "flux-operator"
  chart            = "oci://ghcr.io/controlplaneio-fluxcd/charts/flux-operator"
  version          = "0.33.0"
  namespace        = "flux-system"
  create_namespace = true
  timeout          = "5m"
}
"#,
    );
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success);
    let text = out.flat();
    assert!(
        text.contains("Deployment flux-system/flux-operator"),
        "names the workload: {text}"
    );
    assert!(
        text.contains("untolerated taint {node.kubernetes.io/not-ready"),
        "says why: {text}"
    );
    assert!(text.contains("Diagnosis: no node is Ready"), "{text}");
    assert!(text.contains("depends_on"), "names the fix: {text}");
    assert!(
        ws.state_text().contains("\"status\": \"tainted\""),
        "kept, tainted:\n{}",
        ws.state_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_release_left_pending_upgrade_is_planned_and_repaired() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let ws = workspace(&cluster, &format!("{CILIUM}{ARGOCD}"));
    ws.apply();
    // An upgrade killed half-way: the newest record says pending-upgrade.
    let records = history(&client, "argocd", "argocd").await;
    let (newest, _) = records.iter().last().expect("a record");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "argocd");
    let name = format!("sh.helm.release.v1.argocd.v{newest}");
    let secret = secrets.get(&name).await.expect("record");
    let field = secret.data.expect("data")["release"].0.clone();
    let b64 = base64::engine::general_purpose::STANDARD;
    let gz = b64.decode(field.trim_ascii()).expect("base64");
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gz.as_slice())
        .read_to_end(&mut raw)
        .expect("gunzip");
    let mut record: serde_json::Value = serde_json::from_slice(&raw).expect("json");
    record["info"]["status"] = json!("pending-upgrade");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(record.to_string().as_bytes()).expect("gzip");
    let field = b64.encode(enc.finish().expect("gzip"));
    let patch = json!({"metadata": {"labels": {"status": "pending-upgrade"}}, "data": {"release": b64.encode(field)}});
    secrets
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("mark pending");
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        plan.stdout.contains("will be updated in-place"),
        "{}",
        plan.text()
    );
    let out = ws.apply();
    assert!(
        out.flat().contains("pending-upgrade"),
        "says what it repaired: {}",
        out.text()
    );
    assert_eq!(
        history(&client, "argocd", "argocd")
            .await
            .values()
            .last()
            .map(String::as_str),
        Some("deployed")
    );
    assert!(!ws.plan_has_changes());
}
