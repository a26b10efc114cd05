//! One release written in turn by both Helm majors, with the real binaries (issue 27, item 5):
//! talosboot with a Helm 3 image, the real Helm 4 by hand, talosboot with the (default) Helm 4
//! image, talosboot with a Helm 3 image, Helm 4 by hand again (server-side this time), then a
//! Helm 3 image refused on that server-side release (the plan warns first), the default image
//! applying server-side, and the deliberate switch (`job.apply_method = "csa"`). At every step:
//! what the plan names, each record's `apply_method`, the data source, the value diff, and what
//! `helm history` and `helm get values` print.
//!
//! The chart is the project's generic one (a ConfigMap, no pods), so it runs on the shared cluster
//! in a namespace of its own, without a CNI.

use std::collections::BTreeMap;
use std::io::Read;
use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret, ServiceAccount};
use kube::Api;
use kube::api::{ListParams, LogParams, PostParams};
use serde_json::json;

use crate::harness::{REQUIRED_PROVIDERS, TestCluster, Workspace};

const HELM3: &str = "alpine/helm:3.18.4";
const HELM4: &str = "alpine/helm:4.3.2";
const RELEASE: &str = "mixed";
const CHART: &str = "oci://example.com/charts/foo";
/// Where the by-hand Jobs run (Pod Security exempt, as Talos configures it).
const JOBS_NS: &str = "kube-system";

/// The root: the release with `greeting`, `job` as given (`""`: none, the default image), and the
/// data source after it.
fn root(cluster: &TestCluster, ns: &str, greeting: &str, job: &str) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
{provider}
resource "talosboot_helm_release" "mixed" {{
  name             = "{RELEASE}"
  namespace        = "{ns}"
  create_namespace = true
  repository       = "oci://example.com/charts"
  chart            = "foo"
  version          = "0.1.0"
  values           = [yamlencode({{ greeting = "{greeting}" }})]
  {job}
}}

data "talosboot_helm_release" "mixed" {{
  name       = "{RELEASE}"
  namespace  = "{ns}"
  depends_on = [talosboot_helm_release.mixed]
}}

output "apply_method" {{
  value = coalesce(data.talosboot_helm_release.mixed.apply_method, "none")
}}

output "revision" {{
  value = data.talosboot_helm_release.mixed.revision
}}
"#,
        provider = cluster.provider_block()
    )
}

fn image(image: &str) -> String {
    format!("job = {{ image = {{ repository = \"{image}\" }} }}")
}

/// Revision -> `apply_method` of each record (`None`: no such field, as Helm 3 writes), and its
/// status label.
async fn records(client: &kube::Client, ns: &str) -> BTreeMap<i64, (Option<String>, String)> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let list = secrets
        .list(&ListParams::default().labels(&format!("owner=helm,name={RELEASE}")))
        .await
        .expect("records");
    let b64 = base64::engine::general_purpose::STANDARD;
    list.items
        .into_iter()
        .map(|s| {
            let labels = s.metadata.labels.unwrap_or_default();
            let revision: i64 = labels["version"].parse().expect("revision");
            let field = &s.data.expect("data")["release"].0;
            let gz = b64.decode(field).expect("base64");
            let mut text = String::new();
            flate2::read::GzDecoder::new(gz.as_slice())
                .read_to_string(&mut text)
                .expect("gzip");
            let record: serde_json::Value = serde_json::from_str(&text).expect("json");
            let method = record
                .get("apply_method")
                .and_then(|m| m.as_str())
                .map(str::to_owned);
            (revision, (method, labels["status"].clone()))
        })
        .collect()
}

