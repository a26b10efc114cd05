//! Planning `talosboot_cilium` without the cluster: its defaults and the inputs its values depend
//! on, on top of the shared release plan ([`crate::resources::release::plan`]).

use super::model::{self, Cilium};
use super::schema::{AFTER_UPGRADE, UPGRADE_INPUTS};
use crate::framework::model::{Unknowns, decode};
use crate::framework::{PlanRequest, PlanResponse};
use crate::resources::release::plan::{PlanSpec, plan as plan_release};
use crate::values::Value;

pub fn plan(req: PlanRequest) -> PlanResponse {
    let merged = |planned: &Value| {
        decode::<Cilium>(planned, Unknowns::AsNull)
            .ok()
            .and_then(|c| c.merged_values().ok())
    };
    let spec = PlanSpec {
        defaults: vec![
            ("name", Value::from(model::DEFAULT_NAME)),
            ("namespace", Value::from(model::DEFAULT_NAMESPACE)),
            ("repository", Value::from(model::DEFAULT_REPOSITORY)),
            ("chart", Value::from(model::DEFAULT_CHART)),
            ("timeout", Value::from(model::DEFAULT_TIMEOUT)),
            ("wait", Value::from(true)),
            ("talos_defaults", Value::from(true)),
            (
                "api_endpoint",
                Value::from(crate::cluster::bootstrap::KUBEPRISM),
            ),
            ("adopt_existing", Value::from(false)),
            ("deletion_policy", Value::from("uninstall")),
            ("rbac", Value::from("cluster-admin")),
        ],
        value_inputs: &[
            "values",
            "set",
            "set_sensitive",
            "talos_defaults",
            "api_endpoint",
        ],
        upgrade_inputs: UPGRADE_INPUTS,
        after_upgrade: AFTER_UPGRADE,
        merged_values: &merged,
    };
    plan_release(req, &spec)
}
