//! `talosboot_helm_release`: the data source (the current release record, read natively) and the
//! resource: any chart, installed by the pre-CNI bootstrap engine (a Job on
//! the host network against KubePrism), as a drop-in for hashicorp/helm's `helm_release` v3 where
//! the arguments mean the same. Readiness (`wait`) is judged natively from the release manifest:
//! its Deployments, DaemonSets, StatefulSets and Jobs rolled out, and a diagnostic that names the
//! workload and pod that is not ready and why. Everything else is the shared Helm-release lifecycle.
//!
//! Not supported (and why): `repository_username`/`repository_password`/`repository_*_file`,
//! `verify`/`keyring` (credentials and keys would have to reach the Job: use an OCI mirror the
//! nodes can pull from), `postrender` (runs a local binary), `set_list` (use `values`),
//! `reuse_values`/`reset_values` (values are always exactly the configuration: that is what makes
//! drift visible), `force_update`, `recreate_pods`, `cleanup_on_fail`, `replace`, `lint`,
//! `dependency_update`, `skip_crds`, `render_subchart_notes`, `disable_*` hooks and webhooks. Local
//! chart directories are packaged at apply and shipped to the Job (at most about 1 MiB packaged).
//!
//! Reads top-down: [`schema`], [`model`], [`local_chart`] (digest and package), then what this
//! resource is as a [`ChartResource`] (below: its label, chart install, readiness, plan and move).

pub mod data_source;
pub mod local_chart;
pub mod model;
pub mod schema;

use serde_json::Value as Json;

use self::local_chart::{chart_digest, local_chart, package_chart, plan_chart_digest};
pub use self::model::HelmReleaseModel;
use crate::cluster::engine::BootstrapNamespace;
use crate::cluster::helm::install::ChartInstall;
use crate::cluster::helm::release::HelmRelease;
use crate::cluster::readiness::{Kind, WorkloadRef};
use crate::framework::{Diagnostics, MoveRequest, PlanResponse, Schema};
use crate::resources::private::Private;
use crate::resources::release::list::Listing;
use crate::resources::release::moved::read_helm_state;
use crate::resources::release::resource::ReleaseResource;
use crate::resources::release::{ChartResource, Observed, Readiness, common_in_field};
use crate::values::Value;
pub use data_source::HelmReleaseDataSource;

/// The `talosboot_helm_release` resource.
pub type HelmReleaseResource = ReleaseResource<HelmReleaseModel>;

