//! `talosboot_cilium` with the real OpenTofu CLI against the embedded Talos cluster (the real control plane) (or a real one:
//! `TALOSBOOT_TEST_KUBECONFIG`), observed only through the Kubernetes API.
//!
//! Index: fresh install then an empty plan; out-of-band values drift planned and repaired; a user
//! value restoring SYS_MODULE (capabilities diagnosis, tainted); the Service IP forced (i/o
//! timeout diagnosis); a stuck `pending-install` release repaired; inline-manifest adoption
//! keeping every uid; import; destroy with both policies; a Lease held by another client; API
//! faults during apply; a hung installer (deadline diagnosis); an interrupt during apply.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret, ServiceAccount};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;
use talos_sim::faults::Matcher;

use crate::harness::{REQUIRED_PROVIDERS, TestCluster, Workspace};

pub(crate) const NS: &str = "kube-system";
pub(crate) const MANAGED: &str = "app.kubernetes.io/managed-by=talosboot";

pub(crate) fn root(cluster: &TestCluster, body: &str) -> String {
    format!(
        "{REQUIRED_PROVIDERS}\n{}\n{body}\n",
        cluster.provider_block()
    )
}

pub(crate) fn cilium(extra: &str) -> String {
    format!("resource \"talosboot_cilium\" \"this\" {{\n  version = \"1.18.4\"\n{extra}\n}}\n")
}

pub(crate) fn workspace(cluster: &TestCluster, body: &str) -> Workspace {
    let ws = Workspace::new(&root(cluster, body));
    ws.init();
    ws
}

/// Status labels of the release's records, by revision.
async fn release_history(client: &kube::Client, name: &str) -> BTreeMap<i64, String> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let list = secrets
        .list_metadata(&ListParams::default().labels(&format!("owner=helm,name={name}")))
        .await
        .expect("list release records");
    list.items
        .into_iter()
        .filter_map(|s| {
            let labels = s.metadata.labels?;
            Some((
                labels.get("version")?.parse().ok()?,
                labels.get("status")?.clone(),
            ))
        })
        .collect()
}

pub(crate) async fn current_status(client: &kube::Client) -> Option<String> {
    release_history(client, "cilium").await.into_values().last()
}

/// Bootstrap objects and Leases talosboot left behind in kube-system.
pub(crate) async fn leftovers(client: &kube::Client) -> Vec<String> {
    let params = ListParams::default().labels(MANAGED);
    let mut out = Vec::new();
    let names = |kind: &str, items: Vec<Option<String>>| {
        items
            .into_iter()
            .map(|n| format!("{kind}/{}", n.unwrap_or_default()))
            .collect::<Vec<_>>()
    };
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    out.extend(names(
        "Job",
        jobs.list_metadata(&params)
            .await
            .expect("jobs")
            .items
            .into_iter()
            .map(|m| m.metadata.name)
            .collect(),
    ));
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), NS);
    out.extend(names(
        "ServiceAccount",
        sas.list_metadata(&params)
            .await
            .expect("sas")
            .items
            .into_iter()
            .map(|m| m.metadata.name)
            .collect(),
    ));
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    out.extend(names(
        "ConfigMap",
        cms.list_metadata(&params)
            .await
            .expect("cms")
            .items
            .into_iter()
            .map(|m| m.metadata.name)
            .collect(),
    ));
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    out.extend(names(
        "Lease",
        leases
            .list_metadata(&params)
            .await
            .expect("leases")
            .items
            .into_iter()
            .map(|m| m.metadata.name)
            .collect(),
    ));
    out
}

