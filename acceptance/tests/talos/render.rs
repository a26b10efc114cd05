//! The engine's render Job for `rbac = "minimal"` on the real ground: the real `helm template` of
//! the real Cilium chart piped through the real `sed` under `set -o pipefail` (busybox `sh`). It
//! must print only `---`/`apiVersion:`/`kind:` lines (no values, no Secret contents), need no
//! API access, create nothing, and still show Helm's own error when it fails.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

use super::common::{self, from_json};

const NS: &str = "talosboot-system";
/// A value the chart renders into ConfigMap `cilium-config` (`cluster-name`).
const MARKER: &str = "s3cr3t-render-marker";
/// The render Job's container argv as the provider builds it (`chart_rbac`; upgrade of an
/// existing release: `--is-upgrade`).
const RENDER_SCRIPT: &str = "set -o pipefail; helm template 'cilium' 'cilium' '--repo' 'https://helm.cilium.io' '--version' '1.18.4' '--namespace' 'kube-system' '--kube-version' 'v1.33.2' '--api-versions' 'apps/v1' '--api-versions' 'apps/v1/Deployment' '--include-crds' '--is-upgrade' '--values' '/talosboot/inputs/values-0.yaml' '--values' '/talosboot/secrets/sensitive-values-0.yaml' | sed -n -E '/^(---|apiVersion:|kind:)/p'";

/// The bootstrap namespace with the run's inputs and its ServiceAccount, bound to nothing.
async fn inputs(client: &Client) {
    common::privileged_namespace(client, NS).await;
    let post = PostParams::default();
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .create(
            &post,
            &from_json(json!({"metadata": {"name": "render-1"},
                "data": {"values-0.yaml": "ipam:\n  mode: kubernetes\n"}})),
        )
        .await
        .unwrap();
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(
            &post,
            &from_json(json!({"metadata": {"name": "render-1"},
                "stringData": {"sensitive-values-0.yaml": format!("cluster:\n  name: {MARKER}\n")}})),
        )
        .await
        .unwrap();
    Api::<ServiceAccount>::namespaced(client.clone(), NS)
        .create(&post, &from_json(json!({"metadata": {"name": "render-1"}})))
        .await
        .unwrap();
}

fn kubeprism_env() -> Value {
    json!([{"name": "KUBERNETES_SERVICE_HOST", "value": "localhost"},
           {"name": "KUBERNETES_SERVICE_PORT", "value": "7445"},
           {"name": "HOME", "value": "/tmp"}])
}

