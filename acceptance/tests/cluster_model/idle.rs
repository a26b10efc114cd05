//! An idle cluster is cheap: controllers are event-driven (deadlines for their timers, a slow
//! safety resync), so a bootstrapped cluster with nothing to do uses a small fraction of a core.

use std::time::Duration;

use crate::common::*;

/// CPU time (user + system) of the calling thread, from `/proc/thread-self/stat`.
fn thread_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on Linux.
    Some(Duration::from_millis(ticks * 10))
}

#[tokio::test]
async fn idle_cluster_uses_little_cpu() {
    // `#[tokio::test]` runs the cluster's tasks on this thread: its CPU time is the cluster's.
    let (_sim, client) = start().await;
    bootstrap_cilium(&client).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Without /proc the claim cannot be checked: fail rather than pass silently (this test suite
    // runs on Linux only; the simulator's other tests do not need /proc).
    let before = thread_cpu().expect("/proc/thread-self/stat is readable (Linux)");
    let wall = Duration::from_secs(3);
    tokio::time::sleep(wall).await;
    let used = thread_cpu().expect("/proc/thread-self/stat is readable") - before;
    // Before: every controller re-listed everything every 20 ms (about a third of a core here,
    // in a debug build); now a few percent.
    assert!(
        used < wall / 10,
        "an idle cluster used {used:?} of CPU in {wall:?}"
    );
}
