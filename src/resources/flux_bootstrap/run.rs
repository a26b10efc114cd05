//! One bootstrap run, in the module's order, as named steps: bootstrap namespace, target namespace,
//! prerequisites, prerequisite charts, managed resources, the operator, the CRD, the FluxInstance
//! and its Ready wait. Chart installs take the converge path every chart install takes
//! ([`crate::cluster::converge`]: observe, decide, install or upgrade in the pre-CNI Job); the rest
//! is native.

use kube::discovery;

use super::inputs::{Inputs, PrerequisiteChart};
use crate::cluster::converge::{
    self, Converge, ConvergeError, Converged, Decision, Fingerprint, Install, Observed, Readiness,
    ReadinessOf, Steps, Subject, Want, WorkloadSource, recorded_values,
};
use crate::cluster::engine::EngineError;
use crate::cluster::flux::instance::{self, Outcome};
use crate::cluster::flux::managed::{self, Tracked};
use crate::cluster::flux::objects::{self, secrets};
use crate::cluster::flux::ownership::adopted_by_flux;
use crate::cluster::flux::poll::Wait;
use crate::cluster::flux::{FluxError, Kube, MODULE_SECRET, OPERATOR_RELEASE, operator, pre_cni};
use crate::cluster::helm::install::ChartInstall;
use crate::cluster::helm::release::values_digest;
use crate::cluster::readiness::{Kind, WorkloadRef};
use crate::resources::job::pre_cni_needs;

/// What a run failed on.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Flux(#[from] FluxError),
    /// `what` completes "Failed to ...", e.g. "install chart flux-operator 0.33.0 (flux-system/flux-operator)".
    #[error("failed to {what}: {source}")]
    Engine {
        what: String,
        #[source]
        source: Box<EngineError>,
    },
}

impl RunError {
    pub fn engine(what: String) -> impl FnOnce(EngineError) -> RunError {
        move |source| RunError::Engine {
            what,
            source: Box::new(source),
        }
    }

    /// A failed converge of `chart`, named by its step.
    fn converge(chart: &ChartInstall) -> impl FnOnce(ConvergeError) -> RunError + '_ {
        move |e| match e {
            ConvergeError::Observe(e) | ConvergeError::Read(e) => RunError::engine(format!(
                "read the release {}/{}",
                chart.namespace, chart.release
            ))(e),
            ConvergeError::Install(e) => RunError::engine(describe(chart))(e),
            // The bootstrap waits for the operator itself (see `Runner::instance`), never here.
            ConvergeError::NotReady { not_ready, .. } => {
                RunError::engine(describe(chart))(EngineError::new(
                    crate::cluster::helm::READ_RELEASE,
                    not_ready.workloads.join(", "),
                ))
            }
        }
    }
}

fn describe(c: &crate::cluster::helm::install::ChartInstall) -> String {
    let version = if c.version.is_empty() {
        "(latest)"
    } else {
        &c.version
    };
    format!(
        "install chart {} {version} as {}/{}",
        c.chart, c.namespace, c.release
    )
}

/// Which parts run. Native steps always run (they are cheap and repair drift); a chart install
/// runs a Job only when the converge path decides one is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope {
    /// Create, a failed last run, or a change of an input the schema declares `.updates()`:
    /// the prerequisite charts and the operator converge to the configuration. Otherwise the
    /// operator is only repaired (gone, failed, stuck, its Deployment deleted) as it is installed.
    pub full: bool,
}

/// The check before a bootstrap Job: one that needs what only exists after the CNI would wait
/// for its timeout, so the converge stops with the diagnosis instead.
struct BeforeJob<'a> {
    needs: Option<&'static str>,
    namespace: &'a str,
    stopped: Option<RunError>,
}