/// The render Job (shaped like the engine's) running `sh -c script`.
fn render_job(name: &str, script: &str, env: Value) -> Job {
    from_json(json!({
        "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "activeDeadlineSeconds": 600, "template": {"spec": {
            "serviceAccountName": "render-1", "restartPolicy": "Never", "hostNetwork": true,
            "dnsPolicy": "Default", "enableServiceLinks": false,
            "tolerations": [{"operator": "Exists"}],
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "volumes": [{"name": "inputs", "configMap": {"name": "render-1"}},
                        {"name": "secrets", "secret": {"secretName": "render-1"}},
                        {"name": "tmp", "emptyDir": {}}],
            "containers": [{"name": "render", "image": "alpine/helm:3.18.4",
                "command": ["sh", "-c", script], "env": env,
                "volumeMounts": [{"name": "inputs", "mountPath": "/talosboot/inputs", "readOnly": true},
                                 {"name": "secrets", "mountPath": "/talosboot/secrets", "readOnly": true},
                                 {"name": "tmp", "mountPath": "/tmp"}],
                "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                    "capabilities": {"drop": ["ALL"]}}}]}}}
    }))
}

/// Runs the Job to its end: (succeeded, log).
async fn run(client: &kube::Client, job: Job) -> (bool, String) {
    common::run_job(client, NS, &job, 120).await
}

/// The (apiVersion, kind) of each `---` document; panics on any other line.
fn kinds(log: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for doc in log.split("---\n").filter(|d| !d.is_empty()) {
        let (mut api_version, mut kind) = (None, None);
        for line in doc.lines() {
            match line.split_once(": ") {
                Some(("apiVersion", v)) => api_version = Some(v.to_string()),
                Some(("kind", k)) => kind = Some(k.to_string()),
                _ => panic!("unexpected line {line:?} in {log}"),
            }
        }
        out.insert((api_version.expect("apiVersion"), kind.expect("kind")));
    }
    out
}

fn pair(api_version: &str, kind: &str) -> (String, String) {
    (api_version.to_string(), kind.to_string())
}

/// Nothing of the chart and no release record of it exists (the shared cluster holds other
/// tests' releases).
async fn nothing_created(client: &Client) {
    let records = Api::<Secret>::all(client.clone())
        .list(&ListParams::default().labels("owner=helm,name=cilium"))
        .await
        .unwrap();
    assert!(records.items.is_empty(), "release records were written");
    let ds = Api::<DaemonSet>::namespaced(client.clone(), "kube-system");
    assert!(ds.get_opt("cilium").await.unwrap().is_none());
    let cms = Api::<ConfigMap>::namespaced(client.clone(), "kube-system");
    assert!(cms.get_opt("cilium-config").await.unwrap().is_none());
    let sas = Api::<ServiceAccount>::namespaced(client.clone(), "kube-system");
    assert!(sas.get_opt("cilium").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_render_job_prints_only_kinds_needs_no_api_and_fails_with_helms_error() {
    let (_cluster, client) = common::shared().await;
    inputs(&client).await;

    // Only the kinds, no values: the sensitive marker stays out of the log.
    let (ok, log) = run(
        &client,
        render_job("render", RENDER_SCRIPT, kubeprism_env()),
    )
    .await;
    assert!(ok, "{log}");
    assert!(log.lines().any(|l| l == "kind: DaemonSet"), "{log}");
    assert!(!log.contains("# Source:") && !log.contains(MARKER), "{log}");
    let rbac = "rbac.authorization.k8s.io/v1";
    let want: BTreeSet<_> = [
        pair("v1", "ServiceAccount"),
        pair("v1", "ConfigMap"),
        pair("v1", "Service"),
        pair(rbac, "ClusterRole"),
        pair(rbac, "ClusterRoleBinding"),
        pair(rbac, "Role"),
        pair(rbac, "RoleBinding"),
        pair("apps/v1", "DaemonSet"),
        pair("apps/v1", "Deployment"),
    ]
    .into();
    assert_eq!(kinds(&log), want, "{log}");
    nothing_created(&client).await;
    // The control: unfiltered, the chart does render the sensitive value.
    let unfiltered = RENDER_SCRIPT.split(" | sed").next().unwrap();
    let (ok, log) = run(
        &client,
        render_job("unfiltered", unfiltered, kubeprism_env()),
    )
    .await;
    assert!(ok, "{log}");
    assert!(
        log.contains(&format!("cluster-name: \"{MARKER}\"")),
        "{log:.2000}"
    );
    assert!(log.contains("# Source: cilium/templates/"), "{log:.2000}");

    // No reachable API needed: the kubelet's default endpoint (the Service IP) is unreachable
    // before the CNI, and the render still works; `--validate` is what would need it.
    let home = json!([{"name": "HOME", "value": "/tmp"}]);
    let (ok, log) = run(&client, render_job("offline", RENDER_SCRIPT, home.clone())).await;
    assert!(ok, "{log}");
    assert!(kinds(&log).contains(&pair("apps/v1", "DaemonSet")), "{log}");
    let validating = RENDER_SCRIPT.replace("'--is-upgrade'", "'--is-upgrade' '--validate'");
    let (ok, log) = run(&client, render_job("validate", &validating, home)).await;
    assert!(!ok, "{log}");
    assert!(
        log.contains("Error: Kubernetes cluster unreachable: Get \"https://10.96.0.1:443/version\": dial tcp 10.96.0.1:443: i/o timeout"),
        "{log}"
    );
    nothing_created(&client).await;

    // A failing render: Helm's own error, and the Job fails through pipefail.
    let missing = RENDER_SCRIPT.replace("values-0.yaml", "missing.yaml");
    let (ok, log) = run(&client, render_job("missing", &missing, kubeprism_env())).await;
    assert!(!ok, "{log}");
    assert_eq!(
        log,
        "Error: open /talosboot/inputs/missing.yaml: no such file or directory\n"
    );
    // Without pipefail the pipeline's status is sed's: the Job would pass with nothing rendered.
    let no_pipefail = missing.replace("set -o pipefail; ", "");
    let (ok, log) = run(
        &client,
        render_job("no-pipefail", &no_pipefail, kubeprism_env()),
    )
    .await;
    assert!(ok, "{log}");
    assert!(
        log.starts_with("Error: open /talosboot/inputs/missing.yaml"),
        "{log}"
    );
    let unknown = RENDER_SCRIPT.replace("'--include-crds'", "'--include-crd'");
    let (ok, log) = run(
        &client,
        render_job("unknown-flag", &unknown, kubeprism_env()),
    )
    .await;
    assert!(!ok, "{log}");
    assert_eq!(log, "Error: unknown flag: --include-crd\n");
}
