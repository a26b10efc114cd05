//! Apply: create and update run the bootstrap (see [`super::run`]); destroy keeps Flux running
//! (`deletion_policy = "keep"`: only the bootstrap namespace goes) or uninstalls it. A failed run
//! returns the state that tells the truth, and marks the private state so that the next plan
//! shows the failed run as drift and tries again. With its own `cluster`, the apply checks that it
//! reaches the planned cluster and names it in every error; a destroy (which has no
//! configuration) goes through the provider's connection only when that reaches the same cluster
//! (`crate::resources::fleet`).

use tokio::time::Instant;

use super::inputs::{Inputs, bootstrap_namespace, job_settings, timeout};
use super::model::{Config, INSTANCE_NAME, set_computed};
use super::private::{Private, managed_hash};
use super::report::run_diagnostic;
use super::run::{RunError, Runner, Scope};
use crate::cluster::ClusterHandle;
use crate::cluster::client::PSA_ENFORCE;
use crate::cluster::engine::EngineError;
use crate::cluster::engine::objects::PSA_PRIVILEGED;
use crate::cluster::flux::instance::{
    conditions_text, delete_instance, delete_namespace, read_instance,
};
use crate::cluster::flux::manifest::ObjectRef;
use crate::cluster::flux::objects::{self, configmaps, secrets};
use crate::cluster::flux::ownership::adopted_by_flux;
use crate::cluster::flux::pod_security;
use crate::cluster::flux::poll::Wait;
use crate::cluster::flux::{FluxError, Kube, OPERATOR_RELEASE, operator};
use crate::cluster::helm;
use crate::framework::model::{Unknowns, decode};
use crate::framework::plan::same_value;
use crate::framework::{ApplyRequest, ApplyResponse, Ctx, Diagnostic, Diagnostics};
use crate::resources::choice::DeletionPolicy;
use crate::resources::connection::{self, IDENTITY};
use crate::resources::fleet::{UnreachableDestroy, name_cluster, without_its_cluster};
use crate::values::Value;

/// An apply that stops before it changes anything: the prior state, as it was.
fn failed(prior: &Value, diagnostics: Diagnostics) -> ApplyResponse {
    ApplyResponse {
        new_state: prior.clone(),
        diagnostics,
        private: None,
    }
}

async fn connect(cluster: &ClusterHandle) -> Result<Kube, RunError> {
    cluster
        .connect()
        .await
        .map_err(EngineError::connect)
        .map_err(RunError::engine("connect to the cluster".into()))
}

/// A full run (every chart converges to the configuration) on a create, after a failed run, or
/// when an input the schema declares `.updates()` changed; otherwise the charts are only
/// repaired. Decided on the schema, as the chart resources decide an upgrade.
pub(super) fn scope(prior: &Value, planned: &Value, private: &Private) -> Scope {
    let schema = super::schema::schema();
    let changed = schema
        .block
        .update_inputs()
        .into_iter()
        .any(|name| !same_value(prior.attr(name), planned.attr(name)));
    Scope {
        full: prior.is_null() || changed || private.last_run_failed,
    }
}

