//! What Read compares: the managed objects against their fingerprints, the FluxInstance, the
//! operator (Deployment and Helm release). Objects Flux has adopted are never drift. The round
//! trips run concurrently; any API error is an error (never "gone"). Each finding is a typed
//! [`Drift`]: the state's `drift` list holds its text, and plan and apply decide on the type
//! ([`Drift::parse`] reads the text back), never on matching words.

use std::fmt;

use futures::future::try_join_all;
use serde_json::Value as Json;

use super::managed::{Tracked, fingerprint};
use super::manifest::ObjectRef;
use super::objects::{self, configmaps, deployments, secrets};
use super::ownership::adopted_by_flux;
use super::{FluxError, Kube, OPERATOR_RELEASE, instance};
use crate::cluster::helm::release::{ReleaseStatus, current_release};

/// What drifted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    /// A managed Secret or the runtime-info ConfigMap.
    Managed,
    FluxInstance,
    /// The operator's Deployment.
    OperatorDeployment,
    /// The operator's Helm release.
    OperatorRelease,
    /// The bootstrap's last run (it failed).
    Run,
}

/// How it drifted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum How {
    Deleted,
    Changed,
    /// The last run failed.
    Failed,
    /// The release record's status, when it is not `deployed`.
    Status(ReleaseStatus),
}

/// One finding: `object` is `Kind/namespace/name` (`bootstrap run` for [`What::Run`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    pub what: What,
    pub object: String,
    pub how: How,
}

/// The text of the last run's failure in the `drift` list.
const RUN: &str = "bootstrap run";

impl fmt::Display for Drift {
    /// `Kind/namespace/name: deleted|changed|<release status>`, `bootstrap run: failed`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = match &self.how {
            How::Deleted => "deleted",
            How::Changed => "changed",
            How::Failed => "failed",
            How::Status(s) => s.as_str(),
        };
        write!(f, "{}: {how}", self.object)
    }
}

impl Drift {
    fn new(what: What, object: impl Into<String>, how: How) -> Drift {
        Drift {
            what,
            object: object.into(),
            how,
        }
    }

    /// The last run failed.
    pub fn run_failed() -> Drift {
        Drift::new(What::Run, RUN, How::Failed)
    }

    /// Reads back an entry of the state's `drift` list (what [`Drift`]'s `Display` wrote);
    /// `None` for text it never writes.
    pub fn parse(entry: &str) -> Option<Drift> {
        let (object, how) = entry.rsplit_once(": ")?;
        if object == RUN {
            return Some(Drift::run_failed());
        }
        let what = match object.split('/').next()? {
            "Secret" | "ConfigMap" => What::Managed,
            "FluxInstance" => What::FluxInstance,
            "Deployment" => What::OperatorDeployment,
            "Release" => What::OperatorRelease,
            _ => return None,
        };
        let how = match (what, how) {
            (_, "deleted") => How::Deleted,
            (What::OperatorRelease, status) => How::Status(ReleaseStatus::from(status)),
            (_, "changed") => How::Changed,
            _ => return None,
        };
        Some(Drift::new(what, object, how))
    }

    /// Whether apply repairs it by installing the operator's chart again (a Job), rather than
    /// natively.
    pub fn needs_operator_install(&self) -> bool {
        matches!(self.what, What::OperatorDeployment | What::OperatorRelease)
    }
}

async fn managed_one(
    kube: &Kube,
    tracked: &Tracked,
    salt: &[u8],
) -> Result<Option<Drift>, FluxError> {
    let Some(reference) = ObjectRef::parse(&tracked.object) else {
        return Ok(None);
    };
    let resource = match reference.kind.as_str() {
        "Secret" => secrets(),
        "ConfigMap" => configmaps(),
        _ => return Ok(None),
    };
    let api = objects::api(kube, &resource, Some(&reference.namespace));
    let live = objects::get(kube, &api, &reference.name, &tracked.object).await?;
    Ok(judge_managed(live.as_ref(), tracked, salt)
        .map(|how| Drift::new(What::Managed, &tracked.object, how)))
}

