//! The engine's cleanup: the leftovers of earlier runs of a target before a run, and the run's
//! own objects after it. Problems are warnings, never a failed run.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams};

use super::*;

/// Jobs (and leftovers of killed runs) of earlier runs of this target: a failed Job stays for
/// `kubectl logs` until the next run, which is now.
pub(super) async fn remove_earlier_runs(
    clients: &Kube,
    spec: &RunSpec,
    names: &objects::RunNames,
) -> Vec<String> {
    let selector = format!("{}={}", objects::TARGET_LABEL, names.target_label);
    let mut warnings = Vec::new();
    warnings.extend(delete_target_jobs(clients, spec, names, None).await);
    warnings.extend(delete_run_objects(clients, spec, &selector).await);
    warnings
}

/// Deletes the Jobs of this target except `keep`. A failed list is a warning, never ignored.
async fn delete_target_jobs(
    clients: &Kube,
    spec: &RunSpec,
    names: &objects::RunNames,
    keep: Option<&str>,
) -> Vec<String> {
    let selector = format!("{}={}", objects::TARGET_LABEL, names.target_label);
    let ns = &spec.namespace.name;
    let jobs: Api<Job> = Api::namespaced(clients.client.clone(), ns);
    let params = ListParams::default().labels(&selector);
    let list = match clients
        .retry("list jobs", || jobs.list_metadata(&params))
        .await
    {
        Ok(list) => list,
        Err(e) => {
            return vec![format!(
                "failed to list earlier bootstrap Jobs in {ns}: {e} (their ttlSecondsAfterFinished removes them later)"
            )];
        }
    };
    let mut warnings = Vec::new();
    for job in list.items {
        let name = job.metadata.name.unwrap_or_default();
        if Some(name.as_str()) == keep || job.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Err(e) = delete(clients, &jobs, &name, &DeleteParams::background()).await {
            warnings.push(format!(
                "failed to delete the earlier bootstrap Job {ns}/{name}: {e}"
            ));
        }
    }
    warnings
}

/// Deletes `name` (transient errors retried); an object already gone is deleted.
async fn delete<K>(
    clients: &Kube,
    api: &Api<K>,
    name: &str,
    params: &DeleteParams,
) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + fmt::Debug + serde::de::DeserializeOwned,
{
    match clients.retry("delete", || api.delete(name, params)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

async fn delete_labelled<K>(clients: &Kube, api: Api<K>, selector: &str, what: &str) -> Vec<String>
where
    K: kube::Resource + Clone + fmt::Debug + serde::de::DeserializeOwned,
{
    let mut warnings = Vec::new();
    match api
        .list_metadata(&ListParams::default().labels(selector))
        .await
    {
        Ok(list) => {
            for item in list.items {
                let name = item.metadata.name.unwrap_or_default();
                if let Err(e) = delete(clients, &api, &name, &DeleteParams::default()).await {
                    warnings.push(format!("failed to delete the bootstrap {what} {name}: {e}"));
                }
            }
        }
        Err(e) => warnings.push(format!("failed to list bootstrap {what}s: {e}")),
    }
    warnings
}

/// Namespaced objects matching `selector` in every namespace (the Roles and RoleBindings of
/// [`Rbac::Minimal`] live in the namespaces their rules are limited to).
async fn delete_labelled_everywhere<K>(clients: &Kube, selector: &str, what: &str) -> Vec<String>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + fmt::Debug
        + serde::de::DeserializeOwned,
    K::DynamicType: Default,
{
    let client = &clients.client;
    let all: Api<K> = Api::all(client.clone());
    let params = ListParams::default().labels(selector);
    let list = match clients.retry("list", || all.list_metadata(&params)).await {
        Ok(list) => list,
        Err(e) => return vec![format!("failed to list bootstrap {what}s: {e}")],
    };
    let mut warnings = Vec::new();
    for item in list.items {
        let ns = item.metadata.namespace.unwrap_or_default();
        let name = item.metadata.name.unwrap_or_default();
        let api: Api<K> = Api::namespaced(client.clone(), &ns);
        if let Err(e) = delete(clients, &api, &name, &DeleteParams::default()).await {
            warnings.push(format!(
                "failed to delete the bootstrap {what} {ns}/{name}: {e}"
            ));
        }
    }
    warnings
}

/// ServiceAccounts, bindings and roles, ConfigMaps and Secrets matching `selector`.
async fn delete_run_objects(clients: &Kube, spec: &RunSpec, selector: &str) -> Vec<String> {
    let ns = &spec.namespace.name;
    let c = &clients.client;
    let mut warnings = Vec::new();
    warnings.extend(
        delete_labelled(
            clients,
            Api::<ClusterRoleBinding>::all(c.clone()),
            selector,
            "ClusterRoleBinding",
        )
        .await,
    );
    warnings.extend(
        delete_labelled(
            clients,
            Api::<ClusterRole>::all(c.clone()),
            selector,
            "ClusterRole",
        )
        .await,
    );
    warnings
        .extend(delete_labelled_everywhere::<RoleBinding>(clients, selector, "RoleBinding").await);
    warnings.extend(delete_labelled_everywhere::<Role>(clients, selector, "Role").await);
    warnings.extend(
        delete_labelled(
            clients,
            Api::<ServiceAccount>::namespaced(c.clone(), ns),
            selector,
            "ServiceAccount",
        )
        .await,
    );
    warnings.extend(
        delete_labelled(
            clients,
            Api::<ConfigMap>::namespaced(c.clone(), ns),
            selector,
            "ConfigMap",
        )
        .await,
    );
    warnings.extend(
        delete_labelled(
            clients,
            Api::<Secret>::namespaced(c.clone(), ns),
            selector,
            "Secret",
        )
        .await,
    );
    warnings
}

/// After the run: its ServiceAccount, binding, ConfigMap and Secret always go; the Job too unless
/// it failed (kept for `kubectl logs`).
pub(super) async fn cleanup(
    clients: &Kube,
    spec: &RunSpec,
    names: &objects::RunNames,
    delete_job: bool,
) -> Vec<String> {
    let selector = format!("{}={}", objects::RUN_LABEL, names.run_id);
    let mut warnings = Vec::new();
    if delete_job {
        let jobs: Api<Job> = Api::namespaced(clients.client.clone(), &spec.namespace.name);
        if let Err(e) = delete(clients, &jobs, &names.object, &DeleteParams::background()).await {
            warnings.push(format!(
                "failed to delete the bootstrap Job {}/{}: {e} (its ttlSecondsAfterFinished removes it later)",
                spec.namespace.name, names.object
            ));
        }
        // After a success nothing of this target is left: also earlier failed Jobs the first
        // sweep could not remove (e.g. the API was unreachable for a moment).
        warnings.extend(delete_target_jobs(clients, spec, names, Some(&names.object)).await);
    }
    warnings.extend(delete_run_objects(clients, spec, &selector).await);
    warnings
}
