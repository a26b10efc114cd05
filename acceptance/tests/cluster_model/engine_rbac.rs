//! talosboot's bootstrap engine with `rbac = "minimal"` against the simulated cluster with RBAC
//! enforced: the rules are derived by rendering the chart (`chart_rbac::install_rules`), the
//! Cilium install works with them and leaves no role, binding or render Job behind, and a run
//! missing a permission fails with a diagnosis naming the verb and resource.

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Client;
use kube::api::{Api, ListParams};
use talos_sim::SimConfig;
use talosboot::cluster::bootstrap::rbac::{RbacPolicy, Rule};
use talosboot::cluster::bootstrap::{
    self, BootstrapNamespace, Clients, EngineError, JobSettings, Rbac, RunOutcome, RunSpec,
};
use talosboot::cluster::chart_rbac;
use talosboot::cluster::helm_install::{self, ChartInstall, DEFAULT_HELM_IMAGE};
use talosboot::cluster::talos::talos_cilium_values;
use tokio_util::sync::CancellationToken;

use crate::common::*;

const TIMEOUT: Duration = Duration::from_secs(60);

fn cilium_chart() -> ChartInstall {
    // JSON is YAML: the Talos values as one values document.
    let values = talos_cilium_values("localhost", 7445).to_string();
    ChartInstall {
        release: "cilium".into(),
        namespace: "kube-system".into(),
        repository: Some("https://helm.cilium.io".into()),
        chart: "cilium".into(),
        version: "1.18.4".into(),
        values_yaml: vec![values],
        ..Default::default()
    }
}

fn cilium_spec(rbac: Rbac) -> RunSpec {
    let (command, files, secret_files) = cilium_chart().command(TIMEOUT);
    RunSpec {
        purpose: "install Cilium".into(),
        target: "helm/kube-system/cilium".into(),
        namespace: BootstrapNamespace::named("kube-system"),
        job: JobSettings::talos(DEFAULT_HELM_IMAGE),
        command,
        files,
        binary_files: Default::default(),
        secret_files,
        timeout: TIMEOUT,
        rbac,
        capture_output: false,
    }
}

fn clients(client: &Client) -> Clients {
    Clients {
        client: client.clone(),
        stream: client.clone(),
        endpoint: "talos-sim".into(),
    }
}

/// The rules `rbac = "minimal"` derives for the Cilium chart, by rendering it in the cluster.
async fn derived_rules(client: &Client) -> Vec<Rule> {
    chart_rbac::install_rules(
        &clients(client),
        &BootstrapNamespace::named("kube-system"),
        &JobSettings::talos(DEFAULT_HELM_IMAGE),
        &cilium_chart(),
        None,
        Instant::now() + TIMEOUT,
        &CancellationToken::new(),
    )
    .await
    .unwrap_or_else(|e| panic!("render run failed: {e}: {:?} {:?}", e.diagnosis, e.report))
}

async fn run(client: &Client, spec: &RunSpec) -> Result<RunOutcome, EngineError> {
    bootstrap::run(&clients(client), spec, &CancellationToken::new()).await
}

/// RBAC objects the engine created (label `app.kubernetes.io/managed-by=talosboot`).
async fn engine_rbac_objects(client: &Client) -> Vec<String> {
    let lp = ListParams::default().labels("app.kubernetes.io/managed-by=talosboot");
    let mut out = Vec::new();
    for i in Api::<ClusterRole>::all(client.clone())
        .list(&lp)
        .await
        .unwrap()
    {
        out.push(format!(
            "ClusterRole/{}",
            i.metadata.name.unwrap_or_default()
        ));
    }
    for i in Api::<ClusterRoleBinding>::all(client.clone())
        .list(&lp)
        .await
        .unwrap()
    {
        out.push(format!(
            "ClusterRoleBinding/{}",
            i.metadata.name.unwrap_or_default()
        ));
    }
    for i in Api::<Role>::all(client.clone()).list(&lp).await.unwrap() {
        out.push(format!("Role/{}", i.metadata.name.unwrap_or_default()));
    }
    for i in Api::<RoleBinding>::all(client.clone())
        .list(&lp)
        .await
        .unwrap()
    {
        out.push(format!(
            "RoleBinding/{}",
            i.metadata.name.unwrap_or_default()
        ));
    }
    out
}

fn grants(rules: &[Rule], group: &str, resource: &str) -> bool {
    rules.iter().any(|r| {
        r.api_groups.iter().any(|g| g == group) && r.resources.iter().any(|x| x == resource)
    })
}

