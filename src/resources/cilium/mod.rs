//! Resource `talosboot_cilium`: Cilium installed, adopted, upgraded, watched and repaired before any
//! CNI exists, as Cilium's values and readiness on top of the shared Helm-release lifecycle
//! ([`crate::resources::release`]). Reads top-down: [`schema`], [`model`] (inputs, Talos values,
//! checks), [`plan`], [`preflight`] (the kube-proxy check, at plan and before any Job),
//! [`lifecycle`] (what "ready" means for Cilium, the components in the state), [`moved`] (from
//! `helm_release`).

pub mod lifecycle;
pub mod model;
pub mod moved;
pub mod plan;
pub mod preflight;
pub mod schema;

use self::model::Cilium;
use crate::framework::{Diagnostics, MoveRequest, PlanRequest, PlanResponse, Schema};
use crate::resources::private::Private;
use crate::resources::release::resource::{ReleaseModel, ReleaseResource};
use crate::values::Value;

/// The `talosboot_cilium` resource.
pub type CiliumResource = ReleaseResource<Cilium>;

impl ReleaseModel for Cilium {
    const TYPE_NAME: &'static str = schema::TYPE_NAME;

    fn schema() -> Schema {
        schema::schema()
    }
    fn validate(&self, diagnostics: &mut Diagnostics) {
        model::validate(self, diagnostics);
    }
    fn plan(req: PlanRequest) -> PlanResponse {
        plan::plan(req)
    }
    fn planned_for_preflight(planned: &Value, config: &Value) -> Option<Self> {
        plan::planned_with_known_values(config, planned)
    }
    fn with_defaults(self) -> Self {
        Cilium::with_defaults(self)
    }
    fn merged_values(&self) -> Result<serde_json::Value, String> {
        Cilium::merged_values(self)
    }
    fn set_values_sha256(&mut self, hash: Option<String>) {
        self.values_sha256 = hash;
    }
    fn keep_computed(&mut self, prior: &Self) {
        self.status = prior.status.clone();
        self.revision = prior.revision;
        self.chart_version = prior.chart_version.clone();
        self.app_version = prior.app_version.clone();
        self.values_sha256 = prior.values_sha256.clone();
        self.agents = prior.agents.clone();
        self.components = prior.components.clone();
        self.nodes_ready = prior.nodes_ready;
    }
    fn for_import(namespace: &str, name: &str) -> Self {
        Cilium {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        }
    }
    fn moved(req: &MoveRequest, diagnostics: &mut Diagnostics) -> Option<(Self, Private)> {
        moved::from_helm_release(req, diagnostics)
    }
}
