//! Generic steps on objects of any kind: resolve the API of a manifest (discovery for kinds we do not
//! know), read, server-side apply with the bootstrap's field manager, delete, and the prerequisite
//! rule (apply until Flux adopts the object, then never again).

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
    PropagationPolicy,
};
use kube::discovery::{self, Scope};
use serde_json::Value as Json;

use super::manifest::Manifest;
use super::ownership::adopted_by_flux;
use super::{FIELD_MANAGER, FluxError, Kube, is_not_found};

/// Field managers whose ownership is dropped before applying, as kustomize-controller does (hand
/// edits with kubectl would otherwise keep fields the input no longer sets).
const DISALLOWED_MANAGERS: [&str; 2] = ["kubectl", "before-first-apply"];

/// The API resource of a kind talosboot knows without discovery.
pub fn known(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

pub fn secrets() -> ApiResource {
    known("", "v1", "Secret", "secrets")
}
pub fn configmaps() -> ApiResource {
    known("", "v1", "ConfigMap", "configmaps")
}
pub fn namespaces() -> ApiResource {
    known("", "v1", "Namespace", "namespaces")
}
pub fn deployments() -> ApiResource {
    known("apps", "v1", "Deployment", "deployments")
}
pub fn crds() -> ApiResource {
    known(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    )
}
pub fn flux_instances() -> ApiResource {
    known(
        "fluxcd.controlplane.io",
        "v1",
        "FluxInstance",
        "fluxinstances",
    )
}

/// A namespaced (`Some(ns)`) or cluster-scoped (`None`) API handle.
pub fn api(kube: &Kube, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(kube.client.clone(), ns, resource),
        None => Api::all_with(kube.client.clone(), resource),
    }
}

/// The API of a manifest's kind, found by discovery; namespaced objects without a namespace go to
/// `default`, as kubectl does.
pub async fn api_for(kube: &Kube, manifest: &Manifest) -> Result<Api<DynamicObject>, FluxError> {
    let gvk = GroupVersionKind::gvk(manifest.group(), manifest.version(), manifest.kind());
    let (resource, caps) = kube
        .retry(&format!("discover the API of {}", manifest.kind()), || {
            discovery::pinned_kind(&kube.client, &gvk)
        })
        .await
        .map_err(|e| match &e {
            kube::Error::Api(s) if s.code == 404 => FluxError::UnknownKind {
                api_version: manifest.api_version().to_owned(),
                kind: manifest.kind().to_owned(),
            },
            kube::Error::Discovery(_) => FluxError::UnknownKind {
                api_version: manifest.api_version().to_owned(),
                kind: manifest.kind().to_owned(),
            },
            _ => kube.error(format!("discover the API of {}", manifest.kind()), e),
        })?;
    Ok(match caps.scope {
        Scope::Cluster => api(kube, &resource, None),
        Scope::Namespaced => {
            let ns = Some(manifest.namespace()).filter(|n| !n.is_empty());
            api(kube, &resource, Some(ns.unwrap_or("default")))
        }
    })
}

/// Reads an object; `None` when it does not exist.
pub async fn get(
    kube: &Kube,
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
) -> Result<Option<Json>, FluxError> {
    match kube
        .retry(&format!("read {what}"), || api.get_opt(name))
        .await
    {
        Ok(Some(object)) => Ok(Some(serde_json::to_value(object).unwrap_or_default())),
        Ok(None) => Ok(None),
        // The kind itself is gone (its CRD was deleted, e.g. with the operator's chart): the real
        // apiserver answers a bare `404 page not found`, not a NotFound Status; no object either.
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(e) => Err(kube.error(format!("read {what}"), e)),
    }
}

/// Every node, as the API returns it.
///
/// # Errors
/// The API refused or could not be reached.
pub async fn list_nodes(kube: &Kube) -> Result<Vec<Json>, FluxError> {
    let nodes = api(kube, &known("", "v1", "Node", "nodes"), None);
    let params = kube::api::ListParams::default();
    let nodes = kube
        .retry("list the nodes", || nodes.list(&params))
        .await
        .map_err(|e| kube.error("list the nodes", e))?;
    Ok(nodes
        .items
        .into_iter()
        .map(|n| serde_json::to_value(n).unwrap_or_default())
        .collect())
}