pub(crate) async fn nodes_ready(client: &kube::Client) -> bool {
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes.list(&ListParams::default()).await.expect("nodes");
    !list.items.is_empty()
        && list.items.iter().all(|n| {
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
}

/// Leftovers go in the background (Job deletion propagates); wait for them to be gone.
pub(crate) async fn assert_no_leftovers(client: &kube::Client) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = leftovers(client).await;
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "bootstrap objects left behind: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fresh_cluster_gets_cilium_ready_and_the_next_plan_is_empty() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let ws = workspace(
        &cluster,
        &format!(
            "{}\noutput \"agents\" {{ value = talosboot_cilium.this.agents }}\noutput \"status\" {{ value = talosboot_cilium.this.status }}",
            cilium("")
        ),
    );
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        plan.stdout
            .contains("talosboot_cilium.this will be created"),
        "{}",
        plan.text()
    );
    ws.apply();
    assert!(
        nodes_ready(&client).await,
        "every node is Ready without the not-ready taint"
    );
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
    let outputs = ws.outputs();
    assert_eq!(outputs["status"]["value"], "deployed");
    assert_eq!(
        outputs["agents"]["value"]["ready"],
        outputs["agents"]["value"]["desired"]
    );
    assert_no_leftovers(&client).await;
    assert!(!ws.plan_has_changes(), "second plan is empty");
}

