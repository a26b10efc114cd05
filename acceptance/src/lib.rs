//! `talos-sim`: a Talos cluster for talosboot's acceptance tests and demo.
//!
//! [`talos`] is the ground: the real Kubernetes control plane (etcd, kube-apiserver,
//! controller-manager, scheduler, built by `scripts/install-tools.sh`) with the Talos node layer
//! around it (nodes, kubelets, KubePrism, the network before the CNI, real Helm in pod sandboxes,
//! emulated Cilium, Flux Operator and Argo CD, the chart repositories, a fault proxy in front of
//! the apiserver), acting only through the Kubernetes API. See `README.md` for what is real and
//! what is emulated, component by component.
//!
//! Map of the crate:
//! - [`talos`]: [`talos::TalosCluster`] and its parts.
//! - [`faults`]: the bounded faults ([`Faults`]) the fault proxy injects.
//! - [`test_gate`]: which tests of a test process run side by side and which run apart.

pub mod faults;
pub mod talos;
pub mod test_gate;
mod util;

pub use faults::{FaultSpec, Faults, Matcher};
