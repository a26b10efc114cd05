//! The Talos layer over a real Kubernetes control plane: the real etcd, kube-apiserver,
//! kube-controller-manager and kube-scheduler (built by `scripts/install-tools.sh`), and around
//! them what Talos and the programs that cannot run here are: nodes, kubelets, KubePrism, the
//! network before the CNI, the Service dataplane after it, the chart repositories, Git over SSH
//! on loopback, emulated Cilium; the real Flux Operator and
//! controllers where built.
//!
//! Everything in this module acts on the cluster through the Kubernetes API (`kube`), as the
//! real node components do; nothing reads or writes etcd.

pub mod charts;
pub mod cluster;
pub mod control_plane;
pub mod emulated;
pub mod fault_proxy;
pub mod flux_distribution;
pub mod git;
pub mod kubelet;
pub mod kubelet_faults;
pub mod kubelet_logs;
pub mod manifests;
pub mod netns;
pub mod network;
pub mod nodes;
pub mod pki;
pub mod process;
pub mod programs;
pub mod sandbox;
pub mod services;
pub mod shared;
pub mod tools;

pub use cluster::{TalosCluster, TalosConfig};
pub use manifests::TalosVersion;
pub use shared::shared_cluster;
