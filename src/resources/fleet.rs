//! What every resource with a `cluster` attribute does the same way when it names its own
//! cluster (`crate::resources::connection`) instead of using the provider's connection, whatever
//! it installs (the chart resources, `release::fleet`; the Flux bootstrap, `flux_bootstrap::fleet`):
//! - [`validate_cluster`] checks the `cluster` settings without I/O (validate and plan, no cluster
//!   needed), on their attribute paths;
//! - [`read_own_cluster`]: refresh has no configuration, so it keeps such a state as it is; plan,
//!   which has it, reads the cluster within [`PLAN_READ_BUDGET`] (a warning, never an error, when
//!   it cannot), so that `plan` still shows drift on every cluster;
//! - [`plan_identity`] plans `cluster_identity`, and a replacement (saying why) when `cluster`
//!   reaches another cluster than the one the state was applied to;
//! - [`without_its_cluster`] decides a destroy that cannot reach the resource's cluster (a
//!   destroy has no configuration either);
//! - [`name_cluster`] names the cluster (its API server URL, never a credential) in errors.

use std::future::Future;
use std::time::Duration;

use crate::cluster::Kube;
use crate::cluster::engine::EngineError;
use crate::framework::{Diagnostic, Diagnostics, PlanRequest, PlanResponse, Severity};
use crate::resources::connection::{self, CLUSTER, IDENTITY, Scope, Target};
use crate::resources::engine_report::engine_diagnostic;
use crate::resources::private::Private;
use crate::values::{AttributePath, Value};

/// How long a plan waits for the read of a resource's own cluster: a cluster that does not
/// answer is reported by a warning (the plan goes on from the stored state) and by the apply.
pub const PLAN_READ_BUDGET: Duration = Duration::from_secs(20);

/// The `cluster` settings' mistakes (conflicting settings, a credential without `host`, a bad
/// URL, PEM or kubeconfig), each on `cluster.<name>`, as the provider block reports its own
/// ([`connection::resolve`]). An empty `cluster` is reported by [`connection::target`] at plan.
pub fn validate_cluster(config: &Value, diagnostics: &mut Diagnostics) {
    let Some(block) = config
        .attr(CLUSTER)
        .filter(|v| !v.is_null() && !v.is_unknown())
    else {
        return;
    };
    let (_, found) = connection::resolve(block, Scope::Block);
    diagnostics.extend(found);
}

/// Whether a plan reads the resource's own cluster: with `cluster` (every setting known), an
/// existing state (refresh kept it as stored), no destroy planned, and `cluster` reaching the
/// cluster the state was applied to (another one plans a replacement: nothing of it is there).
pub async fn reads_at_plan(target: &Target, req: &PlanRequest) -> bool {
    let Target::Own { source, .. } = target else {
        return false;
    };
    if req.prior_state.is_null() || req.proposed_new_state.is_null() {
        return false;
    }
    let Some(stored) = req.prior_state.attr(IDENTITY).filter(|v| !v.is_null()) else {
        // Applied through the provider's connection: `cluster` is where the apply goes now.
        return true;
    };
    let private = Private::decode_without_new_salt(&req.prior_private);
    match crate::cluster::identity(source).await {
        Ok(id) => &connection::identity_value(&id, Some(&private)) == stored,
        // `plan_identity` reports it.
        Err(_) => false,
    }
}

/// The read of `label` on the resource's own cluster that refresh could not make: connects
/// and runs `read` within [`PLAN_READ_BUDGET`]. `None`, with a warning in `diagnostics` saying
/// the plan shows no drift there, when the cluster cannot be read in time.
pub async fn read_own_cluster<T, F, Fut>(
    target: &Target,
    label: &str,
    diagnostics: &mut Diagnostics,
    read: F,
) -> Option<(Kube, T)>
where
    F: FnOnce(Kube) -> Fut,
    Fut: Future<Output = Result<(Kube, T), Diagnostic>>,
{
    let handle = target.handle();
    let outcome = tokio::time::timeout(PLAN_READ_BUDGET, async {
        let kube = handle
            .connect()
            .await
            .map_err(|e| engine_diagnostic("connect", &EngineError::connect(e)))?;
        read(kube).await
    })
    .await;
    let why = match outcome {
        Ok(Ok(read)) => return Some(read),
        Ok(Err(d)) => format!(
            "Its own cluster could not be read, so this plan does not show drift there and plans from the stored state: {}",
            d.detail
        ),
        Err(_) => format!(
            "Its own cluster did not answer within {}s, so this plan does not show drift there and plans from the stored state.",
            PLAN_READ_BUDGET.as_secs()
        ),
    };
    diagnostics.warning(format!("Could not read {label} at plan"), why);
    None
}

