//! The loop every cluster controller runs: reconcile everything, then wait for a change to a
//! type it cares about (or a resync tick), debounce a burst of changes, repeat.

use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;

use crate::controller::ControllerContext;
use crate::store::{GroupResource, Store};

/// Resync interval: a reconcile runs at least this often even without changes (timers such as
/// Job deadlines and back-offs are checked then).
pub(crate) fn resync(ctx: &ControllerContext) -> Duration {
    ctx.config.pace.scale(Duration::from_secs(1))
}

/// Runs `reconcile` until shutdown, after every relevant change and at least every resync tick.
pub(crate) async fn run(
    ctx: ControllerContext,
    interests: Vec<GroupResource>,
    mut reconcile: impl FnMut(&Store) + Send,
) {
    let mut rx = ctx.store.subscribe();
    let tick = resync(&ctx);
    loop {
        reconcile(&ctx.store);
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
            _ = tokio::time::sleep(tick) => {}
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        while rx.try_recv().is_ok() {}
    }
}
