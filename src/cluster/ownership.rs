//! Who manages an object, decided once from its labels and annotations: a GitOps tool that took
//! it over (Argo CD, Flux's helm-controller or kustomize-controller, the Flux Operator), or
//! nobody but its installer. The chart resources leave a release whose workloads another tool
//! manages alone (no upgrade, even without a refresh), and the Flux bootstrap never touches an
//! object or namespace such a tool adopted.
//!
//! The marks, as each tool writes them:
//! - Argo CD 3 tracks by the annotation `argocd.argoproj.io/tracking-id`
//!   (`<application>:<group>/<kind>:<namespace>/<name>`, the application prefixed with its
//!   namespace and `_` outside Argo CD's own namespace); Argo CD 2's default, still selectable,
//!   is the label `argocd.argoproj.io/instance` (`<application>`).
//! - Flux's helm-controller labels what it installs `helm.toolkit.fluxcd.io/name` and
//!   `helm.toolkit.fluxcd.io/namespace` (the HelmRelease); kustomize-controller
//!   `kustomize.toolkit.fluxcd.io/name` and `/namespace` (the Kustomization).
//! - The Flux Operator labels what a FluxInstance applies `fluxcd.controlplane.io/name` and
//!   `/namespace`, and what a ResourceSet applies `resourceset.fluxcd.controlplane.io/name` and
//!   `/namespace`.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value as Json;

/// Argo CD 3's default tracking annotation.
pub const ARGOCD_TRACKING_ID: &str = "argocd.argoproj.io/tracking-id";
/// Argo CD's label tracking (the default before 3.0).
pub const ARGOCD_INSTANCE: &str = "argocd.argoproj.io/instance";

/// The tool that manages an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Manager {
    /// An Argo CD Application (`namespace_name` for applications outside Argo CD's namespace).
    ArgoCd { application: String },
    /// A Flux HelmRelease (helm-controller).
    FluxHelmRelease { reference: Reference },
    /// A Flux Kustomization (kustomize-controller).
    FluxKustomization { reference: Reference },
    /// The Flux Operator, for the FluxInstance or ResourceSet `reference`.
    FluxOperator {
        kind: OperatorKind,
        reference: Reference,
    },
}

/// What in the Flux Operator applied an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorKind {
    FluxInstance,
    ResourceSet,
}

/// `namespace/name` of the managing object, as its labels give them (the namespace label may be
/// missing on objects written by old controllers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub namespace: Option<String>,
    pub name: String,
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

impl fmt::Display for Manager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Manager::ArgoCd { application } => write!(f, "Argo CD Application {application:?}"),
            Manager::FluxHelmRelease { reference } => {
                write!(f, "Flux HelmRelease \"{reference}\"")
            }
            Manager::FluxKustomization { reference } => {
                write!(f, "Flux Kustomization \"{reference}\"")
            }
            Manager::FluxOperator { kind, reference } => {
                let kind = match kind {
                    OperatorKind::FluxInstance => "FluxInstance",
                    OperatorKind::ResourceSet => "ResourceSet",
                };
                write!(f, "the Flux Operator ({kind} \"{reference}\")")
            }
        }
    }
}

impl Manager {
    /// Whether this manager adopts the objects it is given (helm-controller, kustomize-controller,
    /// Argo CD), as opposed to the Flux Operator, which only marks the namespaces and objects
    /// of its own distribution. The Flux bootstrap hands objects over to the former; a namespace
    /// is handed over to any.
    pub fn adopts_objects(&self) -> bool {
        !matches!(self, Manager::FluxOperator { .. })
    }
}