/// Runs `helm ARGS` the way an operator would by hand: a Job on the host network via KubePrism.
pub(crate) async fn helm_by_hand(client: &kube::Client, args: &[&str]) {
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    let name = format!("by-hand-{}", std::process::id());
    // As on a real cluster, the operator's pod needs RBAC: a ServiceAccount bound to cluster-admin.
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("sa");
    let _ = Api::<ServiceAccount>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &sa)
        .await;
    let binding: k8s_openapi::api::rbac::v1::ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NS}],
    }))
    .expect("binding");
    let _ = Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await;
    let mut command = vec!["helm"];
    command.extend(args);
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never", "hostNetwork": true, "dnsPolicy": "Default",
            "serviceAccountName": name, "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "helm", "image": "alpine/helm:3.18.4", "command": command,
                "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": "localhost"}, {"name": "KUBERNETES_SERVICE_PORT", "value": "7445"}]}]}}},
    }))
    .expect("job");
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("create job");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let j = jobs.get(&name).await.expect("get job");
        let done = j.status.and_then(|s| s.conditions).unwrap_or_default();
        if done
            .iter()
            .any(|c| c.type_ == "Complete" && c.status == "True")
        {
            return;
        }
        assert!(
            !done
                .iter()
                .any(|c| c.type_ == "Failed" && c.status == "True"),
            "helm by hand failed"
        );
        assert!(Instant::now() < deadline, "helm by hand did not finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn values_changed_out_of_band_show_as_an_update_and_apply_converges() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let ws = workspace(
        &cluster,
        &cilium("  values = [yamlencode({ hubble = { relay = { enabled = true } } })]"),
    );
    ws.apply();
    assert!(!ws.plan_has_changes());
    helm_by_hand(
        &client,
        &[
            "upgrade",
            "cilium",
            "cilium",
            "--repo",
            "https://helm.cilium.io",
            "--version",
            "1.18.4",
            "-n",
            NS,
            "--set",
            "hubble.relay.enabled=false",
        ],
    )
    .await;
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        plan.stdout.contains("will be updated in-place"),
        "{}",
        plan.text()
    );
    assert!(
        plan.stdout.contains("values_sha256"),
        "the diff names the drifted values hash:\n{}",
        plan.stdout
    );
    assert!(
        plan.flat()
            .contains("Release values differ from the configuration")
            && plan
                .flat()
                .contains("helm get values -n kube-system cilium"),
        "the plan says the cluster's values get replaced:\n{}",
        plan.text()
    );
    ws.apply();
    assert!(!ws.plan_has_changes(), "converged");
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_user_value_restoring_sys_module_fails_with_the_capabilities_diagnosis_and_taints() {
    let cluster = TestCluster::start().await;
    let ws = workspace(
        &cluster,
        &cilium(
            r#"  timeout = "2m"
  set = [{ name = "securityContext.capabilities.ciliumAgent", value = "{CHOWN,KILL,NET_ADMIN,NET_RAW,IPC_LOCK,SYS_ADMIN,SYS_RESOURCE,DAC_OVERRIDE,FOWNER,SETGID,SETUID,SYS_MODULE}" }]"#,
        ),
    );
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success);
    let text = out.flat();
    assert!(
        text.contains("unable to apply caps: operation not permitted"),
        "{text}"
    );
    assert!(
        text.contains("Diagnosis: a container requested the SYS_MODULE capability"),
        "{text}"
    );
    assert!(text.contains("Fix: remove SYS_MODULE"), "{text}");
    assert!(
        ws.state_text().contains("\"status\": \"tainted\""),
        "failed create is kept, tainted:\n{}",
        ws.state_text()
    );
    // Fixing the configuration repairs it on the next apply.
    ws.write("main.tf", &root(&cluster, &cilium("")));
    ws.apply();
    assert!(!ws.plan_has_changes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_broken_upgrade_fails_until_fixed_and_the_fix_waits_for_its_own_pods() {
    // The real controllers roll out as a real cluster does: the broken revision's agents are
    // still crashing when the fix's wait starts.
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let good = cilium("  timeout = \"2m\"");
    let bad = cilium(
        r#"  timeout = "2m"
  set = [{ name = "securityContext.capabilities.ciliumAgent", value = "{CHOWN,KILL,NET_ADMIN,NET_RAW,IPC_LOCK,SYS_ADMIN,SYS_RESOURCE,DAC_OVERRIDE,FOWNER,SETGID,SETUID,SYS_MODULE}" }]"#,
    );
    let ws = workspace(&cluster, &good);
    ws.apply();
    ws.write("main.tf", &root(&cluster, &bad));
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success, "{}", out.text());
    assert!(
        out.flat().contains("Fix: remove SYS_MODULE"),
        "{}",
        out.text()
    );
    // The same broken configuration again (a CI retry): it must not turn green.
    let plan = ws.run(&["plan", "-no-color", "-detailed-exitcode"]);
    assert_eq!(
        plan.code,
        Some(2),
        "the unready release plans a new wait:\n{}",
        plan.text()
    );
    let retry = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(
        !retry.success,
        "a retry of the broken apply fails again:\n{}",
        retry.text()
    );
    assert!(retry.flat().contains("SYS_MODULE"), "{}", retry.text());
    // The fix: the old revision's agents still crash while they are replaced; the wait is for the
    // new ones.
    ws.write("main.tf", &root(&cluster, &good));
    let fixed = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(fixed.success, "the fix applies:\n{}", fixed.text());
    assert!(!ws.plan_has_changes());
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_service_ip_before_the_cni_gets_the_io_timeout_diagnosis() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let ws = workspace(
        &cluster,
        &cilium(
            r#"  job = { env = { KUBERNETES_SERVICE_HOST = "10.96.0.1", KUBERNETES_SERVICE_PORT = "443" } }"#,
        ),
    );
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success);
    let text = out.flat();
    assert!(
        text.contains("dial tcp 10.96.0.1:443: i/o timeout"),
        "{text}"
    );
    assert!(
        text.contains(
            "Fix: point the client at an API endpoint outside the Service CIDR: `api_endpoint`"
        ),
        "{text}"
    );
    if cluster.nodes_are_emulated() {
        assert!(
            text.contains("kube-proxy is disabled in this cluster"),
            "the test cluster runs no kube-proxy: {text}"
        );
    }
    assert!(
        text.contains("kubectl -n kube-system logs job/"),
        "names the kept Job for kubectl logs: {text}"
    );
    assert_eq!(current_status(&client).await, None, "nothing was installed");
    assert!(
        !ws.state_text().contains("talosboot_cilium"),
        "nothing in state: nothing exists"
    );
}

