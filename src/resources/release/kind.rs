//! [`ChartResource`]: the one trait a chart-installing resource implements, for what is its own:
//! its type name and schema (the extra attributes beside [`ReleaseCommon`]'s, with their
//! defaults and plan behaviour declared on them), its base values, what "ready" means, extra
//! checks and plan warnings. Everything else (plan, apply, read, import, destroy, the install
//! decision) is shared, in this module's siblings.

use std::time::Instant;

use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value as Json, json};
use tokio_util::sync::CancellationToken;

use super::common::ReleaseCommon;
use super::{Observed, Readiness, WorkloadSource};
use crate::cluster::ClusterError;
use crate::cluster::Kube;
use crate::cluster::engine::{BootstrapNamespace, JobSettings};
use crate::cluster::helm::install::ChartInstall;
use crate::cluster::helm::release::HelmRelease;
use crate::framework::model::{Unknowns, decode, encode};
use crate::framework::plan::apply_defaults;
use crate::framework::{Diagnostics, MoveRequest, PlanResponse, Schema};
use crate::resources::private::Private;
use crate::values::Value;

/// When a [`ChartResource::prerequisites`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckAt {
    /// Best-effort: one try, bounded, skipped when the cluster cannot be read.
    Plan,
    /// Before any Job runs: retried, and an error stops the apply.
    Apply,
}

/// A chart-installing resource's model: one struct for config, plan and state, embedding
/// [`ReleaseCommon`] (`#[serde(flatten)]`), plus what is the resource's own.
/// [`ChartResource::common`] and [`ChartResource::common_mut`] of a model whose [`ReleaseCommon`]
/// is its `common` field, as every chart resource's is.
macro_rules! common_in_field {
    () => {
        fn common(&self) -> &$crate::resources::release::ReleaseCommon {
            &self.common
        }
        fn common_mut(&mut self) -> &mut $crate::resources::release::ReleaseCommon {
            &mut self.common
        }
    };
}
pub(crate) use common_in_field;

