//! `moved { from = helm_release.x  to = talosboot_<type>.x }`: the state hashicorp/helm's
//! `helm_release` wrote (v3: schema version 2, `set`/`set_sensitive` lists of `{name, value, type}`,
//! `metadata` an object; v2: `set` blocks and `metadata` a one-element list), read into the fields
//! every Helm-release model shares, with nothing done in the cluster. The next refresh reads the
//! release; when the configuration carries the same chart, version and values, the plan is empty.

use serde_json::Value as Json;

use super::ReleaseCommon;
use crate::cluster::helm::release::{ReleaseStatus, values_digest};
use crate::cluster::helm::values::SetValue;
use crate::framework::{Diagnostics, MoveRequest};
use crate::resources::private::Private;

/// What a `helm_release` state says, in talosboot's terms: the shared inputs and computed
/// attributes (`chart` is the chart's name: an `oci://` reference is split into `repository` and
/// it; `values_sha256` the salted hash of `metadata.values`, with the salt in the returned private
/// state), and the inputs only `talosboot_helm_release` has.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HelmState {
    pub common: ReleaseCommon,
    pub create_namespace: Option<bool>,
    pub atomic: Option<bool>,
    pub max_history: Option<i64>,
    pub description: Option<String>,
}

/// Provider addresses whose `helm_release` we understand (any registry host).
fn is_helm_provider(address: &str) -> bool {
    address.ends_with("hashicorp/helm")
}

fn text(v: &Json, key: &str) -> Option<String> {
    v.get(key)
        .and_then(Json::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn set_values(v: &Json, key: &str) -> Option<Vec<SetValue>> {
    let items = v.get(key)?.as_array()?;
    if items.is_empty() {
        return None;
    }
    Some(
        items
            .iter()
            .map(|i| SetValue {
                name: text(i, "name").unwrap_or_default(),
                value: text(i, "value"),
                kind: text(i, "type").filter(|t| t != "auto"),
            })
            .collect(),
    )
}

/// Reads a `helm_release` state; `target` names the resource type for messages.
pub fn read_helm_state(
    req: &MoveRequest,
    target: &str,
    d: &mut Diagnostics,
) -> Option<(HelmState, Private)> {
    if req.source_type_name != "helm_release" || !is_helm_provider(&req.source_provider_address) {
        d.error(
            "Cannot move this resource",
            format!(
                "{target} can be moved from hashicorp/helm's helm_release only, not from {} ({}). Remove the old resource from state (`removed {{ lifecycle {{ destroy = false }} }}`) and import `<namespace>/<name>` instead.",
                req.source_type_name, req.source_provider_address
            ),
        );
        return None;
    }
    let Ok(source) = serde_json::from_slice::<Json>(&req.source_state_json) else {
        d.error(
            "Cannot read the helm_release state",
            "The moved state is not valid JSON.",
        );
        return None;
    };
    let metadata = match source.get("metadata") {
        Some(Json::Array(items)) => items.first().cloned().unwrap_or(Json::Null),
        Some(m) => m.clone(),
        None => Json::Null,
    };
    let values: Option<Vec<String>> = source
        .get("values")
        .and_then(Json::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Json::as_str)
                .map(str::to_owned)
                .collect()
        })
        .filter(|v: &Vec<String>| !v.is_empty());
    let chart = text(&source, "chart").unwrap_or_default();
    let repository = text(&source, "repository");
    let (repository, chart) = match (&repository, chart.rsplit_once('/')) {
        (None, Some((repo, name))) if repo.starts_with("oci://") => {
            (Some(repo.to_owned()), name.to_owned())
        }
        _ => (
            repository,
            chart.rsplit('/').next().unwrap_or_default().to_owned(),
        ),
    };
    let private = Private::fresh();
    let common = ReleaseCommon {
        name: text(&source, "name"),
        namespace: text(&source, "namespace"),
        chart: Some(chart),
        repository,
        version: text(&source, "version").or_else(|| text(&metadata, "version")),
        values,
        set: set_values(&source, "set"),
        set_sensitive: set_values(&source, "set_sensitive"),
        wait: source.get("wait").and_then(Json::as_bool),
        status: text(&source, "status").map(|s| ReleaseStatus::from(s.as_str())),
        revision: metadata.get("revision").and_then(Json::as_i64),
        chart_version: text(&metadata, "version"),
        app_version: text(&metadata, "app_version"),
        values_sha256: text(&metadata, "values")
            .and_then(|v| serde_json::from_str::<Json>(&v).ok())
            .map(|v| private.salted(&values_digest(Some(&v)))),
        ..Default::default()
    };
    let state = HelmState {
        common,
        create_namespace: source.get("create_namespace").and_then(Json::as_bool),
        atomic: source.get("atomic").and_then(Json::as_bool),
        max_history: source.get("max_history").and_then(Json::as_i64),
        description: text(&source, "description"),
    };
    Some((state, private))
}
