//! Resource `talosboot_cilium`: Cilium installed, adopted, upgraded, watched and repaired before any
//! CNI exists, as Cilium's values and readiness on top of the shared chart-release lifecycle
//! ([`crate::resources::release`]). Reads top-down: [`schema`], [`model`] (inputs, Talos values,
//! checks), [`plan`], [`prerequisites`] (the kube-proxy and Gateway API CRD checks, at plan and before
//! any Job),
//! [`readiness`] (what "ready" means for Cilium, the components in the state), [`moved`] (from
//! `helm_release`), [`versions`] (the values checked against the chart version), then what it is
//! as a [`ChartResource`] (below).

pub mod model;
pub mod moved;
pub mod plan;
pub mod prerequisites;
pub mod readiness;
pub mod schema;
pub mod upgrade;
pub mod versions;

use futures::future::BoxFuture;
use serde_json::Value as Json;

use self::model::Cilium;
use crate::cluster::ClusterError;
use crate::cluster::Kube;
use crate::cluster::engine::BootstrapNamespace;
use crate::cluster::helm::install::ChartInstall;
use crate::cluster::helm::release::HelmRelease;
use crate::framework::{Diagnostics, MoveRequest, PlanResponse, Schema};
use crate::resources::private::Private;
use crate::resources::release::resource::ReleaseResource;
use crate::resources::release::{
    ChartResource, CheckAt, Observed, Readiness, WorkloadSource, common_in_field,
};
use crate::values::Value;

/// The `talosboot_cilium` resource.
pub type CiliumResource = ReleaseResource<Cilium>;

impl ChartResource for Cilium {
    const TYPE_NAME: &'static str = schema::TYPE_NAME;

    /// As every chart resource's, but `kube_proxy_replacement` is left to the refresh right after,
    /// which records what the release's values say (`readiness::record`) instead of the default.
    fn for_import(namespace: &str, name: &str) -> Self {
        let mut m = Cilium::default();
        m.common.name = Some(name.into());
        m.common.namespace = Some(namespace.into());
        let mut m = m.with_defaults();
        m.kube_proxy_replacement = None;
        m
    }
    const VALUE_INPUTS: &'static [&'static str] = plan::VALUE_INPUTS;
    const KEEP_VALUES_HINT: &'static str = " With `talos_defaults = true` (the default) the Talos values are merged under yours: to install exactly the values that run now, set `talos_defaults = false` and put what `helm get values` shows into `values`.";

    /// A Cilium release installed outside talosboot runs exactly its recorded values: no Talos
    /// values merged under them.
    fn adopted(&mut self) {
        self.talos_defaults = Some(false);
    }

    fn schema() -> Schema {
        schema::schema()
    }
    common_in_field!();
    fn label(&self) -> String {
        // A state read back from an import has no version yet.
        match self.common.version.as_deref() {
            Some(v) if !v.is_empty() => format!("Cilium {v} ({})", self.common.id()),
            _ => format!("Cilium ({})", self.common.id()),
        }
    }
    fn base_values(&self) -> Json {
        Cilium::base_values(self)
    }
    fn chart_install(&self) -> Result<ChartInstall, String> {
        let mut install = self.common.chart_install(Cilium::base_values(self))?;
        install.description = Some(format!(
            "talosboot: Cilium {}",
            self.common.version.clone().unwrap_or_default()
        ));
        Ok(install)
    }
    /// Cilium's bootstrap Job runs in the release namespace (`kube-system` is exempt from Pod
    /// Security on Talos).
    fn bootstrap_namespace(&self) -> BootstrapNamespace {
        BootstrapNamespace::named(self.common.release_namespace())
    }
    fn readiness(&self, release: Option<&HelmRelease>) -> Readiness {
        readiness::readiness(self, release)
    }
    /// A refresh reads the components, not the nodes: a node's agent Ready means its CNI is up
    /// (the node lost the not-ready taint), so `nodes_ready` follows from the agents.
    fn refresh_readiness(&self, release: Option<&HelmRelease>) -> Readiness {
        let mut r = self.readiness(release);
        r.nodes = false;
        r
    }
    /// What Talos' inline manifests (or `helm template | kubectl apply`) made of Cilium's chart.
    fn adoption_candidates(&self) -> Vec<crate::cluster::helm::release::ManifestObject> {
        let ns = self.common.release_namespace();
        [
            ("apps/v1", "DaemonSet", "cilium"),
            ("apps/v1", "Deployment", "cilium-operator"),
            ("v1", "ConfigMap", "cilium-config"),
        ]
        .into_iter()
        .map(
            |(api_version, kind, name)| crate::cluster::helm::release::ManifestObject {
                api_version: api_version.into(),
                kind: kind.into(),
                namespace: Some(ns.to_owned()),
                name: name.into(),
            },
        )
        .collect()
    }
    fn workload_source(&self) -> WorkloadSource {
        WorkloadSource::ManifestListed
    }
    fn prerequisites<'a>(
        &'a self,
        clients: &'a Kube,
        prior: Option<&'a Self>,
        at: CheckAt,
    ) -> BoxFuture<'a, Result<Diagnostics, ClusterError>> {
        Box::pin(prerequisites::check(self, clients, prior, at))
    }
    fn validate(&self, diagnostics: &mut Diagnostics) {
        model::validate(self, diagnostics);
    }
    fn plan(config: &Value, _prior: &Value, resp: &mut PlanResponse) {
        plan::plan(config, resp);
    }
    fn settle(config: &Value, prior: &Value, proposed: &mut Value) {
        upgrade::settle(config, prior, proposed);
    }
    fn plan_checks<'a>(
        &'a self,
        prior: Option<&'a Self>,
        private: &'a crate::resources::private::Private,
        budget: std::time::Duration,
    ) -> BoxFuture<'a, Diagnostics> {
        Box::pin(upgrade::plan_checks(self, prior, private, budget))
    }
    fn before_upgrade<'a>(
        &'a self,
        clients: &'a Kube,
        running: &'a HelmRelease,
        job: &'a crate::cluster::engine::JobSettings,
        deadline: std::time::Instant,
        cancel: &'a tokio_util::sync::CancellationToken,
    ) -> BoxFuture<'a, Diagnostics> {
        Box::pin(upgrade::before_upgrade(
            self, clients, running, job, deadline, cancel,
        ))
    }
    fn rollout_details<'a>(&'a self, clients: &'a Kube) -> BoxFuture<'a, Vec<String>> {
        Box::pin(async move {
            let ns = self.common.release_namespace();
            crate::cluster::cilium::rollout::read(clients, ns, "cilium")
                .await
                .map(|r| r.lines())
                .unwrap_or_default()
        })
    }
    fn rollback_on_failure(&self) -> bool {
        Cilium::rollback_on_failure(self)
    }
    fn planned_for_checks(planned: &Value, config: &Value) -> Option<Self> {
        plan::planned_with_known_values(config, planned)
    }
    fn record(&mut self, observed: &Observed) {
        readiness::record(self, observed);
    }
    fn keep_computed(&mut self, prior: &Self) {
        self.agents = prior.agents.clone();
        self.components = prior.components.clone();
        self.nodes_ready = prior.nodes_ready;
    }
    fn moved(req: &MoveRequest, diagnostics: &mut Diagnostics) -> Option<(Self, Private)> {
        moved::from_helm_release(req, diagnostics)
    }
}
