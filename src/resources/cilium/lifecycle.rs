//! What is Cilium's own on top of the shared Helm-release lifecycle ([`crate::resources::release`]):
//! readiness as `cilium status --wait` judges it (the agent DaemonSet and the operator Deployment
//! rolled out at their current generation) plus every node Ready without the not-ready taint, and
//! the agents and nodes in the state.

use std::time::Duration;

use super::model::{Agents, Cilium};
use crate::cluster::bootstrap::{BootstrapNamespace, JobSettings};
use crate::cluster::helm_install::ChartInstall;
use crate::cluster::helm_release::HelmRelease;
use crate::cluster::readiness::{Kind, WorkloadRef};
use crate::resources::release::{Observed, Readiness, Release, ReleaseFields};

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
    fn readiness(&self, _release: Option<&HelmRelease>) -> Readiness {
        let ns = self.release_namespace().to_owned();
        Readiness {
            workloads: vec![
                WorkloadRef {
                    kind: Kind::DaemonSet,
                    namespace: ns.clone(),
                    name: "cilium".into(),
                },
                WorkloadRef {
                    kind: Kind::Deployment,
                    namespace: ns,
                    name: "cilium-operator".into(),
                },
            ],
            pods: "app.kubernetes.io/part-of=cilium".into(),
            nodes: true,
        }
    }
    /// A refresh reads the agents only: a node's agent Ready means its CNI is up (the node lost the
    /// not-ready taint), so `nodes_ready` follows from them; the operator counts at apply.
    fn refresh_readiness(&self, _release: Option<&HelmRelease>) -> Readiness {
        let mut r = self.readiness(None);
        r.workloads.retain(|w| w.kind == Kind::DaemonSet);
        r.nodes = false;
        r
    }
    fn readiness_is_fixed(&self) -> bool {
        true
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
        let agents = o.rollout("cilium");
        self.agents = Some(Agents {
            ready: agents.map_or(0, |r| r.ready),
            desired: agents.map_or(0, |r| r.desired),
        });
        // Read at apply; a refresh infers it from the agents (one per node, tolerating everything).
        self.nodes_ready = o
            .nodes_ready
            .or_else(|| agents.map(|r| r.desired > 0 && r.ready == r.desired));
    }
}