/// How a managed object drifted, judged on the live object alone: gone, or changed in what the
/// bootstrap sets (its fingerprint: type, the data keys, labels and annotations of the input).
/// Never drift: an object Flux's controllers adopted, and what other field managers add or own
/// beside the bootstrap's fields. The Flux Operator applies as `flux-operator`, forced, and takes
/// fields only from kustomize-controller, helm, kubectl and flux, so an object it co-owns with
/// `flux-operator-bootstrap` keeps both managers and gains the operator's labels
/// (`app.kubernetes.io/managed-by`, `fluxcd.controlplane.io/*`) and annotations
/// (`kustomize.toolkit.fluxcd.io/ssa`, `.../prune`): none of that is in the fingerprint.
pub fn judge_managed(live: Option<&Json>, tracked: &Tracked, salt: &[u8]) -> Option<How> {
    match live {
        None => Some(How::Deleted),
        Some(live) if adopted_by_flux(live) => None,
        Some(live) if fingerprint(salt, live, &tracked.keys) != tracked.fingerprint => {
            Some(How::Changed)
        }
        Some(_) => None,
    }
}

/// Drift of the managed Secrets and runtime-info ConfigMap.
pub async fn managed(
    kube: &Kube,
    tracked: &[Tracked],
    salt: &[u8],
) -> Result<Vec<Drift>, FluxError> {
    let found = try_join_all(tracked.iter().map(|t| managed_one(kube, t, salt))).await?;
    Ok(found.into_iter().flatten().collect())
}

/// Drift of the FluxInstance: gone.
pub async fn flux_instance(
    kube: &Kube,
    namespace: &str,
    name: &str,
) -> Result<Vec<Drift>, FluxError> {
    Ok(
        match instance::read_instance(kube, namespace, name).await? {
            None => vec![Drift::new(
                What::FluxInstance,
                format!("FluxInstance/{namespace}/{name}"),
                How::Deleted,
            )],
            Some(_) => Vec::new(),
        },
    )
}

