//! When Flux (or another GitOps tool) owns an object, so the bootstrap must never touch it again,
//! as [`crate::cluster::ownership`] decides, and the pure readiness
//! conditions the waits classify: CRD `Established`, FluxInstance `Ready` / `Stalled`.

use serde_json::Value as Json;

use crate::cluster::ownership::manager_of_object;

/// True when a GitOps tool has adopted the object: Flux's helm-controller or
/// kustomize-controller, or Argo CD ([`crate::cluster::ownership`]).
pub fn adopted_by_flux(object: &Json) -> bool {
    manager_of_object(object).is_some_and(|m| m.adopts_objects())
}

/// True when Flux (the operator's FluxInstance or a ResourceSet included) or Argo CD has
/// adopted the namespace.
pub fn namespace_adopted_by_flux(namespace: &Json) -> bool {
    manager_of_object(namespace).is_some()
}

/// The object's `status.conditions` (none before it has a status).
pub fn conditions(object: &Json) -> &[Json] {
    object
        .pointer("/status/conditions")
        .and_then(Json::as_array)
        .map_or(&[], Vec::as_slice)
}

fn condition<'a>(object: &'a Json, type_: &str) -> Option<&'a Json> {
    conditions(object)
        .iter()
        .find(|c| c.get("type").and_then(Json::as_str) == Some(type_))
}

/// A field of a condition as text (empty when absent).
pub fn text<'a>(c: &'a Json, key: &str) -> &'a str {
    c.get(key).and_then(Json::as_str).unwrap_or_default()
}

/// Node condition `Ready=True`.
pub fn node_ready(node: &Json) -> bool {
    condition(node, "Ready").is_some_and(|c| text(c, "status") == "True")
}

/// CRD condition `Established=True`.
pub fn crd_established(crd: &Json) -> bool {
    condition(crd, "Established").is_some_and(|c| text(c, "status") == "True")
}

/// Where a FluxInstance stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstanceStatus {
    Ready,
    /// Still reconciling (or not observed yet); carries a short description for timeouts.
    Progressing(String),
    /// `Ready=False` with a terminal reason, or `Stalled=True`.
    Failed {
        reason: String,
        message: String,
    },
}

/// Reasons with which `Ready=False` is a failure rather than progress, as the real operator
/// sets them ([`super::diagnosis`]): `ReconciliationFailed` after its health-check wait (an
/// unreachable or refused Git source ends here), `BuildFailed` (with `Stalled`), and
/// `ArtifactFailed` (only a failed pull of the distribution artifact). `HealthCheckCanceled` (a
/// newer change interrupted the wait) and `Progressing` are progress.
const FAILURE_REASONS: [&str; 3] = ["ArtifactFailed", "BuildFailed", "ReconciliationFailed"];

/// Classifies a FluxInstance by its conditions. A status older than the spec (observedGeneration
/// behind generation) is progress, never success.
pub fn instance_status(instance: &Json) -> InstanceStatus {
    if let Some(stalled) = condition(instance, "Stalled").filter(|c| text(c, "status") == "True") {
        return InstanceStatus::Failed {
            reason: text(stalled, "reason").to_owned(),
            message: text(stalled, "message").to_owned(),
        };
    }
    let Some(ready) = condition(instance, "Ready") else {
        return InstanceStatus::Progressing("no Ready condition yet".into());
    };
    let generation = instance
        .pointer("/metadata/generation")
        .and_then(Json::as_i64);
    let observed = ready.get("observedGeneration").and_then(Json::as_i64);
    let current = match (generation, observed) {
        (Some(g), Some(o)) => o >= g,
        _ => true,
    };
    let (status, reason, message) = (
        text(ready, "status"),
        text(ready, "reason"),
        text(ready, "message"),
    );
    match status {
        "True" if current => InstanceStatus::Ready,
        "False" if current && FAILURE_REASONS.contains(&reason) => InstanceStatus::Failed {
            reason: reason.to_owned(),
            message: message.to_owned(),
        },
        _ => InstanceStatus::Progressing(format!("Ready={status} ({reason}) {message}")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn flux_ownership_labels() {
        let adopted =
            json!({"metadata": {"labels": {"kustomize.toolkit.fluxcd.io/name": "flux-system"}}});
        assert!(adopted_by_flux(&adopted));
        assert!(!adopted_by_flux(&json!({"metadata": {}})));
        let ns = json!({"metadata": {"labels": {"fluxcd.controlplane.io/name": "flux"}}});
        assert!(namespace_adopted_by_flux(&ns));
        assert!(
            !adopted_by_flux(&ns),
            "only namespaces count the operator's label"
        );
    }

    #[test]
    fn instance_conditions_classify() {
        let with =
            |conds: Json| json!({"metadata": {"generation": 2}, "status": {"conditions": conds}});
        assert_eq!(
            instance_status(&with(
                json!([{"type": "Ready", "status": "True", "observedGeneration": 2}])
            )),
            InstanceStatus::Ready
        );
        assert!(matches!(
            instance_status(&with(
                json!([{"type": "Ready", "status": "True", "observedGeneration": 1}])
            )),
            InstanceStatus::Progressing(_)
        ));
        // What the real operator reports for an unreachable Git source, after its health check.
        let unreachable = "reconciliation failed: timeout waiting for: [GitRepository/flux-system/flux-system status: 'Failed']";
        assert_eq!(
            instance_status(&with(
                json!([{"type": "Ready", "status": "False", "reason": "ReconciliationFailed", "message": unreachable, "observedGeneration": 2}])
            )),
            InstanceStatus::Failed {
                reason: "ReconciliationFailed".into(),
                message: unreachable.into()
            }
        );
        for progress in ["Progressing", "HealthCheckCanceled"] {
            assert!(
                matches!(
                    instance_status(&with(
                        json!([{"type": "Ready", "status": "False", "reason": progress}])
                    )),
                    InstanceStatus::Progressing(_)
                ),
                "{progress}"
            );
        }
        assert!(matches!(
            instance_status(&with(
                json!([{"type": "Ready", "status": "Unknown", "reason": "Progressing", "message": "Reconciliation in progress"}])
            )),
            InstanceStatus::Progressing(_)
        ));
        assert!(matches!(
            instance_status(&with(
                json!([{"type": "Ready", "status": "False", "reason": "BuildFailed"}, {"type": "Stalled", "status": "True", "reason": "BuildFailed", "message": "build failed: no match found for semver: 2.99.x"}])
            )),
            InstanceStatus::Failed { reason, .. } if reason == "BuildFailed"
        ));
        assert!(matches!(
            instance_status(&with(
                json!([{"type": "Stalled", "status": "True", "reason": "InvalidSpec"}])
            )),
            InstanceStatus::Failed { .. }
        ));
        assert!(crd_established(
            &json!({"status": {"conditions": [{"type": "Established", "status": "True"}]}})
        ));
    }
}
