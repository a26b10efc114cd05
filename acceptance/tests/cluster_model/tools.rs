//! The emulated tools as an installer pod runs them: unknown flags fail as in the real cobra
//! programs, the flags the bootstrap engine uses are known, and the `alpine/helm` installer
//! runs under the `restricted` securityContext reading values from a ConfigMap and a Secret.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use talos_sim::programs::release::Release;

use crate::common::*;

const HELM_IMAGE: &str = "alpine/helm:3.18.4";

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|s| s.to_string()).collect()
}

/// Runs `command` in a kube-system bootstrap Job (exempt from Pod Security): (ok, log).
async fn run(client: &Client, name: &str, image: &str, command: &[&str]) -> (bool, String) {
    let job = bootstrap_job(name, image, &argv(command), kubeprism_env());
    let done = run_job(client, "kube-system", &job, 20).await;
    (
        job_condition(&done, "Complete").is_some(),
        job_log(client, "kube-system", name).await,
    )
}

#[tokio::test]
async fn unknown_flags_fail_like_the_real_tools() {
    let (_sim, client) = start().await;
    let cases: &[(&str, &str, &[&str], &str)] = &[
        (
            "helm-long",
            HELM_IMAGE,
            &["helm", "upgrade", "--install", "r", "oci://x/c", "--foo"],
            "Error: unknown flag: --foo\n",
        ),
        (
            "helm-short",
            HELM_IMAGE,
            &["helm", "upgrade", "-x", "r", "oci://x/c"],
            "Error: unknown shorthand flag: 'x' in -x\n",
        ),
        // Helm's flag is --history-max.
        (
            "helm-max-history",
            HELM_IMAGE,
            &[
                "helm",
                "upgrade",
                "--install",
                "r",
                "oci://x/c",
                "--max-history",
                "3",
            ],
            "Error: unknown flag: --max-history\n",
        ),
        (
            "cilium-cli",
            "quay.io/cilium/cilium-cli:v0.18.7",
            &["cilium", "install", "--version", "1.18.4", "--sett", "a=b"],
            "Error: unknown flag: --sett\n",
        ),
        (
            "kubectl",
            "bitnami/kubectl:1.33",
            &["kubectl", "apply", "--server-sid", "-f", "/x.yaml"],
            "error: unknown flag: --server-sid\nSee 'kubectl apply --help' for usage.\n",
        ),
    ];
    for (name, image, command, want) in cases {
        let (ok, log) = run(&client, name, image, command).await;
        assert!(!ok, "{name}: {log}");
        assert_eq!(&log, want, "{name}");
    }
}

#[tokio::test]
async fn failed_release_without_a_deployed_revision_is_replaced_by_upgrade_install() {
    let (_sim, client) = start().await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    let failed = Release {
        name: "foo".into(),
        namespace: "kube-system".into(),
        version: 1,
        status: "failed".into(),
        description: "Release \"foo\" failed: context deadline exceeded".into(),
        first_deployed: "2026-01-01T00:00:00Z".into(),
        last_deployed: "2026-01-01T00:00:00Z".into(),
        chart: "foo".into(),
        chart_version: "0.1.0".into(),
        app_version: "0.1.0".into(),
        config: json!({}),
        manifest: String::new(),
    };
    secrets
        .create(&PostParams::default(), &from_json(failed.to_secret()))
        .await
        .unwrap();
    let (ok, log) = run(
        &client,
        "replace",
        HELM_IMAGE,
        &[
            "helm",
            "upgrade",
            "--install",
            "foo",
            "oci://example.com/charts/foo",
            "-n",
            "kube-system",
        ],
    )
    .await;
    assert!(ok, "{log}");
    let status = |n: i64| {
        let secrets = secrets.clone();
        async move {
            let s = secrets
                .get(&format!("sh.helm.release.v1.foo.v{n}"))
                .await
                .unwrap();
            Release::from_secret(&serde_json::to_value(s).unwrap())
                .unwrap()
                .status
        }
    };
    assert_eq!(status(1).await, "superseded");
    assert_eq!(status(2).await, "deployed");
}

/// The installer container the bootstrap engine runs: restricted securityContext, values from
/// a ConfigMap and a Secret volume.
fn installer_pod(name: &str, host_network: bool, command: &[&str]) -> Value {
    json!({"metadata": {"name": name}, "spec": {
        "hostNetwork": host_network, "dnsPolicy": "Default", "restartPolicy": "Never",
        "tolerations": [{"operator": "Exists"}],
        "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
        "volumes": [{"name": "inputs", "configMap": {"name": "inputs"}},
                    {"name": "secret-inputs", "secret": {"secretName": "secret-inputs"}}],
        "containers": [{"name": "install", "image": HELM_IMAGE, "command": command,
            "env": kubeprism_env(),
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}},
            "volumeMounts": [{"name": "inputs", "mountPath": "/inputs", "readOnly": true},
                             {"name": "secret-inputs", "mountPath": "/secret-inputs", "readOnly": true}]}]}})
}

