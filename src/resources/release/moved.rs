//! `moved { from = helm_release.x  to = talosboot_<type>.x }`: the state hashicorp/helm's
//! `helm_release` wrote (v3: schema version 2, `set`/`set_sensitive` lists of `{name, value, type}`,
//! `metadata` an object; v2: `set` blocks and `metadata` a one-element list), read into the fields
//! every Helm-release model shares (its `metadata` output too, without the values), with nothing
//! done in the cluster. The next refresh reads the release; when the configuration carries the
//! same chart, version and values, the plan is empty.

use serde_json::Value as Json;

use super::ReleaseCommon;
use super::common::ReleaseMetadata;
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
                name: text(i, "name"),
                value: text(i, "value"),
                kind: text(i, "type").filter(|t| t != "auto"),
            })
            .collect(),
    )
}

/// `(repository, chart name)` of every form `helm_release` takes for a chart: a name in
/// `repository` (`cilium`), `repo/name` of a repository added to Helm (`cilium/cilium`), a full
/// OCI reference (`oci://quay.io/cilium/charts/cilium`, optionally `:1.18.4`), or the URL of a
/// chart archive (`https://helm.cilium.io/cilium-1.18.4.tgz`: the repository is its folder).
fn chart_reference(repository: Option<String>, chart: &str) -> (Option<String>, String) {
    let chart = chart.trim();
    let (folder, last) = chart.rsplit_once('/').unwrap_or(("", chart));
    if let Some(archive) = last.strip_suffix(".tgz") {
        // `<name>-<version>.tgz`: the version starts at the first `-` followed by a digit.
        let name = archive
            .char_indices()
            .find(|(i, c)| *c == '-' && archive[i + 1..].starts_with(|d: char| d.is_ascii_digit()))
            .map_or(archive, |(i, _)| &archive[..i]);
        let repository = match folder.contains("://") {
            true => Some(folder.to_owned()),
            false => repository,
        };
        return (repository, name.to_owned());
    }
    let name = last.split_once(':').map_or(last, |(name, _tag)| name);
    match (repository, folder.starts_with("oci://")) {
        (None, true) => (Some(folder.to_owned()), name.to_owned()),
        (repository, _) => (repository, name.to_owned()),
    }
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
                "{target} can be moved from hashicorp/helm's helm_release only, not from {} ({}). Remove the old resource from state (a `removed` block that names it in `from` and holds `lifecycle {{ destroy = false }}`) and import `<namespace>/<name>` instead.",
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
    let (repository, chart) = chart_reference(
        text(&source, "repository"),
        &text(&source, "chart").unwrap_or_default(),
    );
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
        metadata: metadata.is_object().then(|| ReleaseMetadata {
            name: text(&metadata, "name").unwrap_or_default(),
            revision: metadata
                .get("revision")
                .and_then(Json::as_i64)
                .unwrap_or_default(),
            namespace: text(&metadata, "namespace").unwrap_or_default(),
            chart: text(&metadata, "chart").unwrap_or_default(),
            version: text(&metadata, "version").unwrap_or_default(),
            app_version: text(&metadata, "app_version").unwrap_or_default(),
            first_deployed: metadata
                .get("first_deployed")
                .and_then(Json::as_i64)
                .unwrap_or_default(),
            last_deployed: metadata
                .get("last_deployed")
                .and_then(Json::as_i64)
                .unwrap_or_default(),
            notes: text(&metadata, "notes").unwrap_or_default(),
        }),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_chart_form_of_helm_release_names_the_chart_and_its_repository() {
        let helm = Some("https://helm.cilium.io".to_owned());
        let table: &[(Option<String>, &str, Option<&str>, &str)] = &[
            (
                helm.clone(),
                "cilium",
                Some("https://helm.cilium.io"),
                "cilium",
            ),
            (None, "cilium/cilium", None, "cilium"),
            (
                helm.clone(),
                "cilium/cilium",
                Some("https://helm.cilium.io"),
                "cilium",
            ),
            (
                None,
                "oci://quay.io/cilium/charts/cilium",
                Some("oci://quay.io/cilium/charts"),
                "cilium",
            ),
            (
                None,
                "oci://quay.io/cilium/charts/cilium:1.18.4",
                Some("oci://quay.io/cilium/charts"),
                "cilium",
            ),
            (
                Some("oci://quay.io/cilium/charts".into()),
                "cilium",
                Some("oci://quay.io/cilium/charts"),
                "cilium",
            ),
            (
                None,
                "https://helm.cilium.io/cilium-1.18.4.tgz",
                Some("https://helm.cilium.io"),
                "cilium",
            ),
            (
                None,
                "https://charts.example/argo-cd-9.4.15.tgz",
                Some("https://charts.example"),
                "argo-cd",
            ),
            (None, "./charts/cilium-1.19.0-rc.1.tgz", None, "cilium"),
        ];
        for (repository, chart, want_repo, want_chart) in table {
            let (repo, name) = chart_reference(repository.clone(), chart);
            assert_eq!(
                (repo.as_deref(), name.as_str()),
                (*want_repo, *want_chart),
                "{chart}"
            );
        }
    }
}