/// A Helm record as a killed `helm install` leaves it.
async fn pending_install_record(client: &kube::Client) {
    let record = json!({"name": "cilium", "namespace": NS, "version": 1,
        "info": {"status": "pending-install", "description": "Initial install underway"},
        "chart": {"metadata": {"name": "cilium", "version": "1.18.4", "appVersion": "1.18.4"}},
        "config": {}, "manifest": ""});
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(record.to_string().as_bytes()).expect("gzip");
    let field = base64::engine::general_purpose::STANDARD.encode(gz.finish().expect("gzip"));
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "sh.helm.release.v1.cilium.v1", "labels": {"owner": "helm", "name": "cilium", "status": "pending-install", "version": "1"}},
        "type": "helm.sh/release.v1",
        "stringData": {"release": field},
    }))
    .expect("secret");
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create record");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_release_stuck_in_pending_install_is_repaired() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    pending_install_record(&client).await;
    let ws = workspace(&cluster, &cilium(""));
    let out = ws.apply();
    assert!(
        out.flat().contains("pending-install"),
        "says what it repaired: {}",
        out.text()
    );
    let history = release_history(&client, "cilium").await;
    // Unlocked (marked failed), then superseded by the upgrade from it, as Helm does.
    assert_eq!(
        history.get(&1).map(String::as_str),
        Some("superseded"),
        "{history:?}"
    );
    assert_eq!(
        history.values().last().map(String::as_str),
        Some("deployed"),
        "{history:?}"
    );
    assert!(!ws.plan_has_changes());
}

