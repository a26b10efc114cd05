//! PlanResourceChange: validation first, unset computed values unknown on a change, the declared
//! defaults, the resource's plan, then requires-replace from the schema and write-only values
//! nulled.

use super::*;

impl Dispatcher {
    pub async fn plan(&self, type_name: &str, mut req: PlanRequest) -> PlanResponse {
        tracing::debug!(type_name, "plan");
        let r = match self.resource(type_name) {
            Ok(r) => r,
            Err(diagnostics) => return PlanResponse::from(diagnostics),
        };
        if req.proposed_new_state.is_null() {
            // Destroy: nothing to plan beyond the null.
            return PlanResponse {
                private: Some(req.prior_private),
                ..Default::default()
            };
        }
        let mut diagnostics = Diagnostics::new();
        let validated = validate_guarded(type_name, || {
            r.implementation.validate(&req.config, &mut diagnostics)
        });
        if let Err(panicked) = validated {
            diagnostics = panicked;
        }
        if diagnostics.has_errors() {
            locatable_paths(&mut diagnostics, &r.schema().block);
            return PlanResponse::from(diagnostics);
        }
        if req.prior_state.is_null()
            || changes(r.schema(), &req.prior_state, &req.proposed_new_state)
        {
            // Like terraform-plugin-framework: only a create or a change makes unset computed
            // values unknown; an unchanged resource keeps its (possibly null) computed values.
            mark_unset_computed_unknown(
                &r.schema().block,
                &mut req.proposed_new_state,
                &req.config,
            );
        }
        // Declared defaults, as terraform-plugin-framework applies attribute defaults: the
        // resource plans from them and never re-derives them.
        crate::framework::plan::apply_defaults(
            &r.schema().block,
            &mut req.proposed_new_state,
            &req.config,
        );
        let (prior, prior_private) = (req.prior_state.clone(), req.prior_private.clone());
        let mut resp =
            match guarded(type_name, "plan", r.implementation.plan(&self.ctx(), req)).await {
                Ok(resp) => resp,
                Err(diagnostics) => return PlanResponse::from(diagnostics),
            };
        if !prior.is_null() && !resp.planned_state.is_null() {
            for path in requires_replace(&r.schema().block, &prior, &resp.planned_state) {
                if !resp.requires_replace.contains(&path) {
                    resp.requires_replace.push(path);
                }
            }
        }
        null_write_only(&r.schema().block, &mut resp.planned_state);
        resp.private.get_or_insert(prior_private);
        diagnostics.extend(std::mem::take(&mut resp.diagnostics));
        resp.diagnostics = diagnostics;
        resp
    }
}

/// Whether `proposed` differs from `prior`, sets compared as sets and write-only values (never in
/// prior state) left out.
fn changes(schema: &Schema, prior: &Value, proposed: &Value) -> bool {
    let (mut prior, mut proposed) = (prior.clone(), proposed.clone());
    null_write_only(&schema.block, &mut prior);
    null_write_only(&schema.block, &mut proposed);
    prior != proposed
}
