//! Shared setup: the process's shared cluster or a fresh one, an admin client, polling, manifests.
//!
//! A test that only creates objects of its own (in a namespace no other test uses) and reads
//! them back runs on the [`shared`] cluster; one that changes the cluster for others (installs
//! Cilium, injects faults, other settings) or measures the start [`start`]s its own.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::api::{Api, ListParams, LogParams, PostParams};
use serde_json::{Value, json};
use talos_sim::talos::{TalosCluster, TalosConfig};

/// A fresh cluster (1 control plane, 1 worker, KubePrism on 7445, no kube-proxy) and an admin client.
pub async fn start() -> (TalosCluster, kube::Client) {
    start_with(TalosConfig::default()).await
}

pub async fn start_with(config: TalosConfig) -> (TalosCluster, kube::Client) {
    init();
    let cluster = TalosCluster::start(config)
        .await
        .expect("the cluster starts");
    let client = cluster.client().await.expect("an admin client");
    (cluster, client)
}

/// The process's shared cluster ([`TalosConfig::default`], never given a CNI) and an admin client.
pub async fn shared() -> (&'static TalosCluster, kube::Client) {
    init();
    let cluster = talos_sim::talos::shared_cluster()
        .await
        .expect("the shared cluster starts");
    let client = cluster.client().await.expect("an admin client");
    (cluster, client)
}

/// The tests of this suite that run apart (`talos_sim::test_gate`), as libtest names them: none
/// yet; every test here bounds its waits generously and measures nothing against the clock but
/// lower bounds.
const RUN_APART: &[&str] = &[];

/// Lets the test in through the process's gate (side by side with others, or apart when in
/// [`RUN_APART`]), sets up logging and the TLS provider.
fn init() {
    talos_sim::test_gate::enter(RUN_APART);
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .try_init();
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// Polls `f` until it returns `Some`, for at most `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {secs}s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("valid manifest")
}

/// A namespace whose Pod Security level allows host-network pods, as a Talos user must label it.
pub async fn privileged_namespace(client: &kube::Client, name: &str) {
    let ns: Namespace = from_json(json!({
        "metadata": {"name": name, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}
    }));
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
    // Pods are refused until the controller-manager has created the default ServiceAccount.
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), name);
    eventually(30, "default ServiceAccount", || async {
        accounts.get_opt("default").await.ok().flatten()
    })
    .await;
}

/// Grants cluster-admin to a namespace's `default` ServiceAccount.
pub async fn cluster_admin(client: &kube::Client, namespace: &str) {
    let binding: k8s_openapi::api::rbac::v1::ClusterRoleBinding = from_json(json!({
        "metadata": {"name": format!("{namespace}-default-admin")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}],
    }));
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding");
}

/// The pod, once `done` says so.
pub async fn wait_pod(
    client: &kube::Client,
    ns: &str,
    name: &str,
    secs: u64,
    done: impl Fn(&Pod) -> bool,
) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    eventually(secs, &format!("pod {ns}/{name}"), || async {
        pods.get_opt(name).await.ok().flatten().filter(|p| done(p))
    })
    .await
}

pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// `reason: message` of the events about `name` in `ns`.
pub async fn events(client: &kube::Client, ns: &str, name: &str) -> Vec<String> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    api.list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter(|e| e.involved_object.name.as_deref() == Some(name))
                .map(|e| {
                    format!(
                        "{}: {}",
                        e.reason.unwrap_or_default(),
                        e.message.unwrap_or_default()
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Debian's kubectl, installed by `acceptance/scripts/install-kubectl.sh` (never the machine's own).
pub fn kubectl() -> std::path::PathBuf {
    let path = std::env::var_os("TALOSBOOT_KUBECTL")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join(".work/kubectl/usr/bin/kubectl")
        });
    assert!(
        path.is_file(),
        "{} is missing: run acceptance/scripts/install-kubectl.sh",
        path.display()
    );
    path
}

/// Runs kubectl against the cluster; (exit ok, stdout, stderr).
pub fn run_kubectl(cluster: &TalosCluster, args: &[&str]) -> (bool, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&config).expect("kubeconfig");
    let out = std::process::Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(&config)
        .args(args)
        .output()
        .expect("kubectl runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Creates `job` in `namespace` and waits up to `secs` for its pod to end; (succeeded, log).
pub async fn run_job(
    client: &kube::Client,
    namespace: &str,
    job: &Job,
    secs: u64,
) -> (bool, String) {
    let name = job.metadata.name.clone().expect("the Job has a name");
    Api::<Job>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), job)
        .await
        .unwrap_or_else(|e| panic!("create job {name}: {e}"));
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pod = eventually(secs, &format!("job {name} finished"), || async {
        pods.list(&ListParams::default().labels(&format!("job-name={name}")))
            .await
            .ok()?
            .items
            .into_iter()
            .find(|p| matches!(phase(p), "Succeeded" | "Failed"))
    })
    .await;
    let log = pods
        .logs(
            pod.metadata.name.as_deref().unwrap_or_default(),
            &LogParams::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("log of job {name}: {e}"));
    (phase(&pod) == "Succeeded", log)
}

/// An emulated Cilium agent on every node: the nodes' CNI comes up.
pub async fn cni_up(cluster: &talos_sim::talos::TalosCluster, client: &kube::Client) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    for node in cluster.nodes() {
        let pod: Pod = from_json(json!({
            "metadata": {"name": format!("cilium-{}", node.name)},
            "spec": {
                "nodeName": node.name,
                "hostNetwork": true,
                "tolerations": [{"operator": "Exists"}],
                "containers": [{
                    "name": "cilium-agent",
                    "image": "quay.io/cilium/cilium:v1.18.4",
                    "command": ["cilium-agent"],
                    "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": "localhost"},
                            {"name": "KUBERNETES_SERVICE_PORT", "value": "7445"}],
                }],
            },
        }));
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("agent");
    }
    eventually(60, "the CNI on every node", || async {
        cluster
            .nodes()
            .iter()
            .all(|n| cluster.shared.cni_ready(&n.name))
            .then_some(())
    })
    .await;
}
