//! The Flux Operator's side of the bootstrap: whether Flux owns its Deployment (then the chart is
//! never installed again), and the wait for it to be available, which tells a missing pod network
//! (no CNI yet: every node NotReady) from a slow start.

use std::time::Duration;

use serde_json::Value as Json;
use tokio::time::Instant;

use super::objects::{self, deployments};
use super::ownership::{adopted_by_flux, node_ready};
use super::poll::{Check, Wait, poll};
use super::{FluxError, Kube, OPERATOR_RELEASE};

/// How long every node may be NotReady before the wait says "no pod network" instead of waiting on.
const NO_NETWORK_GRACE: Duration = Duration::from_secs(60);

/// The operator's Deployment, if it exists.
pub async fn deployment(kube: &Kube, namespace: &str) -> Result<Option<Json>, FluxError> {
    let api = objects::api(kube, &deployments(), Some(namespace));
    let what = format!("Deployment {namespace}/{OPERATOR_RELEASE}");
    objects::get(kube, &api, OPERATOR_RELEASE, &what).await
}

/// True when Flux has adopted the operator (its HelmRelease manages it now).
pub async fn adopted(kube: &Kube, namespace: &str) -> Result<bool, FluxError> {
    Ok(deployment(kube, namespace)
        .await?
        .as_ref()
        .is_some_and(adopted_by_flux))
}

/// Whether the Deployment has an available replica.
pub fn available(deployment: &Json) -> bool {
    deployment
        .pointer("/status/availableReplicas")
        .and_then(Json::as_i64)
        .unwrap_or(0)
        > 0
}

/// How many nodes are `Ready`.
pub async fn ready_nodes(kube: &Kube) -> Result<usize, FluxError> {
    Ok(objects::list_nodes(kube)
        .await?
        .iter()
        .filter(|n| node_ready(n))
        .count())
}

/// Waits until the operator has an available replica. With every node NotReady for longer than a
/// grace period, fails with [`FluxError::NoPodNetwork`].
pub async fn wait_available(kube: &Kube, namespace: &str, wait: Wait<'_>) -> Result<(), FluxError> {
    let started = Instant::now();
    let what = format!("Deployment {namespace}/{OPERATOR_RELEASE} to be available");
    poll(&what, wait, || async {
        let seen = match deployment(kube, namespace).await? {
            Some(d) if available(&d) => return Ok(Check::Done(())),
            Some(_) => "no available replica".to_owned(),
            None => "the Deployment does not exist".to_owned(),
        };
        let grace = NO_NETWORK_GRACE.min(wait.timeout / 2);
        if ready_nodes(kube).await? == 0 && started.elapsed() >= grace {
            return Err(FluxError::NoPodNetwork {
                namespace: namespace.to_owned(),
            });
        }
        Ok(Check::Waiting(seen))
    })
    .await
}
