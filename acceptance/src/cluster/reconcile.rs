//! The loop every cluster controller runs: reconcile everything, then wait for a change to a
//! type it cares about, the deadline the pass asked for (a back-off, TTL or active deadline), or
//! a (slow) safety resync; debounce a burst of changes, repeat. Controllers are event-driven:
//! an idle cluster only does the safety resync.

use std::time::{Duration, Instant};

use tokio::sync::broadcast::error::RecvError;

use crate::config::Pace;
use crate::controller::ControllerContext;
use crate::store::{GroupResource, Store};

/// Safety resync: a reconcile runs at least this often even without changes or deadlines
/// (30 s scaled, at least 1 s). Nothing depends on it: every timer is a deadline a pass returns.
pub(crate) fn resync(pace: Pace) -> Duration {
    pace.scale(Duration::from_secs(30))
        .max(Duration::from_secs(1))
}

/// When a pass that failed, or whose pod create the API refused (e.g. a missing
/// ServiceAccount), is retried: 1 s scaled, at least 100 ms.
pub(crate) fn retry_at(pace: Pace) -> Instant {
    Instant::now()
        + pace
            .scale(Duration::from_secs(1))
            .max(Duration::from_millis(100))
}

/// Runs `reconcile` until shutdown, after every relevant change and at least every resync.
pub(crate) async fn run(
    ctx: ControllerContext,
    interests: Vec<GroupResource>,
    mut reconcile: impl FnMut(&Store) + Send,
) {
    run_timed(ctx, interests, move |store| {
        reconcile(store);
        None
    })
    .await
}

/// Like [`run`], for a `reconcile` that returns when it next needs to run without a change
/// (`None`: only on changes and the safety resync).
pub(crate) async fn run_timed(
    ctx: ControllerContext,
    interests: Vec<GroupResource>,
    mut reconcile: impl FnMut(&Store) -> Option<Instant> + Send,
) {
    let mut rx = ctx.store.subscribe();
    let tick = resync(ctx.config.pace);
    loop {
        let safety = Instant::now() + tick;
        let wake = reconcile(&ctx.store).map_or(safety, |next| next.min(safety));
        let changed = async {
            loop {
                match rx.recv().await {
                    Ok(ev) if interests.contains(&ev.gr) => return,
                    Ok(_) => continue,
                    Err(RecvError::Lagged(_)) => return,
                    Err(RecvError::Closed) => std::future::pending::<()>().await,
                }
            }
        };
        tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            _ = changed => {}
            _ = tokio::time::sleep_until(wake.into()) => {}
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        while rx.try_recv().is_ok() {}
    }
}

/// The earlier of two optional deadlines.
pub(crate) fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
