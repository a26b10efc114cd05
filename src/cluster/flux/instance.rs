//! Namespaces, the FluxInstance CRD wait, the FluxInstance itself (applied until Flux adopts it) and
//! the wait for it to be Ready. Waits poll a pure condition (see [`super::ownership`]) against a
//! caller-owned deadline and stop on cancellation.

use std::collections::BTreeMap;

use serde_json::{Value as Json, json};

use super::manifest::Manifest;
pub use super::objects::Outcome;
use super::objects::{self, crds, flux_instances, namespaces};
use super::ownership::{
    InstanceStatus, adopted_by_flux, conditions, crd_established, instance_status,
    namespace_adopted_by_flux, text,
};
use super::poll::{Check, Wait, poll, poll_gone};
use super::{FLUXINSTANCE_CRD, FluxError, Kube};

/// Creates or updates namespace `name` with the given metadata (present at creation, so admission
/// policies that require it accept the namespace), unless Flux has adopted it.
///
/// Why not `Kube::ensure_namespace` (the engine's and Helm's): that one creates a missing
/// namespace and leaves an existing one alone, while the bootstrap keeps its namespaces' metadata
/// in sync by server-side apply under the module's field manager (adopting the module's
/// namespaces) until Flux owns them, like every other object it applies.
pub async fn apply_namespace(
    kube: &Kube,
    name: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Result<Outcome, FluxError> {
    let api = objects::api(kube, &namespaces(), None);
    let mut metadata = json!({"name": name});
    if !labels.is_empty() {
        metadata["labels"] = json!(labels);
    }
    if !annotations.is_empty() {
        metadata["annotations"] = json!(annotations);
    }
    let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata});
    let what = format!("namespace {name}");
    objects::apply_unless_adopted(kube, &api, &object, &what, namespace_adopted_by_flux).await
}

/// Waits while namespace `name` is being deleted (a destroy right before a create, e.g. when a
/// tainted resource is replaced): applying into a terminating namespace fails.
pub async fn wait_not_terminating(
    kube: &Kube,
    name: &str,
    wait: Wait<'_>,
) -> Result<(), FluxError> {
    let api = objects::api(kube, &namespaces(), None);
    let what = format!("namespace {name}");
    poll(&format!("{what} to finish terminating"), wait, || async {
        Ok(match objects::get(kube, &api, name, &what).await? {
            Some(ns) if ns.pointer("/metadata/deletionTimestamp").is_some() => {
                Check::Waiting("still terminating".to_owned())
            }
            _ => Check::Done(()),
        })
    })
    .await
}

/// Deletes namespace `name` and waits until it is gone.
pub async fn delete_namespace(kube: &Kube, name: &str, wait: Wait<'_>) -> Result<(), FluxError> {
    let api = objects::api(kube, &namespaces(), None);
    let what = format!("namespace {name}");
    if !objects::delete(kube, &api, name, &what).await? {
        return Ok(());
    }
    poll_gone(&what, wait, || async {
        Ok(objects::get(kube, &api, name, &what).await?.is_some())
    })
    .await
}

/// Waits until CRD `fluxinstances.fluxcd.controlplane.io` exists and is Established.
pub async fn wait_crd_established(kube: &Kube, wait: Wait<'_>) -> Result<(), FluxError> {
    let api = objects::api(kube, &crds(), None);
    let what = format!("CRD {FLUXINSTANCE_CRD} to be Established");
    poll(&what, wait, || async {
        Ok(
            match objects::get(kube, &api, FLUXINSTANCE_CRD, "the FluxInstance CRD").await? {
                Some(crd) if crd_established(&crd) => Check::Done(()),
                Some(_) => Check::Waiting("the CRD exists, not Established yet".into()),
                None => Check::Waiting("the CRD does not exist yet".into()),
            },
        )
    })
    .await
}

/// Creates the FluxInstance, or applies it again while Flux has not adopted it.
pub async fn apply_instance(kube: &Kube, manifest: &Manifest) -> Result<Outcome, FluxError> {
    let api = objects::api(kube, &flux_instances(), Some(manifest.namespace()));
    let what = format!("FluxInstance {}/{}", manifest.namespace(), manifest.name());
    objects::apply_unless_adopted(kube, &api, &manifest.object, &what, adopted_by_flux).await
}

/// Reads the FluxInstance (`None` when absent).
pub async fn read_instance(
    kube: &Kube,
    namespace: &str,
    name: &str,
) -> Result<Option<Json>, FluxError> {
    let api = objects::api(kube, &flux_instances(), Some(namespace));
    match objects::get(
        kube,
        &api,
        name,
        &format!("FluxInstance {namespace}/{name}"),
    )
    .await
    {
        // Before the operator is installed the kind does not exist: the instance does not either.
        Err(FluxError::Cluster {
            source: crate::cluster::ClusterError::Rejected { code: 404, .. },
            ..
        }) => Ok(None),
        other => other,
    }
}

/// Waits for `Ready=True`; fails at once on `Ready=False` with a failure reason or `Stalled=True`.
pub async fn wait_ready(
    kube: &Kube,
    namespace: &str,
    name: &str,
    wait: Wait<'_>,
) -> Result<(), FluxError> {
    let what = format!("FluxInstance {namespace}/{name} to be Ready");
    poll(&what, wait, || async {
        let Some(fi) = read_instance(kube, namespace, name).await? else {
            return Ok(Check::Waiting("the FluxInstance does not exist".into()));
        };
        match instance_status(&fi) {
            InstanceStatus::Ready => Ok(Check::Done(())),
            InstanceStatus::Progressing(seen) => Ok(Check::Waiting(seen)),
            InstanceStatus::Failed { reason, message } => Err(FluxError::InstanceFailed {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                reason,
                message,
            }),
        }
    })
    .await
}

/// The FluxInstance's conditions as `Type=Status (Reason): message` lines, for diagnostics.
pub fn conditions_text(instance: &Json) -> String {
    conditions(instance)
        .iter()
        .map(|c| {
            format!(
                "{}={} ({}): {}",
                text(c, "type"),
                text(c, "status"),
                text(c, "reason"),
                text(c, "message")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Deletes the FluxInstance and waits until it is gone (the operator's finalizer uninstalls Flux).
pub async fn delete_instance(
    kube: &Kube,
    namespace: &str,
    name: &str,
    wait: Wait<'_>,
) -> Result<(), FluxError> {
    if read_instance(kube, namespace, name).await?.is_none() {
        return Ok(());
    }
    let api = objects::api(kube, &flux_instances(), Some(namespace));
    let what = format!("FluxInstance {namespace}/{name}");
    objects::delete(kube, &api, name, &what).await?;
    poll_gone(&what, wait, || async {
        Ok(read_instance(kube, namespace, name).await?.is_some())
    })
    .await
}
