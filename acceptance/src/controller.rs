//! The hook for the cluster model: in-process controllers running beside the API server.
//!
//! A controller is any long-running task that works through the [`Store`] API (get/list/
//! create/update/patch/delete and [`Store::subscribe`] / [`Store::watch`] for change events).
//! [`SimCluster::start`](crate::SimCluster::start) spawns [`builtin_controllers`] and then the
//! ones returned by [`cluster_controllers`]; each gets a [`ControllerContext`] and must return
//! when `ctx.shutdown` is cancelled.
//!
//! The cluster model (nodes, scheduler, kubelet running emulated programs, Job / Deployment /
//! DaemonSet controllers) plugs in by filling [`cluster_controllers`] (or through
//! [`SimCluster::start_with`](crate::SimCluster::start_with) in tests).

use std::future::Future;
use std::pin::Pin;

use tokio_util::sync::CancellationToken;

use crate::config::SimConfig;
use crate::faults::Faults;
use crate::store::Store;

/// What a controller gets to work with.
#[derive(Clone)]
pub struct ControllerContext {
    pub store: Store,
    pub config: SimConfig,
    pub faults: Faults,
    /// Cancelled when the cluster shuts down.
    pub shutdown: CancellationToken,
}

/// A boxed future returned by [`Controller::run`].
pub type ControllerFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// An in-process controller.
pub trait Controller: Send + 'static {
    /// A short name for logs (`gc`, `kubelet`, `job-controller`).
    fn name(&self) -> &str;
    /// Runs until `ctx.shutdown` is cancelled.
    fn run(self: Box<Self>, ctx: ControllerContext) -> ControllerFuture;
}

/// Controllers the API server itself needs: the garbage collector / namespace finalizer /
/// pod-grace timer ([`Store::housekeeping`]).
pub fn builtin_controllers() -> Vec<Box<dyn Controller>> {
    vec![Box::new(Housekeeping)]
}

/// Controllers of the simulated cluster (nodes, scheduler, kubelet, workload controllers).
/// The cluster model (`src/cluster/`) returns its controllers from here.
pub fn cluster_controllers(config: &SimConfig) -> Vec<Box<dyn Controller>> {
    crate::cluster::controllers(config)
}

struct Housekeeping;

impl Controller for Housekeeping {
    fn name(&self) -> &str {
        "gc"
    }

    fn run(self: Box<Self>, ctx: ControllerContext) -> ControllerFuture {
        Box::pin(async move {
            let tick = ctx.config.pace.housekeeping_tick();
            loop {
                tokio::select! {
                    _ = ctx.shutdown.cancelled() => return,
                    _ = ctx.store.housekeeping_wanted(tick) => {}
                }
                // A little delay so a burst of deletes is handled in one pass.
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                ctx.store.housekeeping();
            }
        })
    }
}
