//! Whose fields an adoption takes. Helm 4 installs by server-side apply; adopting objects that
//! another field manager wrote (Talos' `talos` for inline manifests, kubectl, Helm 3's
//! client-side writes) runs with `--force-conflicts`, which makes Helm the owner of every field
//! it sets. The plan names those managers, read from the objects' `managedFields` when the
//! cluster is reachable.

use std::collections::{BTreeMap, BTreeSet};

use super::release::{ManifestApis, ManifestObject, ObjectApi};
use crate::cluster::{ClusterError, Kube};

/// Helm 4's field manager (`helm`), for its server-side applies.
pub const HELM_MANAGER: &str = "helm";

/// The managers of one object's fields, as `managedFields` lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldManager {
    pub manager: String,
    /// `Apply` (server-side apply) or `Update` (a create, patch or update).
    pub operation: String,
    /// `status` for a status write (never taken by an apply of the object).
    pub subresource: Option<String>,
}

/// Whether a forced server-side apply as `helm` may take fields from this manager: every writer
/// of the object but Helm 4's own applies, status writes and the controllers (which set what no
/// chart sets: a Deployment's revision annotation). Helm's client-side writes (`helm` with
/// `Update`) count: they are another manager to the API server. Which of their fields the chart
/// sets is not known before the apply, so this names who may lose fields.
pub fn is_taken_from(m: &FieldManager) -> bool {
    !(m.manager == HELM_MANAGER && m.operation == "Apply")
        && m.subresource.as_deref().is_none_or(str::is_empty)
        && !m.manager.ends_with("-controller")
        && m.manager != "kube-controller-manager"
}

/// The managers an adoption takes fields from, each with the objects it manages
/// (`Kind namespace/name`), sorted.
pub fn taken(found: &[(String, Vec<FieldManager>)]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (object, managers) in found {
        for m in managers.iter().filter(|m| is_taken_from(m)) {
            let name = match m.operation.as_str() {
                "Apply" => m.manager.clone(),
                // Helm 3's writes are `helm` too: say which.
                _ if m.manager == HELM_MANAGER => "helm (client-side, Helm 3)".to_owned(),
                _ => m.manager.clone(),
            };
            out.entry(name).or_default().insert(object.clone());
        }
    }
    out
}

/// At most this many objects are named per manager.
const NAMED: usize = 6;

/// The plan's warning: `None` when no other manager owns a field.
pub fn taken_message(
    release: &str,
    taken: &BTreeMap<String, BTreeSet<String>>,
) -> Option<(String, String)> {
    if taken.is_empty() {
        return None;
    }
    let lines: Vec<String> = taken
        .iter()
        .map(|(manager, objects)| {
            let named: Vec<&str> = objects.iter().take(NAMED).map(String::as_str).collect();
            let more = objects.len().saturating_sub(NAMED);
            let rest = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!("  - {manager}: {}{rest}", named.join(", "))
        })
        .collect();
    Some((
        "Helm 4 takes fields from other managers".to_owned(),
        format!(
            "Release {release} adopts existing objects (`adopt_existing = true`) by server-side apply: the installer passes `--force-conflicts`, so Helm (field manager `helm`) becomes the owner of every field the chart sets, taking them from the managers that own fields of these objects now:\n{}\nLater server-side applies of those fields by another manager conflict unless forced, and client-side writes (`kubectl apply`, `kubectl edit`) change them under Helm: remove the inline manifest from the machine config or stop applying them by hand once the release owns them. With `job.apply_method = \"csa\"` (or a Helm 3 image) the adoption is a client-side three-way merge instead, which takes no ownership of fields.",
            lines.join("\n")
        ),
    ))
}

/// The field managers of each object that exists, as `Kind namespace/name`; kinds the cluster does
/// not serve and objects that do not exist are skipped.
///
/// # Errors
/// The API refused or could not be reached.
pub async fn managers_of(
    kube: &Kube,
    objects: &[ManifestObject],
    release_namespace: &str,
) -> Result<Vec<(String, Vec<FieldManager>)>, ClusterError> {
    let mut apis = ManifestApis::default();
    let mut out = Vec::new();
    for object in objects {
        let Some(ObjectApi { api, label }) = apis.api_for(kube, object, release_namespace).await?
        else {
            continue;
        };
        let live = kube
            .retry("read an object to adopt", || api.get_opt(&object.name))
            .await
            .map_err(|e| kube.cluster_error(e))?;
        let Some(live) = live else { continue };
        let managers = live
            .metadata
            .managed_fields
            .unwrap_or_default()
            .into_iter()
            .map(|m| FieldManager {
                manager: m.manager.unwrap_or_default(),
                operation: m.operation.unwrap_or_default(),
                subresource: m.subresource,
            })
            .collect();
        out.push((label, managers));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(manager: &str, operation: &str) -> FieldManager {
        FieldManager {
            manager: manager.into(),
            operation: operation.into(),
            subresource: None,
        }
    }

    #[test]
    fn an_adoption_names_every_manager_but_helm_4s_own_applies() {
        let found = vec![
            (
                "DaemonSet kube-system/cilium".to_owned(),
                vec![
                    m("talos", "Apply"),
                    m("kube-controller-manager", "Update"),
                    m("helm", "Apply"),
                    FieldManager {
                        subresource: Some("status".into()),
                        ..m("cilium-agent", "Update")
                    },
                ],
            ),
            (
                "ConfigMap kube-system/cilium-config".to_owned(),
                vec![
                    m("kubectl-client-side-apply", "Update"),
                    m("helm", "Update"),
                ],
            ),
        ];
        let taken = taken(&found);
        assert_eq!(
            taken.keys().collect::<Vec<_>>(),
            [
                "helm (client-side, Helm 3)",
                "kubectl-client-side-apply",
                "talos"
            ]
        );
        let (summary, detail) = taken_message("kube-system/cilium", &taken).expect("a warning");
        assert!(summary.contains("Helm 4"));
        assert!(
            detail.contains("  - talos: DaemonSet kube-system/cilium"),
            "{detail}"
        );
        assert!(detail.contains("--force-conflicts"));
        assert!(taken_message("x/y", &BTreeMap::new()).is_none());
    }
}
