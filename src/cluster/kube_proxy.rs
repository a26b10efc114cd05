//! kube-proxy and Cilium's kube-proxy replacement: which one routes Service IPs.
//!
//! Talos runs kube-proxy (DaemonSet `kube-system/kube-proxy`) unless the machine config disables
//! it (see [`super::talos`] for both forms); its Cilium guide has a variant for each case. With both running,
//! two dataplanes program the same Services; with neither, no Service IP ever routes (the
//! `kubernetes` Service, CoreDNS, everything). [`find`] looks the DaemonSet up, [`judge`] decides
//! (a pure table, tested beside it), and [`explain`] tells the Service-IP timeout diagnosis which
//! case the cluster is in, so it never claims kube-proxy is disabled when it runs.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Service;
use kube::Api;

use super::ClusterError;
use super::Kube;
use super::diagnosis::{Diagnosis, Signature};

/// Where Talos deploys kube-proxy.
pub const NAMESPACE: &str = "kube-system";
pub const NAME: &str = "kube-proxy";

/// Whether kube-proxy is deployed in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeProxy {
    /// DaemonSet `kube-system/kube-proxy` exists.
    Deployed,
    /// No such DaemonSet (Talos: kube-proxy disabled in the machine config).
    Absent,
}

/// How patient a lookup is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patience {
    /// One request: plan-time checks and diagnoses are best-effort.
    Once,
    /// Transient errors retried (see [`Kube::retry`]): an apply step.
    Retried,
}

/// Looks up DaemonSet `kube-system/kube-proxy` (one GET).
///
/// # Errors
/// [`ClusterError`] when the API cannot answer (after retries with [`Patience::Retried`]).
pub async fn find(clients: &Kube, patience: Patience) -> Result<KubeProxy, ClusterError> {
    let api: Api<DaemonSet> = Api::namespaced(clients.client.clone(), NAMESPACE);
    let found = match patience {
        Patience::Once => api.get_opt(NAME).await,
        Patience::Retried => {
            clients
                .retry("get the kube-proxy DaemonSet", || api.get_opt(NAME))
                .await
        }
    }
    .map_err(|e| ClusterError::from_kube(e, &clients.endpoint))?;
    Ok(match found {
        Some(_) => KubeProxy::Deployed,
        None => KubeProxy::Absent,
    })
}

/// What is wrong with a Service dataplane choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mismatch {
    /// kube-proxy runs and Cilium replaces it too: both handle Services (a warning).
    BothHandleServices,
    /// Neither runs: Service IPs never route (an error: nothing would work).
    NothingRoutesServices,
}

/// The Service dataplane a Cilium configuration chooses (`kubeProxyReplacement`) against the
/// cluster: `None` when they fit.
pub fn judge(replacement: bool, kube_proxy: KubeProxy) -> Option<Mismatch> {
    match (replacement, kube_proxy) {
        (true, KubeProxy::Deployed) => Some(Mismatch::BothHandleServices),
        (false, KubeProxy::Absent) => Some(Mismatch::NothingRoutesServices),
        (true, KubeProxy::Absent) | (false, KubeProxy::Deployed) => None,
    }
}

/// The ClusterIP of the `kubernetes` Service (`default/kubernetes`): the address pods reach the
/// API at through the Service dataplane, in whatever Service CIDR the cluster has. `None` when the
/// Service has none.
///
/// # Errors
/// [`ClusterError`] when the API cannot answer.
pub async fn service_ip(clients: &Kube) -> Result<Option<String>, ClusterError> {
    let api: Api<Service> = Api::namespaced(clients.client.clone(), "default");
    let found = api
        .get_opt("kubernetes")
        .await
        .map_err(|e| ClusterError::from_kube(e, &clients.endpoint))?;
    Ok(found
        .and_then(|s| s.spec)
        .and_then(|s| s.cluster_ip)
        .filter(|ip| !ip.is_empty() && ip != "None"))
}

/// Judges an API timeout diagnosis with the cluster's `kubernetes` Service address (one GET), and
/// tells a Service-IP timeout whether kube-proxy is deployed (one GET). Best-effort: when a lookup
/// fails the diagnosis stays as it is. Other diagnoses are left alone.
pub async fn explain(clients: &Kube, diagnosis: &mut Option<Diagnosis>) {
    let Some(d) = diagnosis.as_mut() else {
        return;
    };
    if matches!(
        d.kind,
        Signature::ServiceIpTimeout | Signature::EndpointTimeout
    ) {
        match service_ip(clients).await {
            Ok(Some(ip)) => d.judge_service_ip(&ip),
            Ok(None) => {}
            Err(e) => tracing::debug!(error = %e, "Service IP lookup for the diagnosis failed"),
        }
    }
    if d.kind != Signature::ServiceIpTimeout {
        return;
    }
    match find(clients, Patience::Once).await {
        Ok(kube_proxy) => d.explain_service_ip(kube_proxy),
        Err(e) => tracing::debug!(error = %e, "kube-proxy lookup for the diagnosis failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_service_dataplane_fits() {
        let table = [
            (true, KubeProxy::Absent, None),
            (false, KubeProxy::Deployed, None),
            (
                true,
                KubeProxy::Deployed,
                Some(Mismatch::BothHandleServices),
            ),
            (
                false,
                KubeProxy::Absent,
                Some(Mismatch::NothingRoutesServices),
            ),
        ];
        for (replacement, kube_proxy, expected) in table {
            assert_eq!(
                judge(replacement, kube_proxy),
                expected,
                "replacement {replacement}, {kube_proxy:?}"
            );
        }
    }
}
