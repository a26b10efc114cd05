//! `talosboot_flux_bootstrap`: the flux-operator-bootstrap module as a native resource, with the
//! module's arguments. Reading order: [`schema`], [`model`] (decoding, defaults, validation),
//! [`inputs`] (one run's resolved inputs), [`plan`] (with [`operator_values`], the running
//! operator's values an upgrade changes, and [`plan_checks`], the bootstrap namespace's Pod
//! Security label and a Job that would need a CNI), [`apply`] (with [`run`], the steps, and
//! [`report`], the diagnostics), [`read`] (drift), [`import`]; [`private`] holds the salt and
//! fingerprints; [`fleet`], what changes when the resource names its own cluster through
//! `cluster` (a fleet in one root: the drift read moves from refresh to plan).

mod apply;
mod fleet;
mod import;
mod inputs;
mod model;
mod operator_values;
mod plan;
mod plan_checks;
mod private;
mod read;
mod report;
mod run;
mod schema;

use async_trait::async_trait;

use crate::framework::model::{Unknowns, decode};
use crate::framework::*;
use crate::resources::connection;
use crate::values::Value;

pub struct FluxBootstrap;

#[async_trait]
impl Resource for FluxBootstrap {
    fn type_name(&self) -> &'static str {
        "talosboot_flux_bootstrap"
    }

    fn schema(&self) -> Schema {
        schema::schema()
    }

    /// The FluxInstance's namespace and name. The operator reconciles only the instance named
    /// `flux`, so the name is fixed; the import ID is the namespace.
    fn identity(&self) -> Option<IdentitySchema> {
        Some(IdentitySchema::namespaced(
            "The namespace of the FluxInstance.",
            IdentityAttribute::fixed(
                "name",
                model::INSTANCE_NAME,
                "The name of the FluxInstance: always `flux`.",
            ),
        ))
    }

    fn validate(&self, config: &Value, diagnostics: &mut Diagnostics) {
        let mut found = Diagnostics::new();
        match decode::<model::Config>(config, Unknowns::AsNull) {
            Ok(mut model) => {
                model.unknown_variables = model::has_unknown_variables(config);
                model.validate(&mut found)
            }
            Err(e) => found.push(e.diagnostic("configuration")),
        }
        // Clients that cannot point at a nested attribute's source line still show which one.
        for d in found {
            diagnostics.push(crate::resources::fleet::path_in_detail(d));
        }
        crate::resources::fleet::validate_cluster(config, diagnostics);
    }

    async fn plan(&self, ctx: &Ctx, req: PlanRequest) -> PlanResponse {
        let target = match connection::target(ctx, &req.config) {
            Ok(t) => t,
            Err(diagnostics) => return PlanResponse::from(diagnostics),
        };
        let cluster = target.handle();
        let (stored_prior, stored_private) = (req.prior_state.clone(), req.prior_private.clone());
        // Refresh had no configuration to reach this resource's own cluster: read it now.
        let (req, read_at_plan) = fleet::read_at_plan(&target, req).await;
        let (prior, config, private) = (
            req.prior_state.clone(),
            req.config.clone(),
            req.prior_private.clone(),
        );
        let mut resp = plan::plan(req);
        read_at_plan.finish(&mut resp);
        if !resp.planned_state.is_null() && !resp.diagnostics.has_errors() {
            let planned = &resp.planned_state;
            let (operator, namespace, adopted) = futures::join!(
                operator_values::warning(&cluster, &prior, planned, &config, &private),
                plan_checks::warnings(ctx, &cluster, &prior, planned, &config, &private),
                plan_checks::adopted_instance(ctx, &cluster, &prior, &config),
            );
            let found: Vec<_> = operator
                .into_iter()
                .chain(namespace)
                .chain(adopted)
                .collect();
            for d in found {
                resp.diagnostics.push(d);
            }
        }
        crate::resources::fleet::plan_identity(&target, &stored_prior, &stored_private, &mut resp)
            .await;
        resp
    }

    async fn apply(&self, ctx: &Ctx, req: ApplyRequest) -> ApplyResponse {
        apply::apply(ctx, req).await
    }

    async fn read(&self, ctx: &Ctx, req: ReadRequest) -> ReadResponse {
        read::read(ctx, req).await
    }

    async fn import(&self, ctx: &Ctx, req: ImportRequest) -> ImportResponse {
        import::import(ctx, req, &self.schema().value_type()).await
    }

    /// 0.1.0 states (version 0) had the module's `job` without the attributes the chart
    /// resources had.
    async fn upgrade_state(&self, _ctx: &Ctx, req: UpgradeRequest) -> UpgradeResponse {
        use crate::resources::job::{Flavor, upgrade_state};
        upgrade_state(&self.schema(), self.type_name(), req, Flavor::Module)
    }
}

#[cfg(test)]
mod tests;