#[tokio::test]
async fn restricted_installer_reads_values_from_config_map_and_secret() {
    let (_sim, client) = start().await;
    let ns: Api<Namespace> = Api::all(client.clone());
    for (name, level) in [("talosboot-system", "privileged"), ("apps", "restricted")] {
        ns.create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": name, "labels": {"pod-security.kubernetes.io/enforce": level}}})),
        )
        .await
        .unwrap();
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), name);
        cms.create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": "inputs"}, "data": {"values.yaml": "replicas: 2\nimage:\n  tag: v1\n"}})),
        )
        .await
        .unwrap();
        let secrets: Api<Secret> = Api::namespaced(client.clone(), name);
        // `data` is base64 on the wire: the program reads the decoded file.
        secrets
            .create(
                &PostParams::default(),
                &from_json(json!({"metadata": {"name": "secret-inputs"},
                    "data": {"values.yaml": "aW1hZ2U6CiAgcHVsbFNlY3JldDogczNjcjN0Cg=="}})),
            )
            .await
            .unwrap();
    }
    let command = [
        "helm",
        "upgrade",
        "--install",
        "app",
        "app",
        "--repo",
        "https://charts.example.com",
        "--version",
        "1.0.0",
        "-n",
        "apps",
        "-f",
        "/inputs/values.yaml",
        "-f",
        "/secret-inputs/values.yaml",
        "--set",
        "replicas=3",
        "--create-namespace",
        "--wait",
        "--timeout",
        "5m",
        "--take-ownership",
        "--description",
        "talosboot run 1",
        "--history-max",
        "5",
        "--atomic",
        "--skip-crds",
        "--no-hooks",
    ];
    // Host networking (pre-CNI) in the privileged bootstrap namespace.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "talosboot-system");
    pods.create(
        &PostParams::default(),
        &from_json(installer_pod("installer", true, &command)),
    )
    .await
    .expect("admitted in a privileged namespace");
    let phase = eventually(20, "installer finished", || async {
        let p = pods.get("installer").await.ok()?;
        let phase = p.status?.phase?;
        matches!(phase.as_str(), "Succeeded" | "Failed").then_some(phase)
    })
    .await;
    let log = pods
        .logs("installer", &Default::default())
        .await
        .unwrap_or_default();
    assert_eq!(phase, "Succeeded", "{log}");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "apps");
    let s = secrets.get("sh.helm.release.v1.app.v1").await.unwrap();
    let rel = Release::from_secret(&serde_json::to_value(s).unwrap()).unwrap();
    assert_eq!(rel.status, "deployed");
    assert_eq!(rel.description, "talosboot run 1");
    assert_eq!(
        rel.config,
        json!({"replicas": 3, "image": {"tag": "v1", "pullSecret": "s3cr3t"}})
    );
    // Without host networking the same pod meets `restricted`.
    let apps: Api<Pod> = Api::namespaced(client.clone(), "apps");
    apps.create(
        &PostParams::default(),
        &from_json(installer_pod("installer", false, &["helm", "version"])),
    )
    .await
    .expect("the installer pod meets restricted without hostNetwork");
}

fn record(version: i64, status: &str) -> Secret {
    from_json(
        Release {
            name: "foo".into(),
            namespace: "kube-system".into(),
            version,
            status: status.into(),
            description: "Initial install underway".into(),
            first_deployed: "2026-01-01T00:00:00Z".into(),
            last_deployed: "2026-01-01T00:00:00Z".into(),
            chart: "foo".into(),
            chart_version: "0.1.0".into(),
            app_version: "0.1.0".into(),
            config: json!({}),
            manifest: String::new(),
        }
        .to_secret(),
    )
}

#[tokio::test]
async fn upgrade_install_over_a_pending_install_is_in_progress() {
    let (_sim, client) = start().await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    secrets
        .create(&PostParams::default(), &record(1, "pending-install"))
        .await
        .unwrap();
    let (ok, log) = run(
        &client,
        "blocked",
        HELM_IMAGE,
        &[
            "helm",
            "upgrade",
            "--install",
            "foo",
            "oci://example.com/charts/foo",
            "-n",
            "kube-system",
        ],
    )
    .await;
    assert!(!ok);
    assert_eq!(
        log,
        "Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress\n"
    );
}