impl ChartResource for HelmReleaseModel {
    const TYPE_NAME: &'static str = schema::TYPE_NAME;
    const VALUE_INPUTS: &'static [&'static str] = &["values", "set", "set_sensitive"];

    /// Releases of the Cilium chart are `talosboot_cilium`'s to list and adopt.
    fn listing(chart: &str) -> Listing {
        match chart == crate::resources::cilium::model::DEFAULT_CHART {
            true => Listing::Elsewhere(crate::resources::cilium::schema::TYPE_NAME),
            false => Listing::Here,
        }
    }

    fn schema() -> Schema {
        schema::schema()
    }
    common_in_field!();
    fn label(&self) -> String {
        let c = &self.common;
        let version = c
            .version
            .as_deref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        // A state read back from an import has no chart yet.
        match c.chart.as_deref() {
            Some(chart) if !chart.is_empty() => format!("chart {chart}{version} ({})", c.id()),
            _ => format!("Helm release {}", c.id()),
        }
    }
    fn chart_install(&self) -> Result<ChartInstall, String> {
        let mut install = self
            .common
            .chart_install(Json::Object(Default::default()))?;
        if let Some(dir) = local_chart(&install.chart) {
            let (name, archive) = package_chart(dir)?;
            install.chart = format!("{name}.tgz");
            install.repository = None;
            install.chart_archive = Some(archive);
        }
        install.create_namespace = self.create_namespace.unwrap_or(false);
        install.description = self.description.clone();
        install.atomic = self.atomic.unwrap_or(false);
        install.history_max = self.max_history.and_then(|n| u32::try_from(n).ok());
        Ok(install)
    }
    fn bootstrap_namespace(&self) -> BootstrapNamespace {
        // kube-system is exempt from Pod Security on Talos and always exists.
        BootstrapNamespace::named("kube-system")
    }
    /// Every Deployment, DaemonSet, StatefulSet and Job of the release manifest in its namespace.
    fn readiness(&self, release: Option<&HelmRelease>) -> Readiness {
        let ns = self.common.release_namespace().to_owned();
        let workloads = release
            .map(|r| r.workloads.as_slice())
            .unwrap_or_default()
            .iter()
            .filter(|w| w.namespace.as_deref().is_none_or(|n| n == ns))
            .filter_map(|w| {
                Some(WorkloadRef {
                    kind: Kind::of(&w.kind)?,
                    namespace: ns.clone(),
                    name: w.name.clone(),
                })
            })
            .collect();
        Readiness {
            workloads,
            pods: format!("app.kubernetes.io/instance={}", self.common.release_name()),
            nodes: false,
        }
    }
    fn validate(&self, d: &mut Diagnostics) {
        HelmReleaseModel::validate(self, d);
    }
    /// `chart_sha256` of a local chart; an unset `version` is "known after apply" on create (the
    /// repository's latest then).
    fn plan(config: &Value, prior: &Value, resp: &mut PlanResponse) {
        let unset_version = config.attr("version").is_none_or(Value::is_null);
        let prior_digest = (!prior.is_null())
            .then(|| prior.attr("chart_sha256").cloned())
            .flatten()
            .filter(|d| !d.is_null());
        plan_chart_digest(resp, prior_digest.as_ref());
        if unset_version
            && resp
                .planned_state
                .attr("version")
                .is_none_or(Value::is_null)
        {
            if let Some(attrs) = resp.planned_state.attrs_mut() {
                attrs.insert("version".into(), Value::unknown());
            }
        }
    }
    fn content_digest(&self) -> Option<&str> {
        self.chart_sha256.as_deref()
    }
    /// What the plan read; a chart edited between plan and apply fails as inconsistent.
    fn derive(&mut self) {
        if let Some(dir) = self.common.chart.as_deref().and_then(local_chart) {
            self.chart_sha256 = chart_digest(dir).ok();
        }
    }
    fn record(&mut self, o: &Observed) {
        self.ready = Some(o.unhealthy().is_empty());
    }
    fn keep_computed(&mut self, prior: &Self) {
        self.ready = prior.ready;
    }
    fn moved(req: &MoveRequest, d: &mut Diagnostics) -> Option<(Self, Private)> {
        let (h, private) = read_helm_state(req, schema::TYPE_NAME, d)?;
        let state = HelmReleaseModel {
            common: h.common,
            create_namespace: h.create_namespace,
            atomic: h.atomic,
            max_history: h.max_history,
            description: h.description,
            ..Default::default()
        }
        .with_defaults();
        Some((state, private))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::release::ReleaseCommon;

    #[test]
    fn readiness_comes_from_the_release_manifest_in_its_namespace() {
        let c = HelmReleaseModel {
            common: ReleaseCommon {
                name: Some("argocd".into()),
                namespace: Some("argocd".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let release = HelmRelease {
            name: "argocd".into(),
            namespace: "argocd".into(),
            revision: 1,
            status: crate::cluster::helm::release::ReleaseStatus::Deployed,
            chart: "argo-cd".into(),
            chart_version: "9.4.15".into(),
            app_version: "v3".into(),
            last_deployed: String::new(),
            first_deployed: String::new(),
            description: String::new(),
            notes: String::new(),
            values_sha256: String::new(),
            workloads: vec![
                crate::cluster::helm::release::ManifestWorkload {
                    kind: "Deployment".into(),
                    namespace: None,
                    name: "argocd-server".into(),
                },
                crate::cluster::helm::release::ManifestWorkload {
                    kind: "StatefulSet".into(),
                    namespace: Some("argocd".into()),
                    name: "argocd-application-controller".into(),
                },
                crate::cluster::helm::release::ManifestWorkload {
                    kind: "Deployment".into(),
                    namespace: Some("elsewhere".into()),
                    name: "x".into(),
                },
            ],
            kinds: Vec::new(),
            objects: Vec::new(),
            apply_method: None,
            upgrade_compatibility: None,
            kube_proxy_replacement: None,
        };
        let r = c.readiness(Some(&release));
        assert_eq!(r.workloads.len(), 2);
        assert_eq!(r.workloads[1].kind, Kind::StatefulSet);
        assert_eq!(r.pods, "app.kubernetes.io/instance=argocd");
    }
}
