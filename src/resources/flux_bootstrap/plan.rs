//! Plan, without cluster I/O here (the best-effort read of the running operator's values is
//! [`super::operator_values`]). The FluxInstance's namespace comes from `instance_yaml`, the hash of the
//! write-only `managed_resources` from the salt in private state (unknown before the first apply),
//! and `drift` is planned empty: a refreshed state that listed drift therefore plans an update
//! whose diff names what drifted, and a warning says what apply does about each entry (the diff
//! alone reads as a removal). Managed Secrets the configuration no longer lists are named in a
//! warning: the write-only diff cannot show that apply deletes them.

use super::model::{Config, has_unknown_variables, parse_secrets, set_computed};
use super::private::{Private, managed_hash};
use crate::cluster::flux::drift::{Drift, How, What};
use crate::framework::model::{Unknowns, decode};
use crate::framework::{Diagnostics, PlanRequest, PlanResponse};
use crate::resources::job::{self, Flavor};
use crate::values::Value;

pub fn plan(req: PlanRequest) -> PlanResponse {
    let mut planned = req.proposed_new_state;
    let private = Private::decode_without_new_salt(&req.prior_private);
    let namespace = planned_namespace(&req.config)
        .map(Value::from)
        .unwrap_or_else(Value::unknown);
    let mut diagnostics = Diagnostics::new();
    if let (Some(ns), false) = (namespace.as_str(), req.prior_state.is_null()) {
        let retired = retired_secrets(&private, req.config.attr("managed_resources"), ns);
        if !retired.is_empty() {
            diagnostics.warning(
                "Managed Secrets will be deleted",
                format!(
                    "`managed_resources` no longer lists {}: apply deletes {} (unless Flux has adopted {}), as the module does.",
                    retired.join(", "),
                    if retired.len() == 1 { "it" } else { "them" },
                    if retired.len() == 1 { "it" } else { "them" },
                ),
            );
        }
    }
    if let Some(repairs) = repairs(&req.prior_state) {
        diagnostics.warning(
            "Apply repairs what drifted",
            format!("The last refresh found drift in what the bootstrap owns (the `drift` entries this plan empties). Apply:\n{repairs}"),
        );
    }
    // A create has no salt yet, whatever private state comes with it: the create half of a
    // replacement is planned with the replaced object's private state but planned again at
    // apply without it (that object is gone by then), and both plans must agree.
    let salt = match req.prior_state.is_null() {
        true => "",
        false => private.salt.as_str(),
    };
    let hash =
        managed_hash(salt, req.config.attr("managed_resources")).unwrap_or_else(Value::unknown);
    set_computed(&mut planned, namespace, Some(hash));
    // A partial `job` turns host networking off, as in the module: the plan shows it.
    job::plan_defaults(&mut planned, &req.config, Flavor::Module);
    PlanResponse {
        planned_state: planned,
        diagnostics,
        ..Default::default()
    }
}

/// The FluxInstance's namespace as apply will resolve it (runtime variables substituted), `None`
/// while it is unknown: a placeholder whose variables are not known yet plans an unknown
/// namespace, never the placeholder itself.
fn planned_namespace(config: &Value) -> Option<String> {
    let mut model = decode::<Config>(config, Unknowns::AsNull).ok()?;
    model.unknown_variables = has_unknown_variables(config);
    model.planned_namespace()
}

/// The prior state's `drift` entries, typed (what a refresh found).
pub(super) fn drifted(prior: &Value) -> Vec<Drift> {
    match prior.attr("drift") {
        Some(Value::List(entries)) => entries
            .iter()
            .filter_map(Value::as_str)
            .filter_map(Drift::parse)
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether the refresh found the operator gone or failed: apply installs its chart again even
/// without a full run, so the plan-time checks of a Job apply.
pub(super) fn operator_repair(prior: &Value) -> bool {
    drifted(prior).iter().any(Drift::needs_operator_install)
}

/// What apply does about each `drift` entry of the prior state, one line each; `None` without
/// drift.
fn repairs(prior: &Value) -> Option<String> {
    let lines: Vec<String> = drifted(prior)
        .iter()
        .map(|d| {
            let action = match (d.what, &d.how) {
                (What::Run, _) => "runs the bootstrap again (the last run failed)".to_owned(),
                (What::OperatorRelease | What::OperatorDeployment, How::Deleted) => {
                    "installs the operator again (it was deleted)".to_owned()
                }
                (What::OperatorRelease, How::Status(status)) => format!(
                    "upgrades the operator's release again (it is {})",
                    status.as_str()
                ),
                (_, How::Deleted) => "creates it again (it was deleted in the cluster)".to_owned(),
                (_, How::Changed) => {
                    "updates it back to the configuration (it was changed in the cluster)"
                        .to_owned()
                }
                _ => format!("repairs it ({d})"),
            };
            format!("  - {}: {action}", d.object)
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// Secrets the last apply managed that the configured `managed_resources` (write-only: in the
/// configuration only, known at plan) no longer lists. Names only, never values.
fn retired_secrets(private: &Private, managed: Option<&Value>, namespace: &str) -> Vec<String> {
    let Some(managed) = managed.filter(|m| m.is_wholly_known()) else {
        return Vec::new();
    };
    let listed: Vec<String> = match managed.attr("secrets_yaml").and_then(Value::as_str) {
        Some(text) => match parse_secrets(text, namespace) {
            Ok(secrets) => secrets
                .iter()
                .map(|m| format!("{}/{}/{}", m.kind(), m.namespace(), m.name()))
                .collect(),
            // Validation reports it.
            Err(_) => return Vec::new(),
        },
        None => Vec::new(),
    };
    private
        .tracked
        .iter()
        .map(|t| t.object.clone())
        .filter(|o| o.starts_with("Secret/") && !listed.contains(o))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_drift_entry_says_what_apply_will_do() {
        let prior = Value::object([(
            "drift",
            Value::List(
                [
                    "Secret/flux-system/flux-system: deleted",
                    "ConfigMap/flux-system/flux-runtime-info: changed",
                    "FluxInstance/flux-system/flux: deleted",
                    "Deployment/flux-system/flux-operator: deleted",
                    "Release/flux-system/flux-operator: pending-upgrade",
                    "bootstrap run: failed",
                ]
                .map(Value::from)
                .to_vec(),
            ),
        )]);
        let text = repairs(&prior).expect("drift");
        for line in [
            "Secret/flux-system/flux-system: creates it again (it was deleted in the cluster)",
            "ConfigMap/flux-system/flux-runtime-info: updates it back to the configuration",
            "FluxInstance/flux-system/flux: creates it again",
            "Deployment/flux-system/flux-operator: installs the operator again",
            "Release/flux-system/flux-operator: upgrades the operator's release again (it is pending-upgrade)",
            "bootstrap run: runs the bootstrap again",
        ] {
            assert!(text.contains(line), "{line}\n{text}");
        }
        assert_eq!(
            repairs(&Value::object([("drift", Value::List(Vec::new()))])),
            None
        );
    }
}
