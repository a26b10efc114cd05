//! Planning a chart-installing resource without the cluster (its defaults are planned already,
//! by the dispatcher, from the schema): the salted hash of the values it will install (compared
//! with the hash read from the cluster, so drift in the cluster shows as an update), and what
//! becomes "known after apply" (the attributes the schema marks as changed by an upgrade). On
//! create the hash is unknown: the salt is made at apply (both plans of a create see no private
//! state).

use serde_json::Value as Json;

use super::ChartResource;
use crate::cluster::helm::release::values_digest;
use crate::framework::model::{Unknowns, decode};
use crate::framework::plan::{changed_inputs, mark_unknown, same_value};
use crate::framework::{Diagnostics, PlanRequest, PlanResponse};
use crate::resources::private::Private;
use crate::values::Value;

/// Write-only value inputs (`set_wo`): in the configuration only, never in plan or state, yet part
/// of the values hash, so a changed secret plans an update without a revision bump.
pub const WRITE_ONLY_VALUE_INPUTS: &[&str] = &["set_wo"];

/// What differs between resources, from their schema and [`ChartResource`].
pub struct PlanSpec<'a> {
    /// Inputs the values hash depends on.
    pub value_inputs: &'a [&'a str],
    /// Inputs whose change means an upgrade.
    pub upgrade_inputs: &'a [&'a str],
    /// Computed attributes an upgrade changes.
    pub after_upgrade: &'a [&'a str],
    /// The values the release will record, from the planned object (with the write-only inputs,
    /// which only the configuration carries, copied in).
    pub merged_values: &'a dyn Fn(&Value) -> Option<Json>,
}

/// The plan of a [`ChartResource`]: the shared plan, then what the resource adds.
pub fn plan<K: ChartResource>(req: PlanRequest) -> PlanResponse {
    let schema = K::schema();
    let upgrade_inputs = schema.block.update_inputs();
    let after_upgrade = schema.block.changed_by_update();
    let merged = |planned: &Value| {
        decode::<K>(planned, Unknowns::AsNull)
            .ok()
            .and_then(|m| m.merged_values().ok())
    };
    let spec = PlanSpec {
        value_inputs: K::VALUE_INPUTS,
        upgrade_inputs: &upgrade_inputs,
        after_upgrade: &after_upgrade,
        merged_values: &merged,
    };
    let (config, prior) = (req.config.clone(), req.prior_state.clone());
    let mut resp = plan_with(req, &spec);
    K::plan(&config, &prior, &mut resp);
    resp
}

