//! The cluster layer: provider configuration, the lazily built Kubernetes client with errors that
//! name their cause, and native readers of cluster state (Helm release records).

mod client;
mod config;
pub mod helm_release;
mod scrub;
#[cfg(test)]
mod test_server;

pub use client::{
    CONNECT_TIMEOUT, ClusterError, ClusterHandle, READ_TIMEOUT, describe_cause, kubeconfig_error,
};
pub use config::{ConfigSource, ProviderConfig};
pub use scrub::{redact_user_info, scrub_api_message};
