//! Planning `talosboot_cilium` without the cluster: defaults, the salted hash of the values it will
//! install (compared with the one read from the cluster, so drift in the cluster shows as an
//! update), and what becomes "known after apply".

use super::model::{self, Cilium};
use super::schema::{AFTER_UPGRADE, UPGRADE_INPUTS};
use crate::cluster::helm_release::values_digest;
use crate::framework::model::{Unknowns, decode};
use crate::framework::plan::{changed_inputs, default_value, mark_unknown, same_value};
use crate::framework::{PlanRequest, PlanResponse};
use crate::resources::private::Private;
use crate::values::Value;

/// Inputs the values hash depends on.
const VALUE_INPUTS: &[&str] = &[
    "values",
    "set",
    "set_sensitive",
    "talos_defaults",
    "api_endpoint",
];

pub fn plan(req: PlanRequest) -> PlanResponse {
    let mut planned = req.proposed_new_state;
    let config = &req.config;
    for (name, default) in [
        ("name", Value::from(model::DEFAULT_NAME)),
        ("namespace", Value::from(model::DEFAULT_NAMESPACE)),
        ("repository", Value::from(model::DEFAULT_REPOSITORY)),
        ("chart", Value::from(model::DEFAULT_CHART)),
        ("timeout", Value::from(model::DEFAULT_TIMEOUT)),
        ("wait", Value::from(true)),
        ("talos_defaults", Value::from(true)),
        (
            "api_endpoint",
            Value::from(crate::cluster::bootstrap::KUBEPRISM),
        ),
        ("adopt_existing", Value::from(false)),
        ("deletion_policy", Value::from("uninstall")),
    ] {
        default_value(&mut planned, config, name, default);
    }
    let private = Private::decode(&req.prior_private);
    let id = match (planned.attr("namespace"), planned.attr("name")) {
        (Some(Value::String(ns)), Some(Value::String(n))) => Value::from(format!("{ns}/{n}")),
        _ => Value::unknown(),
    };
    // On create the salt is made at apply (both plans of a create see no private state).
    let values_known = !req.prior_state.is_null()
        && VALUE_INPUTS
            .iter()
            .all(|a| planned.attr(a).is_none_or(Value::is_wholly_known));
    let desired_hash = if values_known {
        decode::<Cilium>(&planned, Unknowns::AsNull)
            .ok()
            .and_then(|c| c.merged_values().ok())
            .map(|v| Value::from(private.salted(&values_digest(Some(&v)))))
            .unwrap_or_else(Value::unknown)
    } else {
        Value::unknown()
    };
    let prior = &req.prior_state;
    let mut diagnostics = crate::framework::Diagnostics::new();
    if let Some(attrs) = planned.attrs_mut() {
        attrs.insert("id".into(), id);
        attrs.insert("values_sha256".into(), desired_hash.clone());
    }
    if prior.is_null() {
        mark_unknown(&mut planned, AFTER_UPGRADE);
    } else if let Some(owner) = &private.owner {
        // GitOps owns the release now: keep what was read, change nothing in the cluster.
        if let (Some(attrs), Some(prior_hash)) = (planned.attrs_mut(), prior.attr("values_sha256"))
        {
            attrs.insert("values_sha256".into(), prior_hash.clone());
        }
        diagnostics.warning(
            "Cilium is managed by GitOps",
            format!("The release is owned by {owner}: talosboot leaves it alone and plans no upgrade. Remove this resource from the configuration (with `removed {{ lifecycle {{ destroy = false }} }}`) or set `deletion_policy = \"keep\"`."),
        );
    } else {
        let inputs_changed = !changed_inputs(prior, &planned, UPGRADE_INPUTS).is_empty();
        let drifted = !same_value(prior.attr("values_sha256"), Some(&desired_hash));
        let unhealthy_release = prior.attr("status").and_then(Value::as_str) != Some("deployed");
        if inputs_changed || drifted || unhealthy_release {
            mark_unknown(&mut planned, AFTER_UPGRADE);
        }
    }
    PlanResponse {
        planned_state: planned,
        private: Some(private.encode()),
        diagnostics,
        ..Default::default()
    }
}
