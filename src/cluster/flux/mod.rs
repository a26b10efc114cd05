//! Native cluster steps of the Flux bootstrap (`talosboot_flux_bootstrap`): everything the
//! flux-operator-bootstrap module's Job did with kubectl, done through the Kubernetes API, except
//! Helm chart installs (those run in the pre-CNI Job of the bootstrap engine).
//!
//! Reading order: [`manifest`] (parsing, identity, `${var}` substitution), [`ownership`] (when Flux
//! has taken an object over, and the readiness conditions), [`objects`] (generic get/apply/delete of
//! any kind), [`managed`] (managed Secrets, the runtime-info ConfigMap, the module's `inventory`),
//! [`instance`] (namespaces, the CRD wait, the FluxInstance and its Ready wait), [`operator`] (its
//! Deployment and the pod-network check), [`pod_security`] (the bootstrap namespace's level),
//! [`pre_cni`] (whether any node has a CNI yet), [`poll`] (the wait loop every wait step uses),
//! [`drift`] (what Read compares), [`distribution`] (which operator chart can install which Flux),
//! [`diagnosis`] (what the real operator's and source's conditions mean, and what to do).

pub mod diagnosis;
pub mod distribution;
pub mod drift;
pub mod instance;
pub mod managed;
pub mod manifest;
pub mod objects;
pub mod operator;
pub mod ownership;
pub mod pod_security;
pub mod poll;
pub mod pre_cni;

use std::time::Duration;

use super::ClusterError;

/// The field manager of every server-side apply, the module's own (so a migration keeps ownership).
pub const FIELD_MANAGER: &str = "flux-operator-bootstrap";
/// The module's inventory ConfigMap in the bootstrap namespace (key `entries`, `- Kind/ns/name` lines).
pub const INVENTORY_CONFIGMAP: &str = "inventory";
/// The runtime-info ConfigMap in the FluxInstance's namespace.
pub const RUNTIME_INFO_CONFIGMAP: &str = "flux-runtime-info";
/// The module's Secret that carried `secrets.yaml` into its Job (talosboot applies Secrets directly).
pub const MODULE_SECRET: &str = "flux-operator-bootstrap";
/// The operator's Helm release and Deployment name.
pub const OPERATOR_RELEASE: &str = "flux-operator";
pub const FLUXINSTANCE_CRD: &str = "fluxinstances.fluxcd.controlplane.io";

pub use super::Kube;

impl Kube {
    /// Wraps a `kube::Error` from `step` (worded "failed to <step>").
    pub fn error(&self, step: impl Into<String>, err: kube::Error) -> FluxError {
        FluxError::Cluster {
            step: step.into(),
            source: ClusterError::from_kube(err, &self.endpoint),
        }
    }
}

/// What went wrong in a step; messages never carry secret values.
#[derive(Debug, thiserror::Error)]
pub enum FluxError {
    #[error("failed to {step}: {source}")]
    Cluster {
        step: String,
        #[source]
        source: ClusterError,
    },
    #[error(transparent)]
    Manifest(#[from] manifest::ManifestError),
    #[error("the cluster has no API for {api_version} {kind} (is its CRD installed?)")]
    UnknownKind { api_version: String, kind: String },
    #[error("timed out after {}s waiting for {what}; last seen: {last}", after.as_secs())]
    Timeout {
        what: String,
        after: Duration,
        last: String,
    },
    /// The operator's final word (`Ready=False` with a failure reason, or `Stalled`); `message`
    /// is redacted, `sources` are the sync objects as read after it.
    #[error("FluxInstance {namespace}/{name} is not Ready: {reason}: {message}")]
    InstanceFailed {
        namespace: String,
        name: String,
        reason: String,
        message: String,
        sources: Vec<diagnosis::SourceState>,
    },
    /// The apply's `timeout` ran out while the operator had said nothing final (it reports a
    /// failure only after its own health-check wait); `sources` say what it is waiting for.
    #[error(
        "timed out after {}s waiting for FluxInstance {namespace}/{name} to be Ready; last seen: {last}. {operator_wait}",
        after.as_secs()
    )]
    InstanceNotReady {
        namespace: String,
        name: String,
        after: Duration,
        last: String,
        operator_wait: diagnosis::OperatorWait,
        sources: Vec<diagnosis::SourceState>,
    },
    #[error(
        "the Flux Operator in {namespace} cannot start: no node is Ready, so no pod network exists yet (the operator is not a host-network pod). Install the CNI first: make this resource `depends_on` the `talosboot_cilium` (or `helm_release.cilium`) that installs Cilium"
    )]
    NoPodNetwork { namespace: String },
    #[error(
        "the bootstrap Job in {namespace} would use {needs}, but no node has a CNI yet (every node is NotReady: cni plugin not initialized), so it cannot run. A `job` block turns host networking and the KubePrism environment off, as in the module: set `host_network = true` and `env = {{ KUBERNETES_SERVICE_HOST = \"localhost\", KUBERNETES_SERVICE_PORT = \"7445\" }}` in `job` (or drop `job`: those are talosboot's defaults), or install the CNI first (`depends_on` the `talosboot_cilium`)"
    )]
    JobNeedsCni { namespace: String, needs: String },
    #[error(
        "FluxInstance {namespace}/{name} is being deleted, but the Flux Operator that removes its finalizer `fluxcd.controlplane.io/finalizer` (after uninstalling Flux) is not running in {namespace}, so the delete would never finish. Start the operator again (its Deployment {namespace}/flux-operator) and apply again, or, to leave Flux installed, remove the finalizer by hand: `kubectl -n {namespace} patch fluxinstance {name} --type=merge -p '{{\"metadata\":{{\"finalizers\":null}}}}'`"
    )]
    FinalizerStuck { namespace: String, name: String },
    #[error("cancelled while waiting for {what}")]
    Cancelled { what: String },
    #[error("{0}")]
    Engine(String),
}

impl FluxError {
    /// The underlying cluster error, when the step failed talking to the API.
    pub fn cluster_error(&self) -> Option<&ClusterError> {
        match self {
            FluxError::Cluster { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// True for a 404 from the API.
pub fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 404)
}
