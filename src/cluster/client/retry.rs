//! Retries of transient API errors: 429 (honouring the server's back-off), 500/502/503/504, and
//! connections that dropped or were refused for a moment. Anything else (404, 409, 422, 403, ...)
//! is an answer, returned at once. Bounded: a cluster that stays unreachable is reported, with
//! the real cause, after the retry budget ([`RETRY_BUDGET`] unless the provider block's
//! `api_retry_timeout` set another, [`set_budget`]). The first retry of a call is logged at `WARN`
//! (what, why, for how long), so a run that waits for an API says so.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long one call keeps retrying, by default.
pub const RETRY_BUDGET: Duration = Duration::from_secs(30);

/// The budget in force, in milliseconds: one provider configuration per plugin process.
static BUDGET_MS: AtomicU64 = AtomicU64::new(RETRY_BUDGET.as_millis() as u64);

/// Sets how long each call keeps retrying (the provider block's `api_retry_timeout`).
pub fn set_budget(budget: Duration) {
    BUDGET_MS.store(budget.as_millis() as u64, Ordering::Relaxed);
}

/// How long each call keeps retrying.
pub fn budget() -> Duration {
    Duration::from_millis(BUDGET_MS.load(Ordering::Relaxed))
}

/// Whether `e` may succeed when tried again.
pub fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => matches!(s.code, 429 | 500 | 502 | 503 | 504),
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Runs `call` until it succeeds, fails for good, or the [`budget`] is spent.
pub async fn retry<T, F, Fut>(what: &str, call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    retry_if(what, is_transient, call).await
}

/// [`retry`] for any error, with `transient` saying which ones may succeed when tried again.
pub async fn retry_if<T, E, F, Fut>(
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
    let budget = budget();
    let mut delay = Duration::from_millis(100);
    let mut first = true;
    loop {
        match call().await {
            Err(e) if transient(&e) && started.elapsed() < budget => {
                if std::mem::take(&mut first) {
                    tracing::warn!(
                        "{what}: the Kubernetes API did not answer ({e}); retrying for up to {}s (the provider block's `api_retry_timeout`)",
                        budget.as_secs()
                    );
                }
                tracing::debug!(what, error = %e, delay_ms = delay.as_millis() as u64, "transient API error; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
            }
            other => return other,
        }
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
        let out = retry("get", || {
            calls += 1;
            let n = calls;
            async move { if n < 3 { Err(api_error(429)) } else { Ok(n) } }
        })
        .await;
        assert_eq!(out.ok(), Some(3));
        let mut conflicts = 0;
        let out: Result<(), _> = retry("create", || {
            conflicts += 1;
            async { Err(api_error(409)) }
        })
        .await;
        assert!(out.is_err());
        assert_eq!(conflicts, 1);
    }
}