pub async fn apply(ctx: &Ctx, req: ApplyRequest) -> ApplyResponse {
    if req.planned_state.is_null() {
        return destroy(ctx, req).await;
    }
    let fail = |d: Diagnostic| failed(&req.prior_state, d.into());
    let config: Config = match decode(&req.config, Unknowns::Reject) {
        Ok(c) => c,
        Err(e) => return fail(e.diagnostic("configuration")),
    };
    let inputs = match Inputs::resolve(&config, &crate::resources::job_defaults(ctx)) {
        Ok(i) => i,
        Err(message) => return fail(Diagnostic::error("Invalid Flux bootstrap input", message)),
    };
    let target = match connection::target(ctx, &req.config) {
        Ok(t) => t,
        Err(d) => return failed(&req.prior_state, d),
    };
    let mut private = Private::decode_without_new_salt(&req.planned_private);
    private.ensure_salt();
    // The plan read what the import named on this cluster; the run adopts it.
    private.imported = None;
    let identity = match connection::applied_identity(&target, &req.planned_state, &private).await {
        Ok(identity) => identity,
        Err(d) => return fail(d),
    };
    let endpoint = identity
        .attr("api_server")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let scope = scope(&req.prior_state, &req.planned_state, &private);
    let mut state = req.planned_state;
    let hash = managed_hash(&private.salt, req.config.attr("managed_resources"));
    set_computed(
        &mut state,
        Value::from(inputs.namespace.as_str()),
        Some(hash.unwrap_or_default()),
    );
    if let Some(attrs) = state.attrs_mut() {
        attrs.insert(IDENTITY.into(), identity);
    }
    let mut diagnostics = Diagnostics::new();
    let cluster = target.handle();
    match run(ctx, &cluster, &inputs, scope, &private, &mut diagnostics).await {
        Ok(tracked) => {
            private.tracked = tracked;
            private.last_run_failed = false;
        }
        Err((err, conditions)) => {
            private.last_run_failed = true;
            diagnostics.push(run_diagnostic(&err, inputs.debug, conditions.as_deref()));
        }
    }
    ApplyResponse {
        new_state: state,
        private: Some(private.encode()),
        diagnostics: name_cluster(diagnostics, &target, &endpoint),
    }
}

/// Runs the bootstrap; on failure also returns the FluxInstance's conditions (for the diagnostic).
async fn run(
    ctx: &Ctx,
    cluster: &ClusterHandle,
    inputs: &Inputs,
    scope: Scope,
    private: &Private,
    diagnostics: &mut Diagnostics,
) -> Result<Vec<crate::cluster::flux::managed::Tracked>, (RunError, Option<String>)> {
    let kube = connect(cluster).await.map_err(|e| (e, None))?;
    // Before any Job: the bootstrap's own namespace, made by the module without the label.
    let (namespace, host_network) = (&inputs.bootstrap.name, inputs.job.host_network);
    if pod_security::ensure(&kube, namespace, host_network)
        .await
        .map_err(|e| (e.into(), None))?
    {
        diagnostics.warning(
            "Labelled the bootstrap namespace",
            format!("Namespace {namespace} had no Pod Security label (the module created it without one); talosboot labelled it `{PSA_ENFORCE}={PSA_PRIVILEGED}`, which its host-network bootstrap pod needs on Talos."),
        );
    }
    let runner = Runner {
        kube: &kube,
        inputs,
        wait: Wait::from_now(inputs.timeout, &ctx.cancel),
    };
    match runner.run(scope, private.salt_bytes()).await {
        Ok(tracked) => Ok(tracked),
        Err(err) => {
            let fi = &inputs.instance;
            let conditions = match read_instance(&kube, fi.namespace(), fi.name()).await {
                Ok(Some(object)) => Some(conditions_text(&object)),
                _ => None,
            };
            Err((err, conditions))
        }
    }
}

// --- destroy ----------------------------------------------------------------------------------

async fn destroy(ctx: &Ctx, req: ApplyRequest) -> ApplyResponse {
    let config: Config = decode(&req.prior_state, Unknowns::AsNull).unwrap_or_default();
    let private = Private::decode_without_new_salt(&req.planned_private);
    let uninstall = config.deletion_policy == Some(DeletionPolicy::Uninstall);
    let namespace = req
        .prior_state
        .attr("namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let bootstrap = bootstrap_namespace(&config);
    // A destroy has no configuration: the provider's connection, if it is the cluster's.
    let Some(cluster) = connection::destroy_handle(ctx, &req.prior_state, &private).await else {
        let label = format!("Flux bootstrap {namespace}");
        let left = format!(
            "Flux (FluxInstance {namespace}/{INSTANCE_NAME}) with the bootstrap namespace {}",
            bootstrap.name
        );
        return match without_its_cluster(&label, &req.prior_state, (!uninstall).then_some(&left)) {
            UnreachableDestroy::Forget(warning) => ApplyResponse::from(Diagnostics::from(warning)),
            UnreachableDestroy::Refuse(error) => failed(&req.prior_state, error.into()),
        };
    };
    let result = async {
        let kube = connect(&cluster).await?;
        if uninstall && !namespace.is_empty() {
            uninstall_flux(ctx, &kube, &config, &namespace, &private).await?;
        }
        let wait = Wait::from_now(timeout(&config), &ctx.cancel);
        delete_namespace(&kube, &bootstrap.name, wait).await?;
        Ok::<(), RunError>(())
    }
    .await;
    let mut diagnostics = Diagnostics::new();
    if let Err(e) = result {
        diagnostics.push(run_diagnostic(&e, true, None));
    }
    ApplyResponse::from(diagnostics)
}

/// One step of `deletion_policy = "uninstall"`, in the order [`uninstall_steps`] gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UninstallStep {
    /// Delete the FluxInstance and wait until it is gone. The operator's finalizer
    /// (`fluxcd.controlplane.io/finalizer`) removes the controllers, the CRDs and the Flux
    /// objects (the namespace stays) before the object goes, so the operator must still run.
    DeleteInstance,
    /// Delete the managed Secrets and the runtime-info ConfigMap (unless Flux adopted them).
    DeleteManaged,
    /// Uninstall the operator's release.
    UninstallOperator,
}