/// Server-side apply (forced) with the bootstrap's field manager; returns the object as stored.
pub async fn apply(
    kube: &Kube,
    api: &Api<DynamicObject>,
    name: &str,
    object: &Json,
    what: &str,
) -> Result<Json, FluxError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let patch = Patch::Apply(object);
    kube.retry(&format!("apply {what}"), || {
        api.patch(name, &params, &patch)
    })
    .await
    .map(|o| serde_json::to_value(o).unwrap_or_default())
    .map_err(|e| kube.error(format!("apply {what}"), e))
}

/// Deletes an object (background propagation); `false` when it was already gone.
pub async fn delete(
    kube: &Kube,
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
) -> Result<bool, FluxError> {
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    match kube
        .retry(&format!("delete {what}"), || api.delete(name, &params))
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if is_not_found(&e) => Ok(false),
        Err(e) => Err(kube.error(format!("delete {what}"), e)),
    }
}

/// Drops the ownership records of hand-edit managers (`kubectl`, `before-first-apply`) so the next
/// apply owns, and can remove, what they set.
pub async fn strip_disallowed_managers(
    kube: &Kube,
    api: &Api<DynamicObject>,
    current: &Json,
    what: &str,
) -> Result<(), FluxError> {
    let Some(fields) = current
        .pointer("/metadata/managedFields")
        .and_then(Json::as_array)
    else {
        return Ok(());
    };
    let keep: Vec<Json> = fields
        .iter()
        .filter(|f| {
            let manager = f.get("manager").and_then(Json::as_str).unwrap_or_default();
            !DISALLOWED_MANAGERS.contains(&manager)
        })
        .cloned()
        .collect();
    if keep.len() == fields.len() {
        return Ok(());
    }
    // A merge patch replaces the list; `[{}]` is the API's way to say "no managers left".
    let entries = if keep.is_empty() {
        serde_json::json!([{}])
    } else {
        Json::Array(keep)
    };
    let name = current
        .pointer("/metadata/name")
        .and_then(Json::as_str)
        .unwrap_or_default();
    let patch = serde_json::json!({"metadata": {"managedFields": entries}});
    let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
    kube.retry(&format!("drop kubectl's field ownership of {what}"), || {
        api.patch(name, &params, &patch)
    })
    .await
    .map(|_| ())
    .map_err(|e| kube.error(format!("drop kubectl's field ownership of {what}"), e))
}

/// What an apply-until-adopted step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Created,
    /// Existed, not yet adopted by Flux: applied again.
    Reapplied,
    /// Adopted by Flux: left alone.
    Adopted,
}

/// The module's hand-off rule: apply `object` (creating it if missing) until `adopted` says Flux
/// owns the live object, then never touch it again.
pub async fn apply_unless_adopted(
    kube: &Kube,
    api: &Api<DynamicObject>,
    object: &Json,
    what: &str,
    adopted: fn(&Json) -> bool,
) -> Result<Outcome, FluxError> {
    let name = object
        .pointer("/metadata/name")
        .and_then(Json::as_str)
        .unwrap_or_default();
    let outcome = match get(kube, api, name, what).await? {
        None => Outcome::Created,
        Some(current) if adopted(&current) => return Ok(Outcome::Adopted),
        Some(_) => Outcome::Reapplied,
    };
    apply(kube, api, name, object, what).await?;
    Ok(outcome)
}

/// Applies a prerequisite unless Flux has adopted it.
pub async fn apply_prerequisite(kube: &Kube, manifest: &Manifest) -> Result<Outcome, FluxError> {
    let api = api_for(kube, manifest).await?;
    let what = format!("prerequisite {}", manifest.reference());
    apply_unless_adopted(kube, &api, &manifest.object, &what, adopted_by_flux).await
}
