//! The cluster model of the simulated Talos cluster: nodes, scheduler, kubelet, workload
//! controllers, and the programs containers run. Everything works through the public
//! [`Store`](crate::store::Store) API, like real controllers through the API server.
//!
//! What is simulated, and how, is described in `src/cluster/README.md`. In short:
//! - [`nodes`]: `NotReady` + `node.kubernetes.io/not-ready:NoSchedule` until a Ready Cilium
//!   agent runs on the node.
//! - [`scheduler`]: taints/tolerations, nodeSelector, required node affinity; `FailedScheduling`.
//! - [`kubelet`]: sandbox (pod network only once the CNI is up: `FailedCreatePodSandBox`
//!   before), image pulls (`ImagePullBackOff` for unknown images), init containers, containers
//!   running [`programs`](crate::programs), restarts with CrashLoopBackOff, logs, status.
//! - [`network`]: which API endpoint is reachable from where (the pre-CNI rule).
//! - [`jobs`], [`workloads`]: Job, Deployment → ReplicaSet, DaemonSet controllers.
//! - [`faults`]: kill a pod, hang a program, mark objects adopted by Flux.

pub mod events;
pub mod faults;
pub mod jobs;
pub mod kubelet;
pub mod network;
pub mod nodes;
pub(crate) mod obj;
mod reconcile;
pub mod scheduler;
pub mod workloads;

use crate::config::SimConfig;
use crate::controller::Controller;
use crate::programs::ProgramRegistry;

pub use faults::{hang_template, kill_pod, mark_adopted_by_flux};

/// The cluster model's controllers with the built-in programs.
pub fn controllers(config: &SimConfig) -> Vec<Box<dyn Controller>> {
    controllers_with(config, ProgramRegistry::builtin())
}

/// The cluster model's controllers, with the kubelet running programs from `registry`.
pub fn controllers_with(
    _config: &SimConfig,
    registry: ProgramRegistry,
) -> Vec<Box<dyn Controller>> {
    vec![
        Box::new(nodes::NodeController),
        Box::new(scheduler::Scheduler),
        Box::new(kubelet::KubeletController { registry }),
        Box::new(jobs::JobController),
        Box::new(workloads::ReplicaSetController),
        Box::new(workloads::DeploymentController),
        Box::new(workloads::DaemonSetController),
    ]
}
