//! Reading `talosboot_cilium` back from the cluster: the release record (the data source's
//! decoder), the agent DaemonSet, the operator Deployment and the nodes, concurrently. Drift an
//! upgrade fixes shows in the state (values hash, version, status, or no release at all); unhealthy
//! agents with an intact release are reported, not turned into an upgrade loop.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;

use super::model::{Agents, Cilium};
use crate::cluster::ClusterError;
use crate::cluster::bootstrap::{Clients, EngineError};
use crate::cluster::helm_install;
use crate::cluster::helm_release::HelmRelease;
use crate::cluster::readiness::{daemonset_rollout, deployment_rollout, node_not_ready};
use crate::framework::Diagnostics;
use crate::resources::private::Private;

/// Labels that say a GitOps tool manages an object.
const GITOPS_LABELS: &[(&str, &str)] = &[
    ("helm.toolkit.fluxcd.io/name", "Flux HelmRelease"),
    ("kustomize.toolkit.fluxcd.io/name", "Flux Kustomization"),
    ("argocd.argoproj.io/instance", "Argo CD Application"),
];

/// What the cluster has for one release.
pub struct Observed {
    pub release: Option<HelmRelease>,
    pub agents: Option<DaemonSet>,
    pub operator: Option<Deployment>,
    pub nodes_ready: Option<bool>,
}

pub async fn observe(clients: &Clients, c: &Cilium) -> Result<Observed, EngineError> {
    let ns = c.release_namespace();
    let map = |e: kube::Error| {
        EngineError::api(
            crate::cluster::bootstrap::Step::Release,
            ClusterError::from_kube(e, &clients.endpoint),
        )
    };
    let ds_api: Api<DaemonSet> = Api::namespaced(clients.client.clone(), ns);
    let deploy_api: Api<Deployment> = Api::namespaced(clients.client.clone(), ns);
    let nodes_api: Api<Node> = Api::all(clients.client.clone());
    let all = ListParams::default();
    let (release, agents, operator, nodes) = tokio::join!(
        helm_install::release(clients, ns, c.release_name()),
        ds_api.get_opt("cilium"),
        deploy_api.get_opt("cilium-operator"),
        nodes_api.list(&all),
    );
    let nodes = nodes.map_err(map)?;
    Ok(Observed {
        release: release?,
        agents: agents.map_err(map)?,
        operator: operator.map_err(map)?,
        nodes_ready: Some(
            !nodes.items.is_empty() && nodes.items.iter().all(|n| node_not_ready(n).is_none()),
        ),
    })
}

/// The GitOps tool that manages Cilium's objects, if any.
pub fn gitops_owner(o: &Observed) -> Option<String> {
    let labels = o.agents.as_ref()?.metadata.labels.as_ref()?;
    GITOPS_LABELS
        .iter()
        .find_map(|(label, tool)| labels.get(*label).map(|name| format!("{tool} {name:?}")))
}

/// Updates `state` with what was observed; `None` when the release is gone. Warnings for
/// unhealthy agents go to `diagnostics`.
pub fn apply_observed(
    mut state: Cilium,
    o: &Observed,
    private: &mut Private,
    diagnostics: &mut Diagnostics,
) -> Option<Cilium> {
    let release = o.release.as_ref()?;
    if release.status == "uninstalled" {
        return None;
    }
    state.status = Some(release.status.clone());
    state.revision = Some(release.revision);
    state.chart_version = Some(release.chart_version.clone());
    state.app_version = Some(release.app_version.clone());
    state.values_sha256 = Some(private.salted(&release.values_sha256));
    // Keep the configured spelling (`v1.18.4`) unless the cluster runs another version.
    let configured = state.version.clone().unwrap_or_default();
    if configured.trim_start_matches('v') != release.chart_version.trim_start_matches('v') {
        state.version = Some(release.chart_version.clone());
    }
    let rollout = o.agents.as_ref().map(daemonset_rollout);
    state.agents = Some(Agents {
        ready: rollout.as_ref().map_or(0, |r| r.ready),
        desired: rollout.as_ref().map_or(0, |r| r.desired),
    });
    state.nodes_ready = o.nodes_ready;
    private.owner = gitops_owner(o);
    let operator_ok = o
        .operator
        .as_ref()
        .map(deployment_rollout)
        .is_some_and(|r| r.done());
    let agents_ok = rollout.as_ref().is_some_and(|r| r.done());
    if release.status == "deployed" && (!agents_ok || !operator_ok) {
        let agents = state.agents.clone().unwrap_or_default();
        diagnostics.warning(
            "Cilium is not healthy",
            format!(
                "The release {} is deployed, but {} of {} agents are ready and the operator is {}. This is not drift that an upgrade fixes: check the agents (`kubectl -n {} get pods -l k8s-app=cilium`).",
                state.id.clone().unwrap_or_default(),
                agents.ready,
                agents.desired,
                if operator_ok { "ready" } else { "not ready" },
                state.release_namespace(),
            ),
        );
    }
    Some(state)
}
