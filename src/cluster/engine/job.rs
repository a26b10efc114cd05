//! The run's own objects (ServiceAccount, bindings or roles, ConfigMap, Secret) and its Job,
//! created, then watched until it ends ([`super::wait`]).

use super::*;
use crate::cluster::diagnosis::Signature;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};

async fn create<K>(clients: &Kube, api: &Api<K>, object: &K, step: Step) -> Result<(), EngineError>
where
    K: kube::Resource + Clone + fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let params = PostParams::default();
    match clients
        .retry("create", || api.create(&params, object))
        .await
    {
        // A retried create whose first attempt went through.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        other => other.map(|_| ()),
    }
    .map_err(|e| clients.api_error(step, e))
}

/// Creates `object` in `namespace` (one of the run's objects: its ServiceAccount, RBAC, inputs).
async fn create_in<K>(clients: &Kube, namespace: &str, object: &K) -> Result<(), EngineError>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
    K::DynamicType: Default,
{
    let api = Api::namespaced(clients.client.clone(), namespace);
    create(clients, &api, object, Step::Objects).await
}

/// The run's ServiceAccount, its RBAC (cluster-wide and per namespace), the inputs ConfigMap and
/// the secrets' Secret, before the Job that uses them.
async fn create_objects(
    clients: &Kube,
    spec: &RunSpec,
    names: &objects::RunNames,
) -> Result<(), EngineError> {
    let ns = &spec.namespace.name;
    let cluster_roles: Api<ClusterRole> = Api::all(clients.client.clone());
    let cluster_bindings: Api<ClusterRoleBinding> = Api::all(clients.client.clone());
    create_in(clients, ns, &objects::service_account(spec, names)).await?;
    if let Some(role) = objects::cluster_role(spec, names) {
        create(clients, &cluster_roles, &role, Step::Objects).await?;
    }
    for (role, binding) in objects::namespaced_rbac(spec, names) {
        let role_ns = role.metadata.namespace.clone().unwrap_or_default();
        create_in(clients, &role_ns, &role).await?;
        create_in(clients, &role_ns, &binding).await?;
    }
    if let Some(binding) = objects::cluster_role_binding(spec, names) {
        create(clients, &cluster_bindings, &binding, Step::Objects).await?;
    }
    create_in(clients, ns, &objects::config_map(spec, names)).await?;
    if let Some(secret) = objects::secret(spec, names) {
        create_in(clients, ns, &secret).await?;
    }
    Ok(())
}

/// Creates the run's objects and Job, waits for it; on success returns the log tail and, when
/// asked for, the whole output.
pub(super) async fn run_job(
    clients: &Kube,
    spec: &RunSpec,
    names: &objects::RunNames,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<(Vec<String>, Option<String>), EngineError> {
    let c = &clients.client;
    let ns = &spec.namespace.name;
    create_objects(clients, spec, names).await?;
    let mut job_spec = spec.clone();
    // What is left of the timeout after the Lease wait: the Job can never outlive the apply.
    job_spec.timeout = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_secs(1));
    let jobs: Api<Job> = Api::namespaced(c.clone(), ns);
    create(clients, &jobs, &objects::job(&job_spec, names), Step::Job).await?;
    let pod_selector = format!("{}={}", objects::RUN_LABEL, names.run_id);
    let pods: Api<Pod> = Api::namespaced(c.clone(), ns);
    let events: Api<Event> = Api::namespaced(c.clone(), ns);
    // The Job controller marks a deadline failure a moment after it passes.
    let grace = Duration::from_secs(10);
    let outcome = wait::wait_for_job(
        Api::namespaced(clients.stream.clone(), ns),
        Api::namespaced(clients.stream.clone(), ns),
        Api::namespaced(clients.stream.clone(), ns),
        &names.object,
        &pod_selector,
        deadline + grace,
        cancel,
    )
    .await;
    let job_ref = format!("{ns}/{}", names.object);
    let report = report::collect(&pods, &events, &names.object, &pod_selector).await;
    // A Job that did not finish in time is deleted (its pod would run until its own deadline)
    // unless a diagnosis kept it for `kubectl logs`.
    let timed_out = matches!(outcome, JobWait::TimedOut);
    let mut failure = match outcome {
        JobWait::Succeeded if spec.capture_output => {
            let output = report::output(clients.retry_budget, &pods, &pod_selector)
                .await
                .map_err(|e| {
                    EngineError::new(
                        Step::Wait,
                        format!(
                            "the bootstrap Job {job_ref} succeeded, but its output could not be read: {e}"
                        ),
                    )
                })?;
            return Ok((report.log_tail, Some(output)));
        }
        JobWait::Succeeded => return Ok((report.log_tail, None)),
        JobWait::Interrupted => {
            let _ = jobs
                .delete(&names.object, &DeleteParams::background())
                .await;
            let mut e = EngineError::interrupted(
                Step::Wait,
                &format!("the bootstrap Job {job_ref} was running; it was deleted"),
            );
            e.report = Some(report);
            return Err(e);
        }
        JobWait::TimedOut => EngineError::new(
            Step::Wait,
            format!(
                "the bootstrap Job {job_ref} did not finish within {}s",
                spec.timeout.as_secs()
            ),
        ),
        JobWait::Failed { reason, message } => {
            let mut e = EngineError::new(
                Step::Wait,
                format!("the bootstrap Job {job_ref} failed: {reason}: {message}"),
            );
            let finished = matches!(
                reason.as_str(),
                "BackoffLimitExceeded" | "DeadlineExceeded" | "PodFailurePolicy"
            );
            if finished {
                e.kept_job = Some(job_ref.clone());
            } else {
                // Cannot start: nothing to keep running until the deadline.
                let _ = jobs
                    .delete(&names.object, &DeleteParams::background())
                    .await;
            }
            let text = format!("{reason}: {message}");
            e = e.with_diagnosis(&[text.as_str()]);
            e
        }
    };
    let texts: Vec<&str> = report.texts().collect();
    if failure.diagnosis.is_none()
        || failure
            .diagnosis
            .as_ref()
            .is_some_and(|d| d.kind == Signature::Deadline)
    {
        // A signature in the log beats the generic deadline diagnosis.
        if let Some(d) = diagnose(texts.iter().copied()) {
            failure.diagnosis = Some(d);
        }
    }
    failure.report = Some(report);
    if failure.kept_job.is_none() && timed_out {
        let _ = jobs
            .delete(&names.object, &DeleteParams::background())
            .await;
    }
    Err(failure)
}
