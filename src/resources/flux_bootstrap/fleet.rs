//! The Flux bootstrap's side of a fleet: what is its own when it names its own cluster through
//! `cluster` (the shared part is `crate::resources::fleet`). Refresh has no configuration and
//! keeps such a state as it is ([`super::read`]); [`read_at_plan`] makes the drift read there
//! instead, so that the prior state the plan starts from lists what drifted, and
//! [`ReadAtPlan::finish`] plans `drift` as "known after apply" when something did: the CLI's
//! prior (the stored state, `drift = []`) would otherwise equal the plan and nothing would be
//! repaired. The "Apply repairs what drifted" warning names each entry, as after a refresh.
//!
//! An import receives only the namespace ([`super::import`]), so the plan checks that the
//! FluxInstance is on the cluster the resource reaches (its `cluster`, or the provider's
//! connection), an error when it is not: an import never bootstraps anything.

use super::model::INSTANCE_NAME;
use super::private::Private;
use super::read::drifted;
use crate::cluster::flux::instance::read_instance;
use crate::framework::Diagnostic;
use crate::framework::plan::mark_unknown;
use crate::framework::{Diagnostics, PlanRequest, PlanResponse};
use crate::resources::connection::Target;
use crate::resources::fleet::{
    not_there_to_import, read_import, read_own_cluster, reads_at_plan, reads_import,
};
use crate::values::Value;

/// What [`read_at_plan`] found, for [`ReadAtPlan::finish`].
#[derive(Default)]
pub struct ReadAtPlan {
    /// Something drifted (or the last run failed): the apply runs and repairs it.
    drifted: bool,
    diagnostics: Diagnostics,
}

impl ReadAtPlan {
    /// Adds what the read found to the plan: its warnings, and `drift` unknown (an update) when
    /// something drifted.
    pub fn finish(self, resp: &mut PlanResponse) {
        resp.diagnostics.extend(self.diagnostics);
        if self.drifted && !resp.planned_state.is_null() {
            mark_unknown(&mut resp.planned_state, &["drift"]);
        }
    }
}

/// With the resource's own `cluster` and a prior state: the drift read the ReadResource could
/// not make (it has no configuration), put into the prior state the plan starts from. Anything
/// else, or a cluster that cannot be read in time (then with a warning), plans from the stored
/// state.
pub async fn read_at_plan(target: &Target, mut req: PlanRequest) -> (PlanRequest, ReadAtPlan) {
    let mut found = ReadAtPlan::default();
    let Some(namespace) = req
        .prior_state
        .attr("namespace")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return (req, found);
    };
    let private = Private::decode_without_new_salt(&req.prior_private);
    let label = format!("the Flux bootstrap of {namespace}");
    if !req.proposed_new_state.is_null() && reads_import(target, &req.prior_private) {
        let (namespace, private) = (&namespace, &private);
        // An import names its object without an article: "the imported Flux bootstrap of ...".
        let import_label = format!("Flux bootstrap of {namespace}");
        // As the chart resources' imports: the read says what is there (the drift, or `None`
        // for no FluxInstance), and not being there is its own error, not a failed read.
        let read = read_import(target, &import_label, |kube| async move {
            let instance = read_instance(&kube, namespace, INSTANCE_NAME)
                .await
                .map_err(|e| {
                    Diagnostic::error("Failed to read the FluxInstance", format!("{e}."))
                })?;
            let entries = match instance {
                Some(_) => Some(
                    drifted(&kube, namespace, private)
                        .await
                        .map_err(|e| super::read::diagnostic(&e))?,
                ),
                None => None,
            };
            Ok((kube, entries))
        })
        .await;
        match read {
            Ok((_, Some(entries))) => found.drifted = set_drift(&mut req.prior_state, entries),
            Ok((kube, None)) => found.diagnostics.push(not_there_to_import(
                &format!("FluxInstance {namespace}/{INSTANCE_NAME}"),
                &kube.endpoint,
            )),
            Err(d) => found.diagnostics.push(d),
        }
        return (req, found);
    }
    if !reads_at_plan(target, &req).await {
        return (req, found);
    }
    let (namespace, private) = (&namespace, &private);
    let read = read_own_cluster(target, &label, &mut found.diagnostics, |kube| async move {
        let entries = drifted(&kube, namespace, private)
            .await
            .map_err(|e| super::read::diagnostic(&e))?;
        Ok((kube, entries))
    })
    .await;
    if let Some((_, entries)) = read {
        found.drifted = set_drift(&mut req.prior_state, entries);
    }
    (req, found)
}

/// `state`'s `drift` set to `entries`; whether there are any.
pub(super) fn set_drift(state: &mut Value, entries: Vec<String>) -> bool {
    let any = !entries.is_empty();
    if let Some(attrs) = state.attrs_mut() {
        attrs.insert(
            "drift".into(),
            Value::List(entries.into_iter().map(Value::from).collect()),
        );
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_found_at_plan_is_planned_as_known_after_apply_and_none_is_not() {
        let mut prior = Value::object([("drift", Value::List(Vec::new()))]);
        assert!(set_drift(
            &mut prior,
            vec!["Secret/flux-system/flux-git: deleted".into()]
        ));
        assert_eq!(
            prior.attr("drift"),
            Some(&Value::List(vec![Value::from(
                "Secret/flux-system/flux-git: deleted"
            )]))
        );
        let planned = || Value::object([("drift", Value::List(Vec::new()))]);
        let mut resp = PlanResponse {
            planned_state: planned(),
            ..Default::default()
        };
        ReadAtPlan {
            drifted: true,
            ..Default::default()
        }
        .finish(&mut resp);
        assert!(
            resp.planned_state
                .attr("drift")
                .is_some_and(Value::is_unknown)
        );
        let mut clean = PlanResponse {
            planned_state: planned(),
            ..Default::default()
        };
        assert!(!set_drift(&mut prior, Vec::new()));
        ReadAtPlan::default().finish(&mut clean);
        assert_eq!(clean.planned_state, planned(), "no drift: an empty plan");
    }
}
