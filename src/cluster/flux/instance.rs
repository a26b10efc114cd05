//! Namespaces, the FluxInstance CRD wait, the FluxInstance itself (applied until Flux adopts it) and
//! the wait for it to be Ready. Waits poll a pure condition (see [`super::ownership`]) against a
//! caller-owned deadline and stop on cancellation.

use std::collections::BTreeMap;

use kube::api::ApiResource;
use serde_json::{Value as Json, json};

use super::diagnosis::{Condition, OperatorWait, SourceState, operator_wait, redact, sync_of};
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

/// Waits for `Ready=True`; fails at once on `Ready=False` with a failure reason or `Stalled=True`
/// ([`FluxError::InstanceFailed`]). When the deadline passes first (the operator says nothing
/// final before its own health-check wait ends), fails with [`FluxError::InstanceNotReady`]:
/// either way with the sync objects' own status, so the user gets a diagnosis rather than a bare
/// timeout.
pub async fn wait_ready(
    kube: &Kube,
    namespace: &str,
    name: &str,
    wait: Wait<'_>,
) -> Result<(), FluxError> {
    let what = format!("FluxInstance {namespace}/{name} to be Ready");
    let waited = poll(&what, wait, || async {
        let Some(fi) = read_instance(kube, namespace, name).await? else {
            return Ok(Check::Waiting("the FluxInstance does not exist".into()));
        };
        match instance_status(&fi) {
            InstanceStatus::Ready => Ok(Check::Done(())),
            InstanceStatus::Progressing(seen) => Ok(Check::Waiting(redact(&seen))),
            InstanceStatus::Failed { reason, message } => Err(FluxError::InstanceFailed {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                reason,
                message: redact(&message),
                sources: Vec::new(),
            }),
        }
    })
    .await;
    match waited {
        Err(FluxError::InstanceFailed {
            namespace,
            name,
            reason,
            message,
            ..
        }) => {
            let fi = read_instance(kube, &namespace, &name).await.ok().flatten();
            let sources = match &fi {
                Some(fi) => sync_states(kube, fi).await,
                None => Vec::new(),
            };
            Err(FluxError::InstanceFailed {
                namespace,
                name,
                reason,
                message,
                sources,
            })
        }
        Err(FluxError::Timeout { after, last, .. }) => {
            let fi = read_instance(kube, namespace, name).await.ok().flatten();
            let (operator_wait, sources) = match &fi {
                Some(fi) => (operator_wait(fi), sync_states(kube, fi).await),
                None => (OperatorWait::Default, Vec::new()),
            };
            Err(FluxError::InstanceNotReady {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                after,
                last,
                operator_wait,
                sources,
            })
        }
        other => other,
    }
}

/// The API of a sync object's kind (the versions Flux 2.6+ serves).
fn sync_api(kind: &str) -> Option<ApiResource> {
    let (group, plural) = match kind {
        "GitRepository" => ("source.toolkit.fluxcd.io", "gitrepositories"),
        "OCIRepository" => ("source.toolkit.fluxcd.io", "ocirepositories"),
        "Bucket" => ("source.toolkit.fluxcd.io", "buckets"),
        "Kustomization" => ("kustomize.toolkit.fluxcd.io", "kustomizations"),
        _ => return None,
    };
    Some(objects::known(group, "v1", kind, plural))
}

/// The source and the Kustomization the FluxInstance's `spec.sync` makes, as they are now.
/// Best effort: what cannot be read is left out.
pub async fn sync_states(kube: &Kube, instance: &Json) -> Vec<SourceState> {
    let Some(sync) = sync_of(instance) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for kind in [sync.kind.as_str(), "Kustomization"] {
        let Some(resource) = sync_api(kind) else {
            continue;
        };
        let api = objects::api(kube, &resource, Some(&sync.namespace));
        let what = format!("{kind} {}/{}", sync.namespace, sync.name);
        let Ok(found) = objects::get(kube, &api, &sync.name, &what).await else {
            continue;
        };
        let condition = |type_: &str| {
            found.as_ref().and_then(|o| {
                conditions(o)
                    .iter()
                    .find(|c| text(c, "type") == type_)
                    .map(|c| Condition {
                        status: text(c, "status").to_owned(),
                        reason: text(c, "reason").to_owned(),
                        message: redact(text(c, "message")),
                    })
            })
        };
        out.push(SourceState {
            kind: kind.to_owned(),
            namespace: sync.namespace.clone(),
            name: sync.name.clone(),
            ready: condition("Ready"),
            fetch_failed: condition("FetchFailed").filter(|c| c.status == "True"),
            exists: found.is_some(),
        });
    }
    out
}

