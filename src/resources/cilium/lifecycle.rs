//! What is Cilium's own on top of the shared Helm-release lifecycle ([`crate::resources::release`]):
//! readiness as `cilium status --wait` judges it: every component the release's manifest contains
//! in its namespace (the `cilium` and `cilium-envoy` DaemonSets, the `cilium-operator`, and with
//! their features the `hubble-relay`, `hubble-ui` and `clustermesh-apiserver` Deployments), each
//! rolled out at its current generation, plus every node Ready without the not-ready taint; the
//! components, agents and nodes in the state; and the kube-proxy check before an install
//! ([`super::preflight`]).

use std::time::Duration;

use futures::future::BoxFuture;

use super::model::{Agents, Cilium, Component};
use crate::cluster::ClusterError;
use crate::cluster::bootstrap::{BootstrapNamespace, Clients, JobSettings};
use crate::cluster::helm_install::ChartInstall;
use crate::cluster::helm_release::HelmRelease;
use crate::cluster::readiness::{Kind, WorkloadRef};
use crate::framework::Diagnostics;
use crate::resources::release::{
    Observed, PreflightAt, Readiness, Release, ReleaseFields, WorkloadSource,
};

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

impl Release for Cilium {
    fn label(&self) -> String {
        format!(
            "Cilium {} ({})",
            self.version.clone().unwrap_or_default(),
            self.id()
        )
    }
    fn id(&self) -> String {
        format!("{}/{}", self.release_namespace(), self.release_name())
    }
    fn release_name(&self) -> &str {
        Cilium::release_name(self)
    }
    fn release_namespace(&self) -> &str {
        Cilium::release_namespace(self)
    }
    fn timeout(&self) -> Duration {
        Cilium::timeout(self)
    }
    fn wait(&self) -> bool {
        self.wait.unwrap_or(true)
    }
    fn keep_on_destroy(&self) -> bool {
        Cilium::keep_on_destroy(self)
    }
    fn chart_install(&self) -> Result<ChartInstall, String> {
        Cilium::chart_install(self)
    }
    fn job_settings(&self) -> JobSettings {
        Cilium::job_settings(self)
    }
    fn bootstrap_namespace(&self) -> BootstrapNamespace {
        Cilium::bootstrap_namespace(self)
    }
    fn readiness(&self, release: Option<&HelmRelease>) -> Readiness {
        Readiness {
            workloads: components(release, self.release_namespace()),
            pods: "app.kubernetes.io/part-of=cilium".into(),
            nodes: true,
        }
    }
    /// A refresh reads the components, not the nodes: a node's agent Ready means its CNI is up
    /// (the node lost the not-ready taint), so `nodes_ready` follows from the agents.
    fn refresh_readiness(&self, release: Option<&HelmRelease>) -> Readiness {
        let mut r = self.readiness(release);
        r.nodes = false;
        r
    }
    fn workload_source(&self) -> WorkloadSource {
        WorkloadSource::ManifestListed
    }
    fn preflight<'a>(
        &'a self,
        clients: &'a Clients,
        at: PreflightAt,
    ) -> BoxFuture<'a, Result<Diagnostics, ClusterError>> {
        Box::pin(super::preflight::check_kube_proxy(self, clients, at))
    }
    fn revision(&self) -> Option<i64> {
        self.revision
    }
    fn status(&self) -> Option<&str> {
        self.status.as_deref()
    }
    fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }
    fn values_sha256(&self) -> Option<&str> {
        self.values_sha256.as_deref()
    }
    fn record(&mut self, f: &ReleaseFields, o: &Observed) {
        self.status = Some(f.status.clone());
        self.revision = Some(f.revision);
        self.chart_version = Some(f.chart_version.clone());
        self.app_version = Some(f.app_version.clone());
        self.values_sha256 = Some(f.values_sha256.clone());
        self.version = Some(f.version.clone());
        // States written before the input existed: those installs replaced kube-proxy.
        self.kube_proxy_replacement.get_or_insert(true);
        let agents = o.rollout("cilium");
        self.agents = Some(Agents {
            ready: agents.map_or(0, |r| r.ready),
            desired: agents.map_or(0, |r| r.desired),
        });
        self.components = Some(
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
        self.nodes_ready = o
            .nodes_ready
            .or_else(|| agents.map(|r| r.desired > 0 && r.ready == r.desired));
    }
}
