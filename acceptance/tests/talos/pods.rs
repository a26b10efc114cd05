//! The kubelet on the real control plane: pre-CNI networking, real Helm through KubePrism, logs
//! through the real apiserver, image pulls and deletion.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use super::common::{self, from_json};

fn helm_job(name: &str, script: &str, env: serde_json::Value) -> Job {
    from_json(json!({
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": "Never",
                "hostNetwork": true,
                "dnsPolicy": "Default",
                "tolerations": [{"operator": "Exists"}],
                "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532},
                "volumes": [{"name": "tmp", "emptyDir": {}}],
                "containers": [{
                    "name": "helm", "image": "alpine/helm:3.18.4",
                    "command": ["sh", "-c", script],
                    "env": env,
                    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                }],
            }},
        },
    }))
}

fn kubeprism_env() -> serde_json::Value {
    json!([
        {"name": "KUBERNETES_SERVICE_HOST", "value": "localhost"},
        {"name": "KUBERNETES_SERVICE_PORT", "value": "7445"},
        {"name": "HOME", "value": "/tmp"},
    ])
}

async fn job_pod(client: &kube::Client, ns: &str, job: &str, secs: u64) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    common::eventually(secs, &format!("a finished pod of job {job}"), || async {
        let list = pods
            .list(&kube::api::ListParams::default().labels(&format!("job-name={job}")))
            .await
            .ok()?;
        list.items
            .into_iter()
            .find(|p| matches!(common::phase(p), "Succeeded" | "Failed"))
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_network_job_runs_the_real_helm_through_kubeprism() {
    let (cluster, client) = common::shared().await;
    common::privileged_namespace(&client, "boot-helm").await;
    common::cluster_admin(&client, "boot-helm").await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "boot-helm");
    let job = helm_job(
        "list",
        "helm version --template '{{.Version}}'; echo; helm list -n boot-helm --output json; id -u",
        kubeprism_env(),
    );
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("job");
    let pod = job_pod(&client, "boot-helm", "list", 90).await;
    let (ok, log, err) = common::run_kubectl(cluster, &["logs", "-n", "boot-helm", "job/list"]);
    assert!(ok, "kubectl logs: {err}");
    assert_eq!(common::phase(&pod), "Succeeded", "log:\n{log}");
    assert!(log.contains("v3.18.4"), "the real Helm runs: {log}");
    assert!(
        log.contains("[]"),
        "helm list reached the API through KubePrism: {log}"
    );
    assert!(
        log.lines().any(|l| l.trim() == "65532"),
        "as the pod's user: {log}"
    );
    // The Job controller is the real one.
    common::eventually(30, "job Complete", || async {
        let job = jobs.get("list").await.ok()?;
        job.status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "Complete" && c.status == "True")
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_service_ip_before_the_cni_is_the_users_timeout() {
    let (cluster, client) = common::shared().await;
    common::privileged_namespace(&client, "boot-svc").await;
    common::cluster_admin(&client, "boot-svc").await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "boot-svc");
    let env = json!([{"name": "HOME", "value": "/tmp"}]);
    jobs.create(
        &PostParams::default(),
        &helm_job("svc", "helm upgrade --install x /tmp/none", env),
    )
    .await
    .expect("job");
    let pod = job_pod(&client, "boot-svc", "svc", 90).await;
    assert_eq!(common::phase(&pod), "Failed");
    let (_, log, _) = common::run_kubectl(cluster, &["logs", "-n", "boot-svc", "job/svc"]);
    assert!(log.contains("dial tcp 10.96.0.1:443: i/o timeout"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pod_network_pod_waits_for_the_cni() {
    let (_cluster, client) = common::shared().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = from_json(json!({
        "metadata": {"name": "app"},
        "spec": {
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        },
    }));
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod");
    let events = common::eventually(60, "FailedCreatePodSandBox", || async {
        let events = common::events(&client, "default", "app").await;
        events
            .iter()
            .any(|e| e.starts_with("FailedCreatePodSandBox"))
            .then_some(events)
    })
    .await;
    assert!(
        events
            .iter()
            .any(|e| e.contains("cni plugin not initialized")),
        "{events:?}"
    );
    let pod = pods.get("app").await.expect("pod");
    assert_eq!(common::phase(&pod), "Pending");
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_images_back_off_and_deleted_pods_go_away() {
    let (_cluster, client) = common::shared().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let pod = |name: &str, image: &str| -> Pod {
        from_json(json!({
            "metadata": {"name": name},
            "spec": {
                "hostNetwork": true,
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "c", "image": image}],
            },
        }))
    };
    pods.create(
        &PostParams::default(),
        &pod("nope", "example.invalid/nope:1"),
    )
    .await
    .expect("pod");
    pods.create(
        &PostParams::default(),
        &pod("pause", "registry.k8s.io/pause:3.10"),
    )
    .await
    .expect("pod");
    common::wait_pod(&client, "kube-system", "nope", 60, |p| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c.state
                        .as_ref()
                        .and_then(|s| s.waiting.as_ref())
                        .and_then(|w| w.reason.as_deref())
                        .is_some_and(|r| r == "ImagePullBackOff" || r == "ErrImagePull")
                })
            })
    })
    .await;
    common::wait_pod(&client, "kube-system", "pause", 60, |p| {
        common::phase(p) == "Running"
    })
    .await;
    pods.delete("pause", &DeleteParams::default())
        .await
        .expect("delete");
    common::eventually(60, "the pod is gone", || async {
        pods.get_opt("pause")
            .await
            .ok()
            .and_then(|p| p.is_none().then_some(()))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_container_ends_with_137_and_its_job_fails() {
    let (_cluster, client) = common::shared().await;
    common::privileged_namespace(&client, "boot-kill").await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "boot-kill");
    jobs.create(
        &PostParams::default(),
        &helm_job("sleeper", "echo started; sleep 300", kubeprism_env()),
    )
    .await
    .expect("job");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "boot-kill");
    let running = common::eventually(60, "the job's pod runs", || async {
        let list = pods
            .list(&kube::api::ListParams::default().labels("job-name=sleeper"))
            .await
            .ok()?;
        list.items
            .into_iter()
            .find(|p| common::phase(p) == "Running")
    })
    .await;
    let name = running.metadata.name.clone().unwrap();
    let patch = json!({"metadata": {"annotations": {"talos-sim.dev/kill": "1"}}});
    pods.patch(
        &name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .expect("annotate");
    let done = job_pod(&client, "boot-kill", "sleeper", 30).await;
    assert_eq!(common::phase(&done), "Failed");
    let terminated = done
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.clone())
        .expect("terminated");
    assert_eq!(terminated.exit_code, 137, "{terminated:?}");
    common::eventually(60, "the Job fails (backoffLimit 0)", || async {
        let job = jobs.get("sleeper").await.ok()?;
        job.status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "Failed" && c.status == "True")
            .then_some(())
    })
    .await;
}