/// The manager of an object with these labels and annotations, or `None`. When several tools
/// left their marks, the one that applies the object now comes first: Flux's controllers (which
/// re-label on every apply), then Argo CD (annotation, then label), then the Flux Operator.
pub fn manager_of(
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Option<Manager> {
    let reference = |prefix: &str| {
        labels.get(&format!("{prefix}/name")).map(|name| Reference {
            namespace: labels.get(&format!("{prefix}/namespace")).cloned(),
            name: name.clone(),
        })
    };
    if let Some(reference) = reference("helm.toolkit.fluxcd.io") {
        return Some(Manager::FluxHelmRelease { reference });
    }
    if let Some(reference) = reference("kustomize.toolkit.fluxcd.io") {
        return Some(Manager::FluxKustomization { reference });
    }
    let tracked = annotations
        .get(ARGOCD_TRACKING_ID)
        .and_then(|id| id.split_once(':').map(|(app, _)| app))
        .filter(|app| !app.is_empty());
    if let Some(application) = tracked.or(labels.get(ARGOCD_INSTANCE).map(String::as_str)) {
        return Some(Manager::ArgoCd {
            application: application.to_owned(),
        });
    }
    for (prefix, kind) in [
        ("fluxcd.controlplane.io", OperatorKind::FluxInstance),
        (
            "resourceset.fluxcd.controlplane.io",
            OperatorKind::ResourceSet,
        ),
    ] {
        if let Some(reference) = reference(prefix) {
            return Some(Manager::FluxOperator { kind, reference });
        }
    }
    None
}

/// [`manager_of`] an object as JSON (`metadata.labels`, `metadata.annotations`).
pub fn manager_of_object(object: &Json) -> Option<Manager> {
    let map = |pointer: &str| -> BTreeMap<String, String> {
        object
            .pointer(pointer)
            .and_then(Json::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    };
    manager_of(&map("/metadata/labels"), &map("/metadata/annotations"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn reference(namespace: Option<&str>, name: &str) -> Reference {
        Reference {
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        }
    }

    /// A case: its name, the object's labels, its annotations, the manager expected.
    type Case<'a> = (
        &'a str,
        &'a [(&'a str, &'a str)],
        &'a [(&'a str, &'a str)],
        Option<Manager>,
    );

    #[test]
    fn every_tool_is_named_by_the_marks_it_writes() {
        let argo = |app: &str| {
            Some(Manager::ArgoCd {
                application: app.into(),
            })
        };
        let cases: Vec<Case> = vec![
            (
                "nothing",
                &[("app.kubernetes.io/managed-by", "Helm")],
                &[("meta.helm.sh/release-name", "cilium")],
                None,
            ),
            (
                "Argo CD 3 annotation",
                &[],
                &[(
                    ARGOCD_TRACKING_ID,
                    "cilium:apps/DaemonSet:kube-system/cilium",
                )],
                argo("cilium"),
            ),
            (
                "Argo CD 3 annotation, application in another namespace",
                &[],
                &[(
                    ARGOCD_TRACKING_ID,
                    "team-a_cilium:apps/DaemonSet:kube-system/cilium",
                )],
                argo("team-a_cilium"),
            ),
            (
                "Argo CD label",
                &[(ARGOCD_INSTANCE, "cilium")],
                &[],
                argo("cilium"),
            ),
            (
                "Argo CD annotation wins over a stale label",
                &[(ARGOCD_INSTANCE, "old")],
                &[(
                    ARGOCD_TRACKING_ID,
                    "new:apps/Deployment:kube-system/cilium-operator",
                )],
                argo("new"),
            ),
            (
                "a tracking id without an application is no mark",
                &[],
                &[(ARGOCD_TRACKING_ID, "garbage")],
                None,
            ),
            (
                "Flux helm-controller",
                &[
                    ("helm.toolkit.fluxcd.io/name", "cilium"),
                    ("helm.toolkit.fluxcd.io/namespace", "flux-system"),
                ],
                &[],
                Some(Manager::FluxHelmRelease {
                    reference: reference(Some("flux-system"), "cilium"),
                }),
            ),
            (
                "Flux helm-controller, name only",
                &[("helm.toolkit.fluxcd.io/name", "cilium")],
                &[],
                Some(Manager::FluxHelmRelease {
                    reference: reference(None, "cilium"),
                }),
            ),
            (
                "Flux Kustomization",
                &[
                    ("kustomize.toolkit.fluxcd.io/name", "flux-system"),
                    ("kustomize.toolkit.fluxcd.io/namespace", "flux-system"),
                ],
                &[],
                Some(Manager::FluxKustomization {
                    reference: reference(Some("flux-system"), "flux-system"),
                }),
            ),
            (
                "Flux Operator (FluxInstance)",
                &[
                    ("fluxcd.controlplane.io/name", "flux"),
                    ("fluxcd.controlplane.io/namespace", "flux-system"),
                    ("app.kubernetes.io/managed-by", "flux-operator"),
                ],
                &[],
                Some(Manager::FluxOperator {
                    kind: OperatorKind::FluxInstance,
                    reference: reference(Some("flux-system"), "flux"),
                }),
            ),
            (
                "Flux Operator (ResourceSet)",
                &[
                    ("resourceset.fluxcd.controlplane.io/name", "apps"),
                    (
                        "resourceset.fluxcd.controlplane.io/namespace",
                        "flux-system",
                    ),
                ],
                &[],
                Some(Manager::FluxOperator {
                    kind: OperatorKind::ResourceSet,
                    reference: reference(Some("flux-system"), "apps"),
                }),
            ),
            (
                "Flux's controller applies it now, over Argo CD's old mark",
                &[
                    ("kustomize.toolkit.fluxcd.io/name", "infra"),
                    (ARGOCD_INSTANCE, "old"),
                ],
                &[],
                Some(Manager::FluxKustomization {
                    reference: reference(None, "infra"),
                }),
            ),
        ];
        for (case, labels, annotations, want) in cases {
            assert_eq!(manager_of(&map(labels), &map(annotations)), want, "{case}");
        }
    }

    #[test]
    fn managers_read_as_users_know_them() {
        for (manager, text) in [
            (
                Manager::ArgoCd {
                    application: "cilium".into(),
                },
                "Argo CD Application \"cilium\"",
            ),
            (
                Manager::FluxHelmRelease {
                    reference: reference(Some("flux-system"), "cilium"),
                },
                "Flux HelmRelease \"flux-system/cilium\"",
            ),
            (
                Manager::FluxKustomization {
                    reference: reference(None, "apps"),
                },
                "Flux Kustomization \"apps\"",
            ),
            (
                Manager::FluxOperator {
                    kind: OperatorKind::FluxInstance,
                    reference: reference(Some("flux-system"), "flux"),
                },
                "the Flux Operator (FluxInstance \"flux-system/flux\")",
            ),
        ] {
            assert_eq!(manager.to_string(), text);
        }
    }

    #[test]
    fn json_objects_are_read_by_their_metadata() {
        let object = serde_json::json!({"metadata": {
            "name": "cilium",
            "annotations": {ARGOCD_TRACKING_ID: "cni:apps/DaemonSet:kube-system/cilium", "n": 1},
        }});
        assert_eq!(
            manager_of_object(&object),
            Some(Manager::ArgoCd {
                application: "cni".into()
            })
        );
        assert_eq!(
            manager_of_object(&serde_json::json!({"metadata": {}})),
            None
        );
        let operator = Manager::FluxOperator {
            kind: OperatorKind::FluxInstance,
            reference: reference(None, "flux"),
        };
        assert!(!operator.adopts_objects());
        assert!(
            Manager::ArgoCd {
                application: "a".into()
            }
            .adopts_objects()
        );
    }
}
