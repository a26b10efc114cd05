//! `moved { from = helm_release.cilium  to = talosboot_cilium.this }`: the state hashicorp/helm's
//! `helm_release` wrote (v3: schema version 2, `set`/`set_sensitive` lists of `{name, value, type}`,
//! `metadata` an object; v2: `set` blocks and `metadata` a one-element list) becomes this
//! resource's state, with nothing done in the cluster. The next refresh reads the release; when the
//! configuration carries the same chart, version and values, the plan is empty.

use serde_json::Value as Json;

use super::model::{Cilium, SetValue};
use crate::cluster::helm_release::values_digest;
use crate::framework::{Diagnostics, MoveRequest};
use crate::resources::private::Private;

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
                value: text(i, "value").unwrap_or_default(),
                kind: text(i, "type").filter(|t| t != "auto"),
            })
            .collect(),
    )
}

/// The moved state and its private state, or the reason it cannot be moved.
pub fn from_helm_release(req: &MoveRequest, d: &mut Diagnostics) -> Option<(Cilium, Private)> {
    if req.source_type_name != "helm_release" || !is_helm_provider(&req.source_provider_address) {
        d.error(
            "Cannot move this resource",
            format!(
                "talosboot_cilium can be moved from hashicorp/helm's helm_release only, not from {} ({}). Remove the old resource from state (`removed {{ lifecycle {{ destroy = false }} }}`) and import `kube-system/cilium` instead.",
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
    let chart = text(&source, "chart").unwrap_or_else(|| "cilium".into());
    if !(chart == "cilium" || chart.ends_with("/cilium")) {
        d.error(
            "Not a Cilium release",
            format!("The helm_release installs chart {chart:?}; talosboot_cilium manages the `cilium` chart only."),
        );
        return None;
    }
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
    let repository = text(&source, "repository");
    let (repository, chart) = match (&repository, chart.rsplit_once('/')) {
        (None, Some((repo, name))) if repo.starts_with("oci://") => {
            (Some(repo.to_owned()), name.to_owned())
        }
        _ => (
            repository,
            chart.rsplit('/').next().unwrap_or("cilium").to_owned(),
        ),
    };
    let state = Cilium {
        name: text(&source, "name"),
        namespace: text(&source, "namespace"),
        version: text(&source, "version").or_else(|| text(&metadata, "version")),
        repository,
        chart: Some(chart),
        values,
        set: set_values(&source, "set"),
        set_sensitive: set_values(&source, "set_sensitive"),
        wait: source.get("wait").and_then(Json::as_bool),
        status: text(&source, "status"),
        revision: metadata.get("revision").and_then(Json::as_i64),
        chart_version: text(&metadata, "version"),
        app_version: text(&metadata, "app_version"),
        ..Default::default()
    }
    .with_defaults();
    let private = Private::fresh();
    let mut state = state;
    // helm v3 keeps the release's values as JSON in metadata.values: the refresh recomputes it anyway.
    state.values_sha256 = text(&metadata, "values")
        .and_then(|v| serde_json::from_str::<Json>(&v).ok())
        .map(|v| private.salted(&values_digest(Some(&v))));
    Some((state, private))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(json: Json, address: &str) -> MoveRequest {
        MoveRequest {
            source_provider_address: address.into(),
            source_type_name: "helm_release".into(),
            source_schema_version: 2,
            source_state_json: serde_json::to_vec(&json).expect("json"),
            source_private: Vec::new(),
        }
    }

    #[test]
    fn a_helm_v3_cilium_release_moves_with_its_inputs() {
        let source = serde_json::json!({
            "id": "cilium", "name": "cilium", "namespace": "kube-system", "chart": "cilium",
            "repository": "https://helm.cilium.io", "version": "1.18.4", "values": ["ipam:\n  mode: kubernetes\n"],
            "set": [{"name": "kubeProxyReplacement", "value": "true", "type": "auto"}],
            "set_sensitive": null, "status": "deployed", "wait": true, "timeout": 300,
            "metadata": {"name": "cilium", "revision": 3, "namespace": "kube-system", "chart": "cilium", "version": "1.18.4", "app_version": "1.18.4", "values": "{\"ipam\":{\"mode\":\"kubernetes\"}}"},
        });
        let mut d = Diagnostics::new();
        let (state, _) =
            from_helm_release(&req(source, "registry.terraform.io/hashicorp/helm"), &mut d)
                .expect("moves");
        assert!(d.is_empty());
        assert_eq!(state.id.as_deref(), Some("kube-system/cilium"));
        assert_eq!(state.revision, Some(3));
        assert_eq!(
            state.set.as_ref().map(|s| s[0].kind.clone()),
            Some(None),
            "`auto` is our default"
        );
        assert_eq!(state.timeout.as_deref(), Some("10m"));
        assert!(state.values_sha256.is_some());
    }

    #[test]
    fn other_charts_and_providers_are_refused_with_the_alternative() {
        let mut d = Diagnostics::new();
        assert!(
            from_helm_release(
                &req(
                    serde_json::json!({"chart": "argo-cd"}),
                    "registry.terraform.io/hashicorp/helm"
                ),
                &mut d
            )
            .is_none()
        );
        assert!(d.has_errors());
        let mut d = Diagnostics::new();
        let mut r = req(
            serde_json::json!({}),
            "registry.terraform.io/hashicorp/kubernetes",
        );
        r.source_type_name = "kubernetes_manifest".into();
        assert!(from_helm_release(&r, &mut d).is_none());
        assert!(
            d.iter()
                .any(|x| x.detail.contains("import `kube-system/cilium`"))
        );
    }
}
