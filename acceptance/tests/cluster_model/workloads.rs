//! Deployments, ReplicaSets and DaemonSets as a client sees them; `cilium status --wait`.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::*;

fn sleeper_template(extra_env: &str) -> serde_json::Value {
    json!({"metadata": {"labels": {"app": "sleeper"}}, "spec": {"hostNetwork": true, "tolerations": [{"operator": "Exists"}],
        "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "3600"], "env": [{"name": "X", "value": extra_env}]}]}})
}

#[tokio::test]
async fn deployment_rolls_out_a_new_replica_set_on_template_change() {
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let d: Deployment = from_json(
        json!({"metadata": {"name": "sleeper"}, "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "sleeper"}}, "template": sleeper_template("1")}}),
    );
    deploys.create(&PostParams::default(), &d).await.unwrap();
    let available = |generation: i64| {
        let deploys = deploys.clone();
        async move {
            let d = deploys.get("sleeper").await.ok()?;
            let s = d.status?;
            let cond = s
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "Available" && c.status == "True");
            (s.observed_generation == Some(generation)
                && s.updated_replicas == Some(2)
                && s.available_replicas == Some(2)
                && s.replicas == Some(2))
            .then_some(cond)
            .flatten()
        }
    };
    let cond = eventually(10, "deployment available", || available(1)).await;
    assert_eq!(cond.reason.as_deref(), Some("MinimumReplicasAvailable"));
    let patch = json!({"spec": {"template": sleeper_template("2")}});
    deploys
        .patch("sleeper", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually(10, "rolled out", || available(2)).await;
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let list = rss
        .list(&ListParams::default().labels("app=sleeper"))
        .await
        .unwrap();
    let mut scales: Vec<i32> = list
        .items
        .iter()
        .map(|rs| rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(-1))
        .collect();
    scales.sort();
    assert_eq!(scales, [0, 2], "old ReplicaSet scaled to 0, new one at 2");
    let d = deploys.get("sleeper").await.unwrap();
    let progressing = d
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Progressing")
        .unwrap();
    assert_eq!(
        progressing.reason.as_deref(),
        Some("NewReplicaSetAvailable")
    );
}

#[tokio::test]
async fn daemon_set_runs_on_nodes_its_pods_tolerate() {
    let (_sim, client) = start_with(talos_sim::SimConfig {
        workers: 2,
        ..Default::default()
    })
    .await;
    allow_host_pods(&client, "default").await;
    let dss: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    let workers_only = json!({"metadata": {"name": "agent"}, "spec": {"selector": {"matchLabels": {"app": "agent"}},
        "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {"hostNetwork": true,
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}});
    dss.create(&PostParams::default(), &from_json(workers_only))
        .await
        .unwrap();
    let status = eventually(10, "daemonset ready", || async {
        let s = dss.get("agent").await.ok()?.status?;
        (s.number_ready == 2 && s.updated_number_scheduled == Some(2)).then_some(s)
    })
    .await;
    assert_eq!(
        status.desired_number_scheduled, 2,
        "not on the control plane: its taint is not tolerated"
    );
}

#[tokio::test]
async fn cilium_status_wait_succeeds_after_a_talos_install_and_times_out_otherwise() {
    let (_sim, client) = start().await;
    bootstrap_cilium(&client).await;
    let status = |name: &str| {
        let argv: Vec<String> = ["cilium", "status", "--wait", "--wait-duration", "5m"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        bootstrap_job(
            name,
            "quay.io/cilium/cilium-cli:v0.18.7",
            &argv,
            kubeprism_env(),
        )
    };
    let done = run_job(&client, "kube-system", &status("cilium-status"), 20).await;
    assert!(job_condition(&done, "Complete").is_some());
    let log = job_log(&client, "kube-system", "cilium-status").await;
    assert!(
        log.contains("Cilium:             OK")
            && log
                .contains("DaemonSet              cilium                   Desired: 2, Ready: 2/2"),
        "{log}"
    );

    let (_sim2, client2) = start().await;
    let sets: Vec<String> = talos_cilium_sets()
        .into_iter()
        .filter(|s| !s.starts_with("securityContext"))
        .collect();
    let job = bootstrap_job(
        "cilium-install",
        "quay.io/cilium/cilium-cli:v0.18.7",
        &cilium_install(&sets),
        kubeprism_env(),
    );
    run_job(&client2, "kube-system", &job, 20).await;
    let argv: Vec<String> = ["cilium", "status", "--wait", "--wait-duration", "30s"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let done = run_job(
        &client2,
        "kube-system",
        &bootstrap_job(
            "cilium-status",
            "quay.io/cilium/cilium-cli:v0.18.7",
            &argv,
            kubeprism_env(),
        ),
        20,
    )
    .await;
    assert!(job_condition(&done, "Failed").is_some());
    let log = job_log(&client2, "kube-system", "cilium-status").await;
    assert!(log.contains("Error: Unable to determine status:  timeout while waiting for status to become successful: context deadline exceeded"), "{log}");
}

#[tokio::test]
async fn missing_service_account_shows_as_replica_failure_until_it_exists() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    let (_sim, client) = start().await;
    allow_host_pods(&client, "default").await;
    let mut template = sleeper_template("1");
    template["spec"]["serviceAccountName"] = json!("runner");
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let d: Deployment = from_json(
        json!({"metadata": {"name": "sleeper"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "sleeper"}}, "template": template}}),
    );
    deploys.create(&PostParams::default(), &d).await.unwrap();
    let failure = eventually(10, "Deployment ReplicaFailure", || async {
        let d = deploys.get("sleeper").await.ok()?;
        d.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "ReplicaFailure" && c.status == "True")
    })
    .await;
    assert_eq!(failure.reason.as_deref(), Some("FailedCreate"));
    let message = failure.message.unwrap_or_default();
    assert!(
        message.ends_with(
            "error looking up service account default/runner: serviceaccount \"runner\" not found"
        ),
        "{message}"
    );
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let rs = rss
        .list(&ListParams::default().labels("app=sleeper"))
        .await
        .unwrap()
        .items
        .remove(0);
    let rs_name = rs.metadata.name.unwrap();
    let events = events_for(&client, "default", &rs_name).await;
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "FailedCreate" && m == &format!("Error creating: {message}")),
        "{events:?}"
    );

    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    sas.create(
        &PostParams::default(),
        &from_json(json!({"metadata": {"name": "runner"}})),
    )
    .await
    .unwrap();
    eventually(10, "available without ReplicaFailure", || async {
        let s = deploys.get("sleeper").await.ok()?.status?;
        let conds = s.conditions.unwrap_or_default();
        (s.available_replicas == Some(1) && !conds.iter().any(|c| c.type_ == "ReplicaFailure"))
            .then_some(())
    })
    .await;
}
