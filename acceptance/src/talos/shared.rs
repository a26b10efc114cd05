//! One cluster per test process for the tests that only need an API: [`shared_cluster`].
//!
//! A fresh cluster costs about 10 s of a busy apiserver; most tests only create objects in their
//! own namespaces and read them back, so they can share one. A test that changes what the whole
//! cluster is (installs a CNI, injects faults at the proxy, stops a kubelet, needs other
//! settings than [`TalosConfig::default`]) starts its own cluster instead.
//!
//! The shared cluster runs on a thread and runtime of its own that live as long as the process:
//! the runtime of the test that asked first ends with that test, and the kernel kills a child
//! whose forking thread exits (`PR_SET_PDEATHSIG`). When the process exits, its control-plane
//! processes are killed and its directory removed (`atexit`: a test process has no other end).

use std::path::PathBuf;
use std::sync::OnceLock;

use tokio::sync::OnceCell;

use super::cluster::{TalosCluster, TalosConfig};

/// The process's shared cluster ([`TalosConfig::default`]), started by the first caller.
///
/// Tests on it must keep to names of their own (a namespace per test, cluster-scoped objects
/// named after it) and must not change the cluster for others: no Cilium, no faults, no
/// stopped kubelets.
pub async fn shared_cluster() -> anyhow::Result<&'static TalosCluster> {
    static SHARED: OnceCell<Result<&'static TalosCluster, String>> = OnceCell::const_new();
    SHARED
        .get_or_init(|| async {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let spawned = std::thread::Builder::new()
                .name("talos-sim-shared".into())
                .spawn(move || serve(tx));
            if let Err(e) = spawned {
                return Err(format!("failed to start the shared cluster's thread: {e}"));
            }
            rx.await
                .unwrap_or_else(|_| Err("the shared cluster's thread ended".to_owned()))
        })
        .await
        .clone()
        .map_err(|e| anyhow::anyhow!("the shared cluster failed to start: {e}"))
}

/// Starts the cluster on this thread's own runtime and serves it for the rest of the process.
fn serve(tx: tokio::sync::oneshot::Sender<Result<&'static TalosCluster, String>>) {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("talos-sim-shared-rt")
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = tx.send(Err(e.to_string()));
            return;
        }
    };
    runtime.block_on(async move {
        match TalosCluster::start(TalosConfig::default()).await {
            Ok(cluster) => {
                let cluster: &'static TalosCluster = Box::leak(Box::new(cluster));
                clean_up_at_exit(cluster);
                let _ = tx.send(Ok(cluster));
                std::future::pending::<()>().await;
            }
            Err(e) => {
                let _ = tx.send(Err(format!("{e:#}")));
            }
        }
    });
}

/// What [`clean_up`] removes when the process exits.
static AT_EXIT: OnceLock<(Vec<i32>, PathBuf)> = OnceLock::new();

fn clean_up_at_exit(cluster: &TalosCluster) {
    let pids = cluster.plane.pids().into_iter().map(|p| p as i32).collect();
    if AT_EXIT
        .set((pids, cluster.plane.dir.path().to_path_buf()))
        .is_ok()
    {
        // SAFETY: registers a plain function with no captured state.
        unsafe {
            libc::atexit(clean_up);
        }
    }
}

/// Kills the control plane's process groups (so etcd stops writing), then removes the cluster's
/// directory. Runs inside `exit`: nothing here may panic.
extern "C" fn clean_up() {
    if let Some((pids, dir)) = AT_EXIT.get() {
        for pid in pids {
            // SAFETY: kill(2) of a process group this process started.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