/// The FluxInstance's conditions as `Type=Status (Reason): message` lines, for diagnostics
/// (credentials in URLs removed).
pub fn conditions_text(instance: &Json) -> String {
    conditions(instance)
        .iter()
        .map(|c| {
            format!(
                "{}={} ({}): {}",
                text(c, "type"),
                text(c, "status"),
                text(c, "reason"),
                redact(text(c, "message"))
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The finalizer the Flux Operator adds to the FluxInstance: it removes it after uninstalling
/// Flux (controllers, CRDs, Flux objects; the namespace stays).
pub const OPERATOR_FINALIZER: &str = "fluxcd.controlplane.io/finalizer";

/// How long a FluxInstance may wait for its finalizer with no operator running before the
/// delete says so (an operator that is restarting gets this long).
const NO_OPERATOR_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// Whether a FluxInstance under deletion waits for a finalizer that only a running operator
/// removes: the operator's, with no available operator replica.
pub fn finalizer_stuck(instance: &Json, operator_available: bool) -> bool {
    let finalizers = instance
        .pointer("/metadata/finalizers")
        .and_then(Json::as_array)
        .map_or(&[][..], Vec::as_slice);
    !operator_available
        && finalizers
            .iter()
            .any(|f| f.as_str() == Some(OPERATOR_FINALIZER))
}

/// Deletes the FluxInstance and waits until it is gone: the operator's finalizer uninstalls Flux
/// first, so the operator must still run (uninstall it only afterwards). When its finalizer stays
/// with no operator running, fails with [`FluxError::FinalizerStuck`] instead of waiting out the
/// timeout.
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
    let started = tokio::time::Instant::now();
    poll(&format!("{what} to be deleted"), wait, || async {
        let Some(fi) = read_instance(kube, namespace, name).await? else {
            return Ok(Check::Done(()));
        };
        // Only once the grace has passed and the finalizer is there; an operator that cannot
        // be read counts as running (this is a diagnosis, never a reason to fail by itself).
        if started.elapsed() >= NO_OPERATOR_GRACE && finalizer_stuck(&fi, false) {
            let running = match super::operator::deployment(kube, namespace).await {
                Ok(d) => d.as_ref().is_some_and(super::operator::available),
                Err(_) => true,
            };
            if finalizer_stuck(&fi, running) {
                return Err(FluxError::FinalizerStuck {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                });
            }
        }
        Ok(Check::Waiting(
            "still terminating (the operator uninstalls Flux first)".to_owned(),
        ))
    })
    .await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_the_operator_removes_its_finalizer() {
        let with = |finalizers: Json| json!({"metadata": {"finalizers": finalizers}});
        let cases = [
            (
                "the operator's finalizer, no operator",
                with(json!([OPERATOR_FINALIZER])),
                false,
                true,
            ),
            (
                "the operator's finalizer, operator running",
                with(json!([OPERATOR_FINALIZER])),
                true,
                false,
            ),
            ("no finalizer left", with(json!([])), false, false),
            (
                "another tool's finalizer",
                with(json!(["example.com/other"])),
                false,
                false,
            ),
            (
                "no metadata.finalizers",
                json!({"metadata": {}}),
                false,
                false,
            ),
        ];
        for (case, instance, running, stuck) in cases {
            assert_eq!(finalizer_stuck(&instance, running), stuck, "{case}");
        }
    }
}