/// The shared plan, for any [`PlanSpec`].
pub fn plan_with(req: PlanRequest, spec: &PlanSpec) -> PlanResponse {
    let mut planned = req.proposed_new_state;
    let config = &req.config;
    let private = Private::decode(&req.prior_private);
    let id = match (planned.attr("namespace"), planned.attr("name")) {
        (Some(Value::String(ns)), Some(Value::String(n))) => Value::from(format!("{ns}/{n}")),
        _ => Value::unknown(),
    };
    let prior = &req.prior_state;
    let values_known = !prior.is_null()
        && spec
            .value_inputs
            .iter()
            .all(|a| planned.attr(a).is_none_or(Value::is_wholly_known))
        && WRITE_ONLY_VALUE_INPUTS
            .iter()
            .all(|a| config.attr(a).is_none_or(Value::is_wholly_known));
    let desired_hash = values_known
        .then(|| {
            let mut with_write_only = planned.clone();
            if let Some(attrs) = with_write_only.attrs_mut() {
                for name in WRITE_ONLY_VALUE_INPUTS {
                    attrs.insert(
                        (*name).to_owned(),
                        config.attr(name).cloned().unwrap_or_default(),
                    );
                }
            }
            (spec.merged_values)(&with_write_only)
        })
        .flatten()
        .map(|v| Value::from(private.salted(&values_digest(Some(&v)))))
        .unwrap_or_else(Value::unknown);
    let mut diagnostics = Diagnostics::new();
    if let Some(attrs) = planned.attrs_mut() {
        attrs.insert("id".into(), id);
        attrs.insert("values_sha256".into(), desired_hash.clone());
    }
    if prior.is_null() {
        mark_unknown(&mut planned, spec.after_upgrade);
    } else if let Some(owner) = &private.owner {
        // GitOps owns the release now: keep what was read, change nothing in the cluster.
        if let (Some(attrs), Some(prior_hash)) = (planned.attrs_mut(), prior.attr("values_sha256"))
        {
            attrs.insert("values_sha256".into(), prior_hash.clone());
        }
        diagnostics.warning(
            "Release managed by GitOps",
            format!("The release is owned by {owner}: talosboot leaves it alone and plans no upgrade. Remove this resource from the configuration (with `removed {{ lifecycle {{ destroy = false }} }}`) or set `deletion_policy = \"keep\"`."),
        );
    } else {
        // An input that only feeds the values (`talos_defaults`, `set`, ...) changes nothing when
        // the values it makes are what the cluster has: the hash comparison below decides.
        let hash_known = !desired_hash.is_unknown();
        let inputs_changed = changed_inputs(prior, &planned, spec.upgrade_inputs)
            .iter()
            .filter(|name| !(**name == "version" && same_version(prior, &planned)))
            .any(|name| !(hash_known && spec.value_inputs.contains(name)));
        let drifted = !same_value(prior.attr("values_sha256"), Some(&desired_hash));
        let status = prior.attr("status").and_then(Value::as_str);
        let unhealthy_release = status != Some("deployed");
        if let Some(pending) = status.filter(|s| s.starts_with("pending-")) {
            diagnostics.warning(
                "Release left pending",
                format!("The release is {pending:?}: an install or upgrade was interrupted. Apply unlocks it (marks that revision `failed`, as Helm users do by hand) and upgrades from it, under the bootstrap Lease, so a run still in progress elsewhere is waited for, not broken."),
            );
        }
        // Drift from the cluster, not an edit: the value inputs are as the last apply left them
        // (a write-only `set_wo` is not in state, so with one set an edit cannot be told apart).
        let values_edited = !changed_inputs(prior, &planned, spec.value_inputs).is_empty()
            || WRITE_ONLY_VALUE_INPUTS
                .iter()
                .any(|a| config.attr(a).is_some_and(|v| !v.is_null()));
        if drifted && hash_known && !inputs_changed && !values_edited && !unhealthy_release {
            let id = planned
                .attr("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let (ns, name) = id.split_once('/').unwrap_or(("", &id));
            diagnostics.warning(
                "Release values differ from the configuration",
                format!("The values release {id} runs differ from the ones this configuration makes (they were changed outside of talosboot, or the release was imported): apply upgrades it to the configuration's values, replacing what it runs now. `helm get values -n {ns} {name}` shows those; put what must stay into `values`/`set` first."),
            );
        }
        let revision = prior.attr("revision").and_then(Value::as_i64);
        let unready = private.unready_revision.is_some() && private.unready_revision == revision;
        if unready {
            diagnostics.warning(
                "Release not ready at the last apply",
                format!("Revision {} did not become ready when it was applied, and has not been seen healthy since: this apply waits for it again (and fails again if it still is not ready) instead of calling it unchanged.", revision.unwrap_or_default()),
            );
        }
        if inputs_changed || drifted || unhealthy_release || unready {
            mark_unknown(&mut planned, spec.after_upgrade);
        }
    }
    PlanResponse {
        planned_state: planned,
        private: Some(private.encode()),
        diagnostics,
        ..Default::default()
    }
}

/// `1.18.4` and `v1.18.4` name the same chart version (Helm resolves both alike): writing the other
/// spelling is bookkeeping, not an upgrade.
fn same_version(prior: &Value, planned: &Value) -> bool {
    match (
        prior.attr("version").and_then(Value::as_str),
        planned.attr("version").and_then(Value::as_str),
    ) {
        (Some(a), Some(b)) => super::same_version(a, b),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::object;

    /// A release whose values are `values` itself (a string), upgraded by `version` and `values`.
    fn spec_plan(prior: Value, planned: Value, private: &Private) -> PlanResponse {
        let merged = |p: &Value| {
            p.attr("values")
                .and_then(Value::as_str)
                .map(|v| serde_json::json!({ "v": v }))
        };
        let spec = PlanSpec {
            value_inputs: &["values"],
            upgrade_inputs: &["version", "values"],
            after_upgrade: &["revision", "status"],
            merged_values: &merged,
        };
        let req = PlanRequest {
            prior_state: prior,
            proposed_new_state: planned.clone(),
            config: planned,
            prior_private: private.encode(),
            client_capabilities: Default::default(),
        };
        plan_with(req, &spec)
    }

    fn state(version: &str, values: &str, status: &str, hash: Value) -> Value {
        object([
            ("namespace", Value::from("ns")),
            ("name", Value::from("app")),
            ("version", Value::from(version)),
            ("values", Value::from(values)),
            ("status", Value::from(status)),
            ("revision", Value::int(2)),
            ("values_sha256", hash),
        ])
    }

    #[test]
    fn the_plan_upgrades_on_inputs_drift_and_unhealth_only() {
        let private = Private::fresh();
        let hash = |v: &str| {
            Value::from(private.salted(&values_digest(Some(&serde_json::json!({ "v": v })))))
        };
        // (why, prior, planned, upgrade planned)
        let table = [
            (
                "nothing changed",
                state("1.0.0", "a", "deployed", hash("a")),
                state("1.0.0", "a", "deployed", hash("a")),
                false,
            ),
            (
                "version spelling",
                state("1.0.0", "a", "deployed", hash("a")),
                state("v1.0.0", "a", "deployed", hash("a")),
                false,
            ),
            (
                "version",
                state("1.0.0", "a", "deployed", hash("a")),
                state("1.1.0", "a", "deployed", hash("a")),
                true,
            ),
            (
                "values edited",
                state("1.0.0", "a", "deployed", hash("a")),
                state("1.0.0", "b", "deployed", hash("a")),
                true,
            ),
            (
                "drift in the cluster",
                state("1.0.0", "a", "deployed", hash("x")),
                state("1.0.0", "a", "deployed", hash("x")),
                true,
            ),
            (
                "failed release",
                state("1.0.0", "a", "failed", hash("a")),
                state("1.0.0", "a", "failed", hash("a")),
                true,
            ),
        ];
        for (why, prior, planned, upgrade) in table {
            let resp = spec_plan(prior, planned, &private);
            let unknown = resp
                .planned_state
                .attr("revision")
                .is_some_and(Value::is_unknown);
            assert_eq!(unknown, upgrade, "{why}");
            assert_eq!(
                resp.planned_state
                    .attr("status")
                    .is_some_and(Value::is_unknown),
                upgrade,
                "{why}"
            );
            assert_eq!(
                resp.planned_state.attr("id"),
                Some(&Value::from("ns/app")),
                "{why}"
            );
        }
    }

    #[test]
    fn a_create_plans_the_hash_and_what_an_upgrade_changes_unknown() {
        let planned = state("1.0.0", "a", "", Value::Null);
        let resp = spec_plan(Value::Null, planned, &Private::fresh());
        for attr in ["values_sha256", "revision", "status"] {
            assert!(
                resp.planned_state.attr(attr).is_some_and(Value::is_unknown),
                "{attr}"
            );
        }
        assert!(resp.diagnostics.is_empty());
    }

    #[test]
    fn drift_is_a_warning_and_a_gitops_owner_plans_no_upgrade() {
        let mut private = Private::fresh();
        let drifted = state("1.0.0", "a", "deployed", Value::from("other"));
        let resp = spec_plan(drifted.clone(), drifted.clone(), &private);
        assert!(
            resp.diagnostics
                .iter()
                .any(|d| d.summary == "Release values differ from the configuration")
        );
        private.owner = Some("Flux HelmRelease \"x\"".into());
        let resp = spec_plan(drifted.clone(), drifted, &private);
        assert_eq!(resp.planned_state.attr("revision"), Some(&Value::int(2)));
        assert_eq!(
            resp.planned_state.attr("values_sha256"),
            Some(&Value::from("other"))
        );
        assert!(
            resp.diagnostics
                .iter()
                .any(|d| d.summary == "Release managed by GitOps")
        );
    }
}