/// Plans `cluster_identity` (see [`connection::planned_identity`]) and, when `cluster` reaches
/// another cluster than the one `stored_prior` was applied to, a replacement with the reason.
pub async fn plan_identity(
    target: &Target,
    stored_prior: &Value,
    prior_private: &[u8],
    resp: &mut PlanResponse,
) {
    if resp.planned_state.is_null() {
        return;
    }
    // A create has no salt yet (it is made at apply): its CA hash is known after apply.
    let private = Private::decode_without_new_salt(prior_private);
    let salted = (!stored_prior.is_null() && !private.salt.is_empty()).then_some(&private);
    match connection::planned_identity(target, stored_prior, salted).await {
        Ok(identity) => {
            if let Some(attrs) = resp.planned_state.attrs_mut() {
                attrs.insert(IDENTITY.to_owned(), identity);
            }
        }
        Err(d) => resp.diagnostics.push(d),
    }
    if let Some(why) = connection::moved_to_another_cluster(stored_prior, &resp.planned_state) {
        resp.diagnostics.push(why);
        resp.requires_replace.push(AttributePath::attr(IDENTITY));
    }
}

/// A destroy that cannot reach the cluster its resource was applied to (see
/// [`connection::destroy_handle`]).
#[derive(Debug)]
pub enum UnreachableDestroy {
    /// The deletion policy keeps what runs: the resource leaves the state, with this warning.
    Forget(Diagnostic),
    /// It must delete something there: an error, and the state is kept.
    Refuse(Diagnostic),
}

/// Decides a destroy of `label` (state `prior`) without its cluster. `left_running` is what the
/// deletion policy leaves in the cluster (the warning's text), `None` when the policy deletes.
pub fn without_its_cluster(
    label: &str,
    prior: &Value,
    left_running: Option<&str>,
) -> UnreachableDestroy {
    let Some(left) = left_running else {
        return UnreachableDestroy::Refuse(connection::unreachable_on_destroy(label, prior));
    };
    let server = connection::stored_api_server(prior).unwrap_or("its cluster");
    UnreachableDestroy::Forget(Diagnostic::warning(
        format!("{label} left running"),
        format!(
            "deletion_policy is \"keep\" and the provider's connection does not reach {server} (a destroy receives no `cluster`): {left} stays on {server} and is no longer managed by this configuration."
        ),
    ))
}

