//! Planning `talosboot_cilium` without the cluster, on top of the shared release plan
//! ([`crate::resources::release::plan`]; the defaults and what an upgrade changes are declared on
//! the schema): the inputs its values depend on, the Service-IP warning and the version checks.

use super::model::Cilium;
use crate::cluster::cilium::running_config::kube_proxy_replacement_on;
use crate::framework::PlanResponse;
use crate::framework::model::{Unknowns, decode};
use crate::values::Value;

/// Inputs whose change alone is no upgrade when the values they make are what the cluster has.
pub const VALUE_INPUTS: &[&str] = &[
    "values",
    "set",
    "set_sensitive",
    "talos_defaults",
    "kube_proxy_replacement",
    "api_endpoint",
    "upgrade_compatibility",
];

/// What Cilium adds to the shared plan: a warning when its agents would need the Service IP, and
/// the values checked against the chart version ([`super::versions`]).
pub fn plan(config: &Value, resp: &mut PlanResponse) {
    if let Some(warning) = service_host_warning(config, &resp.planned_state) {
        resp.diagnostics
            .warning("Cilium would need the Service IP before it exists", warning);
    }
    if let Some(cilium) = planned_with_known_values(config, &resp.planned_state) {
        resp.diagnostics.extend(super::versions::check(&cilium));
    }
}

/// Inputs the merged values are made of (beside the planned object, the write-only `set_wo` of
/// the configuration).
const VALUE_SOURCES: &[&str] = &[
    "values",
    "set",
    "set_sensitive",
    "set_wo",
    "values_wo",
    "talos_defaults",
    "kube_proxy_replacement",
    "api_endpoint",
    "upgrade_compatibility",
];

/// The planned model with the configuration's write-only values, when every input its values are
/// made of is known at plan; `None` otherwise (a check of the values then waits for apply).
pub fn planned_with_known_values(config: &Value, planned: &Value) -> Option<Cilium> {
    let known = VALUE_SOURCES.iter().all(|a| {
        config.attr(a).is_none_or(Value::is_wholly_known)
            && planned.attr(a).is_none_or(Value::is_wholly_known)
    });
    if !known {
        return None;
    }
    let mut with_write_only = planned.clone();
    for name in crate::resources::release::plan::WRITE_ONLY_VALUE_INPUTS {
        if let (Some(attrs), Some(wo)) = (with_write_only.attrs_mut(), config.attr(name)) {
            attrs.insert((*name).into(), wo.clone());
        }
    }
    decode::<Cilium>(&with_write_only, Unknowns::AsNull).ok()
}

/// With `kubeProxyReplacement` on, the agents reach the API at `k8sServiceHost`; without it they
/// use the `kubernetes` Service IP, which only Cilium itself makes work: a fresh cluster never
/// gets its CNI. Talos defaults set it; a configuration that turned them off and forgot it (or
/// misspelled it) is told at plan, not after a timeout.
fn service_host_warning(config: &Value, planned: &Value) -> Option<String> {
    if planned.attr("talos_defaults").and_then(Value::as_bool) != Some(false) {
        return None;
    }
    let values = planned_with_known_values(config, planned)?
        .merged_values()
        .ok()?;
    let on = kube_proxy_replacement_on(values.get("kubeProxyReplacement"));
    let host = values
        .get("k8sServiceHost")
        .and_then(serde_json::Value::as_str)
        .filter(|h| !h.is_empty() && *h != "auto");
    (on && host.is_none()).then(|| {
        "`kubeProxyReplacement` is on but `k8sServiceHost` is not set (with `talos_defaults = false` talosboot sets neither): the agents would dial the `kubernetes` Service IP, which no CNI serves yet, and the install would time out. Set `k8sServiceHost`/`k8sServicePort` to an endpoint outside the Service CIDR (Talos KubePrism `localhost`/`7445`), or keep `talos_defaults = true`.".to_owned()
    })
}