async fn uids(client: &kube::Client) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let ds = Api::<DaemonSet>::namespaced(client.clone(), NS)
        .get("cilium")
        .await
        .expect("ds");
    out.insert(
        "DaemonSet/cilium".into(),
        ds.metadata.uid.unwrap_or_default(),
    );
    let d = Api::<Deployment>::namespaced(client.clone(), NS)
        .get("cilium-operator")
        .await
        .expect("deploy");
    out.insert(
        "Deployment/cilium-operator".into(),
        d.metadata.uid.unwrap_or_default(),
    );
    let cm = Api::<ConfigMap>::namespaced(client.clone(), NS)
        .get("cilium-config")
        .await
        .expect("cm");
    out.insert(
        "ConfigMap/cilium-config".into(),
        cm.metadata.uid.unwrap_or_default(),
    );
    for sa in ["cilium", "cilium-operator"] {
        let s = Api::<ServiceAccount>::namespaced(client.clone(), NS)
            .get(sa)
            .await
            .expect("sa");
        out.insert(
            format!("ServiceAccount/{sa}"),
            s.metadata.uid.unwrap_or_default(),
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn inline_manifest_cilium_is_adopted_in_place() {
    let cluster = TestCluster::start_with(talos_sim::talos::TalosConfig {
        inline_cilium: Some("1.18.4".into()),
        ..Default::default()
    })
    .await;
    if !cluster.nodes_are_emulated() {
        return; // needs a cluster whose Cilium came from inline manifests
    }
    let client = cluster.client().await;
    let before = uids(&client).await;
    let ws = workspace(&cluster, &cilium(""));
    let refused = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!refused.success);
    assert!(
        refused.flat().contains("set `adopt_existing = true`"),
        "{}",
        refused.text()
    );
    assert_eq!(
        uids(&client).await,
        before,
        "a refused install touches nothing"
    );
    ws.write(
        "main.tf",
        &root(&cluster, &cilium("  adopt_existing = true")),
    );
    ws.apply();
    assert_eq!(uids(&client).await, before, "adoption keeps every object");
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
    let ds = Api::<DaemonSet>::namespaced(client.clone(), NS)
        .get("cilium")
        .await
        .expect("ds");
    let annotations = ds.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations
            .get("meta.helm.sh/release-name")
            .map(String::as_str),
        Some("cilium")
    );
    assert!(!ws.plan_has_changes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_imported_release_plans_empty_when_the_configuration_matches() {
    let cluster = TestCluster::start().await;
    let first = workspace(&cluster, &cilium(""));
    first.apply();
    let import = format!(
        "import {{\n  to = talosboot_cilium.this\n  id = \"kube-system/cilium\"\n}}\n{}",
        cilium("")
    );
    let second = workspace(&cluster, &import);
    let plan = second.ok(&["plan", "-no-color"]);
    assert!(
        plan.flat()
            .contains("1 to import, 0 to add, 0 to change, 0 to destroy"),
        "{}",
        plan.text()
    );
    second.apply();
    assert!(!second.plan_has_changes(), "empty plan after import");
    let bad = workspace(
        &cluster,
        "import {\n  to = talosboot_cilium.this\n  id = \"cilium\"\n}\nresource \"talosboot_cilium\" \"this\" {\n  version = \"1.18.4\"\n}\n",
    );
    let out = bad.run(&["plan", "-no-color"]);
    assert!(
        !out.success && out.flat().contains("use `<namespace>/<release name>`"),
        "{}",
        out.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn destroy_keeps_cilium_with_keep_and_uninstalls_by_default() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let ws = workspace(&cluster, &cilium("  deletion_policy = \"keep\""));
    ws.apply();
    let out = ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(
        out.flat().contains("(kube-system/cilium) left running"),
        "{}",
        out.text()
    );
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
    let ds: Api<DaemonSet> = Api::namespaced(client.clone(), NS);
    assert!(ds.get_opt("cilium").await.expect("get").is_some());

    let import = format!(
        "import {{\n  to = talosboot_cilium.this\n  id = \"kube-system/cilium\"\n}}\n{}",
        cilium("")
    );
    let ws = workspace(&cluster, &import);
    ws.apply();
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(
        release_history(&client, "cilium").await.is_empty(),
        "release records gone"
    );
    assert!(
        ds.get_opt("cilium").await.expect("get").is_none(),
        "agents uninstalled"
    );
    assert_no_leftovers(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lease_held_by_another_run_is_waited_for_and_taken_over_once_expired() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let now = k8s_openapi::jiff::Timestamp::now();
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "talosboot-helm-kube-system-cilium"},
        "spec": {"holderIdentity": "talosboot@other-runner/pid-1/run-killed", "leaseDurationSeconds": 4,
                 "acquireTime": now, "renewTime": now, "leaseTransitions": 0},
    }))
    .expect("lease");
    Api::<Lease>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &lease)
        .await
        .expect("create lease");
    let ws = workspace(&cluster, &cilium(""));
    let started = Instant::now();
    let out = ws.apply();
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "waited for the other holder"
    );
    assert!(
        out.flat()
            .contains("talosboot@other-runner/pid-1/run-killed"),
        "says whom it waited for: {}",
        out.text()
    );
    assert_no_leftovers(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn api_faults_and_a_dropped_watch_during_apply_do_not_fail_it() {
    let cluster = TestCluster::start().await;
    let Some(faults) = cluster.faults() else {
        return; // an external cluster: no fault proxy
    };
    let client = cluster.client().await;
    let ws = workspace(&cluster, &cilium(""));
    faults.throttle(3, 1, Matcher::path("/jobs"));
    faults.fail_requests(503, 2, Matcher::path("/configmaps"));
    faults.fail_requests(500, 2, Matcher::path("/leases"));
    faults.drop_connections(2, Matcher::path("watch"));
    ws.apply();
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
    assert!(!ws.plan_has_changes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hung_installer_ends_at_the_deadline_with_its_diagnosis() {
    let cluster = TestCluster::start().await;
    if !cluster.nodes_are_emulated() {
        return; // the hang is the node layer's pod-level fault
    }
    let client = cluster.client().await;
    let ws = workspace(
        &cluster,
        &cilium(
            "  timeout = \"30s\"\n  job = { annotations = { \"talos-sim.dev/hang\" = \"true\" } }",
        ),
    );
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success);
    let text = out.flat();
    assert!(text.contains("DeadlineExceeded"), "{text}");
    assert!(
        text.contains("Diagnosis: the bootstrap did not finish within `timeout`"),
        "{text}"
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    assert!(
        leases
            .list_metadata(&ListParams::default().labels(MANAGED))
            .await
            .expect("leases")
            .items
            .is_empty(),
        "Lease released"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_interrupt_during_apply_deletes_the_job_and_frees_the_lease() {
    let cluster = TestCluster::start().await;
    if !cluster.nodes_are_emulated() {
        return; // the hang is the node layer's pod-level fault
    }
    let client = cluster.client().await;
    let ws = workspace(
        &cluster,
        &cilium(
            "  timeout = \"1h\"\n  job = { annotations = { \"talos-sim.dev/hang\" = \"true\" } }",
        ),
    );
    let child = ws
        .command(&["apply", "-auto-approve", "-no-color"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start apply");
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    let deadline = Instant::now() + Duration::from_secs(60);
    while jobs
        .list_metadata(&ListParams::default().labels(MANAGED))
        .await
        .expect("jobs")
        .items
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the bootstrap Job never appeared"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("wait");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&exit.stdout),
        String::from_utf8_lossy(&exit.stderr)
    );
    assert!(!exit.status.success());
    assert!(
        text.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .contains("interrupted"),
        "says what was interrupted: {text}"
    );
    assert_no_leftovers(&client).await;
}

/// `helm_release.cilium` as hashicorp/helm v3 writes it (schema version 2: `set`/`set_sensitive`
/// lists of `{name, value, type}`, `metadata` an object with the release's values as JSON), made
/// from the state of a one-resource root (so its envelope is the CLI's own), with the root's
/// `values` and `set_sensitive`.
pub(crate) fn helm_release_state(
    tfstate: &str,
    values: serde_json::Value,
    set_sensitive: serde_json::Value,
) -> String {
    let mut s: serde_json::Value = serde_json::from_str(tfstate).expect("state json");
    let resource = &mut s["resources"][0];
    resource["type"] = json!("helm_release");
    resource["name"] = json!("cilium");
    resource["provider"] = json!("provider[\"registry.opentofu.org/hashicorp/helm\"]");
    let instance = &mut resource["instances"][0];
    instance["schema_version"] = json!(2);
    instance
        .as_object_mut()
        .expect("instance")
        .remove("private");
    instance["attributes"] = json!({
        "id": "cilium", "name": "cilium", "namespace": NS, "chart": "cilium",
        "repository": "https://helm.cilium.io", "version": "1.18.4", "values": values, "set": [],
        "set_list": [], "set_sensitive": set_sensitive, "status": "deployed", "wait": true, "timeout": 300,
        "atomic": false, "create_namespace": false, "max_history": 0,
        "metadata": {"name": "cilium", "revision": 1, "namespace": NS, "chart": "cilium", "version": "1.18.4",
                     "app_version": "1.18.4", "values": "{}", "first_deployed": 0, "last_deployed": 0, "notes": ""},
    });
    s.to_string()
}

/// hashicorp/helm cannot be installed here (no registry): a cross-type move needs the source
/// provider present, not its schema, so the Go null provider's binary stands in for it.
pub(crate) fn stand_in_helm_provider(ws: &Workspace) {
    let stand_in = crate::harness::repo_root().join(
        ".tools/mirror/registry.terraform.io/hashicorp/null/2.1.2/linux_amd64/terraform-provider-null_v2.1.2_x4",
    );
    let dir = ws
        .path()
        .join("mirror/registry.opentofu.org/hashicorp/helm/3.0.2/linux_amd64");
    std::fs::create_dir_all(&dir).expect("mirror dir");
    std::fs::copy(&stand_in, dir.join("terraform-provider-helm_v3.0.2")).expect("stand-in");
    let rc = ws.read("cli.tfrc").replacen(
        "include = [",
        "include = [\"registry.opentofu.org/hashicorp/helm\", ",
        1,
    );
    ws.write("cli.tfrc", &rc);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_helm_release_moves_to_talosboot_cilium_without_touching_the_cluster() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let ws = workspace(&cluster, &cilium(""));
    ws.apply();
    let revisions = release_history(&client, "cilium").await;
    // The state a helm_release root has today.
    ws.write(
        "terraform.tfstate",
        &helm_release_state(&ws.state_text(), json!([]), json!([])),
    );
    stand_in_helm_provider(&ws);
    ws.write(
        "main.tf",
        &root(
            &cluster,
            &format!(
                "{}\nmoved {{\n  from = helm_release.cilium\n  to   = talosboot_cilium.this\n}}\n",
                cilium("")
            ),
        ),
    );
    ws.ok(&["init", "-no-color", "-upgrade"]);
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        plan.stdout
            .contains("helm_release.cilium has moved to talosboot_cilium.this"),
        "{}",
        plan.text()
    );
    assert!(
        plan.flat().contains("0 to add, 0 to change, 0 to destroy"),
        "{}",
        plan.text()
    );
    ws.apply();
    assert!(!ws.plan_has_changes(), "empty plan after the move");
    assert_eq!(
        release_history(&client, "cilium").await,
        revisions,
        "the cluster was not touched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn least_privilege_installs_cilium_and_leaves_no_role_behind() {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let ws = workspace(&cluster, &cilium("  rbac = \"minimal\""));
    ws.apply();
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
    assert!(!ws.plan_has_changes());
    let params = ListParams::default().labels(MANAGED);
    let roles = Api::<ClusterRole>::all(client.clone())
        .list_metadata(&params)
        .await
        .expect("roles");
    let bindings = Api::<ClusterRoleBinding>::all(client.clone())
        .list_metadata(&params)
        .await
        .expect("bindings");
    assert!(
        roles.items.is_empty() && bindings.items.is_empty(),
        "the run's RBAC is gone"
    );
    assert_no_leftovers(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn write_only_values_stay_out_of_state_and_a_changed_one_plans_an_update() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    // As users feed secrets: from an ephemeral variable (a literal would be in the configuration).
    let body = format!(
        "variable \"ca_key\" {{\n  type      = string\n  sensitive = true\n  ephemeral = true\n}}\n{}",
        cilium("  set_wo = [{ name = \"hubble.tls.ca.key\", value = var.ca_key }]")
    );
    let ws = workspace(&cluster, &body);
    ws.ok(&[
        "plan",
        "-no-color",
        "-out",
        "tfplan",
        "-var",
        "ca_key=WO-MARKER-ONE",
    ]);
    ws.ok(&[
        "apply",
        "-auto-approve",
        "-no-color",
        "-var",
        "ca_key=WO-MARKER-ONE",
        "tfplan",
    ]);
    let plan_json = ws.ok(&["show", "-json", "tfplan"]).stdout;
    assert!(!ws.state_text().contains("WO-MARKER-ONE"), "not in state");
    assert!(!plan_json.contains("WO-MARKER-ONE"), "not in the plan file");
    let same = ws.run(&[
        "plan",
        "-no-color",
        "-detailed-exitcode",
        "-var",
        "ca_key=WO-MARKER-ONE",
    ]);
    assert_eq!(
        same.code,
        Some(0),
        "same write-only value: no change\n{}",
        same.text()
    );
    let plan = ws.run(&[
        "plan",
        "-no-color",
        "-detailed-exitcode",
        "-var",
        "ca_key=WO-MARKER-TWO",
    ]);
    assert_eq!(
        plan.code,
        Some(2),
        "a changed write-only value plans an update:\n{}",
        plan.text()
    );
    assert!(plan.stdout.contains("values_sha256"), "{}", plan.stdout);
    assert!(!plan.text().contains("WO-MARKER-TWO"));
    ws.ok(&[
        "apply",
        "-auto-approve",
        "-no-color",
        "-var",
        "ca_key=WO-MARKER-TWO",
    ]);
    assert!(!ws.state_text().contains("WO-MARKER-TWO"));
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_talos_defaults_a_missing_service_host_is_warned_at_plan() {
    let cluster = TestCluster::shared().await;
    // A typo users make when they write the Talos values themselves.
    let ws = workspace(
        &cluster,
        &cilium(
            r#"  talos_defaults = false
  values = [yamlencode({ kubeProxyReplacement = true, k8sServiceHots = "localhost", k8sServicePort = 7445 })]"#,
        ),
    );
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        plan.flat()
            .contains("Cilium would need the Service IP before it exists"),
        "{}",
        plan.text()
    );
    assert!(
        plan.flat().contains("`k8sServiceHost` is not set"),
        "{}",
        plan.text()
    );
    let fixed = workspace(
        &cluster,
        &cilium(
            r#"  talos_defaults = false
  values = [yamlencode({ kubeProxyReplacement = true, k8sServiceHost = "localhost", k8sServicePort = 7445 })]"#,
        ),
    );
    let plan = fixed.ok(&["plan", "-no-color"]);
    assert!(
        !plan.flat().contains("Service IP before it exists"),
        "{}",
        plan.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn edits_that_change_nothing_in_the_release_are_bookkeeping() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let ws = workspace(&cluster, &cilium(""));
    ws.apply();
    let before = release_history(&client, "cilium").await;
    // The other spelling of the version, adoption switched on, the values written out as a
    // `set` that yields what the release already has (the Talos default `ipam.mode`).
    let edited = "resource \"talosboot_cilium\" \"this\" {\n  version        = \"v1.18.4\"\n  adopt_existing = true\n  set            = [{ name = \"ipam.mode\", value = \"kubernetes\" }]\n}\n";
    ws.write("main.tf", &root(&cluster, edited));
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        !plan.stdout.contains("(known after apply)"),
        "no upgrade planned:\n{}",
        plan.text()
    );
    ws.apply();
    assert_eq!(
        release_history(&client, "cilium").await,
        before,
        "no new revision"
    );
    assert!(!ws.plan_has_changes());
}

/// `timeout` takes what `helm_release` roots write (seconds, `timeout = 300`) and Go durations
/// (`1h30m`) on every resource; anything else fails validate on its attribute.
#[test]
fn timeout_takes_seconds_and_go_durations_on_every_resource() {
    let instance = "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: flux\n  namespace: flux-system\n";
    let root = |timeout: &str| {
        format!(
            r#"{REQUIRED_PROVIDERS}
provider "talosboot" {{}}

resource "talosboot_cilium" "this" {{
  version = "1.18.4"
  timeout = {timeout}
}}

resource "talosboot_helm_release" "app" {{
  name    = "app"
  chart   = "app"
  timeout = {timeout}
}}

resource "talosboot_flux_bootstrap" "flux" {{
  revision         = 1
  timeout          = {timeout}
  gitops_resources = {{ instance_yaml = {instance:?} }}
}}
"#
        )
    };
    for timeout in ["300", "\"1h30m\""] {
        let ws = Workspace::new(&root(timeout));
        ws.init();
        ws.ok(&["validate", "-no-color"]);
    }
    let ws = Workspace::new(&root("\"five minutes\""));
    ws.init();
    let out = ws.run(&["validate", "-no-color"]);
    let text = out.flat();
    assert!(!out.success, "{text}");
    assert_eq!(
        text.matches("is not a duration: use seconds (`300`) or a Go duration")
            .count(),
        3,
        "each resource names the accepted forms:\n{}",
        out.text()
    );
}
