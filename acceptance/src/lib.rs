//! `talos-sim`: a Talos cluster for talosboot's acceptance tests and demo.
//!
//! [`talos`] is the ground: the real Kubernetes control plane (etcd, kube-apiserver,
//! controller-manager, scheduler) with the Talos node layer around it (nodes, kubelets,
//! KubePrism, the network before the CNI, real Helm in pod sandboxes, emulated Cilium and Flux
//! Operator, the chart repositories), acting only through the Kubernetes API.
//!
//! The older part, still used by the suites that have not moved, is a simulated API server: real HTTPS (rustls, HTTP/1.1 and
//! HTTP/2), real client-certificate and bearer-token authentication, Kubernetes-shaped discovery,
//! CRUD, watch, server-side apply and patches over a generic object store. `kube` and `kubectl`
//! talk to it like to a real API server. See `README.md` for what is real and what is simulated.
//!
//! Map of the crate:
//! - [`talos`]: [`talos::TalosCluster`] on the real control plane.
//! - [`config`]: [`SimConfig`] and [`Pace`].
//! - [`sim`]: [`SimCluster`], the running simulation (server, PKI, kubeconfigs, controllers).
//! - [`store`]: the in-process API ([`Store`]): objects, resourceVersions, admission, managed
//!   fields, watch events, pod logs, garbage collection. Controllers are written against it.
//! - [`controller`]: the [`Controller`] trait, the hook for the cluster model.
//! - [`server`]: the HTTP layer: TLS, authentication, routing, discovery, watch streams.
//! - [`faults`]: bounded fault injection ([`Faults`]).
//! - [`cluster`]: the cluster model (nodes, scheduler, kubelet, Job/Deployment/DaemonSet
//!   controllers, pre-CNI networking); [`programs`]: what containers run (helm, cilium, ...).

pub mod cluster;
pub mod config;
pub mod controller;
pub mod faults;
mod pki;
pub mod programs;
mod seed;
pub mod server;
pub mod sim;
pub mod store;
pub mod talos;
mod util;

pub use config::{Pace, SimConfig};
pub use controller::{Controller, ControllerContext};
pub use faults::{FaultSpec, Faults, Matcher};
pub use sim::SimCluster;
pub use store::Store;
