//! Cilium's pre-flight check before an upgrade (its upgrade guide marks it "Required"): the chart
//! of the new version installed beside the running one as release `cilium-preflight`
//! (`preflight.enabled=true`, `agent=false`, `operator.enabled=false`, as the guide's
//! `helm install cilium-preflight` does), whose DaemonSet `cilium-pre-flight-check` pulls the new
//! image on every node. Ready on every node the agent runs on: the upgrade may go; a node that
//! cannot pull or start it fails the check before anything changed, which turns an
//! `ErrImagePull` halfway through a rollout (a node without a CNI) into a refusal. The release is
//! uninstalled either way. Nothing here knows about Terraform.

use std::time::Instant;

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use serde_json::{Value as Json, json};
use tokio_util::sync::CancellationToken;

use super::running_config::kube_proxy_replacement_on;
use crate::cluster::Kube;
use crate::cluster::engine::{BootstrapNamespace, EngineError, JobSettings};
use crate::cluster::helm::install::{ChartInstall, install_or_upgrade, release, uninstall};
use crate::cluster::readiness::{Kind, NotReady, WorkloadRef, wait_ready_failing_crash_loops};

/// The release the check is installed as (the upgrade guide's name).
pub const RELEASE: &str = "cilium-preflight";
/// The DaemonSet the chart renders with `preflight.enabled`.
pub const DAEMON_SET: &str = "cilium-pre-flight-check";
/// Its pods' label.
const POD_SELECTOR: &str = "k8s-app=cilium-pre-flight-check";
/// The agent DaemonSet whose nodes the check must cover.
const AGENT: &str = "cilium";
/// Restarts after which a check pod backing off fails the check: the pod only starts the new
/// image, so crashing at all means the agents would crash there too (the kubelet's back-off makes
/// two restarts about half a minute).
const CRASH_LOOP_RESTARTS: i32 = 2;

/// What the check installs: the Cilium chart the upgrade installs, and the values it merges.
pub struct Preflight<'a> {
    pub chart: &'a ChartInstall,
    pub values: &'a Json,
    pub bootstrap: &'a BootstrapNamespace,
    pub job: &'a JobSettings,
}

/// The pre-flight values for an upgrade to `values` (the upgrade's merged values): the guide's
/// three, on every node (tolerating every taint, as the agent does), with the agents' API
/// endpoint when they replace kube-proxy, and the agent image when the values point it elsewhere
/// (a mirror), so the check pulls exactly what the upgrade will.
pub fn values(upgrade: &Json) -> Json {
    // The chart's pre-flight does not switch off Hubble's relay and UI or the cluster-mesh
    // API server: off here, so nothing of the running release's is rendered twice.
    let mut v = json!({
        "preflight": {"enabled": true, "tolerations": [{"operator": "Exists"}]},
        "agent": false,
        "operator": {"enabled": false},
        "hubble": {"relay": {"enabled": false}, "ui": {"enabled": false}},
        "clustermesh": {"useAPIServer": false},
    });
    if kube_proxy_replacement_on(upgrade.get("kubeProxyReplacement")) {
        for key in ["k8sServiceHost", "k8sServicePort"] {
            if let Some(x) = upgrade.get(key) {
                v[key] = x.clone();
            }
        }
    }
    if let Some(image) = upgrade.get("image").filter(|i| i.is_object()) {
        v["preflight"]["image"] = image.clone();
    }
    for key in ["imagePullSecrets", "upgradeCompatibility"] {
        if let Some(x) = upgrade.get(key) {
            v[key] = x.clone();
        }
    }
    v
}

/// The chart install of the check.
pub fn chart_install(p: &Preflight) -> ChartInstall {
    ChartInstall {
        release: RELEASE.into(),
        namespace: p.chart.namespace.clone(),
        repository: p.chart.repository.clone(),
        chart: p.chart.chart.clone(),
        version: p.chart.version.clone(),
        values_yaml: vec![values(p.values).to_string()],
        description: Some(format!(
            "talosboot: pre-flight check for Cilium {}",
            p.chart.version
        )),
        apply_method: p.chart.apply_method,
        history_max: Some(1),
        chart_archive: p.chart.chart_archive.clone(),
        ..ChartInstall::default()
    }
}

/// How the check went, when it did not pass.
#[derive(Debug)]
pub enum PreflightError {
    /// Installing the check (its Job) failed.
    Install(EngineError),
    /// Not ready on every node by the deadline, or a pod fails in a way that will not fix itself.
    NotReady(Box<NotReady>),
    /// Ready, but on fewer nodes than the agent runs on.
    FewerNodes { ready: i64, agents: i64 },
    /// Reading the agent's DaemonSet failed.
    Read(EngineError),
}

/// What a check that passed saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passed {
    /// Nodes the new image was pulled and started on.
    pub nodes: i64,
    /// Warnings of the cleanup (the release could not be uninstalled).
    pub warnings: Vec<String>,
}

/// Installs the check, waits for it on every node the agent runs on (by `deadline`), and
/// uninstalls it whatever happened.
///
/// # Errors
/// [`PreflightError`]: the upgrade must not run.
pub async fn run(
    clients: &Kube,
    p: &Preflight<'_>,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Passed, (PreflightError, Vec<String>)> {
    let install = chart_install(p);
    let checked = check(clients, p, &install, deadline, cancel).await;
    let warnings = remove(clients, p, &install, cancel).await;
    match checked {
        Ok(nodes) => Ok(Passed { nodes, warnings }),
        Err(e) => Err((e, warnings)),
    }
}