/// The uninstall's steps: the FluxInstance while the operator still runs, the operator last,
/// and never the operator when Flux manages it (its HelmRelease would reinstall it).
fn uninstall_steps(operator_adopted: bool) -> Vec<UninstallStep> {
    let mut steps = vec![UninstallStep::DeleteInstance, UninstallStep::DeleteManaged];
    if !operator_adopted {
        steps.push(UninstallStep::UninstallOperator);
    }
    steps
}

/// `deletion_policy = "uninstall"`: the FluxInstance (the operator's finalizer removes Flux), the
/// managed objects, then the operator's release ([`uninstall_steps`]). Objects Flux adopted stay.
async fn uninstall_flux(
    ctx: &Ctx,
    kube: &Kube,
    config: &Config,
    namespace: &str,
    private: &Private,
) -> Result<(), RunError> {
    let wait = Wait::from_now(timeout(config), &ctx.cancel);
    let adopted = operator::adopted(kube, namespace).await?;
    for step in uninstall_steps(adopted) {
        match step {
            UninstallStep::DeleteInstance => {
                delete_instance(kube, namespace, INSTANCE_NAME, wait).await?;
            }
            UninstallStep::DeleteManaged => {
                for tracked in &private.tracked {
                    delete_managed(kube, &tracked.object).await?;
                }
            }
            UninstallStep::UninstallOperator => {
                let defaults = crate::resources::job_defaults(ctx);
                let job = job_settings(config.job.as_ref(), config.rbac.as_ref(), &defaults);
                let remaining = wait.deadline.saturating_duration_since(Instant::now());
                helm::install::uninstall(
                    kube,
                    &bootstrap_namespace(config),
                    &job,
                    namespace,
                    OPERATOR_RELEASE,
                    remaining,
                    &ctx.cancel,
                )
                .await
                .map_err(RunError::engine(format!(
                    "uninstall the Flux Operator ({namespace}/{OPERATOR_RELEASE})"
                )))?;
            }
        }
    }
    Ok(())
}

async fn delete_managed(kube: &Kube, object: &str) -> Result<(), FluxError> {
    let Some(r) = ObjectRef::parse(object) else {
        return Ok(());
    };
    let resource = if r.kind == "Secret" {
        secrets()
    } else {
        configmaps()
    };
    let api = objects::api(kube, &resource, Some(&r.namespace));
    match objects::get(kube, &api, &r.name, object).await? {
        Some(live) if !adopted_by_flux(&live) => objects::delete(kube, &api, &r.name, object)
            .await
            .map(|_| ()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flux_instance_goes_while_the_operator_still_runs() {
        use UninstallStep::*;
        assert_eq!(
            uninstall_steps(false),
            vec![DeleteInstance, DeleteManaged, UninstallOperator],
            "the operator's finalizer uninstalls Flux: the FluxInstance must be gone before the operator"
        );
        assert_eq!(
            uninstall_steps(true),
            vec![DeleteInstance, DeleteManaged],
            "an operator Flux manages is left to Flux"
        );
    }
}
