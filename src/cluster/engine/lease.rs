//! Serialization of runs: one `coordination.k8s.io/v1` Lease per target, held for the whole run
//! and renewed while it runs. A second apply on the same target waits for it (and says so); a Lease
//! left by a killed run is taken over once it expires. Released (deleted) when the run ends.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{EngineError, Step};
use crate::cluster::ClusterError;
use crate::cluster::RetryBudget;

/// How long a Lease stays valid without renewal; renewed every third of it.
pub const LEASE_DURATION: Duration = Duration::from_secs(30);

/// A held Lease; renewed in the background until [`HeldLease::release`].
pub struct HeldLease {
    api: Api<Lease>,
    name: String,
    retry_budget: RetryBudget,
    renewer: JoinHandle<()>,
    stop: CancellationToken,
    /// Who held it before us while we waited, and for how long we waited.
    pub waited: Option<(String, Duration)>,
}

fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

fn expired(lease: &Lease) -> bool {
    let Some(spec) = &lease.spec else { return true };
    if spec
        .holder_identity
        .as_deref()
        .unwrap_or_default()
        .is_empty()
    {
        return true;
    }
    let duration = spec.lease_duration_seconds.unwrap_or(15).max(1);
    let Some(MicroTime(renewed)) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else {
        return true;
    };
    let age = Timestamp::now().duration_since(*renewed);
    age.as_secs() >= i64::from(duration)
}

fn lease_body(name: &str, holder: &str, transitions: i32) -> Lease {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "talosboot"}},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": LEASE_DURATION.as_secs(),
            "leaseTransitions": transitions,
        },
    }))
    .map(|mut lease: Lease| {
        if let Some(spec) = lease.spec.as_mut() {
            spec.acquire_time = Some(now());
            spec.renew_time = Some(now());
        }
        lease
    })
    .expect("Lease body matches its API type")
}

/// Takes the Lease `name` in the namespace of `api`, waiting while another holder keeps it alive,
/// until `deadline`; its calls retry transient errors for `retry_budget` (the connection's).
pub async fn acquire(
    api: Api<Lease>,
    endpoint: &str,
    retry_budget: RetryBudget,
    name: &str,
    holder: &str,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<HeldLease, EngineError> {
    let started = Instant::now();
    let mut waited_for: Option<String> = None;
    loop {
        let api_err = |e| EngineError::api(Step::Lease, ClusterError::from_kube(e, endpoint));
        match retry_budget
            .retry("get lease", || api.get_opt(name))
            .await
            .map_err(api_err)?
        {
            None => {
                let body = lease_body(name, holder, 0);
                let params = PostParams::default();
                match retry_budget
                    .retry("create lease", || api.create(&params, &body))
                    .await
                {
                    Ok(_) => break,
                    Err(kube::Error::Api(s)) if s.code == 409 => continue,
                    Err(e) => return Err(api_err(e)),
                }
            }
            Some(lease) if expired(&lease) => {
                let transitions = lease
                    .spec
                    .as_ref()
                    .and_then(|s| s.lease_transitions)
                    .unwrap_or(0);
                let mut body = lease_body(name, holder, transitions + 1);
                body.metadata.resource_version = lease.metadata.resource_version.clone();
                let params = PostParams::default();
                match retry_budget
                    .retry("take over lease", || api.replace(name, &params, &body))
                    .await
                {
                    Ok(_) => break,
                    Err(kube::Error::Api(s)) if s.code == 409 => continue,
                    Err(e) => return Err(api_err(e)),
                }
            }
            Some(lease) => {
                let other = lease
                    .spec
                    .and_then(|s| s.holder_identity)
                    .unwrap_or_default();
                if waited_for.as_deref() != Some(other.as_str()) {
                    tracing::info!(lease = name, holder = %other, "waiting for another run to finish");
                    waited_for = Some(other.clone());
                }
                if Instant::now() >= deadline {
                    return Err(EngineError::new(
                        Step::Lease,
                        format!(
                            "another run (holder {other:?}) still holds Lease {name}; gave up waiting after {}s",
                            started.elapsed().as_secs()
                        ),
                    ));
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                    _ = cancel.cancelled() => return Err(EngineError::interrupted(Step::Lease, "waiting for the Lease")),
                }
            }
        }
    }
    let waited = waited_for.map(|h| (h, started.elapsed()));
    let stop = CancellationToken::new();
    let renewer = tokio::spawn(renew(api.clone(), name.to_owned(), stop.clone()));
    Ok(HeldLease {
        api,
        name: name.to_owned(),
        retry_budget,
        renewer,
        stop,
        waited,
    })
}

async fn renew(api: Api<Lease>, name: String, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(LEASE_DURATION / 3) => {}
            _ = stop.cancelled() => return,
        }
        let patch = json!({"spec": {"renewTime": now()}});
        let params = kube::api::PatchParams::default();
        if let Err(e) = api
            .patch(&name, &params, &kube::api::Patch::Merge(&patch))
            .await
        {
            // A missed renewal is retried next tick; the Lease outlives a few of them.
            tracing::warn!(lease = %name, error = %e, "failed to renew the Lease");
        }
    }
}

impl HeldLease {
    /// Stops renewing and deletes the Lease; a failure only means it expires by itself.
    pub async fn release(self) -> Option<String> {
        self.stop.cancel();
        let _ = self.renewer.await;
        let params = DeleteParams::default();
        match self
            .retry_budget
            .retry("release lease", || self.api.delete(&self.name, &params))
            .await
        {
            Ok(_) | Err(kube::Error::Api(_)) => None,
            Err(e) => Some(format!(
                "the Lease {} could not be released ({e}); it expires by itself within {}s",
                self.name,
                LEASE_DURATION.as_secs()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_without_renewal_expires_and_a_fresh_one_does_not() {
        let fresh = lease_body("l", "me", 0);
        assert!(!expired(&fresh));
        let mut old = fresh.clone();
        if let Some(spec) = old.spec.as_mut() {
            let past = Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(120);
            spec.renew_time = Some(MicroTime(past));
            spec.acquire_time = Some(MicroTime(past));
        }
        assert!(expired(&old));
        let mut released = fresh;
        if let Some(spec) = released.spec.as_mut() {
            spec.holder_identity = Some(String::new());
        }
        assert!(expired(&released));
    }
}