async fn check(
    clients: &Kube,
    p: &Preflight<'_>,
    install: &ChartInstall,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<i64, PreflightError> {
    let remaining = || deadline.saturating_duration_since(Instant::now());
    install_or_upgrade(clients, p.bootstrap, p.job, install, remaining(), cancel)
        .await
        .map_err(PreflightError::Install)?;
    let namespace = install.namespace.as_str();
    let workload = WorkloadRef {
        kind: Kind::DaemonSet,
        namespace: namespace.to_owned(),
        name: DAEMON_SET.into(),
    };
    let rollouts = wait_ready_failing_crash_loops(
        clients,
        namespace,
        std::slice::from_ref(&workload),
        POD_SELECTOR,
        CRASH_LOOP_RESTARTS,
        deadline,
        cancel,
    )
    .await
    .map_err(|n| PreflightError::NotReady(Box::new(n)))?;
    let ready = rollouts.first().map_or(0, |r| r.ready);
    let agents = Api::<DaemonSet>::namespaced(clients.client.clone(), namespace)
        .get_opt(AGENT)
        .await
        .map_err(|e| {
            PreflightError::Read(EngineError::api(
                crate::cluster::helm::PREREQUISITES,
                crate::cluster::ClusterError::from_kube(e, &clients.endpoint),
            ))
        })?
        .and_then(|ds| ds.status)
        .map_or(0, |s| i64::from(s.desired_number_scheduled));
    if ready < agents {
        return Err(PreflightError::FewerNodes { ready, agents });
    }
    Ok(ready)
}

/// `helm uninstall cilium-preflight`, when it exists; what went wrong, as warnings (the check's
/// verdict stands either way).
async fn remove(
    clients: &Kube,
    p: &Preflight<'_>,
    install: &ChartInstall,
    cancel: &CancellationToken,
) -> Vec<String> {
    match release(clients, &install.namespace, RELEASE).await {
        Ok(None) => return Vec::new(),
        Ok(Some(_)) => {}
        Err(e) => {
            return vec![format!(
                "could not read release {}/{RELEASE} to remove it: {e}",
                install.namespace
            )];
        }
    }
    // Its own short budget: a cleanup must not be starved by a check that used the deadline up.
    let budget = std::time::Duration::from_secs(120);
    match uninstall(
        clients,
        p.bootstrap,
        p.job,
        &install.namespace,
        RELEASE,
        budget,
        cancel,
    )
    .await
    {
        Ok(_) => Vec::new(),
        Err(e) => vec![format!(
            "the pre-flight release {ns}/{RELEASE} could not be uninstalled ({e}): remove it with `helm uninstall -n {ns} {RELEASE}`",
            ns = install.namespace
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_pulls_what_the_upgrade_will_where_the_agents_run() {
        let upgrade = json!({
            "kubeProxyReplacement": true,
            "k8sServiceHost": "localhost",
            "k8sServicePort": 7445,
            "image": {"repository": "mirror.example/cilium/cilium", "useDigest": false},
            "upgradeCompatibility": "1.19",
            "hubble": {"enabled": true},
        });
        let v = values(&upgrade);
        assert_eq!(v["preflight"]["enabled"], json!(true));
        assert_eq!(v["agent"], json!(false));
        assert_eq!(v["operator"]["enabled"], json!(false));
        assert_eq!(v["k8sServiceHost"], json!("localhost"));
        assert_eq!(v["k8sServicePort"], json!(7445));
        assert_eq!(
            v["preflight"]["image"]["repository"],
            json!("mirror.example/cilium/cilium")
        );
        assert_eq!(
            v["preflight"]["tolerations"],
            json!([{"operator": "Exists"}])
        );
        assert_eq!(
            v["hubble"],
            json!({"relay": {"enabled": false}, "ui": {"enabled": false}}),
            "nothing else of the upgrade's values"
        );
        let with_proxy = values(&json!({"kubeProxyReplacement": false, "k8sServiceHost": "x"}));
        assert!(
            with_proxy.get("k8sServiceHost").is_none(),
            "kube-proxy routes the Service"
        );
    }

    #[test]
    fn the_check_is_the_new_chart_as_its_own_release() {
        let chart = ChartInstall {
            release: "cilium".into(),
            namespace: "kube-system".into(),
            repository: Some("https://helm.cilium.io".into()),
            chart: "cilium".into(),
            version: "1.20.2".into(),
            values_yaml: vec!["secret: x".into()],
            sensitive_values_yaml: vec!["password: y".into()],
            atomic: true,
            ..ChartInstall::default()
        };
        let (bootstrap, job) = (
            BootstrapNamespace::named("kube-system"),
            JobSettings::talos("img"),
        );
        let values = json!({});
        let p = Preflight {
            chart: &chart,
            values: &values,
            bootstrap: &bootstrap,
            job: &job,
        };
        let i = chart_install(&p);
        assert_eq!(
            (i.release.as_str(), i.version.as_str()),
            (RELEASE, "1.20.2")
        );
        assert_eq!(i.repository.as_deref(), Some("https://helm.cilium.io"));
        assert!(
            i.sensitive_values_yaml.is_empty(),
            "no secret of the upgrade's values"
        );
        assert!(!i.atomic && !i.take_ownership);
        assert!(!i.values_yaml.concat().contains("secret"));
    }
}
