//! The kubelet of every simulated node: runs scheduled pods (see `pod.rs`) with emulated
//! programs from the [`ProgramRegistry`], writes their status and logs, and stops them when
//! they are deleted.
//!
//! In-process faults: annotation `talos-sim.dev/kill` (any new value) kills the pod's running
//! containers like a node reboot (exit code 137); `talos-sim.dev/hang: "true"` (on the pod or
//! its template) makes its containers' programs never exit. See [`crate::cluster::faults`].

mod container;
mod env;
mod pod;
pub(crate) mod status;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{obj, reconcile};
use crate::config::SimConfig;
use crate::controller::{Controller, ControllerContext, ControllerFuture};
use crate::programs::ProgramRegistry;
use crate::store::{ListOptions, Store};

/// Annotation whose change kills a pod's running containers (exit 137, like a node reboot).
pub const KILL_ANNOTATION: &str = "talos-sim.dev/kill";
/// Annotation (`"true"`) making a pod's programs hang until they are killed.
pub const HANG_ANNOTATION: &str = "talos-sim.dev/hang";

/// What every pod task shares.
#[derive(Clone)]
pub(crate) struct Kubelet {
    pub store: Store,
    pub config: SimConfig,
    pub registry: ProgramRegistry,
    pub next_ip: Arc<AtomicU32>,
}

/// The kubelets of all nodes, as one controller.
pub struct KubeletController {
    pub registry: ProgramRegistry,
}

struct Handle {
    updates: watch::Sender<Arc<Value>>,
    gone: CancellationToken,
}

impl Controller for KubeletController {
    fn name(&self) -> &str {
        "kubelet"
    }

    fn run(self: Box<Self>, ctx: ControllerContext) -> ControllerFuture {
        let k = Kubelet {
            store: ctx.store.clone(),
            config: ctx.config.clone(),
            registry: self.registry,
            next_ip: Arc::default(),
        };
        let shutdown = ctx.shutdown.clone();
        let mut tasks: HashMap<String, Handle> = HashMap::new();
        Box::pin(async move {
            reconcile::run(ctx, vec![obj::pods()], move |store| {
                sync_pods(&k, store, &mut tasks, &shutdown)
            })
            .await;
        })
    }
}

fn sync_pods(
    k: &Kubelet,
    store: &Store,
    tasks: &mut HashMap<String, Handle>,
    shutdown: &CancellationToken,
) {
    let Ok(pods) = store.list(&obj::pods(), None, &ListOptions::default()) else {
        return;
    };
    let mut seen = HashSet::new();
    for pod in pods
        .items
        .into_iter()
        .filter(|p| !obj::s(p, "/spec/nodeName").is_empty())
    {
        let uid = obj::uid(&pod).to_string();
        seen.insert(uid.clone());
        let pod = Arc::new(pod);
        if let Some(h) = tasks.get(&uid) {
            h.updates.send_if_modified(|old| {
                let changed = **old != *pod;
                *old = pod.clone();
                changed
            });
            continue;
        }
        let (tx, rx) = watch::channel(pod.clone());
        let gone = shutdown.child_token();
        tasks.insert(
            uid,
            Handle {
                updates: tx,
                gone: gone.clone(),
            },
        );
        if !obj::pod_finished(&pod) {
            tokio::spawn(pod::run(k.clone(), pod, Signals { updates: rx, gone }));
        }
    }
    tasks.retain(|uid, h| {
        let keep = seen.contains(uid);
        if !keep {
            h.gone.cancel();
        }
        keep
    });
}

/// What a pod task listens to: the pod's latest state, and whether it is gone.
#[derive(Clone)]
pub(crate) struct Signals {
    updates: watch::Receiver<Arc<Value>>,
    gone: CancellationToken,
}

impl Signals {
    pub fn latest(&self) -> Arc<Value> {
        self.updates.borrow().clone()
    }

    fn is_stopped(&self) -> bool {
        self.gone.is_cancelled() || obj::is_deleting(&self.updates.borrow())
    }

    /// Resolves when the pod is being deleted or is gone.
    pub async fn stopped(&mut self) {
        while !self.is_stopped() {
            tokio::select! {
                r = self.updates.changed() => if r.is_err() { self.gone.cancelled().await },
                _ = self.gone.cancelled() => {}
            }
        }
    }

    pub fn kill_mark(&self) -> String {
        kill_mark(&self.updates.borrow())
    }

    /// Resolves when the kill annotation changes from `mark`.
    pub async fn killed(&mut self, mark: &str) {
        while kill_mark(&self.updates.borrow_and_update()) == mark {
            if self.updates.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Sleeps; `true` when the pod stopped first.
    pub async fn sleep_or_stop(&self, d: Duration) -> bool {
        let mut me = self.clone();
        tokio::select! {
            _ = tokio::time::sleep(d) => me.is_stopped(),
            _ = me.stopped() => true,
        }
    }
}

fn kill_mark(pod: &Value) -> String {
    obj::s(pod, "/metadata/annotations/talos-sim.dev~1kill").to_string()
}
