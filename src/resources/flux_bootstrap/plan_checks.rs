//! At plan, best-effort (only when the cluster answers in time; a plan never needs it), when the
//! planned run starts bootstrap Jobs: an existing bootstrap namespace without the Pod Security
//! label (apply labels it, [`crate::cluster::flux::pod_security`]), a Job that would need the
//! pod network or the Service IP on a cluster without a CNI (apply stops before it,
//! [`crate::cluster::flux::pre_cni`]), and a Helm 3 image the operator's release record refuses
//! (as the chart resources warn, [`helm_major`]); and, whenever `instance_yaml` changes, a FluxInstance
//! that Flux has adopted (apply leaves it to Flux: [`adopted_instance`]). Each says what apply
//! does and the fix.

use std::time::Duration;

use super::apply::scope;
use super::inputs::{Inputs, bootstrap_namespace, job_settings};
use super::model::Config;
use super::plan::operator_repair;
use super::private::Private;
use crate::cluster::ClusterHandle;
use crate::cluster::client::PSA_ENFORCE;
use crate::cluster::engine::objects::PSA_PRIVILEGED;
use crate::cluster::flux::instance::read_instance;
use crate::cluster::flux::ownership::adopted_by_flux;
use crate::cluster::flux::pod_security::{self, Needed};
use crate::cluster::flux::{FluxError, OPERATOR_RELEASE, pre_cni};
use crate::cluster::ownership::manager_of_object;
use crate::framework::model::{Unknowns, decode};
use crate::framework::{Ctx, Diagnostic};
use crate::resources::job::{JobInput, pre_cni_needs};
use crate::resources::release::helm_major;
use crate::values::Value;

/// How long the plan waits for the cluster.
const PLAN_READ_BUDGET: Duration = Duration::from_secs(5);

/// The warnings, when a run with Jobs is planned.
pub async fn warnings(
    ctx: &Ctx,
    cluster: &ClusterHandle,
    prior: &Value,
    planned: &Value,
    config: &Value,
    prior_private: &[u8],
) -> Vec<Diagnostic> {
    let run = scope(prior, planned, &Private::decode(prior_private));
    if !(run.full || operator_repair(prior)) {
        return Vec::new();
    }
    let Ok(config) = decode::<Config>(config, Unknowns::AsNull) else {
        return Vec::new();
    };
    let name = bootstrap_namespace(&config).name;
    let defaults = crate::resources::job_defaults(ctx);
    let job = job_settings(config.job.as_ref(), config.rbac.as_ref(), &defaults);
    let choice = JobInput::apply_method(config.job.as_ref());
    let operator_namespace = config.planned_namespace();
    let found = tokio::time::timeout(PLAN_READ_BUDGET, async {
        let kube = cluster.connect().await.ok()?;
        let operator = async {
            let ns = operator_namespace.as_deref()?;
            let current = helm_major::current_release(&kube, ns, OPERATOR_RELEASE)
                .await
                .ok()?;
            let id = format!("{ns}/{OPERATOR_RELEASE}");
            helm_major::helm3_warning(&job.image, choice, &id, current.as_ref())
        };
        let (namespace, cni_missing, helm3) = futures::join!(
            pod_security::check(&kube, &name, job.host_network),
            pre_cni::cni_missing(&kube),
            operator,
        );
        Some((namespace.ok(), cni_missing.ok(), helm3))
    })
    .await
    .ok()
    .flatten();
    let Some((namespace, cni_missing, helm3)) = found else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some((summary, detail)) = helm3 {
        out.push(Diagnostic::warning(summary, detail).at(helm_major::image_path()));
    }
    if namespace == Some(Needed::Label) {
        out.push(Diagnostic::warning(
            "Bootstrap namespace without a Pod Security label",
            format!("Namespace {name} exists without the `{PSA_ENFORCE}` label (the flux-operator-bootstrap module created it without one), so Talos' `baseline` level would refuse the bootstrap's host-network pod. It is the bootstrap's own namespace: apply labels it `{PSA_ENFORCE}={PSA_PRIVILEGED}` before any Job runs."),
        ));
    }
    if let (Some(true), Some(needs)) = (cni_missing, pre_cni_needs(&job)) {
        let error = FluxError::JobNeedsCni {
            namespace: name,
            needs: needs.to_owned(),
        };
        out.push(Diagnostic::warning(
            "Bootstrap Job cannot run before the CNI",
            format!("{error}. Apply stops before the Job unless a CNI is up by then."),
        ));
    }
    out
}

/// `gitops_resources.instance_yaml` as a known string.
fn instance_yaml(value: &Value) -> Option<&str> {
    value
        .attr("gitops_resources")?
        .attr("instance_yaml")?
        .as_str()
}

/// When `instance_yaml` changes and the FluxInstance in the cluster is Flux's (a Kustomization
/// applies it from Git): apply leaves it alone, so the plan says so rather than let the diff
/// read as a change to what runs.
pub async fn adopted_instance(
    ctx: &Ctx,
    cluster: &ClusterHandle,
    prior: &Value,
    config: &Value,
) -> Option<Diagnostic> {
    let before = instance_yaml(prior)?;
    if instance_yaml(config)? == before {
        return None;
    }
    let config = decode::<Config>(config, Unknowns::Reject).ok()?;
    let inputs = Inputs::resolve(&config, &crate::resources::job_defaults(ctx)).ok()?;
    let namespace = inputs.namespace.clone();
    let name = inputs.instance.object["metadata"]["name"]
        .as_str()?
        .to_owned();
    let live = tokio::time::timeout(PLAN_READ_BUDGET, async {
        let kube = cluster.connect().await.ok()?;
        read_instance(&kube, &namespace, &name).await.ok().flatten()
    })
    .await
    .ok()
    .flatten()?;
    if !adopted_by_flux(&live) {
        return None;
    }
    let owner = manager_of_object(&live).map_or_else(|| "Flux".to_owned(), |m| m.to_string());
    Some(Diagnostic::warning(
        "The FluxInstance is Flux's: apply does not change it",
        format!(
            "`gitops_resources.instance_yaml` changed, but {owner} has adopted FluxInstance {namespace}/{name}: the bootstrap never fights Flux, so apply leaves it as Flux applies it from Git (the new text is only kept in state, for a bootstrap of a new cluster). To change the running FluxInstance, commit the change to its file in Git."
        ),
    ))
}