#[tokio::test]
async fn status_and_history_print_json() {
    let (_sim, client) = start().await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    secrets
        .create(&PostParams::default(), &record(1, "deployed"))
        .await
        .unwrap();
    let (ok, log) = run(
        &client,
        "status",
        HELM_IMAGE,
        &["helm", "status", "foo", "-n", "kube-system", "-o", "json"],
    )
    .await;
    assert!(ok, "{log}");
    let v: Value = serde_json::from_str(log.trim()).expect("JSON");
    assert_eq!(v["info"]["status"], "deployed");
    assert_eq!(v["version"], 1);
    assert_eq!(v["chart"]["metadata"]["version"], "0.1.0");
    let (ok, log) = run(
        &client,
        "history",
        HELM_IMAGE,
        &[
            "helm",
            "history",
            "foo",
            "--namespace=kube-system",
            "--output",
            "json",
        ],
    )
    .await;
    assert!(ok, "{log}");
    let v: Value = serde_json::from_str(log.trim()).expect("JSON");
    assert_eq!(v[0]["revision"], 1);
    assert_eq!(v[0]["status"], "deployed");
    assert_eq!(v[0]["chart"], "foo-0.1.0");
    let (ok, log) = run(
        &client,
        "missing",
        HELM_IMAGE,
        &["helm", "status", "nope", "-n", "kube-system"],
    )
    .await;
    assert!(!ok);
    assert_eq!(log, "Error: release: not found\n");
}

/// The shape of the bootstrap engine's Job (talosboot `src/cluster/bootstrap/objects.rs`):
/// privileged bootstrap namespace, host network, restricted securityContext with a read-only
/// root file system, inputs from a ConfigMap and a Secret, `/tmp` an emptyDir.
#[tokio::test]
async fn bootstrap_engine_shaped_job_installs_a_release() {
    let (_sim, client) = start().await;
    let ns: Api<Namespace> = Api::all(client.clone());
    ns.create(
        &PostParams::default(),
        &from_json(json!({"metadata": {"name": "talosboot-system",
            "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}})),
    )
    .await
    .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "talosboot-system");
    cms.create(
        &PostParams::default(),
        &from_json(json!({"metadata": {"name": "run-1"}, "data": {"values-0.yaml": "a: 1\n"}})),
    )
    .await
    .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "talosboot-system");
    secrets
        .create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": "run-1"}, "stringData": {"sensitive-values-0.yaml": "token: t0p\n"}})),
        )
        .await
        .unwrap();
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), "talosboot-system");
    sas.create(
        &PostParams::default(),
        &from_json(json!({"metadata": {"name": "run-1"}})),
    )
    .await
    .unwrap();
    let command = [
        "helm",
        "upgrade",
        "--install",
        "cilium",
        "cilium",
        "--repo",
        "https://helm.cilium.io",
        "--version",
        "1.16.3",
        "--namespace",
        "kube-system",
        "--timeout",
        "600s",
        "--history-max",
        "10",
        "--values",
        "/talosboot/inputs/values-0.yaml",
        "--values",
        "/talosboot/secrets/sensitive-values-0.yaml",
        "--take-ownership",
        "--description",
        "talosboot",
    ];
    let job: k8s_openapi::api::batch::v1::Job = from_json(json!({
        "metadata": {"name": "run-1"},
        "spec": {"backoffLimit": 0, "activeDeadlineSeconds": 600, "ttlSecondsAfterFinished": 3600,
            "template": {"spec": {
                "serviceAccountName": "run-1", "restartPolicy": "Never", "hostNetwork": true,
                "dnsPolicy": "Default", "enableServiceLinks": false,
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"},
                                {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}],
                "nodeSelector": {},
                "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
                    "fsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
                "volumes": [{"name": "inputs", "configMap": {"name": "run-1"}}, {"name": "tmp", "emptyDir": {}},
                            {"name": "secrets", "secret": {"secretName": "run-1"}}],
                "containers": [{"name": "bootstrap", "image": HELM_IMAGE, "command": command,
                    "env": [{"name": "HOME", "value": "/tmp"}, {"name": "KUBERNETES_SERVICE_HOST", "value": "localhost"},
                            {"name": "KUBERNETES_SERVICE_PORT", "value": "7445"}],
                    "volumeMounts": [{"name": "inputs", "mountPath": "/talosboot/inputs", "readOnly": true},
                                     {"name": "tmp", "mountPath": "/tmp"},
                                     {"name": "secrets", "mountPath": "/talosboot/secrets", "readOnly": true}],
                    "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}}]}}}}));
    let done = run_job(&client, "talosboot-system", &job, 20).await;
    assert!(
        job_condition(&done, "Complete").is_some(),
        "{}",
        job_log(&client, "talosboot-system", "run-1").await
    );
    let s = Api::<Secret>::namespaced(client.clone(), "kube-system")
        .get("sh.helm.release.v1.cilium.v1")
        .await
        .unwrap();
    let rel = Release::from_secret(&serde_json::to_value(s).unwrap()).unwrap();
    assert_eq!(
        (rel.status.as_str(), rel.description.as_str()),
        ("deployed", "talosboot")
    );
    assert_eq!(rel.config, json!({"a": 1, "token": "t0p"}));
}
