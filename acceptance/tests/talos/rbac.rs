//! RBAC seen from a bootstrap Job on the real control plane: the real Helm and kubectl print the
//! real authorizer's refusals (the signatures the engine's diagnoses match), and a bound
//! ServiceAccount installs while the namespace's default one still cannot.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::common::{self, from_json};

const NS: &str = "kube-system";

fn job_as(name: &str, sa: &str, image: &str, command: &[&str]) -> Job {
    from_json(
        json!({"metadata": {"name": name}, "spec": {"backoffLimit": 0,
        "template": {"spec": {"hostNetwork": true, "restartPolicy": "Never", "serviceAccountName": sa,
            "tolerations": [{"operator": "Exists"}],
            "volumes": [{"name": "tmp", "emptyDir": {}}],
            "containers": [{"name": "c", "image": image, "command": command,
                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                "env": [
                    {"name": "KUBERNETES_SERVICE_HOST", "value": "localhost"},
                    {"name": "KUBERNETES_SERVICE_PORT", "value": "7445"},
                    {"name": "HOME", "value": "/tmp"}]}]}}}}),
    )
}

/// Runs the Job to its end; (succeeded, log).
async fn run(client: &kube::Client, job: Job) -> (bool, String) {
    common::run_job(client, NS, &job, 90).await
}

const HELM: &str = "alpine/helm:3.18.4";
const INSTALL: &str = "cd /tmp && helm create demo >/dev/null && helm upgrade --install demo ./demo --namespace kube-system";

#[tokio::test(flavor = "multi_thread")]
async fn refusals_reach_the_job_log_and_a_bound_account_installs() {
    let (_cluster, client) = common::shared().await;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NS);
    for name in ["installer", "reader"] {
        accounts
            .create(
                &PostParams::default(),
                &from_json(json!({"metadata": {"name": name}})),
            )
            .await
            .unwrap();
    }
    // No permission: the real Helm's first request is refused.
    let (ok, log) = run(
        &client,
        job_as("helm-forbidden", "installer", HELM, &["sh", "-c", INSTALL]),
    )
    .await;
    assert!(!ok, "{log}");
    assert!(
        log.contains("Error: query: failed to query with labels: secrets is forbidden: User \"system:serviceaccount:kube-system:installer\" cannot list resource \"secrets\" in API group \"\" in the namespace \"kube-system\""),
        "{log}"
    );
    // kubectl prints the refusal its own way.
    let (ok, log) = run(
        &client,
        job_as(
            "kubectl-forbidden",
            "reader",
            "bitnami/kubectl:1.37",
            &["kubectl", "create", "namespace", "x"],
        ),
    )
    .await;
    assert!(!ok, "{log}");
    assert!(
        log.contains("Error from server (Forbidden): namespaces is forbidden: User \"system:serviceaccount:kube-system:reader\" cannot create resource \"namespaces\" in API group \"\" at the cluster scope"),
        "{log}"
    );
    // Bound to cluster-admin, the installer installs; the default account still cannot.
    let binding: ClusterRoleBinding = from_json(json!({"metadata": {"name": "installer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": NS}]}));
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let (ok, log) = run(
        &client,
        job_as("as-installer", "installer", HELM, &["sh", "-c", INSTALL]),
    )
    .await;
    assert!(ok, "{log}");
    assert!(log.contains("STATUS: deployed"), "{log}");
    let (ok, log) = run(
        &client,
        job_as("as-default", "default", HELM, &["sh", "-c", INSTALL]),
    )
    .await;
    assert!(!ok, "{log}");
    assert!(
        log.contains(
            "User \"system:serviceaccount:kube-system:default\" cannot list resource \"secrets\""
        ),
        "{log}"
    );
}