#[async_trait::async_trait]
impl Steps for BeforeJob<'_> {
    async fn before_install(&mut self, kube: &Kube, _: &Observed, _: Decision) -> bool {
        let Some(needs) = self.needs else {
            return true;
        };
        let error = match pre_cni::cni_missing(kube).await {
            Ok(false) => return true,
            Ok(true) => FluxError::JobNeedsCni {
                namespace: self.namespace.to_owned(),
                needs: needs.to_owned(),
            },
            Err(e) => e,
        };
        self.stopped = Some(error.into());
        false
    }
}

pub struct Runner<'a> {
    pub kube: &'a Kube,
    pub inputs: &'a Inputs,
    /// The apply's deadline (its `timeout` from the start) and cancellation.
    pub wait: Wait<'a>,
}

impl Runner<'_> {
    /// Converges `chart` (observe, decide, install or upgrade) as `want` says; `readiness` names
    /// the workloads whose marks say who manages it. No wait: the Flux bootstrap waits for the
    /// operator after applying the FluxInstance, telling a missing pod network apart.
    async fn converge(
        &self,
        chart: &ChartInstall,
        want: Want<'_>,
        readiness: &ReadinessOf<'_>,
    ) -> Result<Converged, RunError> {
        let c = Converge {
            subject: Subject {
                namespace: &chart.namespace,
                name: &chart.release,
                known_revision: None,
                source: WorkloadSource::Manifest,
                readiness,
            },
            want,
            install: Install {
                chart,
                bootstrap: &self.inputs.bootstrap,
                job: &self.inputs.job,
            },
            wait: None,
            deadline: self.wait.deadline.into_std(),
        };
        let mut steps = BeforeJob {
            needs: pre_cni_needs(&self.inputs.job),
            namespace: &self.inputs.bootstrap.name,
            stopped: None,
        };
        let converged = converge::converge(self.kube, &c, &mut steps, self.wait.cancel)
            .await
            .map_err(RunError::converge(chart))?;
        match (converged, steps.stopped) {
            (Converged::Stopped, Some(e)) => Err(e),
            (converged, _) => Ok(converged),
        }
    }

    /// Runs every step; returns the fingerprints of the managed objects.
    pub async fn run(&self, scope: Scope, salt: &[u8]) -> Result<Vec<Tracked>, RunError> {
        let i = self.inputs;
        let bootstrap = &i.bootstrap;
        for ns in [&bootstrap.name, &i.namespace] {
            instance::wait_not_terminating(self.kube, ns, self.wait).await?;
        }
        instance::apply_namespace(
            self.kube,
            &bootstrap.name,
            &bootstrap.labels,
            &bootstrap.annotations,
        )
        .await?;
        instance::apply_namespace(
            self.kube,
            &i.namespace,
            &i.common_labels,
            &i.common_annotations,
        )
        .await?;
        for manifest in &i.prerequisites {
            let outcome = objects::apply_prerequisite(self.kube, manifest).await?;
            tracing::info!(object = %manifest.reference(), ?outcome, "prerequisite");
        }
        if scope.full {
            for chart in &i.charts {
                self.prerequisite_chart(chart).await?;
            }
        }
        let managed = managed::reconcile(self.kube, &bootstrap.name, &i.managed, salt).await?;
        if !managed.deleted.is_empty() {
            tracing::info!(deleted = ?managed.deleted.iter().map(ToString::to_string).collect::<Vec<_>>(), "retired managed objects deleted");
        }
        self.operator(scope).await?;
        self.instance().await?;
        self.drop_module_secret().await?;
        Ok(managed.tracked)
    }

    /// The module's rule: with an adoption check, install until Flux adopts the object; without,
    /// install only when the release is absent.
    async fn prerequisite_chart(&self, chart: &PrerequisiteChart) -> Result<(), RunError> {
        let c = &chart.install;
        if c.create_namespace {
            instance::apply_namespace(
                self.kube,
                &c.namespace,
                &self.inputs.common_labels,
                &self.inputs.common_annotations,
            )
            .await?;
        }
        let mut c = c.clone();
        c.create_namespace = false;
        let wanted = values_digest(Some(&recorded_values(&c)));
        let want = match &chart.adoption {
            // The module's rule: until Flux adopts the object, the chart as configured.
            Some((resource, group, name, namespace)) => {
                if self.adopted(resource, group, name, namespace).await? {
                    return Ok(());
                }
                Want::Record(Fingerprint {
                    version: &c.version,
                    values_sha256: Some(&wanted),
                    content_digest: None,
                })
            }
            // Without an adoption check the module installs only an absent release; a failed
            // or stuck one is repaired too, and one that runs is left as it is.
            None => Want::AsInstalled,
        };
        self.converge(&c, want, &|_| Readiness::default()).await?;
        Ok(())
    }

    /// Whether the object named by a `flux_adoption_check` carries a Flux ownership label.
    async fn adopted(
        &self,
        resource: &str,
        group: &str,
        name: &str,
        namespace: &str,
    ) -> Result<bool, RunError> {
        let what = format!("the adoption check object {resource}.{group} {namespace}/{name}");
        let api_group = discovery::group(&self.kube.client, group)
            .await
            .map_err(|e| self.kube.error(format!("discover API group {group:?}"), e))?;
        let Some((ar, _)) = api_group
            .recommended_resources()
            .into_iter()
            .find(|(ar, _)| ar.plural == resource)
        else {
            return Ok(false);
        };
        let api = objects::api(self.kube, &ar, Some(namespace));
        Ok(objects::get(self.kube, &api, name, &what)
            .await?
            .as_ref()
            .is_some_and(adopted_by_flux))
    }

    /// Converges the operator's release: to the configuration on a full run, else repaired as
    /// it is installed; never while another tool manages its Deployment (Flux took it over).
    async fn operator(&self, scope: Scope) -> Result<(), RunError> {
        let chart = &self.inputs.operator;
        let wanted = values_digest(Some(&recorded_values(chart)));
        let want = match scope.full {
            true => Want::Record(Fingerprint {
                version: &chart.version,
                values_sha256: Some(&wanted),
                content_digest: None,
            }),
            false => Want::AsInstalled,
        };
        // Its Deployment, by name whatever the record says: Flux may have adopted it under a
        // release record of its own.
        let deployment = Readiness {
            workloads: vec![WorkloadRef {
                kind: Kind::Deployment,
                namespace: chart.namespace.clone(),
                name: OPERATOR_RELEASE.into(),
            }],
            ..Default::default()
        };
        match self.converge(chart, want, &|_| deployment.clone()).await? {
            Converged::Declined { observed, .. } => {
                let manager = observed
                    .manager()
                    .map(|m| m.to_string())
                    .unwrap_or_default();
                tracing::info!(%manager, "flux-operator is managed by another tool: not installed");
            }
            Converged::Done {
                decision: Decision::Unchanged,
                ..
            } => tracing::info!("flux-operator is deployed with these values: not upgraded"),
            _ => {}
        }
        Ok(())
    }

    /// CRD, FluxInstance (until Flux adopts it), and the Ready wait when it was applied.
    async fn instance(&self) -> Result<(), RunError> {
        instance::wait_crd_established(self.kube, self.wait).await?;
        let fi = &self.inputs.instance;
        let outcome = instance::apply_instance(self.kube, fi).await?;
        if outcome == Outcome::Adopted {
            return Ok(());
        }
        operator::wait_available(self.kube, fi.namespace(), self.wait).await?;
        instance::wait_ready(self.kube, fi.namespace(), fi.name(), self.wait).await?;
        Ok(())
    }

    /// The module kept a copy of `secrets_yaml` in its own Secret; talosboot applies Secrets
    /// directly, so after a migration that copy only adds exposure.
    async fn drop_module_secret(&self) -> Result<(), RunError> {
        let api = objects::api(self.kube, &secrets(), Some(&self.inputs.bootstrap.name));
        let what = format!(
            "the module's Secret {}/{MODULE_SECRET}",
            self.inputs.bootstrap.name
        );
        objects::delete(self.kube, &api, MODULE_SECRET, &what).await?;
        Ok(())
    }
}
