//! kubectl in a bootstrap Job (the flux-operator-bootstrap image, as the module runs it): a shell
//! script applies its input manifests over KubePrism with the real kubectl, and what it created
//! is in the cluster. (Ported from the retired simulator's suite.)

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::common::{self, from_json};

/// The Job's own namespace on the shared cluster.
const NS: &str = "kubectl-script";
const IMAGE: &str = "ghcr.io/controlplaneio-fluxcd/flux-operator-bootstrap:v0.8.0";
const MANIFEST: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kubectl-demo\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  namespace: kubectl-demo\ndata:\n  k: v\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_shell_script_applies_manifests_over_kubeprism() {
    let (_cluster, client) = common::shared().await;
    common::privileged_namespace(&client, NS).await;
    common::cluster_admin(&client, NS).await;
    let inputs: ConfigMap =
        from_json(json!({"metadata": {"name": "inputs"}, "data": {"manifests.yaml": MANIFEST}}));
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &inputs)
        .await
        .expect("inputs");
    let script = "set -e\necho applying\nkubectl apply -f /inputs/manifests.yaml\nkubectl get configmap demo -n kubectl-demo -o name && echo done";
    let job: Job = from_json(json!({
        "metadata": {"name": "script"},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "hostNetwork": true, "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}],
            "volumes": [
                {"name": "inputs", "configMap": {"name": "inputs"}},
                {"name": "tmp", "emptyDir": {}},
            ],
            "containers": [{
                "name": "bootstrap", "image": IMAGE, "command": ["sh", "-c", script],
                "env": [
                    {"name": "KUBERNETES_SERVICE_HOST", "value": "localhost"},
                    {"name": "KUBERNETES_SERVICE_PORT", "value": "7445"},
                    {"name": "HOME", "value": "/tmp"},
                ],
                "volumeMounts": [
                    {"name": "inputs", "mountPath": "/inputs", "readOnly": true},
                    {"name": "tmp", "mountPath": "/tmp"},
                ],
            }],
        }}},
    }));
    let (succeeded, log) = common::run_job(&client, NS, &job, 90).await;
    assert!(succeeded, "{log}");
    assert!(
        log.contains(
            "applying\nnamespace/kubectl-demo created\nconfigmap/demo created\nconfigmap/demo\ndone"
        ),
        "{log}"
    );
    let created = Api::<ConfigMap>::namespaced(client.clone(), "kubectl-demo")
        .get("demo")
        .await
        .expect("the ConfigMap the script applied");
    assert_eq!(created.data.unwrap_or_default()["k"], "v");
}