pub trait ChartResource:
    Serialize + DeserializeOwned + Clone + Default + Send + Sync + 'static
{
    const TYPE_NAME: &'static str;
    /// Inputs the values hash depends on (beside the write-only `set_wo`): when the values they
    /// make are what the cluster has, changing them is no upgrade.
    const VALUE_INPUTS: &'static [&'static str];
    /// How to keep exactly the values a release runs with, beside putting them into `values`/
    /// `set` (e.g. turning off values the resource merges under the user's), for the plan's
    /// values warning; starts with a space.
    const KEEP_VALUES_HINT: &'static str = "";

    /// The schema: [`ReleaseCommon`]'s attributes and the resource's own, each with its default,
    /// requires-replace and "changes on upgrade" declared on it.
    fn schema() -> Schema;
    fn common(&self) -> &ReleaseCommon;
    fn common_mut(&mut self) -> &mut ReleaseCommon;

    /// For messages: "Cilium 1.18.4 (kube-system/cilium)".
    fn label(&self) -> String;

    /// Values under the user's (e.g. the Talos values of Cilium).
    fn base_values(&self) -> Json {
        json!({})
    }
    /// The chart install, from [`ReleaseCommon::chart_install`] with the resource's own settings.
    ///
    /// # Errors
    /// The values do not merge, or a local chart cannot be packaged.
    fn chart_install(&self) -> Result<ChartInstall, String> {
        self.common().chart_install(self.base_values())
    }
    /// Where the bootstrap Job runs.
    fn bootstrap_namespace(&self) -> BootstrapNamespace;

    /// What `wait` waits for; `release` is the current record (its manifest names the workloads).
    fn readiness(&self, release: Option<&HelmRelease>) -> Readiness;
    /// What a refresh reads beside the record (default: what `wait` waits for). A resource may
    /// read less to keep a refresh cheap.
    fn refresh_readiness(&self, release: Option<&HelmRelease>) -> Readiness {
        self.readiness(release)
    }
    /// Objects an adoption (`adopt_existing`) takes before the release has a record (whose
    /// manifest names them afterwards): what the plan reads the field managers of. Default: none.
    fn adoption_candidates(&self) -> Vec<crate::cluster::helm::release::ManifestObject> {
        Vec::new()
    }
    /// How reads find the workloads of [`ChartResource::refresh_readiness`].
    fn workload_source(&self) -> WorkloadSource {
        WorkloadSource::Manifest
    }
    /// Checks of the cluster before an install or upgrade runs: an error diagnostic stops it
    /// before any Job. Called at apply, and at plan (best-effort, when the cluster is reachable).
    /// `prior` is what the last apply installed (`None` on a create).
    fn prerequisites<'a>(
        &'a self,
        _clients: &'a Kube,
        _prior: Option<&'a Self>,
        _at: CheckAt,
    ) -> BoxFuture<'a, Result<Diagnostics, ClusterError>> {
        Box::pin(async { Ok(Diagnostics::new()) })
    }

    /// Before a Helm upgrade of a release that runs (`running`, its newest record), after the
    /// [`ChartResource::prerequisites`]: work of the resource's own that must succeed first (Cilium's
    /// pre-flight DaemonSet). An error diagnostic stops the converge before the upgrade; by
    /// `deadline`, with the Job settings the upgrade runs with. Default: nothing.
    fn before_upgrade<'a>(
        &'a self,
        _clients: &'a Kube,
        _running: &'a HelmRelease,
        _job: &'a JobSettings,
        _deadline: Instant,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Diagnostics> {
        Box::pin(async { Diagnostics::new() })
    }
    /// Lines that say where a rollout that did not become ready stands (Cilium: the agents by
    /// node), for the failure's detail. Default: none.
    fn rollout_details<'a>(&'a self, _clients: &'a Kube) -> BoxFuture<'a, Vec<String>> {
        Box::pin(async { Vec::new() })
    }
    /// Whether an upgrade that did not become ready is rolled back to the revision that ran.
    fn rollback_on_failure(&self) -> bool {
        false
    }

    /// Checks of the resource's own inputs, without I/O ([`ReleaseCommon::validate`] runs too).
    fn validate(&self, _diagnostics: &mut Diagnostics) {}
    /// Settles, in the proposed state, inputs the plan derives from the configuration and the
    /// prior state, before the values are hashed (Cilium's `upgrade_compatibility`).
    fn settle(_config: &Value, _prior: &Value, _proposed: &mut Value) {}
    /// Plan-time checks that may read outside the configuration (a chart repository),
    /// best-effort within `budget`: never an error because something could not be read. `prior`
    /// is the prior state (`None` on a create), `private` its private state as refreshed.
    fn plan_checks<'a>(
        &'a self,
        _prior: Option<&'a Self>,
        _private: &'a crate::resources::private::Private,
        _budget: std::time::Duration,
    ) -> BoxFuture<'a, Diagnostics> {
        Box::pin(async { Diagnostics::new() })
    }
    /// What the resource adds to the shared plan (warnings, its own computed attributes).
    /// `config` and `prior` as in the request.
    fn plan(_config: &Value, _prior: &Value, _resp: &mut PlanResponse) {}
    /// The model a plan-time [`ChartResource::prerequisites`] checks: the planned object (with the
    /// configuration's write-only inputs) when every input the check reads is known at plan.
    /// `None` (the default) skips the check at plan; apply still runs it.
    fn planned_for_checks(_planned: &Value, _config: &Value) -> Option<Self> {
        None
    }

    /// A digest of chart content the version does not pin (a local chart directory): a change
    /// means an upgrade even with the same version and values. `None`: nothing to compare.
    fn content_digest(&self) -> Option<&str> {
        None
    }
    /// Fills what follows from the inputs at apply and import (a local chart's digest).
    fn derive(&mut self) {}
    /// Writes the resource's own computed attributes from what was observed (the shared ones
    /// are written already).
    fn record(&mut self, _observed: &Observed) {}
    /// Copies the resource's own computed attributes of `prior` (the shared ones are copied).
    fn keep_computed(&mut self, _prior: &Self) {}

    /// Which list shows a release of `chart` (`terraform query`): this type's, by default.
    fn listing(_chart: &str) -> super::list::Listing {
        super::list::Listing::Here
    }

    /// Sets what a configuration generated for a release installed outside talosboot needs beside
    /// its record's chart, version and values, so that applying it changes nothing (e.g. no
    /// values merged under the user's).
    fn adopted(&mut self) {}

    /// `moved` from another resource type; the default refuses with the alternative.
    fn moved(req: &MoveRequest, diagnostics: &mut Diagnostics) -> Option<(Self, Private)> {
        diagnostics.error(
            "Move is not supported",
            format!(
                "{} cannot be moved from {} ({}). Remove the old resource from state (a `removed` block that names it in `from` and holds `lifecycle {{ destroy = false }}`) and import this one instead.",
                Self::TYPE_NAME, req.source_type_name, req.source_provider_address
            ),
        );
        None
    }

    /// `prior` when it is what talosboot's last apply installed (its values' salted hash is the
    /// one that apply recorded in private state), `None` for a state a move or import made.
    fn applied_by_talosboot<'a>(prior: Option<&'a Self>, private: &Private) -> Option<&'a Self> {
        let recorded = private.applied_values.as_deref()?;
        prior.filter(|p| {
            p.merged_values().is_ok_and(|v| {
                private.salted(&crate::cluster::helm::release::values_digest(Some(&v))) == recorded
            })
        })
    }

    /// The values the release will record (for their salted hash).
    ///
    /// # Errors
    /// As [`ReleaseCommon::values_parts`].
    fn merged_values(&self) -> Result<Json, String> {
        self.common().merged_values(self.base_values())
    }

    /// The model with the schema's defaults filled where it has nothing, its `id`, and what
    /// [`ChartResource::derive`] fills: the state an import or a move starts from.
    fn with_defaults(self) -> Self {
        let schema = Self::schema();
        let mut model = match encode(&self, &schema.value_type()) {
            Ok(mut value) => {
                // Only where the model has nothing: a moved `helm_release` keeps its own
                // repository, namespace and name.
                let own = value.clone();
                apply_defaults(&schema.block, &mut value, &own);
                decode::<Self>(&value, Unknowns::AsNull).unwrap_or(self)
            }
            Err(_) => self,
        };
        let id = model.common().id();
        model.common_mut().id = Some(id);
        model.derive();
        model
    }

    /// The state an import of `namespace/name` starts from (refreshed right after).
    fn for_import(namespace: &str, name: &str) -> Self {
        let mut m = Self::default();
        m.common_mut().name = Some(name.into());
        m.common_mut().namespace = Some(namespace.into());
        m.with_defaults()
    }
}
