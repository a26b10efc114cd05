//! Two `tofu apply` processes against one cluster at once, one root each, as two teams (or two
//! CI jobs) run them. Different targets run side by side and both converge; runs on the same
//! target are serialized by its Lease (`talosboot-helm-NAMESPACE-NAME`): the second waits, says
//! for whom, and then runs on what the first left.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::ListParams;
use talos_sim::faults::Matcher;

use crate::harness::{REQUIRED_PROVIDERS, TestCluster, TfOutput, Workspace, history};

const CILIUM: &str = "resource \"talosboot_cilium\" \"this\" {\n  version = \"1.18.4\"\n}\n";

const ARGOCD: &str = r#"
resource "talosboot_helm_release" "argocd" {
  name             = "argocd"
  repository       = "https://argoproj.github.io/argo-helm"
  chart            = "argo-cd"
  version          = "9.4.15"
  namespace        = "argocd"
  create_namespace = true
  timeout          = "5m"
  values           = [yamlencode({ configs = { params = { "server.insecure" = true } } })]
}
"#;

const PODINFO: &str = r#"
resource "talosboot_helm_release" "podinfo" {
  name       = "podinfo"
  repository = "oci://ghcr.io/stefanprodan/charts"
  chart      = "podinfo"
  namespace  = "default"
  timeout    = "3m"
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

fn finish(child: std::process::Child) -> TfOutput {
    let out = child.wait_with_output().expect("wait for apply");
    TfOutput {
        success: out.status.success(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The holder of the Lease `name` (in whichever namespace the bootstrap runs), while held.
async fn holder(client: &kube::Client, name: &str) -> Option<String> {
    let leases: Api<Lease> = Api::all(client.clone());
    leases
        .list(&ListParams::default())
        .await
        .ok()?
        .items
        .into_iter()
        .find(|l| l.metadata.name.as_deref() == Some(name))?
        .spec?
        .holder_identity
        .filter(|h| !h.is_empty())
}

async fn talosboot_leases(client: &kube::Client) -> Vec<String> {
    let leases: Api<Lease> = Api::all(client.clone());
    leases
        .list(&ListParams::default())
        .await
        .expect("list leases")
        .items
        .into_iter()
        .filter_map(|l| l.metadata.name)
        .filter(|n| n.starts_with("talosboot-"))
        .collect()
}

on_both_clis!(async cilium_and_argocd_from_two_roots_at_once_both_converge);
async fn cilium_and_argocd_from_two_roots_at_once_both_converge() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let cilium = workspace(&cluster, CILIUM);
    let argocd = workspace(&cluster, ARGOCD);
    // Argo CD's pods need the pod network: its root waits for the CNI the other root installs.
    let a = cilium.start_apply();
    let b = argocd.start_apply();
    let (a, b) = tokio::task::spawn_blocking(move || (finish(a), finish(b)))
        .await
        .expect("join");
    assert!(a.success, "the Cilium root:\n{}", a.text());
    assert!(b.success, "the Argo CD root:\n{}", b.text());
    assert!(!cilium.plan_has_changes(), "the Cilium root plans empty");
    assert!(!argocd.plan_has_changes(), "the Argo CD root plans empty");
    assert_eq!(
        history(&client, "kube-system", "cilium").await,
        BTreeMap::from([(1, "deployed".to_owned())])
    );
    assert_eq!(
        history(&client, "argocd", "argocd").await,
        BTreeMap::from([(1, "deployed".to_owned())])
    );
    assert_eq!(talosboot_leases(&client).await, Vec::<String>::new());
}

on_both_clis!(async two_roots_on_one_release_are_serialized_by_its_lease);
async fn two_roots_on_one_release_are_serialized_by_its_lease() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    workspace(&cluster, CILIUM).apply();
    let first = workspace(&cluster, PODINFO);
    let second = workspace(&cluster, PODINFO);
    // The first run's Job is created 6 s late (the API slow to answer that one request), so the
    // first run holds the Lease, with no release written yet, for longer than the second CLI takes
    // to start and reach its create (a cold machine took more than the Job's own seconds: the
    // second then found the first's release and was rightly refused as a create of a live one).
    let Some(faults) = cluster.faults() else {
        return; // slows one request
    };
    faults.delay_requests(
        Duration::from_secs(6),
        1,
        Matcher {
            path_contains: Some("/jobs".into()),
            verb: Some("POST".into()),
        },
    );
    let a = first.start_apply();
    // The second root starts while the first holds the release's Lease.
    let lease = "talosboot-helm-default-podinfo";
    let deadline = Instant::now() + Duration::from_secs(60);
    let first_holder = loop {
        if let Some(h) = holder(&client, lease).await {
            break h;
        }
        assert!(
            Instant::now() < deadline,
            "the first run never took {lease}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let b = second.start_apply();
    let (a, b) = tokio::task::spawn_blocking(move || (finish(a), finish(b)))
        .await
        .expect("join");
    assert!(a.success, "the first root:\n{}", a.text());
    assert!(
        faults.active().is_empty(),
        "the first run's Job creation was the request slowed: {:?}",
        faults.active()
    );
    let said = b.flat();
    assert!(
        said.contains("Waited")
            && said.contains(&format!("Lease {lease}"))
            && said.contains(&first_holder),
        "the second run waited for the first and says for whom ({first_holder}):\n{}",
        b.text()
    );
    // Then it runs on what the first run left: the release exists, deployed, so its create
    // upgrades that release in place (as a create retried after a lost state does); the runs
    // never overlapped, so Helm saw no operation in progress and left no pending or failed
    // revision.
    assert!(b.success, "the second root:\n{}", b.text());
    assert_eq!(
        history(&client, "default", "podinfo").await,
        BTreeMap::from([(1, "superseded".to_owned()), (2, "deployed".to_owned())]),
        "one revision per run, one after the other"
    );
    assert!(!first.plan_has_changes());
    assert!(!second.plan_has_changes());
    assert_eq!(talosboot_leases(&client).await, Vec::<String>::new());
}
