//! Cilium values that do not fit Talos: the agent never becomes Ready, nodes stay tainted.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, LogParams};

use crate::common::*;

/// Installs Cilium with the Talos values minus the ones `drop` names, and returns the agent pods
/// once one of their init containers restarted at least twice.
async fn install_and_crash(drop: &[&str]) -> (talos_sim::SimCluster, kube::Client, Pod, String) {
    let (sim, client) = start().await;
    let sets: Vec<String> = talos_cilium_sets()
        .into_iter()
        .filter(|s| !drop.iter().any(|d| s.starts_with(d)))
        .collect();
    let job = bootstrap_job(
        "cilium-install",
        "quay.io/cilium/cilium-cli:v0.18.7",
        &cilium_install(&sets),
        kubeprism_env(),
    );
    let done = run_job(&client, "kube-system", &job, 20).await;
    assert!(
        job_condition(&done, "Complete").is_some(),
        "the install itself succeeds"
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let (pod, container) = eventually(
        15,
        "an agent init container in CrashLoopBackOff",
        || async {
            let list = pods
                .list(&ListParams::default().labels("k8s-app=cilium"))
                .await
                .ok()?;
            list.items.into_iter().find_map(|p| {
                let crashing = p
                    .status
                    .as_ref()?
                    .init_container_statuses
                    .as_ref()?
                    .iter()
                    .find(|c| {
                        c.restart_count >= 2
                            && c.state
                                .as_ref()
                                .and_then(|s| s.waiting.as_ref())
                                .is_some_and(|w| w.reason.as_deref() == Some("CrashLoopBackOff"))
                    })?;
                let name = crashing.name.clone();
                Some((p, name))
            })
        },
    )
    .await;
    (sim, client, pod, container)
}

async fn assert_nodes_tainted(client: &kube::Client) {
    let nodes: Api<Node> = Api::all(client.clone());
    for n in nodes.list(&ListParams::default()).await.unwrap().items {
        let taints = n.spec.and_then(|s| s.taints).unwrap_or_default();
        assert!(
            taints
                .iter()
                .any(|t| t.key == "node.kubernetes.io/not-ready"),
            "node stays tainted"
        );
    }
}

#[tokio::test]
async fn sys_module_makes_the_agent_crash() {
    let (_sim, client, pod, container) = install_and_crash(&["securityContext.capabilities"]).await;
    assert_eq!(
        container, "clean-cilium-state",
        "the first container asking for SYS_MODULE"
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let name = pod.metadata.name.unwrap();
    // The runtime refused to start the process: nothing ran, so nothing is in the container's
    // log. A client finds the error in the container's last state and in the `Failed` event.
    let log = pods
        .logs(
            &name,
            &LogParams {
                container: Some(container.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(!log.contains("unable to apply caps"), "{log}");
    let status = pods.get(&name).await.unwrap().status.unwrap();
    let last = status
        .init_container_statuses
        .clone()
        .unwrap()
        .into_iter()
        .find(|c| c.name == container)
        .unwrap()
        .last_state
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(
        (last.exit_code, last.reason.as_deref()),
        (128, Some("StartError"))
    );
    let message = last.message.unwrap_or_default();
    assert!(
        message.contains("unable to apply caps: operation not permitted"),
        "{message}"
    );
    let events = events_for(&client, "kube-system", &name).await;
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "Failed" && m == &format!("Error: {message}")),
        "{events:?}"
    );
    assert!(
        status
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "False")
    );
    assert_nodes_tainted(&client).await;
}

#[tokio::test]
async fn cgroup_automount_makes_mount_cgroup_fail() {
    let (_sim, client, pod, container) = install_and_crash(&["cgroup."]).await;
    assert_eq!(container, "mount-cgroup");
    let log = failed_attempt_log(
        &client,
        &pod.metadata.name.unwrap(),
        &container,
        "cilium-mount: Permission denied",
    )
    .await;
    assert!(log.contains("nsenter: failed to execute"), "{log}");
    assert_nodes_tainted(&client).await;
}

/// The log of a failed attempt of `container` that contains `signature`: the current log during
/// the back-off, the previous one once the next attempt has started (under load a test may
/// only look then).
async fn failed_attempt_log(
    client: &kube::Client,
    pod: &str,
    container: &str,
    signature: &str,
) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    eventually(10, "a failed attempt's log", || async {
        for previous in [false, true] {
            let params = LogParams {
                container: Some(container.to_string()),
                previous,
                ..Default::default()
            };
            if let Ok(log) = pods.logs(pod, &params).await {
                if log.contains(signature) {
                    return Some(log);
                }
            }
        }
        None
    })
    .await
}

#[tokio::test]
async fn default_service_host_without_kube_proxy_leaves_the_agent_unready() {
    let (_sim, client, pod, container) =
        install_and_crash_agent(&["k8sServiceHost", "k8sServicePort"]).await;
    let log = failed_attempt_log(
        &client,
        &pod,
        &container,
        "dial tcp 10.96.0.1:443: i/o timeout",
    )
    .await;
    assert!(log.contains("Unable to contact k8s api-server"), "{log}");
    assert_nodes_tainted(&client).await;
}

/// Like [`install_and_crash`], for the agent container itself.
async fn install_and_crash_agent(
    drop: &[&str],
) -> (talos_sim::SimCluster, kube::Client, String, String) {
    let (sim, client) = start().await;
    let sets: Vec<String> = talos_cilium_sets()
        .into_iter()
        .filter(|s| !drop.iter().any(|d| s.starts_with(d)))
        .collect();
    let job = bootstrap_job(
        "cilium-install",
        "quay.io/cilium/cilium-cli:v0.18.7",
        &cilium_install(&sets),
        kubeprism_env(),
    );
    run_job(&client, "kube-system", &job, 20).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let pod = eventually(15, "the agent restarted", || async {
        let list = pods
            .list(&ListParams::default().labels("k8s-app=cilium"))
            .await
            .ok()?;
        list.items.into_iter().find_map(|p| {
            let agent = p
                .status
                .as_ref()?
                .container_statuses
                .as_ref()?
                .iter()
                .find(|c| c.name == "cilium-agent")?
                .clone();
            (agent.restart_count >= 1 && !agent.ready)
                .then(|| p.metadata.name.clone())
                .flatten()
        })
    })
    .await;
    (sim, client, pod, "cilium-agent".into())
}