/// `diagnostics` with the cluster named in every error of a resource with its own `cluster`
/// (unless the error already names it): with a fleet in one root, "which cluster" is the first
/// question. Only the URL, which `Kube::endpoint` and `cluster_identity` keep free of user info.
pub fn name_cluster(mut diagnostics: Diagnostics, target: &Target, endpoint: &str) -> Diagnostics {
    if target.is_own() {
        for d in diagnostics.iter_mut() {
            if d.severity == Severity::Error && !d.detail.contains(endpoint) {
                d.detail.push_str(&format!(
                    "\n\nCluster: {endpoint} (this resource's `cluster`)."
                ));
            }
        }
    }
    diagnostics
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{ClusterHandle, ConfigSource, ProviderConfig};

    fn applied_to(server: &str) -> Value {
        Value::object([(
            IDENTITY,
            Value::object([
                ("api_server", Value::from(server)),
                ("ca_sha256", Value::from("x")),
            ]),
        )])
    }

    fn source() -> ConfigSource {
        ConfigSource::Direct {
            host: "https://a:6443".into(),
            ca_pem: None,
            client_cert_pem: None,
            client_key_pem: None,
            token: None,
        }
    }

    fn own() -> Target {
        let source = source();
        Target::Own {
            handle: ClusterHandle::new(ProviderConfig::Known(source.clone())),
            source,
        }
    }

    #[test]
    fn bad_cluster_settings_are_errors_on_their_paths_without_a_cluster() {
        let config = |block: Value| Value::object([(CLUSTER, block)]);
        let mut diagnostics = Diagnostics::new();
        validate_cluster(
            &config(Value::object([
                (connection::HOST, Value::from("10.0.0.10:6443")),
                (connection::TOKEN, Value::from("t0k3n")),
            ])),
            &mut diagnostics,
        );
        let d = diagnostics.iter().next().expect("an error");
        assert_eq!(d.severity, Severity::Error);
        assert_eq!(
            d.attribute,
            Some(AttributePath::attr(CLUSTER).then_attr(connection::HOST))
        );
        assert!(!d.detail.contains("t0k3n"));
        for fine in [Value::Null, Value::unknown()] {
            let mut none = Diagnostics::new();
            validate_cluster(&config(fine), &mut none);
            assert!(none.is_empty());
        }
    }

    #[test]
    fn a_destroy_without_its_cluster_forgets_only_what_the_policy_keeps() {
        let prior = applied_to("https://a:6443");
        match without_its_cluster("Flux bootstrap flux-system", &prior, Some("namespace x")) {
            UnreachableDestroy::Forget(d) => {
                assert_eq!(d.severity, Severity::Warning);
                assert!(
                    d.detail.contains("namespace x stays on https://a:6443"),
                    "{}",
                    d.detail
                );
            }
            other => panic!("kept: {other:?}"),
        }
        match without_its_cluster("Flux bootstrap flux-system", &prior, None) {
            UnreachableDestroy::Refuse(d) => {
                assert_eq!(d.severity, Severity::Error);
                assert!(d.detail.contains("https://a:6443"), "{}", d.detail);
            }
            other => panic!("forgotten: {other:?}"),
        }
    }

    #[tokio::test]
    async fn only_a_resource_with_its_own_cluster_that_is_the_stored_one_is_read_at_plan() {
        let mut private = Private::default();
        private.ensure_salt();
        let id = crate::cluster::identity(&source())
            .await
            .expect("an identity without I/O");
        let stored = Value::object([(IDENTITY, connection::identity_value(&id, Some(&private)))]);
        let req = |prior: &Value, proposed: &Value| PlanRequest {
            prior_state: prior.clone(),
            proposed_new_state: proposed.clone(),
            config: proposed.clone(),
            prior_private: private.encode(),
            client_capabilities: Default::default(),
        };
        assert!(reads_at_plan(&own(), &req(&stored, &stored)).await);
        let via_provider = Value::object([(IDENTITY, Value::Null)]);
        assert!(
            reads_at_plan(&own(), &req(&via_provider, &via_provider)).await,
            "applied through the provider: `cluster` is where it goes now"
        );
        let elsewhere = applied_to("https://b:6443");
        assert!(
            !reads_at_plan(&own(), &req(&elsewhere, &elsewhere)).await,
            "another cluster: a replacement"
        );
        assert!(
            !reads_at_plan(&own(), &req(&Value::Null, &stored)).await,
            "a create"
        );
        assert!(
            !reads_at_plan(&own(), &req(&stored, &Value::Null)).await,
            "a destroy"
        );
        assert!(!reads_at_plan(&Target::Unknown, &req(&stored, &stored)).await);
        let provider = Target::Provider(ClusterHandle::unconfigured());
        assert!(!reads_at_plan(&provider, &req(&stored, &stored)).await);
    }

    #[test]
    fn errors_of_an_own_cluster_name_its_api_server_once() {
        let mut diagnostics = Diagnostics::new();
        diagnostics.error("Failed", "it broke");
        diagnostics.error("Failed", "https://a:6443 refused");
        diagnostics.warning("Slow", "it took long");
        let named: Vec<_> = name_cluster(diagnostics.clone(), &own(), "https://a:6443")
            .into_iter()
            .collect();
        assert!(
            named[0]
                .detail
                .ends_with("Cluster: https://a:6443 (this resource's `cluster`).")
        );
        assert_eq!(named[1].detail, "https://a:6443 refused", "already named");
        assert_eq!(named[2].detail, "it took long", "warnings as they are");
        let provider = Target::Provider(ClusterHandle::unconfigured());
        let plain: Vec<_> = name_cluster(diagnostics, &provider, "https://a:6443")
            .into_iter()
            .collect();
        assert_eq!(plain[0].detail, "it broke");
    }
}