fn waiting_reason(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .clone()
}

/// How a running `talos-sim serve` is given kubelet faults: the ConfigMap
/// `kube-system/talos-sim-kubelet-faults`. A rule naming one node fails pulls there only; deleting
/// the ConfigMap clears it, and the kubelet's next retry starts the container.
#[tokio::test(flavor = "multi_thread")]
async fn the_kubelet_faults_configmap_fails_pulls_on_its_nodes_until_deleted() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let (cluster, client) = common::start().await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let faults: ConfigMap = from_json(json!({
        "metadata": {"name": talos_sim::talos::kubelet_faults::CONFIGMAP},
        "data": {"image-pull-failure": "registry.k8s.io/pause:*@talos-worker-1\n"},
    }));
    configmaps
        .create(&PostParams::default(), &faults)
        .await
        .expect("faults");
    // The node layer's watch reads it (before then, a pull would succeed).
    common::eventually(30, "the ConfigMap's rule in force", || async {
        cluster
            .shared
            .kubelet_faults
            .matches(
                talos_sim::talos::kubelet_faults::FaultKind::ImagePull,
                "registry.k8s.io/pause:3.10",
                "talos-worker-1",
            )
            .then_some(())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    for node in ["talos-cp-1", "talos-worker-1"] {
        let pod: Pod = from_json(json!({
            "metadata": {"name": format!("pause-{node}")},
            "spec": {
                "nodeName": node,
                "hostNetwork": true,
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            },
        }));
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("pod");
    }
    common::wait_pod(&client, "kube-system", "pause-talos-worker-1", 60, |p| {
        matches!(
            waiting_reason(p).as_deref(),
            Some("ErrImagePull" | "ImagePullBackOff")
        )
    })
    .await;
    common::wait_pod(&client, "kube-system", "pause-talos-cp-1", 60, |p| {
        common::phase(p) == "Running"
    })
    .await;
    configmaps
        .delete(
            talos_sim::talos::kubelet_faults::CONFIGMAP,
            &DeleteParams::default(),
        )
        .await
        .expect("delete the faults");
    common::wait_pod(&client, "kube-system", "pause-talos-worker-1", 30, |p| {
        common::phase(p) == "Running"
    })
    .await;
}
