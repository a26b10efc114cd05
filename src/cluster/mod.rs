//! The cluster layer: the lazily built Kubernetes client with errors that name their cause, native
//! readers of cluster state (Helm release records, workload readiness, kube-proxy), and the
//! pre-CNI bootstrap engine with the Helm installs that run on it.

pub mod bootstrap;
pub mod chart_rbac;
mod client;
mod config;
pub mod flux;
pub mod helm_install;
pub mod helm_release;
pub mod helm_status;
pub mod helm_values;
pub mod kube_proxy;
pub mod readiness;
pub mod release_values;
pub mod retry;
mod scrub;
pub mod talos;
#[cfg(test)]
mod test_server;

pub use client::{
    CONNECT_TIMEOUT, ClusterError, ClusterHandle, READ_TIMEOUT, describe_cause, kubeconfig_error,
};
pub use config::{ConfigSource, ProviderConfig};
pub use scrub::{redact_user_info, scrub_api_message};
