//! The Talos node layer over the real control plane (`talos_sim::talos`): real etcd,
//! kube-apiserver, controller-manager and scheduler, real Helm in pod sandboxes, emulated nodes,
//! kubelets, KubePrism and the programs that cannot run here.
//!
//! Index:
//! - `control_plane`: versions, start time and memory, Pod Security and RBAC refusals by the real server
//! - `pods`: the kubelet: pre-CNI networking, real Helm through KubePrism, `kubectl logs` through
//!   the real apiserver, image pulls, restarts, deletion
//! - `helm`: release records written by the real Helm, read by the provider
//! - `faults`: the fault proxy in front of the apiserver: identities pass, faults are bounded
//! - `cilium`: the engine installs Cilium from its repository; every node becomes Ready

#[path = "talos/cilium.rs"]
mod cilium;
#[path = "talos/common.rs"]
mod common;
#[path = "talos/control_plane.rs"]
mod control_plane;
#[path = "talos/faults.rs"]
mod faults;
#[path = "talos/helm.rs"]
mod helm;
#[path = "talos/pods.rs"]
mod pods;
