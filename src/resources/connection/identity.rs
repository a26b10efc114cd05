//! The cluster a state was applied to, `cluster_identity` (the API server URL and a keyed hash of
//! its CA): what a plan sets, what an apply checks against the plan, when a resource moves to
//! another cluster (a replacement, said why), and which connection a destroy, which receives no
//! configuration, can use.

use super::{CLUSTER, IDENTITY, Target};
use crate::cluster::{ClusterHandle, ClusterIdentity, ProviderConfig};
use crate::framework::{Ctx, Diagnostic};
use crate::resources::private::Private;
use crate::values::{AttributePath, Value};

/// The state value of `id`: the URL, and the CA digest salted with the resource's salt (unknown
/// without one: a create's salt is only made at apply).
pub fn identity_value(id: &ClusterIdentity, private: Option<&Private>) -> Value {
    Value::object([
        ("api_server", Value::from(id.api_server.clone())),
        (
            "ca_sha256",
            private
                .map(|p| Value::from(p.salted(&id.ca_sha256)))
                .unwrap_or_else(Value::unknown),
        ),
    ])
}

/// The API server a state's `cluster_identity` names, when it has one.
pub fn stored_api_server(state: &Value) -> Option<&str> {
    state
        .attr(IDENTITY)
        .and_then(|i| i.attr("api_server"))
        .and_then(Value::as_str)
}

/// Whether a state was applied through its own `cluster`: refresh, which has no configuration,
/// cannot reach that cluster and keeps such a state as it is.
pub fn applied_through_own_cluster(state: &Value) -> bool {
    stored_api_server(state).is_some()
}

/// The `cluster_identity` a plan sets: null with the provider's connection, the prior one while
/// the `cluster` settings are unknown (checked again at apply), else the identity of the
/// settings (the CA hash salted with `private`, the prior state's: `None` on a create).
///
/// # Errors
/// The settings do not load (a kubeconfig file that cannot be read, ...), on `cluster`.
pub async fn planned_identity(
    target: &Target,
    prior: &Value,
    private: Option<&Private>,
) -> Result<Value, Diagnostic> {
    match target {
        Target::Provider(_) => Ok(Value::Null),
        Target::Unknown => Ok(prior
            .attr(IDENTITY)
            .filter(|v| !v.is_null())
            .cloned()
            .unwrap_or_else(Value::unknown)),
        Target::Own { source, .. } => crate::cluster::identity(source)
            .await
            .map(|id| identity_value(&id, private))
            .map_err(|e| {
                crate::resources::cluster_diagnostic("load the `cluster` connection", &e)
                    .at(AttributePath::attr(CLUSTER))
            }),
    }
}

/// When `planned` names another cluster than `prior` (both fully known), the warning that says
/// why the plan replaces the resource; the caller adds [`IDENTITY`] to `requires_replace`.
pub fn moved_to_another_cluster(prior: &Value, planned: &Value) -> Option<Diagnostic> {
    let fields = |v: &Value| {
        let id = v.attr(IDENTITY)?;
        let text = |n| id.attr(n).and_then(Value::as_str).map(str::to_owned);
        Some((text("api_server")?, text("ca_sha256")?))
    };
    let ((from, from_ca), (to, to_ca)) = (fields(prior)?, fields(planned)?);
    if from == to && from_ca == to_ca {
        return None;
    }
    let why = if from == to {
        format!("the API server {to} is the same, but it is trusted with another CA")
    } else {
        format!("it was applied to {from} and `cluster` now reaches {to}")
    };
    Some(
        Diagnostic::warning(
            "Resource moves to another cluster",
            format!("This resource is replaced: {why}. Terraform destroys it on the old cluster (which needs the provider's connection to reach that cluster, unless `deletion_policy = \"keep\"`) and creates it on the new one."),
        )
        .at(AttributePath::attr(CLUSTER)),
    )
}

/// At apply, the identity of the cluster the operation reaches: it must be the planned one (a
/// `cluster` unknown at plan may turn out to be another cluster; Terraform would then store a
/// state that does not match the plan).
///
/// # Errors
/// The settings do not load, or name another cluster than the plan.
pub async fn applied_identity(
    target: &Target,
    planned: &Value,
    private: &Private,
) -> Result<Value, Diagnostic> {
    let Target::Own { source, .. } = target else {
        return Ok(Value::Null);
    };
    let id = crate::cluster::identity(source).await.map_err(|e| {
        crate::resources::cluster_diagnostic("load the `cluster` connection", &e)
            .at(AttributePath::attr(CLUSTER))
    })?;
    if let Some(planned_server) = stored_api_server(planned) {
        if planned_server != id.api_server {
            return Err(Diagnostic::error(
                "Cluster changed since the plan",
                format!("The plan kept this resource on {planned_server} (its `cluster` was not known yet), but `cluster` now reaches {}. Run plan again: it plans the move to the other cluster as a replacement.", id.api_server),
            ).at(AttributePath::attr(CLUSTER)));
        }
    }
    Ok(identity_value(&id, Some(private)))
}

