//! Pod Security admission as Talos configures it: `baseline` enforced everywhere but
//! `kube-system`, namespace labels honoured, the real server's messages, and pods of
//! controllers refused the same way (the Job's `FailedCreate` event, then a retry).

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use talos_sim::SimConfig;

use crate::common::*;

fn pod(name: &str, spec: Value) -> Pod {
    from_json(json!({"metadata": {"name": name}, "spec": spec}))
}

fn host_pod(name: &str) -> Pod {
    pod(
        name,
        json!({"hostNetwork": true, "tolerations": [{"operator": "Exists"}],
               "containers": [{"name": "c", "image": "busybox:1", "command": ["sh", "-c", "echo hi"]}]}),
    )
}

async fn namespace(client: &kube::Client, name: &str, labels: Value) {
    let ns: Api<Namespace> = Api::all(client.clone());
    ns.create(
        &PostParams::default(),
        &from_json(json!({"metadata": {"name": name, "labels": labels}})),
    )
    .await
    .expect("namespace created");
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn host_network_pod_is_forbidden_by_the_baseline_default() {
    let (_sim, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let e = api_error(
        pods.create(&PostParams::default(), &host_pod("x"))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 403);
    assert_eq!(e.reason, "Forbidden");
    assert_eq!(
        e.message,
        "pods \"x\" is forbidden: violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)"
    );
    // A server-side dry run answers the same (a client can check before creating a Job).
    let e = api_error(
        pods.create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &host_pod("x"),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 403);
    // Several violations, in the real evaluator's order, joined with ", ".
    let bad = pod(
        "y",
        json!({"hostNetwork": true, "hostPID": true,
               "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
               "containers": [{"name": "c", "image": "busybox:1",
                   "securityContext": {"privileged": true, "capabilities": {"add": ["NET_ADMIN", "CHOWN"]}},
                   "ports": [{"containerPort": 80, "hostPort": 80}]}]}),
    );
    let e = api_error(pods.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!(
        e.message,
        "pods \"y\" is forbidden: violates PodSecurity \"baseline:latest\": non-default capabilities (container \"c\" must not include \"NET_ADMIN\" in securityContext.capabilities.add), host namespaces (hostNetwork=true, hostPID=true), hostPath volumes (volume \"root\"), hostPort (container \"c\" uses hostPort 80), privileged (container \"c\" must not set securityContext.privileged=true)"
    );
    // kube-system is exempt, whatever its labels say.
    let system: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    system
        .create(&PostParams::default(), &host_pod("x"))
        .await
        .expect("kube-system is exempt");
}

#[tokio::test]
async fn namespace_labels_win_over_the_default() {
    let (_sim, client) = start().await;
    namespace(
        &client,
        "open",
        json!({"pod-security.kubernetes.io/enforce": "privileged"}),
    )
    .await;
    namespace(
        &client,
        "strict",
        json!({"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}),
    )
    .await;
    let open: Api<Pod> = Api::namespaced(client.clone(), "open");
    open.create(&PostParams::default(), &host_pod("x"))
        .await
        .expect("privileged namespace admits host networking");
    let strict: Api<Pod> = Api::namespaced(client.clone(), "strict");
    let plain = pod(
        "plain",
        json!({"containers": [{"name": "c", "image": "busybox:1"}]}),
    );
    let e = api_error(
        strict
            .create(&PostParams::default(), &plain)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        e.message,
        "pods \"plain\" is forbidden: violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
    );
    // The same pod is fine under the default baseline.
    let default: Api<Pod> = Api::namespaced(client.clone(), "default");
    default
        .create(&PostParams::default(), &plain)
        .await
        .expect("baseline admits it");
    // A level label that is not a level is refused.
    let ns: Api<Namespace> = Api::all(client.clone());
    let e = api_error(
        ns.patch(
            "open",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "strict"}}}),
            ),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "Namespace \"open\" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted"
    );
}

#[tokio::test]
async fn host_network_job_gets_failed_create_until_the_namespace_is_privileged() {
    let (_sim, client) = start().await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let job = bootstrap_job(
        "boot",
        "busybox:1",
        &["sh".into(), "-c".into(), "echo done".into()],
        json!([]),
    );
    jobs.create(&PostParams::default(), &job).await.unwrap();
    let message = eventually(10, "FailedCreate event", || async {
        events_for(&client, "default", "boot")
            .await
            .into_iter()
            .find(|(r, _)| r == "FailedCreate")
            .map(|(_, m)| m)
    })
    .await;
    let rest = message
        .strip_prefix("Error creating: pods \"boot-")
        .unwrap_or_else(|| panic!("{message}"));
    assert_eq!(
        &rest[5..],
        "\" is forbidden: violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)",
        "{message}"
    );
    // Retried, not counted as a failure; labelling the namespace lets the next try through.
    let j = jobs.get("boot").await.unwrap();
    assert_eq!(j.status.and_then(|s| s.failed).unwrap_or(0), 0);
    allow_host_pods(&client, "default").await;
    eventually(10, "job complete", || async {
        job_condition(&jobs.get("boot").await.ok()?, "Complete")
    })
    .await;
    assert_eq!(job_log(&client, "default", "boot").await, "done\n");
}

#[tokio::test]
async fn enforcement_can_be_turned_off() {
    let (_sim, client) = start_with(SimConfig {
        pod_security: false,
        ..SimConfig::default()
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &host_pod("x"))
        .await
        .expect("no Pod Security admission");
}
