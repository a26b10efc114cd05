//! Helm records written by the real Helm, in a bootstrap-like Job, read by the provider's code.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;
use talosboot::cluster::helm;

use super::common::{self, from_json};

/// A small chart (a ConfigMap from a value, and a Deployment), packaged by the real Helm.
fn packaged_chart(dir: &std::path::Path) -> Vec<u8> {
    let chart = dir.join("demo");
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: demo\nversion: 1.2.3\nappVersion: \"4.5\"\n",
    )
    .unwrap();
    std::fs::write(chart.join("values.yaml"), "greeting: hello\nreplicas: 1\n").unwrap();
    std::fs::write(
        chart.join("templates/config.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-config\ndata:\n  greeting: {{ .Values.greeting | quote }}\n",
    )
    .unwrap();
    std::fs::write(
        chart.join("templates/deployment.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  replicas: {{ .Values.replicas }}\n  selector:\n    matchLabels: {app: demo}\n  template:\n    metadata:\n      labels: {app: demo}\n    spec:\n      hostNetwork: true\n      tolerations: [{operator: Exists}]\n      containers:\n      - name: pause\n        image: registry.k8s.io/pause:3.10\n",
    )
    .unwrap();
    let helm = talos_sim::talos::tools::Tools::find().expect("tools").helm;
    let out = std::process::Command::new(helm)
        .args(["package", "--destination"])
        .arg(dir)
        .arg(&chart)
        .output()
        .expect("helm package");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(dir.join("demo-1.2.3.tgz")).expect("the package")
}

const HELM3_IMAGE: &str = "alpine/helm:3.18.4";
const HELM4_IMAGE: &str = "alpine/helm:4.3.2";

fn helm_job(name: &str, image: &str, script: &str) -> Job {
    from_json(json!({
        "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never", "hostNetwork": true, "dnsPolicy": "Default",
            "tolerations": [{"operator": "Exists"}],
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532},
            "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "charts", "configMap": {"name": "charts"}}],
            "containers": [{
                "name": "helm", "image": image, "command": ["sh", "-c", script],
                "env": [
                    {"name": "KUBERNETES_SERVICE_HOST", "value": "localhost"},
                    {"name": "KUBERNETES_SERVICE_PORT", "value": "7445"},
                    {"name": "HOME", "value": "/tmp"},
                ],
                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, {"name": "charts", "mountPath": "/charts", "readOnly": true}],
            }],
        }}},
    }))
}

async fn run_job(
    client: &kube::Client,
    cluster: &talos_sim::talos::TalosCluster,
    name: &str,
    image: &str,
    script: &str,
) -> String {
    let jobs: Api<Job> = Api::namespaced(client.clone(), "helm-records");
    jobs.create(&PostParams::default(), &helm_job(name, image, script))
        .await
        .expect("job");
    common::eventually(90, &format!("job {name} finished"), || async {
        let job = jobs.get(name).await.ok()?;
        job.status?
            .conditions?
            .iter()
            .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
            .then_some(())
    })
    .await;
    let (_, log, _) = common::run_kubectl(
        cluster,
        &["logs", "-n", "helm-records", &format!("job/{name}")],
    );
    let job = jobs.get(name).await.expect("job");
    let complete = job
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Complete");
    assert!(complete, "job {name} failed:\n{log}");
    log
}

