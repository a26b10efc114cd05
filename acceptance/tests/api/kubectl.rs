//! Debian's kubectl 1.20 against the simulated API server: get, server-side apply, get -o json,
//! logs, delete. Install it with `acceptance/scripts/install-kubectl.sh` (or point
//! `TALOSBOOT_KUBECTL` at a kubectl binary).

use std::path::{Path, PathBuf};
use std::process::Output;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::common::start;

fn kubectl_path() -> PathBuf {
    if let Ok(p) = std::env::var("TALOSBOOT_KUBECTL") {
        return PathBuf::from(p);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".work/kubectl/usr/bin/kubectl")
}

async fn kubectl(bin: &Path, kubeconfig: &Path, args: &[&str]) -> Output {
    tokio::process::Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", kubeconfig.parent().unwrap())
        .output()
        .await
        .expect("kubectl runs")
}

fn ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kubectl failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test]
async fn kubectl_1_20_get_apply_logs_delete() {
    let bin = kubectl_path();
    assert!(
        bin.exists(),
        "kubectl not found at {}: run acceptance/scripts/install-kubectl.sh (installs Debian's kubernetes-client 1.20 into acceptance/.work/kubectl/) or set TALOSBOOT_KUBECTL",
        bin.display()
    );
    let (sim, client) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kc).unwrap();

    let nodes = ok(&kubectl(&bin, &kc, &["get", "nodes"]).await);
    assert!(
        nodes.contains("talos-cp-1") && nodes.contains("talos-worker-1"),
        "{nodes}"
    );

    let manifest = dir.path().join("cm.yaml");
    std::fs::write(&manifest, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  namespace: default\ndata:\n  key: value\n").unwrap();
    let applied = ok(&kubectl(
        &bin,
        &kc,
        &["apply", "--server-side", "-f", manifest.to_str().unwrap()],
    )
    .await);
    assert!(
        applied.contains("configmap/demo serverside-applied"),
        "{applied}"
    );
    let again = ok(&kubectl(
        &bin,
        &kc,
        &["apply", "--server-side", "-f", manifest.to_str().unwrap()],
    )
    .await);
    assert!(
        again.contains("configmap/demo serverside-applied"),
        "{again}"
    );

    let js = ok(&kubectl(&bin, &kc, &["get", "cm", "demo", "-o", "json"]).await);
    let v: serde_json::Value = serde_json::from_str(&js).unwrap();
    assert_eq!(v["data"]["key"], "value");
    assert_eq!(v["metadata"]["managedFields"][0]["manager"], "kubectl");
    let table = ok(&kubectl(&bin, &kc, &["get", "cm"]).await);
    assert!(table.contains("demo"), "{table}");

    // a pod with log content written by the (simulated) kubelet
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "seeded"}, "spec": {"containers": [{"name": "main", "image": "busybox:1"}]}})).unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    sim.store()
        .logs()
        .append("default", "seeded", "main", b"hello from the pod\n");
    let logs = ok(&kubectl(&bin, &kc, &["logs", "seeded"]).await);
    assert_eq!(logs, "hello from the pod\n");

    let deleted = ok(&kubectl(&bin, &kc, &["delete", "cm", "demo"]).await);
    assert!(deleted.contains("configmap \"demo\" deleted"), "{deleted}");
    let missing = kubectl(&bin, &kc, &["get", "cm", "demo"]).await;
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("configmaps \"demo\" not found"), "{stderr}");
}

#[tokio::test]
async fn kubectl_reapplying_a_changed_job_is_rejected_as_immutable() {
    let bin = kubectl_path();
    assert!(
        bin.exists(),
        "kubectl not found at {}: run acceptance/scripts/install-kubectl.sh or set TALOSBOOT_KUBECTL",
        bin.display()
    );
    let (sim, _client) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kc).unwrap();
    let job = |image: &str| {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: boot\n  namespace: default\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: run\n        image: {image}\n"
        )
    };
    let f = dir.path().join("job.yaml");
    std::fs::write(&f, job("busybox:1")).unwrap();
    ok(&kubectl(
        &bin,
        &kc,
        &["apply", "--server-side", "-f", f.to_str().unwrap()],
    )
    .await);
    std::fs::write(&f, job("busybox:2")).unwrap();
    let out = kubectl(
        &bin,
        &kc,
        &["apply", "--server-side", "-f", f.to_str().unwrap()],
    )
    .await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("field is immutable"), "{stderr}");
}

#[tokio::test]
async fn kubectl_shows_pod_security_warnings_and_refusals() {
    let bin = kubectl_path();
    assert!(
        bin.exists(),
        "kubectl not found at {}: run acceptance/scripts/install-kubectl.sh or set TALOSBOOT_KUBECTL",
        bin.display()
    );
    let (sim, _client) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kc).unwrap();
    let apply = |name: &str, body: &str| {
        let f = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&f, body).unwrap();
        f
    };
    // Baseline passes; Talos warns at `restricted`.
    let plain = apply(
        "plain",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\nspec:\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: busybox:1\n",
    );
    let out = kubectl(
        &bin,
        &kc,
        &["apply", "--server-side", "-f", plain.to_str().unwrap()],
    )
    .await;
    let stdout = ok(&out);
    assert!(stdout.contains("deployment.apps/web"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Warning: would violate PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false (container \"web\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container \"web\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or container \"web\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container \"web\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"),
        "{stderr}"
    );
    // A host-network pod is refused at `baseline`.
    let host = apply(
        "host",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: host\n  namespace: default\nspec:\n  hostNetwork: true\n  containers:\n  - name: c\n    image: busybox:1\n",
    );
    let out = kubectl(
        &bin,
        &kc,
        &["apply", "--server-side", "-f", host.to_str().unwrap()],
    )
    .await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("pods \"host\" is forbidden: violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)"),
        "{stderr}"
    );
}
