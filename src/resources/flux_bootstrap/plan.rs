//! Plan: no cluster I/O. The FluxInstance's namespace comes from `instance_yaml`, the hash of the
//! write-only `managed_resources` from the salt in private state (unknown before the first apply),
//! and `drift` is planned empty: a refreshed state that listed drift therefore plans an update
//! whose diff names what drifted, and apply repairs it.

use super::model::parse_instance;
use super::private::{Private, managed_hash};
use crate::framework::{PlanRequest, PlanResponse};
use crate::values::Value;

pub fn plan(req: PlanRequest) -> PlanResponse {
    let mut planned = req.proposed_new_state;
    let private = Private::decode(&req.prior_private);
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
    let hash = managed_hash(&private.salt, req.config.attr("managed_resources"))
        .unwrap_or_else(Value::unknown);
    if let Some(attrs) = planned.attrs_mut() {
        attrs.insert("id".into(), namespace.clone());
        attrs.insert("namespace".into(), namespace);
        attrs.insert("managed_resources_hash".into(), hash);
        attrs.insert("drift".into(), Value::List(Vec::new()));
    }
    PlanResponse {
        planned_state: planned,
        ..Default::default()
    }
}