#[tokio::test(flavor = "multi_thread")]
async fn the_provider_reads_what_the_real_helm_wrote() {
    let (cluster, client) = common::shared().await;
    common::privileged_namespace(&client, "helm-records").await;
    common::cluster_admin(&client, "helm-records").await;
    let dir = tempfile::tempdir().unwrap();
    let package = packaged_chart(dir.path());
    let charts: ConfigMap = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("charts".into()),
            ..Default::default()
        },
        binary_data: Some(BTreeMap::from([(
            "demo-1.2.3.tgz".to_owned(),
            ByteString(package),
        )])),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), "helm-records")
        .create(&PostParams::default(), &charts)
        .await
        .expect("charts");
    run_job(&client, cluster, "install", HELM3_IMAGE, "helm upgrade --install demo /charts/demo-1.2.3.tgz --namespace apps --create-namespace --set greeting=hi").await;

    let release = helm::release::current_release(client.clone(), "talos", "apps", "demo")
        .await
        .expect("the record reads")
        .expect("a release");
    assert_eq!(
        (
            release.name.as_str(),
            release.revision,
            release.status.as_str()
        ),
        ("demo", 1, "deployed")
    );
    assert_eq!(
        (
            release.chart.as_str(),
            release.chart_version.as_str(),
            release.app_version.as_str()
        ),
        ("demo", "1.2.3", "4.5")
    );
    assert_eq!(
        release.values_sha256,
        helm::release::values_digest(Some(&json!({"greeting": "hi"})))
    );
    assert!(
        release
            .workloads
            .iter()
            .any(|w| w.kind == "Deployment" && w.name == "demo"),
        "{:?}",
        release.workloads
    );
    // The objects are the chart's, created by Helm as the Job's ServiceAccount.
    let config = Api::<ConfigMap>::namespaced(client.clone(), "apps")
        .get("demo-config")
        .await
        .expect("rendered");
    assert_eq!(config.data.unwrap()["greeting"], "hi");

    run_job(&client, cluster, "upgrade", HELM3_IMAGE, "helm upgrade demo /charts/demo-1.2.3.tgz --namespace apps --reuse-values --set greeting=again && helm history demo -n apps").await;
    let upgraded = helm::release::current_release(client.clone(), "talos", "apps", "demo")
        .await
        .expect("reads")
        .expect("a release");
    assert_eq!(
        (upgraded.revision, upgraded.status.as_str()),
        (2, "deployed")
    );
    assert_eq!(
        upgraded.values_sha256,
        helm::release::values_digest(Some(&json!({"greeting": "again"})))
    );
}

/// Which Helm a pod runs follows its image's tag (acceptance/README.md): the real Helm 4 for a
/// `4.x` tag, and its release record, which adds `apply_method` (server-side apply on install),
/// still reads as the provider expects.
#[tokio::test(flavor = "multi_thread")]
async fn a_helm_4_image_runs_the_real_helm_4_whose_record_the_provider_reads() {
    let (cluster, client) = common::shared().await;
    let _ = cluster;
    // A namespace of its own: the other test of this file shares the process's cluster.
    const NS: &str = "helm4-records";
    common::privileged_namespace(&client, NS).await;
    common::cluster_admin(&client, NS).await;
    let dir = tempfile::tempdir().unwrap();
    let charts: ConfigMap = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("charts".into()),
            ..Default::default()
        },
        binary_data: Some(BTreeMap::from([(
            "demo-1.2.3.tgz".to_owned(),
            ByteString(packaged_chart(dir.path())),
        )])),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &charts)
        .await
        .expect("charts");
    for (image, version) in [(HELM4_IMAGE, "helm v4.3.2"), (HELM3_IMAGE, "helm v3.18.4")] {
        let job = helm_job(
            &format!("version-{}", &version[6..7]),
            image,
            "helm version --template 'helm {{.Version}}'; echo",
        );
        let (succeeded, log) = common::run_job(&client, NS, &job, 90).await;
        assert!(succeeded && log.contains(version), "{image}: {log}");
    }

    let job = helm_job(
        "install4",
        HELM4_IMAGE,
        "helm upgrade --install demo4 /charts/demo-1.2.3.tgz --namespace apps4 --create-namespace --set greeting=four",
    );
    let (succeeded, log) = common::run_job(&client, NS, &job, 90).await;
    assert!(succeeded, "{log}");

    let release = helm::release::current_release(client.clone(), "talos", "apps4", "demo4")
        .await
        .expect("the Helm 4 record reads")
        .expect("a release");
    assert_eq!(
        (
            release.revision,
            release.status.as_str(),
            release.chart_version.as_str()
        ),
        (1, "deployed", "1.2.3")
    );
    assert_eq!(
        release.values_sha256,
        helm::release::values_digest(Some(&json!({"greeting": "four"})))
    );
    // Helm 4 installs by server-side apply, as field manager `helm`.
    let config = Api::<ConfigMap>::namespaced(client.clone(), "apps4")
        .get("demo4-config")
        .await
        .expect("rendered");
    let managers: Vec<(String, String)> = config
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|m| {
            (
                m.manager.unwrap_or_default(),
                m.operation.unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        managers.contains(&("helm".to_owned(), "Apply".to_owned())),
        "{managers:?}"
    );
}
