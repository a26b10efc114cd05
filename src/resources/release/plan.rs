//! Planning a chart-installing resource (its defaults are planned already, by the dispatcher,
//! from the schema): the salted hash of the values it will install (compared with the hash read
//! from the cluster, so drift in the cluster shows as an update), and what becomes "known after
//! apply" (the attributes the schema marks as changed by an upgrade). On create the hash is
//! unknown: the salt is made at apply (both plans of a create see no private state). When the
//! values change and the caller could read the record's values, a warning names every value
//! path that changes, from what runs to what is planned ([`super::values_diff`]).

use serde_json::Value as Json;

use super::ChartResource;
use super::values_diff::{SensitivePaths, lines, value_changes};
use crate::cluster::helm::release::values_digest;
use crate::cluster::helm::release_values::RecordedValues;
use crate::cluster::helm::status::ReleaseStatus;
use crate::framework::model::{Unknowns, decode};
use crate::framework::plan::{changed_inputs, mark_unknown, same_value};
use crate::framework::{Diagnostics, PlanRequest, PlanResponse};
use crate::resources::private::Private;
use crate::values::Value;

/// Write-only value inputs (`set_wo`): in the configuration only, never in plan or state, yet part
/// of the values hash, so a changed secret plans an update without a revision bump.
pub const WRITE_ONLY_VALUE_INPUTS: &[&str] = &["set_wo", "values_wo"];

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
    /// What the release runs with, read from the cluster at plan (`None`: not read).
    pub recorded: Option<&'a RecordedValues>,
    /// How to keep the running values with this resource, for the values warning.
    pub keep_values_hint: &'a str,
}

