//! talosboot's bootstrap engine with `rbac = "minimal"` on the real control plane (the real RBAC
//! authorizer): the rules derived by rendering the Cilium chart, a run missing a permission failing
//! with a diagnosis naming the verb and resource, the chart's own RBAC needing `escalate`/`bind`,
//! and the minimal install succeeding and leaving no role, binding or Job behind.

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Client;
use kube::api::{Api, ListParams};
use talosboot::cluster::Kube;
use talosboot::cluster::engine::rbac::{RbacPolicy, Rule};
use talosboot::cluster::engine::{
    self, BootstrapNamespace, EngineError, JobSettings, Rbac, RunOutcome, RunSpec,
};
use talosboot::cluster::helm::{self, install::DEFAULT_HELM_IMAGE};
use tokio_util::sync::CancellationToken;

use super::cilium::cilium_chart;
use super::common;

const TIMEOUT: Duration = Duration::from_secs(180);
const VERSION: &str = "1.18.4";

fn cilium_spec(rbac: Rbac) -> RunSpec {
    let (command, files, secret_files) =
        cilium_chart(VERSION).command(TIMEOUT, None, DEFAULT_HELM_IMAGE);
    RunSpec {
        purpose: "install Cilium".into(),
        target: "helm/kube-system/cilium".into(),
        namespace: BootstrapNamespace::named("kube-system"),
        job: JobSettings::talos(DEFAULT_HELM_IMAGE),
        command,
        env: helm::install::helm_env(),
        files,
        binary_files: Default::default(),
        secret_files,
        timeout: TIMEOUT,
        rbac,
        capture_output: false,
    }
}

fn clients(client: &Client) -> Kube {
    Kube {
        client: client.clone(),
        stream: client.clone(),
        endpoint: "talos-sim".into(),
        retry_budget: talosboot::cluster::RetryBudget::default(),
    }
}

async fn derived_rules(client: &Client) -> Vec<Rule> {
    helm::rbac::install_rules(
        &clients(client),
        &BootstrapNamespace::named("kube-system"),
        &JobSettings::talos(DEFAULT_HELM_IMAGE),
        &cilium_chart(VERSION),
        None,
        Instant::now() + TIMEOUT,
        &CancellationToken::new(),
    )
    .await
    .unwrap_or_else(|e| panic!("render run failed: {e}: {:?} {:?}", e.diagnosis, e.report))
}

async fn run(client: &Client, spec: &RunSpec) -> Result<RunOutcome, EngineError> {
    engine::run(&clients(client), spec, &CancellationToken::new()).await
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

/// Engine Jobs still present in kube-system (the real garbage collector removes their pods).
async fn engine_jobs(client: &Client) -> Vec<String> {
    Api::<Job>::namespaced(client.clone(), "kube-system")
        .list(&ListParams::default().labels("app.kubernetes.io/managed-by=talosboot"))
        .await
        .expect("jobs")
        .items
        .into_iter()
        .filter_map(|j| j.metadata.name)
        .collect()
}

fn grants(rules: &[Rule], group: &str, resource: &str) -> bool {
    rules.iter().any(|r| {
        r.api_groups.iter().any(|g| g == group) && r.resources.iter().any(|x| x == resource)
    })
}

fn without(rules: &[Rule], pred: impl Fn(&Rule) -> bool) -> Vec<Rule> {
    rules.iter().filter(|r| !pred(r)).cloned().collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn minimal_rbac_derives_the_charts_rules_diagnoses_a_missing_one_and_installs_cilium() {
    let (_cluster, client) = common::start().await;
    assert_eq!(
        Rbac::default(),
        Rbac::ClusterAdmin,
        "cluster-admin stays the default"
    );

    // The derived rules are what the chart renders and no more; rendering left nothing behind.
    let rules = derived_rules(&client).await;
    assert!(grants(&rules, "apps", "daemonsets"), "{rules:?}");
    assert!(grants(&rules, "apps", "deployments"), "{rules:?}");
    assert!(
        grants(&rules, "rbac.authorization.k8s.io", "clusterroles"),
        "{rules:?}"
    );
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
    assert_eq!(engine_rbac_objects(&client).await, Vec::<String>::new());

    // Without the apps rules the real authorizer refuses the DaemonSet lookup; the diagnosis
    // names verb and resource, and the run's roles are gone (only the Job is kept for logs).
    let e = run(
        &client,
        &cilium_spec(Rbac::Minimal(without(&rules, |r| r.api_groups == ["apps"]))),
    )
    .await
    .expect_err("must fail without the apps rules");
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
    assert_eq!(engine_rbac_objects(&client).await, Vec::<String>::new());

    // With the derived rules the install succeeds and leaves no role, binding or Job behind.
    let job = JobSettings {
        rbac: RbacPolicy::Minimal,
        ..JobSettings::talos(DEFAULT_HELM_IMAGE)
    };
    let installed = helm::install::install_or_upgrade(
        &clients(&client),
        &BootstrapNamespace::named("kube-system"),
        &job,
        &cilium_chart(VERSION),
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
        installed.release.map(|r| r.status),
        Some(talosboot::cluster::helm::release::ReleaseStatus::Deployed)
    );
    assert_eq!(engine_rbac_objects(&client).await, Vec::<String>::new());
    // The failed runs' Jobs were kept for `kubectl logs`; the successful runs' Jobs are gone.
    let left = engine_jobs(&client).await;
    assert!(
        left.len() <= 2,
        "only the two failed runs' Jobs may stay: {left:?}"
    );
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

/// The real server's escalation refusal lists every rule not held, one per line (dozens for
/// Cilium), after the line the diagnosis matches: longer than the report's 20-line log tail, so
/// the report keeps the error's headline above the tail.
#[tokio::test(flavor = "multi_thread")]
async fn a_chart_with_rbac_needs_escalate_and_bind() {
    let (_cluster, client) = common::start().await;
    let rules = derived_rules(&client).await;
    // The chart creates ClusterRoles: without `escalate` the real server refuses them.
    let e = run(
        &client,
        &cilium_spec(Rbac::Minimal(without(&rules, |r| {
            r.verbs.iter().any(|v| v == "escalate")
        }))),
    )
    .await
    .expect_err("must fail without escalate");
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
    assert_eq!(engine_rbac_objects(&client).await, Vec::<String>::new());
}