/// Runs the real Helm of `image` by hand in a Job (cluster-admin, host network, KubePrism) and
/// returns its output.
async fn helm(client: &kube::Client, image: &str, script: &str) -> String {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = crate::unique(&format!("mixed-{call}"));
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("sa");
    Api::<ServiceAccount>::namespaced(client.clone(), JOBS_NS)
        .create(&PostParams::default(), &sa)
        .await
        .expect("sa");
    let binding: k8s_openapi::api::rbac::v1::ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": JOBS_NS}],
    }))
    .expect("binding");
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": {"by-hand": name}}, "spec": {
            "restartPolicy": "Never", "hostNetwork": true, "dnsPolicy": "Default",
            "serviceAccountName": name, "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "helm", "image": image, "command": ["sh", "-c", script],
                "env": [
                    {"name": "KUBERNETES_SERVICE_HOST", "value": "localhost"},
                    {"name": "KUBERNETES_SERVICE_PORT", "value": "7445"},
                    {"name": "HELM_CACHE_HOME", "value": "/tmp/helm/cache"},
                    {"name": "HELM_CONFIG_HOME", "value": "/tmp/helm/config"},
                    {"name": "HELM_DATA_HOME", "value": "/tmp/helm/data"},
                ]}]}}},
    }))
    .expect("job");
    let jobs: Api<Job> = Api::namespaced(client.clone(), JOBS_NS);
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("create job");
    let deadline = Instant::now() + Duration::from_secs(90);
    let succeeded = loop {
        let j = jobs.get(&name).await.expect("get job");
        let conditions = j.status.and_then(|s| s.conditions).unwrap_or_default();
        let is = |t: &str| {
            conditions
                .iter()
                .any(|c| c.type_ == t && c.status == "True")
        };
        if is("Complete") {
            break true;
        }
        if is("Failed") {
            break false;
        }
        assert!(Instant::now() < deadline, "helm by hand did not finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), JOBS_NS);
    let pod = pods
        .list(&ListParams::default().labels(&format!("by-hand={name}")))
        .await
        .expect("pods")
        .items
        .into_iter()
        .next()
        .and_then(|p| p.metadata.name)
        .expect("the Job's pod");
    let log = pods
        .logs(&pod, &LogParams::default())
        .await
        .unwrap_or_default();
    assert!(succeeded, "helm by hand ({image}) failed:\n{log}");
    log
}

/// `helm history` and `helm get values` as the real Helm 4 prints them.
async fn history_and_values(client: &kube::Client, ns: &str) -> String {
    helm(
        client,
        HELM4,
        &format!("helm history {RELEASE} -n {ns} && echo --- && helm get values {RELEASE} -n {ns}"),
    )
    .await
}

/// The statuses `helm history` prints, in revision order.
fn history_statuses(printed: &str) -> Vec<String> {
    printed
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("---"))
        .filter_map(|l| l.split('\t').nth(2).map(|s| s.trim().to_owned()))
        .collect()
}

