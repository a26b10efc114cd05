//! talosboot's bootstrap engine with `Rbac::Minimal` against the simulated cluster with RBAC
//! enforced: the Cilium install works with `cilium_install_rules()`, leaves no role or binding
//! behind, and a run missing a permission fails with a diagnosis naming the verb and resource.

use std::time::Duration;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Client;
use kube::api::{Api, ListParams};
use talos_sim::SimConfig;
use talosboot::cluster::bootstrap::rbac::{Rule, cilium_install_rules};
use talosboot::cluster::bootstrap::{
    self, BootstrapNamespace, Clients, EngineError, JobSettings, Rbac, RunOutcome, RunSpec,
};
use talosboot::cluster::helm_install::{ChartInstall, DEFAULT_HELM_IMAGE};
use talosboot::cluster::talos::talos_cilium_values;
use tokio_util::sync::CancellationToken;

use crate::common::*;

fn cilium_spec(rbac: Rbac) -> RunSpec {
    // JSON is YAML: the Talos values as one values document.
    let values = talos_cilium_values("localhost", 7445).to_string();
    let chart = ChartInstall {
        release: "cilium".into(),
        namespace: "kube-system".into(),
        repository: Some("https://helm.cilium.io".into()),
        chart: "cilium".into(),
        version: "1.18.4".into(),
        values_yaml: vec![values],
        sensitive_values_yaml: Vec::new(),
        create_namespace: false,
        take_ownership: false,
        description: None,
        atomic: false,
        history_max: None,
        chart_archive: None,
    };
    let timeout = Duration::from_secs(60);
    let (command, files, secret_files) = chart.command(timeout);
    RunSpec {
        purpose: "install Cilium".into(),
        target: "helm/kube-system/cilium".into(),
        namespace: BootstrapNamespace::named("kube-system"),
        job: JobSettings::talos(DEFAULT_HELM_IMAGE),
        command,
        files,
        binary_files: Default::default(),
        secret_files,
        timeout,
        rbac,
    }
}

async fn run(client: &Client, spec: &RunSpec) -> Result<RunOutcome, EngineError> {
    let clients = Clients {
        client: client.clone(),
        stream: client.clone(),
        endpoint: "talos-sim".into(),
    };
    bootstrap::run(&clients, spec, &CancellationToken::new()).await
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

#[tokio::test]
async fn minimal_rbac_installs_cilium_and_leaves_no_role_behind() {
    let (_sim, client) = start_strict(SimConfig::default()).await;
    let outcome = run(&client, &cilium_spec(Rbac::Minimal(cilium_install_rules())))
        .await
        .unwrap_or_else(|e| panic!("minimal run failed: {e}: {:?} {:?}", e.diagnosis, e.report));
    assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);
    assert_eq!(engine_rbac_objects(&client).await, Vec::<String>::new());
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

fn without(rules: Vec<Rule>, pred: impl Fn(&Rule) -> bool) -> Vec<Rule> {
    rules.into_iter().filter(|r| !pred(r)).collect()
}

#[tokio::test]
async fn a_missing_permission_fails_with_a_diagnosis_naming_verb_and_resource() {
    let (_sim, client) = start_strict(SimConfig::default()).await;
    // No apps rules: the DaemonSet cannot be looked up.
    let rules = without(cilium_install_rules(), |r| r.api_groups == ["apps"]);
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
    let rules = without(cilium_install_rules(), |r| {
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
