//! The cluster layer, by subsystem. Each uses only the subsystems listed after the arrow
//! (`tests/layering.rs` checks it; the items re-exported here are the client's):
//! - [`client`] → (nothing): the provider's cluster handle, [`Kube`] (the one way to connect: the
//!   ordinary and the streaming client and their endpoint), errors that name their cause,
//!   retries of transient API errors;
//! - [`endpoint`] → (nothing): the bootstrap pod's API endpoint, parsed without I/O;
//! - [`diagnosis`] → [`client`], [`kube_proxy`], [`talos`]: the table of known failures, each with a typed
//!   [`diagnosis::Signature`] and whether it is permanent;
//! - [`kube_proxy`] → [`client`], [`diagnosis`], [`talos`]: whether kube-proxy runs (it words one diagnosis);
//! - [`pods`] → [`client`]: what pods and their events say, as text;
//! - [`engine`] → [`client`], [`endpoint`], [`diagnosis`], [`kube_proxy`], [`pods`]: the pre-CNI
//!   bootstrap Job engine: one run of a program in a pod, with its own steps; it knows nothing of
//!   Helm or readiness: callers describe what they run;
//! - [`readiness`] → [`client`], [`diagnosis`], [`kube_proxy`], [`pods`], [`ownership`]: rollout predicates, reads
//!   of workloads and nodes, and the watch until they are ready;
//! - [`helm`] → [`client`], [`endpoint`], [`engine`]: chart installs run on the engine, release
//!   records, values, the render-derived RBAC, release status;
//! - [`converge`] → [`client`], [`engine`], [`helm`], [`readiness`], [`ownership`]: the one
//!   path of every chart install (observe, decide, install or upgrade, wait) and its pure decision;
//! - [`ownership`] → (nothing): which tool manages an object, from its labels and annotations;
//! - [`talos`] → (nothing): Cilium's values for Talos;
//! - [`cilium`] → [`client`], [`engine`], [`helm`], [`readiness`]: Cilium's chart versions (removed
//!   value keys, the node-port features that need the kube-proxy replacement, the Gateway API
//!   CRDs, the upgrade path), the running `cilium-config`, the CRD check, and the day-2 steps (the
//!   pre-flight chart installed and waited for, the agents' rollout by node);
//! - [`flux`] → [`client`], [`helm`], [`ownership`]: the Flux bootstrap's native steps;
//! - [`talos_inventory`] → [`client`], [`helm`]: Talos 1.13+'s bootstrap-manifest inventory, and
//!   taking an adopting release's objects out of it (so `talosctl upgrade-k8s` does not prune them).

pub mod cilium;
pub mod client;
pub mod converge;
pub mod diagnosis;
pub mod endpoint;
pub mod engine;
pub mod flux;
pub mod helm;
pub mod kube_proxy;
pub mod ownership;
pub mod pods;
pub mod readiness;
pub mod talos;
pub mod talos_inventory;

pub use client::{
    CONNECT_TIMEOUT, ClientCache, ClusterError, ClusterHandle, ClusterIdentity, ConfigSource, Kube,
    ProviderConfig, READ_TIMEOUT, RetryBudget, describe_cause, identity, kubeconfig_error,
    redact_user_info, retry, scrub_api_message,
};
