//! Polling a pure condition until it holds, against a caller-owned deadline, stopping on
//! cancellation: the one wait loop of the Flux steps.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::FluxError;

const POLL: Duration = Duration::from_millis(500);

/// How long a step may wait, and what stops it early.
#[derive(Clone, Copy)]
pub struct Wait<'a> {
    pub deadline: Instant,
    /// The whole timeout the deadline came from, for the error message.
    pub timeout: Duration,
    pub cancel: &'a CancellationToken,
}

impl<'a> Wait<'a> {
    /// A wait of `timeout` from now.
    pub fn from_now(timeout: Duration, cancel: &'a CancellationToken) -> Self {
        Wait {
            deadline: Instant::now() + timeout,
            timeout,
            cancel,
        }
    }
}

/// One look at the cluster: done (with what was waited for), or still waiting and why.
pub enum Check<T> {
    Done(T),
    Waiting(String),
}

/// Polls `check` until it answers [`Check::Done`], the deadline passes or the token is cancelled.
/// The last `Waiting` reason goes into the timeout error.
pub async fn poll<T, F, Fut>(what: &str, wait: Wait<'_>, mut check: F) -> Result<T, FluxError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Check<T>, FluxError>>,
{
    let mut last = String::from("nothing yet");
    loop {
        match check().await? {
            Check::Done(value) => return Ok(value),
            Check::Waiting(seen) if !seen.is_empty() => last = seen,
            Check::Waiting(_) => {}
        }
        if Instant::now() >= wait.deadline {
            return Err(FluxError::Timeout {
                what: what.to_owned(),
                after: wait.timeout,
                last,
            });
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = wait.cancel.cancelled() => return Err(FluxError::Cancelled { what: what.to_owned() }),
        }
    }
}

/// Waits until `exists` says the object is gone (after a delete).
pub async fn poll_gone<F, Fut>(what: &str, wait: Wait<'_>, mut exists: F) -> Result<(), FluxError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, FluxError>>,
{
    poll(&format!("{what} to be deleted"), wait, || {
        let exists = exists();
        async move {
            Ok(match exists.await? {
                false => Check::Done(()),
                true => Check::Waiting("still terminating".to_owned()),
            })
        }
    })
    .await
}
