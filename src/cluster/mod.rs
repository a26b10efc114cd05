//! The cluster layer: provider configuration, the lazily built Kubernetes client with errors that
//! name their cause, and native readers of cluster state (Helm release records).

pub mod bootstrap;
mod client;
mod config;
pub mod flux;
pub mod helm_install;
pub mod helm_release;
pub mod readiness;

pub use client::{ClusterError, ClusterHandle, describe_cause, kubeconfig_error};
pub use config::{ConfigSource, ProviderConfig};
