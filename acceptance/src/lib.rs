//! `talos-sim`: a simulated Talos cluster for talosboot's acceptance tests and demo.
//!
//! The part in this crate today is the Kubernetes API server: real HTTPS (rustls, HTTP/1.1 and
//! HTTP/2), real client-certificate and bearer-token authentication, Kubernetes-shaped discovery,
//! CRUD, watch, server-side apply and patches over a generic object store. `kube` and `kubectl`
//! talk to it like to a real API server. See `README.md` for what is real and what is simulated.
//!
//! Map of the crate:
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
pub use faults::{FaultSpec, Faults};
pub use sim::SimCluster;
pub use store::Store;
