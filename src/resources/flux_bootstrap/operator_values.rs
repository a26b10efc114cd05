//! At plan, when the run would install or upgrade the Flux Operator over a release that exists
//! (after a migration from the module, or a change of `operator_chart`): which value paths of the
//! running release change, from what to what, best-effort (only when the cluster answers in
//! time; a plan never needs it). Values that come from runtime variables (`runtime_info`, `sync`)
//! are shown as `(sensitive)`, as are credential-looking keys.

use std::time::Duration;

use serde_json::Value as Json;

use super::apply::scope;
use super::inputs::Inputs;
use super::model::Config;
use super::private::Private;
use crate::cluster::ClusterHandle;
use crate::cluster::converge::recorded_values;
use crate::cluster::flux::ownership::adopted_by_flux;
use crate::cluster::flux::{OPERATOR_RELEASE, operator};
use crate::cluster::helm::release_values::current_values;
use crate::framework::Diagnostic;
use crate::framework::model::{Unknowns, decode};
use crate::resources::release::values_diff::{SensitivePaths, lines, value_changes};
use crate::values::Value;

/// How long the plan waits for the cluster (a cluster that does not answer is read at apply).
const PLAN_READ_BUDGET: Duration = Duration::from_secs(5);

/// The operator's values as the run would install them, and the paths runtime variables fill.
fn planned_values(config: &Value) -> Option<(String, Json, Vec<String>)> {
    let resolve = |config: &Value| {
        let config: Config = decode(config, Unknowns::Reject).ok()?;
        // Only the operator's values are read: the Job defaults do not matter here.
        let defaults = crate::resources::job::JobDefaults::default();
        let inputs = Inputs::resolve(&config, &defaults).ok()?;
        Some((inputs.namespace.clone(), recorded_values(&inputs.operator)))
    };
    let (namespace, values) = resolve(config)?;
    let mut without_variables = config.clone();
    if let Some(attrs) = without_variables.attrs_mut() {
        for name in ["managed_resources", "sync", "suspend_applications"] {
            attrs.insert(name.into(), Value::Null);
        }
    }
    let substituted: Vec<String> = match resolve(&without_variables) {
        Some((_, raw)) => value_changes(&raw, &values, &SensitivePaths::default())
            .into_iter()
            .map(|c| c.path)
            .collect(),
        None => Vec::new(),
    };
    Some((namespace, values, substituted))
}

/// The warning naming the operator's value paths the apply changes; `None` when there is
/// nothing to say or the cluster could not be read.
pub async fn warning(
    cluster: &ClusterHandle,
    prior: &Value,
    planned: &Value,
    config: &Value,
    prior_private: &[u8],
) -> Option<Diagnostic> {
    let private = Private::decode(prior_private);
    if !scope(prior, planned, &private).full {
        return None;
    }
    let (namespace, desired, substituted) = planned_values(config)?;
    let read = tokio::time::timeout(PLAN_READ_BUDGET, async {
        let kube = cluster.connect().await.ok()?;
        let deployment = operator::deployment(&kube, &namespace).await.ok()?;
        if deployment.as_ref().is_some_and(adopted_by_flux) {
            return None;
        }
        current_values(
            kube.client.clone(),
            &kube.endpoint,
            &namespace,
            OPERATOR_RELEASE,
        )
        .await
        .ok()
        .flatten()
    })
    .await;
    let recorded = read.ok().flatten()?;
    let mut sensitive_names: Vec<String> = recorded.sensitive_paths.clone();
    sensitive_names.extend(substituted);
    let sensitive = SensitivePaths::new(sensitive_names.iter().map(String::as_str));
    let changes = value_changes(&recorded.values, &desired, &sensitive);
    if changes.is_empty() {
        return None;
    }
    Some(Diagnostic::warning(
        "Flux Operator values differ from the configuration",
        format!(
            "Apply upgrades release {namespace}/{OPERATOR_RELEASE} (a Helm upgrade: the operator restarts) from the values it runs (`helm get values -n {namespace} {OPERATOR_RELEASE}`) to the ones `gitops_resources.operator_chart.values_yaml` makes. These value paths change (running -> planned):\n{}\nTo keep a running value, put it into `values_yaml` first.",
            lines(&changes)
        ),
    ))
}