fn apply_method_output(ws: &Workspace) -> String {
    ws.outputs()["apply_method"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The record of each revision, its `apply_method` as written: `None` for Helm 3's.
fn methods(records: &BTreeMap<i64, (Option<String>, String)>) -> Vec<(i64, Option<&str>)> {
    records
        .iter()
        .map(|(r, (m, _))| (*r, m.as_deref()))
        .collect()
}

on_both_clis!(async a_release_written_by_both_helm_majors_keeps_its_apply_method_and_converges);
/// The mixed history (see the module's header), step by step.
async fn a_release_written_by_both_helm_majors_keeps_its_apply_method_and_converges() {
    let cluster = TestCluster::shared().await;
    let client = cluster.client().await;
    let ns = crate::unique("mixed");

    // 1. talosboot with a Helm 3 image: a record without `apply_method`.
    let ws = Workspace::new(&root(&cluster, &ns, "one", &image(HELM3)));
    ws.init();
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(plan.stdout.contains("will be created"), "{}", plan.text());
    ws.apply();
    let r = records(&client, &ns).await;
    assert_eq!(methods(&r), [(1, None)]);
    assert_eq!(apply_method_output(&ws), "none");
    let printed = history_and_values(&client, &ns).await;
    assert_eq!(history_statuses(&printed), ["deployed"], "{printed}");
    assert!(printed.contains("greeting: one"), "{printed}");
    assert!(!ws.plan_has_changes());

    // 2. The real Helm 4 from outside: it follows the record (none: client-side) and says so.
    helm(
        &client,
        HELM4,
        &format!("helm upgrade {RELEASE} {CHART} --version 0.1.0 -n {ns} --set greeting=two"),
    )
    .await;
    let r = records(&client, &ns).await;
    assert_eq!(methods(&r), [(1, None), (2, Some("csa"))]);
    let printed = history_and_values(&client, &ns).await;
    assert_eq!(
        history_statuses(&printed),
        ["superseded", "deployed"],
        "{printed}"
    );
    assert!(printed.contains("greeting: two"), "{printed}");
    // The plan names the drift and each value the upgrade changes back.
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        plan.stdout.contains("will be updated in-place"),
        "{}",
        plan.text()
    );
    let flat = plan.flat();
    assert!(
        flat.contains("Release values differ from the configuration") && flat.contains("greeting"),
        "{}",
        plan.text()
    );

    // 3. talosboot with the default image (Helm 4): an upgrade that keeps client-side apply, as
    // the newest record says.
    ws.write("main.tf", &root(&cluster, &ns, "three", ""));
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        plan.stdout.contains("will be updated in-place"),
        "{}",
        plan.text()
    );
    assert!(!plan.flat().contains("Helm 3 installer"), "{}", plan.text());
    ws.apply();
    let r = records(&client, &ns).await;
    assert_eq!(methods(&r), [(1, None), (2, Some("csa")), (3, Some("csa"))]);
    assert_eq!(apply_method_output(&ws), "csa");
    let printed = history_and_values(&client, &ns).await;
    assert_eq!(
        history_statuses(&printed),
        ["superseded", "superseded", "deployed"],
        "{printed}"
    );
    assert!(printed.contains("greeting: three"), "{printed}");
    assert!(!ws.plan_has_changes());

    // 4. talosboot with a Helm 3 image: allowed on a client-side release; Helm 3 rewrites the
    // record it supersedes without `apply_method` (as measured, field notes §10).
    ws.write("main.tf", &root(&cluster, &ns, "four", &image(HELM3)));
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(!plan.flat().contains("Helm 3 installer"), "{}", plan.text());
    ws.apply();
    let r = records(&client, &ns).await;
    assert_eq!(r[&4], (None, "deployed".to_owned()));
    assert_eq!(
        r[&3].0, None,
        "Helm 3 drops the field from the record it supersedes"
    );
    assert_eq!(
        r[&2].0.as_deref(),
        Some("csa"),
        "older records stay as they are"
    );
    assert_eq!(apply_method_output(&ws), "none");
    let printed = history_and_values(&client, &ns).await;
    assert!(printed.contains("greeting: four"), "{printed}");
    assert!(!ws.plan_has_changes());

    // 5. Helm 4 again from outside, moving the release to server-side apply.
    helm(
        &client,
        HELM4,
        &format!(
            "helm upgrade {RELEASE} {CHART} --version 0.1.0 -n {ns} --reuse-values --server-side=true"
        ),
    )
    .await;
    let r = records(&client, &ns).await;
    assert_eq!(r[&5], (Some("ssa".to_owned()), "deployed".to_owned()));

    // 6. A Helm 3 image on that server-side release: the plan warns, naming the image and the
    // record; the apply refuses and changes nothing.
    ws.write("main.tf", &root(&cluster, &ns, "six", &image(HELM3)));
    let plan = ws.ok(&["plan", "-no-color"]);
    let flat = plan.flat();
    assert!(
        flat.contains("Helm 3 installer on a server-side release")
            && flat.contains(HELM3)
            && flat.contains(&format!("sh.helm.release.v1.{RELEASE}.v5"))
            && flat.contains("job.apply_method = \"csa\""),
        "{}",
        plan.text()
    );
    let refused = ws.run(&["apply", "-auto-approve", "-no-color", "-input=false"]);
    assert!(!refused.success, "{}", refused.text());
    let flat = refused.flat();
    assert!(
        flat.contains("talosboot refused the install") && flat.contains("apply_method: ssa"),
        "{}",
        refused.text()
    );
    let r = records(&client, &ns).await;
    assert_eq!(r.keys().max(), Some(&5), "no revision written");
    assert_eq!(r[&5], (Some("ssa".to_owned()), "deployed".to_owned()));

    // 7. The default (Helm 4) image upgrades server-side, as the record says.
    ws.write("main.tf", &root(&cluster, &ns, "seven", ""));
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(!plan.flat().contains("Helm 3 installer"), "{}", plan.text());
    ws.apply();
    let r = records(&client, &ns).await;
    assert_eq!(r[&6], (Some("ssa".to_owned()), "deployed".to_owned()));
    assert_eq!(
        r[&5].0.as_deref(),
        Some("ssa"),
        "kept when superseded by Helm 4"
    );
    assert_eq!(apply_method_output(&ws), "ssa");
    let printed = history_and_values(&client, &ns).await;
    assert!(printed.contains("greeting: seven"), "{printed}");
    assert!(!ws.plan_has_changes());

    // 8. The deliberate switch: a Helm 3 image with `job.apply_method = "csa"`.
    ws.write(
        "main.tf",
        &root(
            &cluster,
            &ns,
            "eight",
            &format!("job = {{\n    image        = {{ repository = \"{HELM3}\" }}\n    apply_method = \"csa\"\n  }}"),
        ),
    );
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(!plan.flat().contains("Helm 3 installer"), "{}", plan.text());
    ws.apply();
    let r = records(&client, &ns).await;
    assert_eq!(r[&7], (None, "deployed".to_owned()));
    assert_eq!(apply_method_output(&ws), "none");
    let printed = history_and_values(&client, &ns).await;
    assert_eq!(history_statuses(&printed).len(), 7, "{printed}");
    assert!(printed.contains("greeting: eight"), "{printed}");
    assert!(!ws.plan_has_changes());
}
