//! Shared setup: a simulated cluster, a client, polling, and manifests.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams, LogParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};
use talos_sim::{SimCluster, SimConfig};

/// A fresh cluster with `config` and an admin client. Pods of these tests act as cluster-admin:
/// a ClusterRoleBinding grants it to the group `system:serviceaccounts` (Kubernetes' documented
/// "permissive binding"), so the tests of the cluster model need no RBAC of their own. Tests of RBAC
/// itself use [`start_strict`].
pub async fn start_with(config: SimConfig) -> (SimCluster, Client) {
    let (sim, client) = start_strict(config).await;
    let binding: k8s_openapi::api::rbac::v1::ClusterRoleBinding = from_json(json!({
        "metadata": {"name": "talos-sim-tests-permissive"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "Group", "name": "system:serviceaccounts", "apiGroup": "rbac.authorization.k8s.io"}],
    }));
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("permissive binding");
    (sim, client)
}

/// A fresh cluster with `config` and an admin client, with RBAC as seeded (pods' ServiceAccounts
/// may do nothing until bound).
pub async fn start_strict(config: SimConfig) -> (SimCluster, Client) {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .try_init();
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let sim = SimCluster::start(config).await.expect("cluster starts");
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).expect("kubeconfig parses");
    let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig loads");
    (sim, Client::try_from(cfg).expect("client builds"))
}

/// The default cluster: 1 control plane, 1 worker, KubePrism on 7445, no kube-proxy.
pub async fn start() -> (SimCluster, Client) {
    start_with(SimConfig::default()).await
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
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

pub fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("valid manifest")
}

/// The Talos values for Cilium (field notes §2) as `--set` arguments.
pub fn talos_cilium_sets() -> Vec<String> {
    [
        "ipam.mode=kubernetes",
        "kubeProxyReplacement=true",
        "k8sServiceHost=localhost",
        "k8sServicePort=7445",
        "cgroup.autoMount.enabled=false",
        "cgroup.hostRoot=/sys/fs/cgroup",
        "securityContext.capabilities.ciliumAgent={CHOWN,KILL,NET_ADMIN,NET_RAW,IPC_LOCK,SYS_ADMIN,SYS_RESOURCE,DAC_OVERRIDE,FOWNER,SETGID,SETUID}",
        "securityContext.capabilities.cleanCiliumState={NET_ADMIN,SYS_ADMIN,SYS_RESOURCE}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// `cilium install --version 1.18.4 --set ...` as argv.
pub fn cilium_install(sets: &[String]) -> Vec<String> {
    let mut argv: Vec<String> = ["cilium", "install", "--version", "1.18.4"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for s in sets {
        argv.push("--set".into());
        argv.push(s.clone());
    }
    argv
}

/// KubePrism as the API endpoint: the env override the seeds use.
pub fn kubeprism_env() -> Value {
    json!([{"name": "KUBERNETES_SERVICE_HOST", "value": "localhost"}, {"name": "KUBERNETES_SERVICE_PORT", "value": "7445"}])
}

/// A pre-CNI bootstrap Job: hostNetwork, tolerates everything, one attempt.
pub fn bootstrap_job(name: &str, image: &str, command: &[String], env: Value) -> Job {
    from_json(json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "hostNetwork": true, "dnsPolicy": "Default", "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "main", "image": image, "command": command, "env": env}]}}}
    }))
}

/// Creates a Job in `ns` and waits until it has a `Complete` or `Failed` condition; returns the
/// final Job.
pub async fn run_job(client: &Client, ns: &str, job: &Job, secs: u64) -> Job {
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    jobs.create(&PostParams::default(), job)
        .await
        .expect("job created");
    let name = job.metadata.name.clone().unwrap_or_default();
    eventually(secs, &format!("job {name} finished"), || async {
        let j = jobs.get(&name).await.ok()?;
        let done = job_condition(&j, "Complete").is_some() || job_condition(&j, "Failed").is_some();
        done.then_some(j)
    })
    .await
}

/// The `True` condition of `ty` on a Job: (reason, message).
pub fn job_condition(job: &Job, ty: &str) -> Option<(String, String)> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty && c.status == "True")
        .map(|c| {
            (
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

/// The log of the (first) pod of a Job.
pub async fn job_log(client: &Client, ns: &str, job: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let list = pods
        .list(&ListParams::default().labels(&format!("job-name={job}")))
        .await
        .expect("pods listed");
    let pod = list
        .items
        .first()
        .and_then(|p| p.metadata.name.clone())
        .expect("job has a pod");
    pods.logs(&pod, &LogParams::default())
        .await
        .expect("logs readable")
}

/// Events about object `name` in `ns`: (reason, message).
pub async fn events_for(client: &Client, ns: &str, name: &str) -> Vec<(String, String)> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let list = events
        .list(&ListParams::default())
        .await
        .expect("events listed");
    list.items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

/// Runs the Talos-correct Cilium bootstrap Job and waits for the nodes to become Ready.
pub async fn bootstrap_cilium(client: &Client) {
    let job = bootstrap_job(
        "cilium-install",
        "quay.io/cilium/cilium-cli:v0.18.7",
        &cilium_install(&talos_cilium_sets()),
        kubeprism_env(),
    );
    let done = run_job(client, "kube-system", &job, 20).await;
    assert!(
        job_condition(&done, "Complete").is_some(),
        "cilium bootstrap job completes: {:?}",
        done.status
    );
    wait_nodes_ready(client).await;
}

/// Waits until every node is Ready without the not-ready taint.
pub async fn wait_nodes_ready(client: &Client) {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    eventually(20, "nodes ready", || async {
        let list = nodes.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .all(|n| {
                let tainted = n
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|t| t.iter().any(|t| t.key == "node.kubernetes.io/not-ready"));
                let ready = n
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                ready && !tainted
            })
            .then_some(())
    })
    .await
}

/// Labels namespace `ns` `pod-security.kubernetes.io/enforce: privileged`, as a user does
/// before running host-network pods outside `kube-system` (Talos enforces `baseline`).
pub async fn allow_host_pods(client: &Client, ns: &str) {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .patch(
            ns,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}),
            ),
        )
        .await
        .expect("namespace labelled privileged");
}
