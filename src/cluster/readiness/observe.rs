//! One read of a workload, a namespace's DaemonSets and Deployments, or the nodes: what a
//! refresh reads (the wait in [`super`] watches instead).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use kube::{Api, Resource};

use super::rollout::*;
use super::slim::{Lean, LeanDaemonSet, LeanDeployment, LeanNode, List};
use crate::cluster::ClusterError;
use crate::cluster::Kube;

/// A workload as observed: its rollout, and its labels and annotations (which say who manages
/// it, see [`crate::cluster::ownership`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Observed {
    pub rollout: Rollout,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

async fn get_one<K, F>(
    clients: &Kube,
    namespace: &str,
    name: &str,
    judge: F,
) -> Result<Observed, ClusterError>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
    <K as kube::Resource>::DynamicType: Default,
    F: Fn(&K) -> Rollout,
{
    let api: Api<K> = Api::namespaced(clients.client.clone(), namespace);
    let found = clients
        .retry("get workload", || api.get_opt(name))
        .await
        .map_err(|e| ClusterError::from_kube(e, &clients.endpoint))?;
    Ok(found
        .map(|o| Observed {
            rollout: judge(&o),
            labels: o.meta().labels.clone().unwrap_or_default(),
            annotations: o.meta().annotations.clone().unwrap_or_default(),
        })
        .unwrap_or_default())
}

/// The current rollout of one workload (a single GET; transient errors retried).
pub async fn observe(clients: &Kube, w: &WorkloadRef) -> Result<Observed, ClusterError> {
    let (ns, name) = (w.namespace.as_str(), w.name.as_str());
    match w.kind {
        Kind::DaemonSet => get_one::<DaemonSet, _>(clients, ns, name, daemonset_rollout).await,
        Kind::Deployment => get_one::<Deployment, _>(clients, ns, name, deployment_rollout).await,
        Kind::StatefulSet => {
            get_one::<StatefulSet, _>(clients, ns, name, statefulset_rollout).await
        }
        Kind::Job => get_one::<Job, _>(clients, ns, name, job_rollout).await,
    }
}

/// Every object at `path` (one LIST, transient errors retried), decoded as its lean form `L`
/// ([`super::slim`]): a whole list of whole objects is never built.
async fn list_lean<L: Lean>(
    clients: &Kube,
    what: &str,
    path: &str,
) -> Result<Vec<L::Full>, ClusterError> {
    let list = clients
        .retry(what, || {
            let request = kube::core::Request::new(path).list(&kube::api::ListParams::default());
            async move {
                let request = request.map_err(kube::Error::BuildRequest)?;
                clients.client.request::<List<L>>(request).await
            }
        })
        .await
        .map_err(|e| ClusterError::from_kube(e, &clients.endpoint))?;
    Ok(list.items.into_iter().map(Lean::into_full).collect())
}

/// The DaemonSets and Deployments of `namespace`, each as observed (two LISTs, concurrently;
/// transient errors retried): what a caller matches against the workloads it wants judged, so
/// that a chart's many components cost one round trip.
pub async fn observe_namespace(
    clients: &Kube,
    namespace: &str,
) -> Result<Vec<(WorkloadRef, Observed)>, ClusterError> {
    let ds_path = DaemonSet::url_path(&(), Some(namespace));
    let deploy_path = Deployment::url_path(&(), Some(namespace));
    let (ds, deploy) = tokio::join!(
        list_lean::<LeanDaemonSet>(clients, "list daemonsets", &ds_path),
        list_lean::<LeanDeployment>(clients, "list deployments", &deploy_path),
    );
    let observed = |kind: Kind, meta: &kube::api::ObjectMeta, rollout: Rollout| {
        (
            WorkloadRef {
                kind,
                namespace: namespace.to_owned(),
                name: meta.name.clone().unwrap_or_default(),
            },
            Observed {
                rollout,
                labels: meta.labels.clone().unwrap_or_default(),
                annotations: meta.annotations.clone().unwrap_or_default(),
            },
        )
    };
    let mut out: Vec<(WorkloadRef, Observed)> = ds?
        .iter()
        .map(|d| observed(Kind::DaemonSet, &d.metadata, daemonset_rollout(d)))
        .collect();
    out.extend(
        deploy?
            .iter()
            .map(|d| observed(Kind::Deployment, &d.metadata, deployment_rollout(d))),
    );
    Ok(out)
}

/// Whether every node is Ready without the `not-ready:NoSchedule` taint (one LIST).
pub async fn all_nodes_ready(clients: &Kube) -> Result<bool, ClusterError> {
    let nodes = list_lean::<LeanNode>(clients, "list nodes", &Node::url_path(&(), None)).await?;
    Ok(!nodes.is_empty() && nodes.iter().all(|n| node_not_ready(n).is_none()))
}