/// The connection a destroy uses. A destroy receives no configuration, so a resource applied
/// through its own `cluster` is reached through the provider's connection when that reaches the
/// same cluster (same URL and CA); `None` otherwise.
pub async fn destroy_handle(ctx: &Ctx, prior: &Value, private: &Private) -> Option<ClusterHandle> {
    let provider = crate::resources::cluster(ctx);
    let Some(stored) = prior.attr(IDENTITY).filter(|v| !v.is_null()) else {
        return Some(provider);
    };
    let ProviderConfig::Known(source) = provider.config() else {
        return None;
    };
    let id = crate::cluster::identity(source).await.ok()?;
    (&identity_value(&id, Some(private)) == stored).then_some(provider)
}

/// The error of a destroy that cannot reach the cluster a resource was applied to.
pub fn unreachable_on_destroy(label: &str, prior: &Value) -> Diagnostic {
    let server = stored_api_server(prior).unwrap_or("its cluster");
    Diagnostic::error(
        format!("Cannot reach the cluster of {label} to destroy it"),
        format!(
            "It was applied to {server} through its `cluster` attribute, and a destroy receives no configuration (no write-only value reaches it). Either point the provider block at {server} for this destroy, set `deletion_policy = \"keep\"` and apply before destroying (the release then stays in the cluster), or forget it with a `removed` block holding `lifecycle {{ destroy = false }}`."
        ),
    )
}

/// `cluster_identity` in a model.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, serde::Serialize)]
pub struct IdentityState {
    pub api_server: Option<String>,
    pub ca_sha256: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(server: &str, ca: &str) -> Value {
        Value::object([(
            IDENTITY,
            Value::object([
                ("api_server", Value::from(server)),
                ("ca_sha256", Value::from(ca)),
            ]),
        )])
    }

    #[test]
    fn another_cluster_or_ca_is_a_replacement_and_an_unknown_one_is_not() {
        let prior = identity("https://a:6443", "hmac-sha256:1");
        assert!(moved_to_another_cluster(&prior, &prior).is_none());
        let moved = moved_to_another_cluster(&prior, &identity("https://b:6443", "hmac-sha256:1"))
            .expect("a replacement");
        assert!(moved.detail.contains("https://a:6443") && moved.detail.contains("https://b:6443"));
        let ca = moved_to_another_cluster(&prior, &identity("https://a:6443", "hmac-sha256:2"))
            .expect("a replacement");
        assert!(ca.detail.contains("another CA"), "{}", ca.detail);
        let unknown = Value::object([(
            IDENTITY,
            Value::object([
                ("api_server", Value::from("https://b:6443")),
                ("ca_sha256", Value::unknown()),
            ]),
        )]);
        assert!(moved_to_another_cluster(&prior, &unknown).is_none());
        assert!(
            moved_to_another_cluster(&Value::object([(IDENTITY, Value::Null)]), &prior).is_none()
        );
    }

    #[test]
    fn only_a_state_applied_through_its_own_cluster_is_kept_by_refresh() {
        assert!(applied_through_own_cluster(&identity(
            "https://a:6443",
            "x"
        )));
        assert!(!applied_through_own_cluster(&Value::object([(
            IDENTITY,
            Value::Null
        )])));
    }

    #[test]
    fn the_identity_hash_is_salted_per_resource_and_unknown_without_a_salt() {
        let id = ClusterIdentity {
            api_server: "https://a:6443".into(),
            ca_sha256: "ab".into(),
        };
        let (p, q) = (Private::fresh(), Private::fresh());
        let a = identity_value(&id, Some(&p));
        assert_ne!(a, identity_value(&id, Some(&q)));
        assert!(!format!("{:?}", a.attr("ca_sha256")).contains("\"ab\""));
        assert!(
            identity_value(&id, None)
                .attr("ca_sha256")
                .is_some_and(Value::is_unknown)
        );
    }
}
