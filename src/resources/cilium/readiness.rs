//! What "ready" means for Cilium, on top of the shared lifecycle ([`crate::resources::release`]):
//! readiness as `cilium status --wait` judges it: every component the release's manifest contains
//! in its namespace (the `cilium` and `cilium-envoy` DaemonSets, the `cilium-operator`, and with
//! their features the `hubble-relay`, `hubble-ui` and `clustermesh-apiserver` Deployments), each
//! rolled out at its current generation, plus every node Ready without the `not-ready:NoSchedule` taint; the
//! components, agents and nodes in the state; and the kube-proxy check before an install
//! ([`super::prerequisites`]).

use super::model::{Agents, Cilium, Component};
use crate::cluster::cilium::running_config::kube_proxy_replacement_on;
use crate::cluster::helm::release::HelmRelease;
use crate::cluster::readiness::{Kind, WorkloadRef};
use crate::resources::release::{Observed, Readiness};

/// The components of a Cilium release: the DaemonSets and Deployments its manifest puts in the
/// release namespace (what `cilium status --wait` judges; Jobs, and workloads of other
/// namespaces such as SPIRE's, are not components).
pub fn components(release: Option<&HelmRelease>, namespace: &str) -> Vec<WorkloadRef> {
    release
        .map(|r| r.workloads.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|w| w.namespace.as_deref().is_none_or(|n| n == namespace))
        .filter_map(|w| {
            let kind =
                Kind::of(&w.kind).filter(|k| matches!(k, Kind::DaemonSet | Kind::Deployment))?;
            Some(WorkloadRef {
                kind,
                namespace: namespace.to_owned(),
                name: w.name.clone(),
            })
        })
        .collect()
}

/// What `wait` waits for: every component, then every node.
pub fn readiness(cilium: &Cilium, release: Option<&HelmRelease>) -> Readiness {
    Readiness {
        workloads: components(release, cilium.common.release_namespace()),
        pods: "app.kubernetes.io/part-of=cilium".into(),
        nodes: true,
    }
}

/// Writes the components, agents and nodes into the state.
pub fn record(cilium: &mut Cilium, o: &Observed) {
    // A state without it (an import or move, or one written before the input existed): what
    // the release's values say, so the next plan shows no flip the cluster never had; a
    // release whose values do not set it runs the chart's default, off.
    if cilium.kube_proxy_replacement.is_none() {
        cilium.kube_proxy_replacement = Some(
            o.release
                .as_ref()
                .is_none_or(|r| kube_proxy_replacement_on(r.kube_proxy_replacement.as_ref())),
        );
    }
    // An import or move takes the minor the release already passes: a plan then keeps it.
    if cilium.upgrade_compatibility.is_none() {
        cilium.upgrade_compatibility = o
            .release
            .as_ref()
            .and_then(|r| r.upgrade_compatibility.clone());
    }
    let agents = o.rollout("cilium");
    cilium.agents = Some(Agents {
        ready: agents.map_or(0, |r| r.ready),
        desired: agents.map_or(0, |r| r.desired),
    });
    cilium.components = Some(
        o.workloads
            .iter()
            .map(|(w, seen)| {
                let r = &seen.rollout;
                let component = Component {
                    kind: w.kind.as_str().to_owned(),
                    desired: r.desired,
                    ready: r.ready,
                    rolled_out: r.done(),
                };
                (w.name.clone(), component)
            })
            .collect(),
    );
    // Read at apply; a refresh infers it from the agents (one per node, tolerating everything).
    cilium.nodes_ready = o
        .nodes_ready
        .or_else(|| agents.map(|r| r.desired > 0 && r.ready == r.desired));
}
