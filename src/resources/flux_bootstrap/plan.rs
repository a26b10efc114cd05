//! Plan: no cluster I/O. The FluxInstance's namespace comes from `instance_yaml`, the hash of the
//! write-only `managed_resources` from the salt in private state (unknown before the first apply),
//! and `drift` is planned empty: a refreshed state that listed drift therefore plans an update
//! whose diff names what drifted, and apply repairs it. Managed Secrets the configuration no
//! longer lists are named in a warning: the write-only diff cannot show that apply deletes them.

use super::model::{parse_instance, parse_secrets, set_computed};
use super::private::{Private, managed_hash};
use crate::framework::{Diagnostics, PlanRequest, PlanResponse};
use crate::values::Value;

pub fn plan(req: PlanRequest) -> PlanResponse {
    let mut planned = req.proposed_new_state;
    let private = Private::decode_without_new_salt(&req.prior_private);
    let namespace = match req
        .config
        .attr("gitops_resources")
        .and_then(|g| g.attr("instance_yaml"))
    {
        Some(Value::String(text)) => parse_instance(text)
            .map(|m| Value::from(m.namespace()))
            .unwrap_or_else(|_| Value::unknown()),
        _ => Value::unknown(),
    };
    let mut diagnostics = Diagnostics::new();
    if let (Some(ns), false) = (namespace.as_str(), req.prior_state.is_null()) {
        let retired = retired_secrets(&private, req.config.attr("managed_resources"), ns);
        if !retired.is_empty() {
            diagnostics.warning(
                "Managed Secrets will be deleted",
                format!(
                    "`managed_resources` no longer lists {}: apply deletes {} (unless Flux has adopted {}), as the module does.",
                    retired.join(", "),
                    if retired.len() == 1 { "it" } else { "them" },
                    if retired.len() == 1 { "it" } else { "them" },
                ),
            );
        }
    }
    let hash = managed_hash(&private.salt, req.config.attr("managed_resources"))
        .unwrap_or_else(Value::unknown);
    set_computed(&mut planned, namespace, Some(hash));
    PlanResponse {
        planned_state: planned,
        diagnostics,
        ..Default::default()
    }
}

/// Secrets the last apply managed that the configured `managed_resources` (write-only: in the
/// configuration only, known at plan) no longer lists. Names only, never values.
fn retired_secrets(private: &Private, managed: Option<&Value>, namespace: &str) -> Vec<String> {
    let Some(managed) = managed.filter(|m| m.is_wholly_known()) else {
        return Vec::new();
    };
    let listed: Vec<String> = match managed.attr("secrets_yaml").and_then(Value::as_str) {
        Some(text) => match parse_secrets(text, namespace) {
            Ok(secrets) => secrets
                .iter()
                .map(|m| format!("{}/{}/{}", m.kind(), m.namespace(), m.name()))
                .collect(),
            // Validation reports it.
            Err(_) => return Vec::new(),
        },
        None => Vec::new(),
    };
    private
        .tracked
        .iter()
        .map(|t| t.object.clone())
        .filter(|o| o.starts_with("Secret/") && !listed.contains(o))
        .collect()
}