/// Whether a plan with this prior state and these planned values changes the values the release
/// runs with (both hashes known and different): then the caller reads the record's values for
/// [`PlanSpec::recorded`]. Never for a release GitOps owns (nothing is changed).
pub fn changes_values(prior: &Value, planned: &Value, private: &Private) -> bool {
    let hash = |v: &Value| {
        v.attr("values_sha256")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    private.owner.is_none()
        && !prior.is_null()
        && matches!((hash(prior), hash(planned)), (Some(a), Some(b)) if a != b)
}

/// `name` of each entry of a `set`-shaped list attribute.
fn set_names(list: Option<&Value>) -> Vec<String> {
    match list {
        Some(Value::List(items)) | Some(Value::Set(items)) => items
            .iter()
            .filter_map(|i| i.attr("name").and_then(Value::as_str))
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// The value paths whose values are secret: the sensitive inputs of the configuration and of the
/// prior state (a moved `helm_release`'s `set_sensitive`), and the record's own marking.
fn sensitive_paths(config: &Value, prior: &Value, recorded: &RecordedValues) -> SensitivePaths {
    let mut names = Vec::new();
    for attr in ["set_sensitive", "set_wo"] {
        names.extend(set_names(config.attr(attr)));
        names.extend(set_names(prior.attr(attr)));
    }
    names.extend(recorded.sensitive_paths.iter().cloned());
    let mut paths = SensitivePaths::new(names.iter().map(String::as_str));
    if let Some(Value::List(docs)) = config.attr("values_wo") {
        for doc in docs.iter().filter_map(Value::as_str) {
            if let Ok(v) = crate::cluster::helm::values::parse_values(doc) {
                paths = paths.with_write_only(&v);
            }
        }
    }
    paths
}

/// The plan of a [`ChartResource`]: the shared plan, then what the resource adds.
pub fn plan<K: ChartResource>(
    mut req: PlanRequest,
    recorded: Option<&RecordedValues>,
) -> PlanResponse {
    if !req.proposed_new_state.is_null() {
        K::settle(&req.config, &req.prior_state, &mut req.proposed_new_state);
    }
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
        recorded,
        keep_values_hint: K::KEEP_VALUES_HINT,
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
    let desired_values = values_known
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
        .flatten();
    let desired_hash = desired_values
        .as_ref()
        .map(|v| Value::from(private.salted(&values_digest(Some(v)))))
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
            format!("The release is owned by {owner}: talosboot leaves it alone and plans no upgrade. Remove this resource from the configuration with a `removed` block that names it in `from` and holds `lifecycle {{ destroy = false }}`, or set `deletion_policy = \"keep\"`."),
        );
    } else {
        // An input that only feeds the values (`talos_defaults`, `set`, ...) changes nothing when
        // the values it makes are what the cluster has: the hash comparison below decides.
        let hash_known = !desired_hash.is_unknown();
        let inputs_changed = changed_inputs(prior, &planned, spec.upgrade_inputs)
            .iter()
            .filter(|name| !(**name == "version" && same_version(prior, &planned)))
            .filter(|name| !first_set_of_what_runs(name, prior, &planned))
            .any(|name| !(hash_known && spec.value_inputs.contains(name)));
        let drifted = !same_value(prior.attr("values_sha256"), Some(&desired_hash));
        let status = prior
            .attr("status")
            .and_then(Value::as_str)
            .map(ReleaseStatus::from);
        let unhealthy_release = status != Some(ReleaseStatus::Deployed);
        if let Some(pending) = status.as_ref().filter(|s| s.is_pending()) {
            diagnostics.warning(
                "Release left pending",
                format!("The release is \"{pending}\": an install or upgrade was interrupted. Apply unlocks it (marks that revision `failed`, as Helm users do by hand) and upgrades from it, under the bootstrap Lease, so a run still in progress elsewhere is waited for, not broken."),
            );
        }
        // Drift from the cluster, not an edit: the value inputs are as the last apply left them
        // (a write-only `set_wo` is not in state, so with one set an edit cannot be told apart).
        let values_edited = !changed_inputs(prior, &planned, spec.value_inputs).is_empty()
            || WRITE_ONLY_VALUE_INPUTS
                .iter()
                .any(|a| config.attr(a).is_some_and(|v| !v.is_null()));
        let id = planned
            .attr("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let (ns, name) = id.split_once('/').unwrap_or(("", &id));
        let shown = match (spec.recorded, &desired_values) {
            (Some(recorded), Some(desired)) if drifted && hash_known => {
                let sensitive = sensitive_paths(config, prior, recorded);
                Some(value_changes(&recorded.values, desired, &sensitive))
            }
            _ => None,
        };
        match shown {
            Some(changes) if !changes.is_empty() => diagnostics.warning(
                "Release values differ from the configuration",
                format!(
                    "Apply upgrades release {id} (a Helm upgrade: its pods may restart) from the values it runs (`helm get values -n {ns} {name}`) to the ones this configuration makes. These value paths change (running -> planned):\n{}\n{}To keep a running value, put it into `values`/`set` first.{}",
                    lines(&changes),
                    match values_edited {
                        true => "",
                        false => "The configuration did not change them: they were changed outside of talosboot, or the release was moved or imported. ",
                    },
                    spec.keep_values_hint,
                ),
            ),
            _ if drifted && hash_known && !inputs_changed && !values_edited && !unhealthy_release => {
                diagnostics.warning(
                    "Release values differ from the configuration",
                    format!("The values release {id} runs differ from the ones this configuration makes (they were changed outside of talosboot, or the release was moved or imported), and the cluster could not be read at plan to list which: apply upgrades it to the configuration's values, replacing what it runs now. `helm get values -n {ns} {name}` shows those; put what must stay into `values`/`set` first.{}", spec.keep_values_hint),
                );
            }
            _ => {}
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

/// Whether `input` is set for the first time on a state that did not have it (imported, moved,
/// or found by `terraform query`), to what already runs: the chart's source, which a release
/// record does not keep, and the chart's name, which the record does (`metadata.chart`).
/// Recorded, never an upgrade.
fn first_set_of_what_runs(input: &str, prior: &Value, planned: &Value) -> bool {
    let unset = prior.attr(input).is_none_or(Value::is_null);
    match input {
        "repository" => unset,
        "chart" => {
            let running = prior
                .attr("metadata")
                .and_then(|m| m.attr("chart"))
                .and_then(Value::as_str);
            // A chart reference may carry its repository (`oci://.../podinfo`).
            let named = planned
                .attr("chart")
                .and_then(Value::as_str)
                .map(|c| c.rsplit('/').next().unwrap_or(c));
            unset && running.is_some() && named == running
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A release whose values are `values` itself (a string), upgraded by `version` and `values`.
    fn spec_plan(prior: Value, planned: Value, private: &Private) -> PlanResponse {
        spec_plan_read(prior, planned, private, None)
    }

    fn spec_plan_read(
        prior: Value,
        planned: Value,
        private: &Private,
        recorded: Option<&RecordedValues>,
    ) -> PlanResponse {
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
            recorded,
            keep_values_hint: "",
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
        Value::object([
            ("namespace", Value::from("ns")),
            ("name", Value::from("app")),
            ("version", Value::from(version)),
            ("values", Value::from(values)),
            ("status", Value::from(status)),
            ("revision", Value::int(2)),
            ("values_sha256", hash),
        ])
    }

    /// An imported release's state has no `repository` (a release record does not keep it):
    /// the configuration's is recorded, not planned as an upgrade; a repository that changes
    /// from one to another still is.
    #[test]
    fn a_repository_set_for_the_first_time_plans_no_upgrade() {
        let private = Private::fresh();
        let hash =
            Value::from(private.salted(&values_digest(Some(&serde_json::json!({ "v": "a" })))));
        let with_repository = |repository: Value| {
            let mut v = state("1.0.0", "a", "deployed", hash.clone());
            if let Some(attrs) = v.attrs_mut() {
                attrs.insert("repository".into(), repository);
            }
            v
        };
        let merged = |p: &Value| {
            p.attr("values")
                .and_then(Value::as_str)
                .map(|v| serde_json::json!({ "v": v }))
        };
        let plan = |prior: Value, planned: Value| {
            let spec = PlanSpec {
                value_inputs: &["values"],
                upgrade_inputs: &["version", "values", "repository", "chart"],
                after_upgrade: &["revision", "status"],
                merged_values: &merged,
                recorded: None,
                keep_values_hint: "",
            };
            plan_with(
                PlanRequest {
                    prior_state: prior,
                    proposed_new_state: planned.clone(),
                    config: planned,
                    prior_private: private.encode(),
                    client_capabilities: Default::default(),
                },
                &spec,
            )
        };
        let upgrades = |resp: &PlanResponse| {
            resp.planned_state
                .attr("revision")
                .is_some_and(Value::is_unknown)
        };
        let first = plan(
            with_repository(Value::Null),
            with_repository("https://charts.example".into()),
        );
        assert!(!upgrades(&first), "{:?}", first.planned_state);
        let moved = plan(
            with_repository("https://charts.example".into()),
            with_repository("https://mirror.example".into()),
        );
        assert!(upgrades(&moved), "{:?}", moved.planned_state);
        // The chart's name: the record has it; the same name is recorded, another one upgrades.
        let with_chart = |chart: Value| {
            let mut v = with_repository("https://charts.example".into());
            if let Some(attrs) = v.attrs_mut() {
                attrs.insert("chart".into(), chart);
                attrs.insert(
                    "metadata".into(),
                    Value::object([("chart", Value::from("app"))]),
                );
            }
            v
        };
        for same in ["app", "oci://registry.example/charts/app"] {
            let named = plan(with_chart(Value::Null), with_chart(same.into()));
            assert!(!upgrades(&named), "{same}: {:?}", named.planned_state);
        }
        let other = plan(with_chart(Value::Null), with_chart("other".into()));
        assert!(upgrades(&other), "another chart: {:?}", other.planned_state);
    }

    #[test]
    fn the_plan_upgrades_on_inputs_drift_and_unhealth_only() {
        let private = Private::fresh();
        let hash = |v: &str| {
            Value::from(private.salted(&values_digest(Some(&serde_json::json!({ "v": v })))))
        };
        // A release as [version, values, status, the values its hash was taken of].
        let release = |[version, values, status, hashed]: [&str; 4]| {
            state(version, values, status, hash(hashed))
        };
        // (why, prior, planned, upgrade planned)
        #[rustfmt::skip]
        let table = [
            ("nothing changed", ["1.0.0", "a", "deployed", "a"], ["1.0.0", "a", "deployed", "a"], false),
            ("version spelling", ["1.0.0", "a", "deployed", "a"], ["v1.0.0", "a", "deployed", "a"], false),
            ("version", ["1.0.0", "a", "deployed", "a"], ["1.1.0", "a", "deployed", "a"], true),
            ("values edited", ["1.0.0", "a", "deployed", "a"], ["1.0.0", "b", "deployed", "a"], true),
            ("drift in the cluster", ["1.0.0", "a", "deployed", "x"], ["1.0.0", "a", "deployed", "x"], true),
            ("failed release", ["1.0.0", "a", "failed", "a"], ["1.0.0", "a", "failed", "a"], true),
        ];
        for (why, prior, planned, upgrade) in table {
            let resp = spec_plan(release(prior), release(planned), &private);
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

    #[test]
    fn a_plan_that_changes_running_values_names_each_path_and_hides_secrets() {
        let private = Private::fresh();
        let hash = |v: &str| {
            Value::from(private.salted(&values_digest(Some(&serde_json::json!({ "v": v })))))
        };
        let recorded = RecordedValues {
            revision: 2,
            values: serde_json::json!({"v": "running", "token": "t0p-s3cret", "mode": "x"}),
            sensitive_paths: vec!["mode".into()],
        };
        // Moved or imported: the state's hash is the cluster's, the configuration makes "a".
        let prior = state("1.0.0", "a", "deployed", Value::from("the cluster's"));
        let resp = spec_plan_read(prior.clone(), prior, &private, Some(&recorded));
        let warning = resp
            .diagnostics
            .iter()
            .find(|d| d.summary == "Release values differ from the configuration")
            .expect("a values warning");
        assert!(
            warning.detail.contains("  v: \"running\" -> \"a\""),
            "{}",
            warning.detail
        );
        assert!(warning.detail.contains("  mode: (sensitive) -> (unset)"));
        assert!(warning.detail.contains("  token: (sensitive) -> (unset)"));
        assert!(!warning.detail.contains("t0p-s3cret"));
        assert!(warning.detail.contains("moved or imported"));
        // Values as the cluster has them: nothing to list.
        let same = state("1.0.0", "a", "deployed", hash("a"));
        let resp = spec_plan_read(same.clone(), same, &private, Some(&recorded));
        assert!(resp.diagnostics.is_empty());
    }

    #[test]
    fn values_change_when_both_hashes_are_known_and_differ() {
        let private = Private::fresh();
        let s = |h: Value| state("1.0.0", "a", "deployed", h);
        // (prior, planned, the values change)
        let table = [
            (s(Value::from("x")), s(Value::from("y")), true),
            (s(Value::from("x")), s(Value::from("x")), false),
            (s(Value::from("x")), s(Value::unknown()), false),
            (Value::Null, s(Value::from("y")), false),
        ];
        for (prior, planned, changes) in table {
            let found = changes_values(&prior, &planned, &private);
            assert_eq!(found, changes, "{prior:?} -> {planned:?}");
        }
    }
}