#[tokio::test]
async fn minimal_rbac_installs_cilium_and_leaves_no_role_behind() {
    let (_sim, client) = start_strict(SimConfig::default()).await;
    let job = JobSettings {
        rbac: RbacPolicy::Minimal,
        ..JobSettings::talos(DEFAULT_HELM_IMAGE)
    };
    let installed = helm_install::install_or_upgrade(
        &clients(&client),
        &BootstrapNamespace::named("kube-system"),
        &job,
        &cilium_chart(),
        TIMEOUT,
        &CancellationToken::new(),
    )
    .await
    .unwrap_or_else(|e| {
        panic!(
            "minimal install failed: {e}: {:?} {:?}",
            e.diagnosis, e.report
        )
    });
    assert!(
        installed.run.warnings.is_empty(),
        "{:?}",
        installed.run.warnings
    );
    assert_eq!(
        installed.release.map(|r| r.status.to_string()).as_deref(),
        Some("deployed")
    );
    assert_eq!(engine_rbac_objects(&client).await, Vec::<String>::new());
    let jobs = Api::<Job>::namespaced(client.clone(), "kube-system")
        .list(&ListParams::default().labels("app.kubernetes.io/managed-by=talosboot"))
        .await
        .expect("jobs");
    assert!(jobs.items.is_empty(), "render and install Jobs are gone");
    // The chart's own RBAC was created (which needed escalate/bind).
    Api::<ClusterRole>::all(client.clone())
        .get("cilium")
        .await
        .expect("chart's ClusterRole");
    Api::<ClusterRoleBinding>::all(client.clone())
        .get("cilium-operator")
        .await
        .expect("chart's binding");
}

#[tokio::test]
async fn the_derived_rules_are_what_the_chart_renders_and_no_more() {
    let (_sim, client) = start_strict(SimConfig::default()).await;
    let rules = derived_rules(&client).await;
    assert!(grants(&rules, "apps", "daemonsets"), "{rules:?}");
    assert!(grants(&rules, "apps", "deployments"), "{rules:?}");
    assert!(grants(&rules, "rbac.authorization.k8s.io", "clusterroles"));
    for (group, resource) in [
        ("apps", "statefulsets"),
        ("batch", "jobs"),
        ("", "namespaces"),
        ("", "pods"),
        ("", "nodes"),
        ("*", "*"),
    ] {
        assert!(
            !grants(&rules, group, resource),
            "{group}/{resource}: {rules:?}"
        );
    }
    // Rendering needed no permission and left nothing behind.
    assert_eq!(engine_rbac_objects(&client).await, Vec::<String>::new());
}

fn without(rules: Vec<Rule>, pred: impl Fn(&Rule) -> bool) -> Vec<Rule> {
    rules.into_iter().filter(|r| !pred(r)).collect()
}

#[tokio::test]
async fn a_missing_permission_fails_with_a_diagnosis_naming_verb_and_resource() {
    let (_sim, client) = start_strict(SimConfig::default()).await;
    // No apps rules: the DaemonSet cannot be looked up.
    let rules = without(derived_rules(&client).await, |r| r.api_groups == ["apps"]);
    let e = run(&client, &cilium_spec(Rbac::Minimal(rules)))
        .await
        .expect_err("must fail");
    let d = e
        .diagnosis
        .clone()
        .unwrap_or_else(|| panic!("no diagnosis: {e} {:?}", e.report));
    assert!(
        d.cause
            .contains("resource `daemonsets` in API group \"apps\""),
        "{}",
        d.cause
    );
    assert!(d.fix.contains("on resource `daemonsets`"), "{}", d.fix);
    assert!(
        d.signature
            .contains("is forbidden: User \"system:serviceaccount:kube-system:talosboot-"),
        "{}",
        d.signature
    );
    // The failed run's roles are gone as well (only the Job is kept for `kubectl logs`).
    assert_eq!(engine_rbac_objects(&client).await, Vec::<String>::new());
}

#[tokio::test]
async fn a_chart_with_rbac_needs_escalate_and_bind() {
    let (_sim, client) = start_strict(SimConfig::default()).await;
    let rules = without(derived_rules(&client).await, |r| {
        r.verbs.iter().any(|v| v == "escalate")
    });
    let e = run(&client, &cilium_spec(Rbac::Minimal(rules)))
        .await
        .expect_err("must fail");
    let d = e
        .diagnosis
        .clone()
        .unwrap_or_else(|| panic!("no diagnosis: {e} {:?}", e.report));
    assert!(
        d.fix.contains("`escalate` and `bind`"),
        "{} / {}",
        d.signature,
        d.fix
    );
}

#[tokio::test]
async fn cluster_admin_stays_the_default_and_works_under_rbac() {
    let (_sim, client) = start_strict(SimConfig::default()).await;
    assert_eq!(Rbac::default(), Rbac::ClusterAdmin);
    run(&client, &cilium_spec(Rbac::ClusterAdmin))
        .await
        .expect("cluster-admin run");
    assert_eq!(engine_rbac_objects(&client).await, Vec::<String>::new());
}
