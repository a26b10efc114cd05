//! ApplyResourceChange: the safety nets around a resource's apply (state kept when it fails after
//! the object exists, write-only values nulled, missing state after create reported as a bug).

use super::*;

impl Dispatcher {
    pub async fn apply(&self, type_name: &str, req: ApplyRequest) -> ApplyResponse {
        tracing::debug!(type_name, "apply");
        let r = match self.resource(type_name) {
            Ok(r) => r,
            Err(diagnostics) => {
                return ApplyResponse {
                    new_state: req.prior_state,
                    diagnostics,
                    private: Some(req.planned_private),
                };
            }
        };
        let creating = req.prior_state.is_null();
        let destroying = req.planned_state.is_null();
        let (prior_state, prior_private) = (req.prior_state.clone(), req.planned_private.clone());
        let ctx = self.ctx();
        let apply = r.implementation.apply(&ctx, req);
        let mut resp = guarded_response(type_name, "apply", apply).await;
        let failed = resp.diagnostics.has_errors();
        if destroying && !failed {
            resp.new_state = Value::Null;
        } else if resp.new_state.is_null() && !creating {
            // A failed update or destroy: the object may still exist, keep it rather than forget it.
            if !failed {
                resp.diagnostics.error(
                    "Provider produced no state",
                    format!("{type_name} reported success but returned no state after an update. This is a bug in the provider; please report it."),
                );
            }
            resp.new_state = prior_state;
            resp.private = Some(prior_private.clone());
        } else if resp.new_state.is_null() && !failed && !destroying {
            resp.diagnostics.error(
                "Provider produced no state",
                format!("{type_name} reported success but returned no state after create. This is a bug in the provider; please report it."),
            );
        }
        null_write_only(&r.schema().block, &mut resp.new_state);
        resp.private.get_or_insert(prior_private);
        resp
    }
}
