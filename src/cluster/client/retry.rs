//! Retries of transient API errors: 429 (honouring the server's back-off), 500/502/503/504, and
//! connections that dropped or were refused for a moment. Anything else (404, 409, 422, 403, ...)
//! is an answer, returned at once. Bounded: a cluster that stays unreachable is reported, with
//! the real cause, after the connection's [`RetryBudget`]. The first retry of a call is logged at
//! `WARN` (what, why, for how long), so a run that waits for an API says so.
//!
//! The budget belongs to a connection, not to the process: one provider process serves many
//! clusters (a `for_each` over a fleet, each resource with its own `cluster`), and a cluster
//! created in the same run may need a longer wait than one that has been up for months. Each
//! [`ClusterHandle`](super::ClusterHandle) carries one (the provider block's
//! `api_retry_timeout`, or a `cluster` attribute's own), and its [`Kube`](super::Kube) retries
//! with it ([`Kube::retry`](super::Kube::retry)).

use std::future::Future;
use std::time::{Duration, Instant};

/// How long one call keeps retrying, by default.
pub const RETRY_BUDGET: Duration = Duration::from_secs(30);

/// How long each call on one connection keeps retrying transient errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RetryBudget(Duration);

impl Default for RetryBudget {
    fn default() -> Self {
        RetryBudget(RETRY_BUDGET)
    }
}

impl RetryBudget {
    pub const fn new(budget: Duration) -> Self {
        RetryBudget(budget)
    }

    /// The duration itself.
    pub fn duration(self) -> Duration {
        self.0
    }

    /// Runs `call` until it succeeds, fails for good, or the budget is spent.
    pub async fn retry<T, F, Fut>(self, what: &str, call: F) -> Result<T, kube::Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        self.retry_if(what, is_transient, call).await
    }

    /// [`RetryBudget::retry`] for any error, with `transient` saying which ones may succeed when
    /// tried again.
    pub async fn retry_if<T, E, F, Fut>(
        self,
        what: &str,
        transient: impl Fn(&E) -> bool,
        mut call: F,
    ) -> Result<T, E>
    where
        E: std::fmt::Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let started = Instant::now();
        let budget = self.0;
        let mut delay = Duration::from_millis(100);
        let mut first = true;
        loop {
            match call().await {
                Err(e) if transient(&e) && started.elapsed() < budget => {
                    if std::mem::take(&mut first) {
                        tracing::warn!(
                            "{what}: the Kubernetes API did not answer ({e}); retrying for up to {}s (`api_retry_timeout`)",
                            budget.as_secs()
                        );
                    }
                    tracing::debug!(what, error = %e, delay_ms = delay.as_millis() as u64, "transient API error; retrying");
                    // Never past the budget: a short one is kept to within one back-off step.
                    let left = budget.saturating_sub(started.elapsed());
                    tokio::time::sleep(delay.min(left.max(Duration::from_millis(10)))).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
                other => return other,
            }
        }
    }
}

/// Whether `e` may succeed when tried again.
pub fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => matches!(s.code, 429 | 500 | 502 | 503 | 504),
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            ..Default::default()
        }))
    }

    #[tokio::test]
    async fn throttling_is_retried_and_a_conflict_is_not() {
        let mut calls = 0;
        let out = RetryBudget::default()
            .retry("get", || {
                calls += 1;
                let n = calls;
                async move { if n < 3 { Err(api_error(429)) } else { Ok(n) } }
            })
            .await;
        assert_eq!(out.ok(), Some(3));
        let mut conflicts = 0;
        let out: Result<(), _> = RetryBudget::default()
            .retry("create", || {
                conflicts += 1;
                async { Err(api_error(409)) }
            })
            .await;
        assert!(out.is_err());
        assert_eq!(conflicts, 1);
    }
}
