//! One bootstrap run, in the module's order, as named steps: bootstrap namespace, target namespace,
//! prerequisites, prerequisite charts, managed resources, the operator, the CRD, the FluxInstance
//! and its Ready wait. Chart installs go through the engine's pre-CNI Job; the rest is native.

use std::time::Duration;

use kube::discovery;
use tokio::time::Instant;

use super::inputs::{Inputs, PrerequisiteChart};
use crate::cluster::engine::EngineError;
use crate::cluster::flux::instance::{self, Outcome};
use crate::cluster::flux::managed::{self, Tracked};
use crate::cluster::flux::objects::{self, secrets};
use crate::cluster::flux::ownership::adopted_by_flux;
use crate::cluster::flux::poll::Wait;
use crate::cluster::flux::{FluxError, Kube, MODULE_SECRET, operator};
use crate::cluster::helm::release::values_digest;
use crate::cluster::helm::values::{merge, parse_values};
use crate::cluster::helm::{self, install::ChartInstall};
use crate::resources::release::{Decision, Fingerprint, decide};
use serde_json::Value as Json;

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

/// Which parts run. Native steps always run (they are cheap and repair drift); Helm installs only
/// when something asks for them, since each is a Job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope {
    /// Create, `revision` bump, or changed gitops inputs: prerequisite charts and the operator.
    pub full: bool,
    /// The operator drifted (gone or failed): reinstall it.
    pub operator: bool,
}

pub struct Runner<'a> {
    pub kube: &'a Kube,
    pub inputs: &'a Inputs,
    /// The apply's deadline (its `timeout` from the start) and cancellation.
    pub wait: Wait<'a>,
}

impl Runner<'_> {
    fn remaining(&self) -> Duration {
        self.wait
            .deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(1))
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
        if scope.full || scope.operator {
            self.operator().await?;
        }
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
        let install = match &chart.adoption {
            Some((resource, group, name, namespace)) => {
                !self.adopted(resource, group, name, namespace).await?
            }
            None => helm::install::release(self.kube, &c.namespace, &c.release)
                .await
                .map_err(RunError::engine(format!(
                    "read the release {}/{}",
                    c.namespace, c.release
                )))?
                .is_none(),
        };
        if install {
            let mut c = c.clone();
            c.create_namespace = false;
            helm::install::install_or_upgrade(
                self.kube,
                &self.inputs.bootstrap,
                &self.inputs.job,
                &c,
                self.remaining(),
                self.wait.cancel,
            )
            .await
            .map_err(RunError::engine(describe(&c)))?;
        }
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

    /// Installs or upgrades the operator unless Flux owns it, then waits for it to be available.
    async fn operator(&self) -> Result<(), RunError> {
        let ns = &self.inputs.namespace;
        let deployment = operator::deployment(self.kube, ns).await?;
        if deployment.as_ref().is_some_and(adopted_by_flux) {
            tracing::info!("flux-operator is adopted by Flux: not installed");
            return Ok(());
        }
        if deployment.is_some() && self.up_to_date(&self.inputs.operator).await? {
            tracing::info!("flux-operator is deployed with these values: not upgraded");
            return Ok(());
        }
        helm::install::install_or_upgrade(
            self.kube,
            &self.inputs.bootstrap,
            &self.inputs.job,
            &self.inputs.operator,
            self.remaining(),
            self.wait.cancel,
        )
        .await
        .map_err(RunError::engine(describe(&self.inputs.operator)))?;
        Ok(())
    }

    /// True when the release is deployed from the requested chart version with exactly these
    /// values: an upgrade would change nothing (and restart nothing), so no Job runs. Decided
    /// as every chart install is ([`decide`]), the record standing for the prior install.
    async fn up_to_date(&self, chart: &ChartInstall) -> Result<bool, RunError> {
        let current = helm::install::release(self.kube, &chart.namespace, &chart.release)
            .await
            .map_err(RunError::engine(format!(
                "read the release {}/{}",
                chart.namespace, chart.release
            )))?;
        let Some(current) = current else {
            return Ok(false);
        };
        let wanted = values_digest(Some(&install_values(chart)));
        let installed = Fingerprint {
            version: &current.chart_version,
            values_sha256: Some(&current.values_sha256),
            content_digest: None,
        };
        let desired = Fingerprint {
            // No version asked for: whichever is installed.
            version: match chart.version.as_str() {
                "" => &current.chart_version,
                v => v,
            },
            values_sha256: Some(&wanted),
            content_digest: None,
        };
        Ok(decide(Some(&current.status), Some(&installed), &desired, None) == Decision::Unchanged)
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

/// The values a chart install records: its documents merged as Helm merges `-f` files (maps
/// deeply, later wins); a document that does not parse counts as empty.
pub(super) fn install_values(chart: &ChartInstall) -> Json {
    let mut values = Json::Object(Default::default());
    for doc in chart.values_yaml.iter().chain(&chart.sensitive_values_yaml) {
        if let Ok(v @ Json::Object(_)) = parse_values(doc) {
            merge(&mut values, &v);
        }
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_values_merge_deeply_as_helm_records_them() {
        let chart = ChartInstall {
            values_yaml: vec![
                "{\"a\": {\"b\": 1, \"c\": 2}}".into(),
                "a:\n  c: 3\n".into(),
            ],
            sensitive_values_yaml: vec!["{\"s\": {\"k\": \"v\"}}".into()],
            ..Default::default()
        };
        assert_eq!(
            install_values(&chart),
            serde_json::json!({"a": {"b": 1, "c": 3}, "s": {"k": "v"}})
        );
        assert_eq!(
            values_digest(Some(&install_values(&ChartInstall::default()))),
            values_digest(None),
            "no values hash as Helm's empty values"
        );
    }
}
