//! The bootstrap namespace's Pod Security level. The module created its namespace without the
//! label, so on Talos (`baseline` enforced everywhere but `kube-system`) the first host-network
//! Job in it, possibly months after the migration, is refused (`FailedCreate`). The namespace is
//! the bootstrap's own: a namespace that exists with no `enforce` label at all gets
//! `privileged`, before any Job runs; one whose `enforce` label someone set is left as it is (the
//! engine then refuses at once, naming the label and the command).

use kube::api::{Patch, PatchParams};
use serde_json::{Value as Json, json};

use super::objects::{self, namespaces};
use super::{FluxError, Kube};

use crate::cluster::client::{PSA_ENFORCE, PSA_PRIVILEGED};

/// What the bootstrap namespace needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needed {
    /// Missing (the run creates it labelled), labelled already, or the Job is not on the host
    /// network: nothing to do.
    Nothing,
    /// It exists without an `enforce` label: apply labels it `privileged`.
    Label,
}

/// Whether `namespace`, as read, needs the label (pure).
pub fn needed(namespace: Option<&Json>, host_network: bool) -> Needed {
    let unlabelled = namespace.is_some_and(|ns| {
        ns.pointer("/metadata/labels")
            .and_then(|l| l.get(PSA_ENFORCE))
            .is_none()
    });
    match host_network && unlabelled {
        true => Needed::Label,
        false => Needed::Nothing,
    }
}

/// Reads the namespace and says what it needs.
///
/// # Errors
/// The API refused or could not be reached.
pub async fn check(kube: &Kube, name: &str, host_network: bool) -> Result<Needed, FluxError> {
    let api = objects::api(kube, &namespaces(), None);
    let found = objects::get(kube, &api, name, &format!("Namespace {name}")).await?;
    Ok(needed(found.as_ref(), host_network))
}

/// Labels the namespace `privileged` when [`check`] says so; true when it did.
///
/// # Errors
/// The API refused or could not be reached.
pub async fn ensure(kube: &Kube, name: &str, host_network: bool) -> Result<bool, FluxError> {
    if check(kube, name, host_network).await? != Needed::Label {
        return Ok(false);
    }
    let api = objects::api(kube, &namespaces(), None);
    let patch = json!({"metadata": {"labels": {PSA_ENFORCE: PSA_PRIVILEGED}}});
    let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
    kube.retry("label the namespace", || api.patch(name, &params, &patch))
        .await
        .map_err(|e| {
            kube.error(
                format!("label namespace {name} {PSA_ENFORCE}={PSA_PRIVILEGED}"),
                e,
            )
        })?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_existing_namespace_without_an_enforce_label_is_labelled_for_host_network_jobs() {
        let bare = json!({"metadata": {"name": "flux-operator-bootstrap"}});
        let other = json!({"metadata": {"labels": {"team": "platform"}}});
        let baseline = json!({"metadata": {"labels": {PSA_ENFORCE: "baseline"}}});
        let privileged = json!({"metadata": {"labels": {PSA_ENFORCE: PSA_PRIVILEGED}}});
        assert_eq!(needed(Some(&bare), true), Needed::Label);
        assert_eq!(needed(Some(&other), true), Needed::Label);
        assert_eq!(
            needed(Some(&baseline), true),
            Needed::Nothing,
            "someone chose it"
        );
        assert_eq!(needed(Some(&privileged), true), Needed::Nothing);
        assert_eq!(needed(None, true), Needed::Nothing, "created labelled");
        assert_eq!(needed(Some(&bare), false), Needed::Nothing, "pod network");
    }
}