/// Drift of the operator: its Deployment gone, or its Helm release failed (unless Flux owns it).
pub async fn operator(kube: &Kube, namespace: &str) -> Result<Vec<Drift>, FluxError> {
    let api = objects::api(kube, &deployments(), Some(namespace));
    let object = format!("Deployment/{namespace}/{OPERATOR_RELEASE}");
    let (deployment, release) = futures::join!(
        objects::get(kube, &api, OPERATOR_RELEASE, &object),
        current_release(
            kube.client.clone(),
            &kube.endpoint,
            namespace,
            OPERATOR_RELEASE
        ),
    );
    let deployment: Option<Json> = deployment?;
    if deployment.as_ref().is_some_and(adopted_by_flux) {
        return Ok(Vec::new());
    }
    let release = release.map_err(|source| FluxError::Cluster {
        step: format!("read the Helm release {namespace}/{OPERATOR_RELEASE}"),
        source,
    })?;
    let mut out = Vec::new();
    if deployment.is_none() {
        out.push(Drift::new(What::OperatorDeployment, object, How::Deleted));
    }
    let record = format!("Release/{namespace}/{OPERATOR_RELEASE}");
    match release {
        None => out.push(Drift::new(What::OperatorRelease, record, How::Deleted)),
        Some(r) if r.status != ReleaseStatus::Deployed => out.push(Drift::new(
            What::OperatorRelease,
            record,
            How::Status(r.status),
        )),
        Some(_) => {}
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_reads_back_as_the_drift_that_wrote_it() {
        let table = [
            Drift::new(
                What::Managed,
                "Secret/flux-system/flux-system",
                How::Deleted,
            ),
            Drift::new(
                What::Managed,
                "ConfigMap/flux-system/flux-runtime-info",
                How::Changed,
            ),
            Drift::new(
                What::FluxInstance,
                "FluxInstance/flux-system/flux",
                How::Deleted,
            ),
            Drift::new(
                What::OperatorDeployment,
                "Deployment/flux-system/flux-operator",
                How::Deleted,
            ),
            Drift::new(
                What::OperatorRelease,
                "Release/flux-system/flux-operator",
                How::Deleted,
            ),
            Drift::new(
                What::OperatorRelease,
                "Release/flux-system/flux-operator",
                How::Status(ReleaseStatus::PendingUpgrade),
            ),
            Drift::new(
                What::OperatorRelease,
                "Release/flux-system/flux-operator",
                How::Status(ReleaseStatus::Failed),
            ),
            Drift::run_failed(),
        ];
        for drift in table {
            assert_eq!(
                Drift::parse(&drift.to_string()),
                Some(drift.clone()),
                "{drift}"
            );
        }
        assert_eq!(Drift::parse("something else"), None);
        assert_eq!(Drift::parse("Pod/a/b: deleted"), None);
    }

    /// A case: its name, the live object (`None`: gone), the drift expected.
    type Case = (&'static str, Option<Json>, Option<How>);

    #[test]
    fn objects_co_owned_with_the_flux_operator_are_not_drift() {
        use serde_json::json;

        use crate::cluster::flux::managed::keys_of;
        let salt = b"salt";
        let desired = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "flux-system", "namespace": "flux-system", "labels": {"team": "platform"}},
            "stringData": {"identity": "KEY", "known_hosts": "HOSTS"},
        });
        let keys = keys_of(&desired);
        let tracked = Tracked {
            object: "Secret/flux-system/flux-system".into(),
            fingerprint: fingerprint(salt, &desired, &keys),
            keys,
        };
        let manager = |name: &str, op: &str| json!({"manager": name, "operation": op, "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {}});
        // The object as the API stores it: `stringData` folded into base64 `data`.
        let live = |labels: Json, annotations: Json, identity: &str, managers: Json| {
            json!({
                "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {
                    "name": "flux-system", "namespace": "flux-system",
                    "labels": labels, "annotations": annotations, "managedFields": managers,
                },
                "data": {"identity": identity, "known_hosts": "SE9TVFM="},
            })
        };
        let ours = json!([manager("flux-operator-bootstrap", "Apply")]);
        let both = json!([
            manager("flux-operator-bootstrap", "Apply"),
            manager("flux-operator", "Apply")
        ]);
        let operator_labels = json!({
            "team": "platform",
            "app.kubernetes.io/managed-by": "flux-operator",
            "fluxcd.controlplane.io/name": "flux",
            "fluxcd.controlplane.io/namespace": "flux-system",
        });
        let operator_annotations = json!({
            "kustomize.toolkit.fluxcd.io/ssa": "Ignore",
            "kustomize.toolkit.fluxcd.io/prune": "Disabled",
        });
        let cases: Vec<Case> = vec![
            ("gone", None, Some(How::Deleted)),
            (
                "as applied, the bootstrap's manager alone",
                Some(live(
                    json!({"team": "platform"}),
                    json!({}),
                    "S0VZ",
                    ours.clone(),
                )),
                None,
            ),
            (
                "co-owned with flux-operator, its labels and annotations added",
                Some(live(
                    operator_labels.clone(),
                    operator_annotations.clone(),
                    "S0VZ",
                    both.clone(),
                )),
                None,
            ),
            (
                "co-owned, and a field the bootstrap sets changed",
                Some(live(
                    operator_labels.clone(),
                    operator_annotations,
                    "T1RIRVI=",
                    both.clone(),
                )),
                Some(How::Changed),
            ),
            (
                "a label the bootstrap sets taken over with another value",
                Some(live(
                    json!({"team": "other", "fluxcd.controlplane.io/name": "flux"}),
                    json!({}),
                    "S0VZ",
                    both,
                )),
                Some(How::Changed),
            ),
            (
                "adopted by a Kustomization: Flux's now, whatever it holds",
                Some(live(
                    json!({"kustomize.toolkit.fluxcd.io/name": "flux-system", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}),
                    json!({}),
                    "T1RIRVI=",
                    json!([
                        manager("flux-operator-bootstrap", "Apply"),
                        manager("kustomize-controller", "Apply")
                    ]),
                )),
                None,
            ),
        ];
        for (case, object, want) in cases {
            assert_eq!(
                judge_managed(object.as_ref(), &tracked, salt),
                want,
                "{case}"
            );
        }
    }

    #[test]
    fn only_the_operator_is_repaired_by_a_chart_install() {
        let needs = |e: &str| Drift::parse(e).map(|d| d.needs_operator_install());
        assert_eq!(
            needs("Release/flux-system/flux-operator: failed"),
            Some(true)
        );
        assert_eq!(
            needs("Deployment/flux-system/flux-operator: deleted"),
            Some(true)
        );
        assert_eq!(needs("Secret/flux-system/x: changed"), Some(false));
        assert_eq!(needs("bootstrap run: failed"), Some(false));
    }
}
