//! Talos 1.13+'s bootstrap-manifest inventory, and taking a Helm release's objects out of it.
//!
//! From Talos 1.13 the node records every object of its bootstrap manifests (inline manifests
//! included) in ConfigMap `kube-system/talos-bootstrap-manifests-inventory`: one `data` key per
//! object, `<namespace>_<name>_<group>_<kind>` (namespace empty for cluster-scoped objects, group
//! empty for the core group, a `:` in an RBAC name written `__`), value empty. What it creates
//! also gets the annotation `config.k8s.io/owning-inventory: talos-bootstrap-manifests-inventory`;
//! what already existed is recorded without it. `talosctl upgrade-k8s` then prunes, by default,
//! every entry its desired set (the manifests the machine config lists now) no longer names, when
//! the live object's annotation names this inventory **or is absent** (go-kubernetes'
//! `AdoptIfNoInventory` policy), and it never prunes an object the inventory does not list.
//!
//! So once a Helm release has adopted the objects of an inline manifest, the inline manifest can
//! leave the machine config only if those objects leave the inventory: removing the annotation
//! alone does not protect them. [`release_from_talos`] removes the release's entries (a merge
//! patch deleting exactly those keys, conditional on the ConfigMap's `resourceVersion`, re-read on
//! a conflict) and then the annotation from those of its objects that carry Talos'. The annotation
//! goes too because a Helm-owned object should not claim another tool's ownership: should the
//! entries come back (the node re-records existing objects of a manifest it still lists), the
//! object is not also marked as Talos'.
//!
//! No inventory (Talos 1.12 and older, or a cluster that is not Talos) means nothing to do.
//! The rules and where they were read (siderolabs/talos v1.13.9 and release-1.14,
//! siderolabs/go-kubernetes v0.2.38/v0.2.41) are in `docs/guides/migrating-cilium.md`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value as Json, json};

use crate::cluster::helm::release::{ManifestApis, ManifestObject, ObjectApi};
use crate::cluster::{ClusterError, Kube};

/// Where Talos keeps the inventory.
pub const INVENTORY_NAMESPACE: &str = "kube-system";
/// Talos' inventory ConfigMap; also the inventory ID the annotation carries.
pub const INVENTORY_NAME: &str = "talos-bootstrap-manifests-inventory";
/// The annotation naming the inventory that owns an object.
pub const OWNING_INVENTORY: &str = "config.k8s.io/owning-inventory";

/// How many times an edit that met a concurrent write of the inventory is tried again.
const CONFLICT_ATTEMPTS: usize = 5;

const RBAC_KINDS: [&str; 4] = ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"];

/// One entry of the inventory.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    /// Empty for a cluster-scoped object.
    pub namespace: String,
    pub name: String,
    /// Empty for the core group.
    pub group: String,
    pub kind: String,
}

impl Entry {
    /// Parses a key: the namespace up to the first `_`, the kind after the last, the group
    /// between the last two, the rest the name (`__` read as `:`). `None`: not an entry.
    pub fn parse(key: &str) -> Option<Entry> {
        let (namespace, rest) = key.split_once('_')?;
        let (rest, kind) = rest.rsplit_once('_')?;
        let (name, group) = rest.rsplit_once('_')?;
        (!name.is_empty() && !kind.is_empty()).then(|| Entry {
            namespace: namespace.to_owned(),
            name: name.replace("__", ":"),
            group: group.to_owned(),
            kind: kind.to_owned(),
        })
    }

    /// The key Talos writes for this entry.
    pub fn key(&self) -> String {
        let rbac =
            self.group == "rbac.authorization.k8s.io" && RBAC_KINDS.contains(&self.kind.as_str());
        let name = match rbac {
            true => self.name.replace(':', "__"),
            false => self.name.clone(),
        };
        format!("{}_{}_{}_{}", self.namespace, name, self.group, self.kind)
    }

    /// Whether this entry is `object` of a release in `release_namespace`: same group (from the
    /// object's `apiVersion`), kind and name; an entry without namespace is a cluster-scoped
    /// object whatever namespace the manifest wrote (Talos drops it), one with a namespace must
    /// be the object's (the release namespace when the manifest gives none).
    pub fn is(&self, object: &ManifestObject, release_namespace: &str) -> bool {
        let group = object
            .api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group);
        let namespace = object.namespace.as_deref().unwrap_or(release_namespace);
        self.group == group
            && self.kind == object.kind
            && self.name == object.name
            && (self.namespace.is_empty() || self.namespace == namespace)
    }
}

impl std::fmt::Display for Entry {
    /// `Kind.group namespace/name`, kubectl's spelling (`DaemonSet.apps kube-system/cilium`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.kind)?;
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        match self.namespace.as_str() {
            "" => write!(f, " {}", self.name),
            ns => write!(f, " {ns}/{}", self.name),
        }
    }
}

/// The inventory as read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Inventory {
    /// For a conditional edit.
    pub resource_version: Option<String>,
    /// Every key, parsed or not (a key that does not parse is never touched).
    pub keys: Vec<String>,
}

impl Inventory {
    /// The inventory of a ConfigMap's data.
    pub fn from_data(resource_version: Option<String>, data: &BTreeMap<String, String>) -> Self {
        Inventory {
            resource_version,
            keys: data.keys().cloned().collect(),
        }
    }

    /// The entries that are objects of the release, with their keys, in key order.
    pub fn entries_of(
        &self,
        objects: &[ManifestObject],
        release_namespace: &str,
    ) -> Vec<(String, Entry)> {
        self.keys
            .iter()
            .filter_map(|key| Some((key.clone(), Entry::parse(key)?)))
            .filter(|(_, entry)| objects.iter().any(|o| entry.is(o, release_namespace)))
            .collect()
    }

    /// The merge patch that deletes exactly `keys`, conditional on the version read.
    pub fn removal_patch(&self, keys: &[String]) -> Json {
        let data: serde_json::Map<String, Json> =
            keys.iter().map(|k| (k.clone(), Json::Null)).collect();
        json!({
            "metadata": {"resourceVersion": self.resource_version},
            "data": data,
        })
    }
}

/// Reads Talos' inventory; `None` when there is none (Talos before 1.13, or not Talos).
///
/// # Errors
/// The API's refusal, or a connection that stays broken (transient errors are retried).
pub async fn read(kube: &Kube) -> Result<Option<Inventory>, ClusterError> {
    let api: Api<ConfigMap> = Api::namespaced(kube.client.clone(), INVENTORY_NAMESPACE);
    let found = kube
        .retry("read Talos' manifest inventory", || {
            api.get_opt(INVENTORY_NAME)
        })
        .await
        .map_err(|e| kube.cluster_error(e))?;
    Ok(found.map(|cm| {
        Inventory::from_data(
            cm.metadata.resource_version.clone(),
            &cm.data.unwrap_or_default(),
        )
    }))
}

/// What [`release_from_talos`] changed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Released {
    /// Whether the cluster has a Talos inventory at all.
    pub inventory_found: bool,
    /// The entries taken out of the inventory.
    pub entries: Vec<Entry>,
    /// The objects whose owning-inventory annotation was removed, as `Kind namespace/name`.
    pub annotations: Vec<String>,
}

impl Released {
    /// Whether anything in the cluster changed.
    pub fn changed(&self) -> bool {
        !self.entries.is_empty() || !self.annotations.is_empty()
    }
}

/// Takes the objects of a release out of Talos' inventory and removes Talos' owning-inventory
/// annotation from them (see the module docs). Idempotent: a second call changes nothing.
///
/// # Errors
/// The API's refusal, a connection that stays broken (transient errors are retried), or an
/// inventory that kept changing under [`CONFLICT_ATTEMPTS`] edits.
pub async fn release_from_talos(
    kube: &Kube,
    objects: &[ManifestObject],
    release_namespace: &str,
) -> Result<Released, ClusterError> {
    let mut released = Released::default();
    let api: Api<ConfigMap> = Api::namespaced(kube.client.clone(), INVENTORY_NAMESPACE);
    for attempt in 1..=CONFLICT_ATTEMPTS {
        let Some(inventory) = read(kube).await? else {
            return Ok(released);
        };
        released.inventory_found = true;
        let matched = inventory.entries_of(objects, release_namespace);
        if matched.is_empty() {
            break;
        }
        let keys: Vec<String> = matched.iter().map(|(k, _)| k.clone()).collect();
        let patch = Patch::Merge(inventory.removal_patch(&keys));
        let params = PatchParams::default();
        let patched = kube
            .retry("take the release's objects out of Talos' inventory", || {
                api.patch(INVENTORY_NAME, &params, &patch)
            })
            .await;
        match patched {
            Ok(_) => {
                released.entries = matched.into_iter().map(|(_, e)| e).collect();
                break;
            }
            // Talos (or anyone) wrote the inventory since it was read: read it again.
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < CONFLICT_ATTEMPTS => continue,
            Err(e) => return Err(kube.cluster_error(e)),
        }
    }
    released.annotations = drop_annotations(kube, objects, release_namespace).await?;
    Ok(released)
}

/// Removes the annotation from every object of the release that carries Talos' (an annotation
/// naming another inventory is left alone); objects that do not exist, or whose kind the
/// cluster does not serve, are skipped.
async fn drop_annotations(
    kube: &Kube,
    objects: &[ManifestObject],
    release_namespace: &str,
) -> Result<Vec<String>, ClusterError> {
    let mut apis = ManifestApis::default();
    let mut dropped = Vec::new();
    let patch = Patch::Merge(json!({"metadata": {"annotations": {OWNING_INVENTORY: null}}}));
    let params = PatchParams::default();
    for object in objects {
        let Some(ObjectApi { api, label }) = apis.api_for(kube, object, release_namespace).await?
        else {
            continue;
        };
        let live = kube
            .retry("read an object of the release", || {
                api.get_opt(&object.name)
            })
            .await
            .map_err(|e| kube.cluster_error(e))?;
        let owned_by_talos = live.as_ref().is_some_and(|l| {
            l.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(OWNING_INVENTORY))
                .is_some_and(|v| v == INVENTORY_NAME)
        });
        if !owned_by_talos {
            continue;
        }
        kube.retry("remove Talos' owning-inventory annotation", || {
            api.patch(&object.name, &params, &patch)
        })
        .await
        .map_err(|e| kube.cluster_error(e))?;
        dropped.push(label);
    }
    Ok(dropped)
}

/// At most this many entries are named in a message; the rest are counted.
const NAMED: usize = 12;

/// `entries` one per line (at most [`NAMED`], then how many more).
pub fn list(entries: &[Entry]) -> String {
    let mut lines: Vec<String> = entries
        .iter()
        .take(NAMED)
        .map(|e| format!("  {e}"))
        .collect();
    if entries.len() > NAMED {
        lines.push(format!("  ... and {} more", entries.len() - NAMED));
    }
    lines.join("\n")
}

/// The commands that do by hand what [`release_from_talos`] does, for `keys` and objects.
pub fn manual_fix(keys: &[String]) -> String {
    let ops: Vec<String> = keys
        .iter()
        .map(|k| format!("{{\"op\":\"remove\",\"path\":\"/data/{k}\"}}"))
        .collect();
    format!(
        "kubectl -n {INVENTORY_NAMESPACE} patch configmap {INVENTORY_NAME} --type=json -p '[{}]'",
        ops.join(",")
    )
}

/// What a plan says before an adoption on a cluster with a Talos inventory of `total` entries.
pub fn before_adoption(release: &str, total: usize) -> (String, String) {
    (
        "Adoption will edit Talos' manifest inventory".into(),
        format!(
            "This cluster has Talos' bootstrap-manifest inventory (Talos 1.13+): ConfigMap {INVENTORY_NAMESPACE}/{INVENTORY_NAME}, {total} entries now. `talosctl upgrade-k8s` (and the Talos Terraform provider's `talos_cluster` when `kubernetes_version` changes) deletes every object it lists that the machine config no longer lists, so objects of an inline manifest (an inline Cilium) removed from the machine config after the adoption would be deleted. After Helm adopts the objects of release {release}, apply therefore (1) removes from that ConfigMap the entry of each object the release then owns, if it lists any, and (2) removes the annotation `{OWNING_INVENTORY}: {INVENTORY_NAME}` from those objects. Which entries is known once Helm has rendered the chart: the apply's warning names each one. Entries of other objects (CoreDNS, kube-proxy, ...) stay. Then remove the inline manifest from the machine config; see the guide \"Migrating Cilium\"."
        ),
    )
}

/// What a plan says when the inventory (again) lists objects of an adopted release.
pub fn still_listed(release: &str, matched: &[(String, Entry)]) -> (String, String) {
    let entries: Vec<Entry> = matched.iter().map(|(_, e)| e.clone()).collect();
    let keys: Vec<String> = matched.iter().map(|(k, _)| k.clone()).collect();
    (
        "Talos' manifest inventory lists objects of this release".into(),
        format!(
            "ConfigMap {INVENTORY_NAMESPACE}/{INVENTORY_NAME} lists {} object(s) of release {release}:\n{}\n`talosctl upgrade-k8s` deletes them (prunes them) once the machine config no longer lists them. Talos lists existing objects again while a manifest naming them is still in the machine config: remove the inline manifest from the machine config first, then take the entries out by hand:\n  {}\n(the next apply of this resource that upgrades the release also takes them out).",
            entries.len(),
            list(&entries),
            manual_fix(&keys),
        ),
    )
}

/// What an apply says after [`release_from_talos`] changed something.
pub fn released_message(release: &str, released: &Released) -> (String, String) {
    let mut done = Vec::new();
    if !released.entries.is_empty() {
        done.push(format!(
            "took {} entr{} out of ConfigMap {INVENTORY_NAMESPACE}/{INVENTORY_NAME}:\n{}\n",
            released.entries.len(),
            if released.entries.len() == 1 {
                "y"
            } else {
                "ies"
            },
            list(&released.entries),
        ));
    }
    if !released.annotations.is_empty() {
        done.push(format!(
            "removed the annotation `{OWNING_INVENTORY}` from {} object(s)",
            released.annotations.len()
        ));
    }
    let mut detail = format!(
        "Release {release} now owns objects Talos' bootstrap manifests created. So that `talosctl upgrade-k8s` does not delete them once the inline manifest leaves the machine config, talosboot {}.",
        done.join("and ").trim_end()
    );
    detail.push_str(" Now remove the inline manifest from the machine config (before any node reboot, which makes Talos list the objects again while the manifest is there), then check that `kubectl -n kube-system get configmap talos-bootstrap-manifests-inventory -o yaml` lists none of them before the next `talosctl upgrade-k8s`.");
    (
        "Took the release's objects out of Talos' manifest inventory".into(),
        detail,
    )
}

/// What an apply says when the inventory could not be edited (the adoption itself succeeded).
pub fn not_released_message(release: &str, error: &str) -> (String, String) {
    (
        "The adopted objects are NOT protected from Talos' prune".into(),
        format!(
            "Helm adopted the objects of release {release}, but talosboot could not take them out of Talos' manifest inventory ({error}). Until they are out of ConfigMap {INVENTORY_NAMESPACE}/{INVENTORY_NAME}, removing the inline manifest from the machine config and running `talosctl upgrade-k8s` (or changing `kubernetes_version` of the Talos provider's `talos_cluster`) DELETES them. Do not remove the inline manifest yet: run `tofu plan` again (it lists the entries and the command that removes them), or run `talosctl upgrade-k8s --manifests-no-prune`."
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> ManifestObject {
        ManifestObject {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(str::to_owned),
            name: name.into(),
        }
    }

    #[test]
    fn keys_parse_and_print_as_talos_writes_them() {
        let cases = [
            (
                "kube-system_cilium_apps_DaemonSet",
                Some(("kube-system", "cilium", "apps", "DaemonSet")),
                "DaemonSet.apps kube-system/cilium",
            ),
            (
                "kube-system_cilium-config__ConfigMap",
                Some(("kube-system", "cilium-config", "", "ConfigMap")),
                "ConfigMap kube-system/cilium-config",
            ),
            (
                "_cilium_rbac.authorization.k8s.io_ClusterRole",
                Some(("", "cilium", "rbac.authorization.k8s.io", "ClusterRole")),
                "ClusterRole.rbac.authorization.k8s.io cilium",
            ),
            (
                "_system__coredns_rbac.authorization.k8s.io_ClusterRole",
                Some((
                    "",
                    "system:coredns",
                    "rbac.authorization.k8s.io",
                    "ClusterRole",
                )),
                "ClusterRole.rbac.authorization.k8s.io system:coredns",
            ),
            (
                "kube-system_hubble_server_certs__Secret",
                Some(("kube-system", "hubble_server_certs", "", "Secret")),
                "Secret kube-system/hubble_server_certs",
            ),
            ("nonsense", None, ""),
            ("a_b", None, ""),
        ];
        for (key, parts, shown) in cases {
            let parsed = Entry::parse(key);
            match parts {
                None => assert_eq!(parsed, None, "{key}"),
                Some((namespace, name, group, kind)) => {
                    let entry = parsed.unwrap_or_else(|| panic!("{key}"));
                    assert_eq!(
                        entry,
                        Entry {
                            namespace: namespace.into(),
                            name: name.into(),
                            group: group.into(),
                            kind: kind.into()
                        },
                        "{key}"
                    );
                    assert_eq!(entry.to_string(), shown);
                    if !name.contains('_') {
                        assert_eq!(entry.key(), key, "round trip");
                    }
                }
            }
        }
    }

    #[test]
    fn the_release_entries_are_those_of_its_manifest_objects() {
        let release = [
            object("apps/v1", "DaemonSet", Some("kube-system"), "cilium"),
            object("v1", "ConfigMap", None, "cilium-config"),
            object(
                "rbac.authorization.k8s.io/v1",
                "ClusterRole",
                None,
                "cilium",
            ),
            // A cluster-scoped object with a namespace in the manifest (Talos drops it).
            object(
                "rbac.authorization.k8s.io/v1",
                "ClusterRoleBinding",
                Some("kube-system"),
                "cilium",
            ),
        ];
        let data: BTreeMap<String, String> = [
            "kube-system_cilium_apps_DaemonSet",
            "kube-system_cilium-config__ConfigMap",
            "_cilium_rbac.authorization.k8s.io_ClusterRole",
            "_cilium_rbac.authorization.k8s.io_ClusterRoleBinding",
            // Same name, other kind, group or namespace: not the release's.
            "kube-system_cilium__ServiceAccount",
            "kube-system_cilium_extensions_DaemonSet",
            "default_cilium-config__ConfigMap",
            "kube-system_coredns_apps_Deployment",
            "unparsable",
        ]
        .into_iter()
        .map(|k| (k.to_owned(), String::new()))
        .collect();
        let inventory = Inventory::from_data(Some("42".into()), &data);
        let matched: Vec<String> = inventory
            .entries_of(&release, "kube-system")
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            matched,
            [
                "_cilium_rbac.authorization.k8s.io_ClusterRole",
                "_cilium_rbac.authorization.k8s.io_ClusterRoleBinding",
                "kube-system_cilium-config__ConfigMap",
                "kube-system_cilium_apps_DaemonSet",
            ]
        );
        // In another release namespace the namespaced ConfigMap without namespace is not it.
        assert_eq!(inventory.entries_of(&release[1..2], "default").len(), 1);
        assert_eq!(inventory.entries_of(&release[1..2], "other").len(), 0);
        assert!(inventory.entries_of(&[], "kube-system").is_empty());
    }

    #[test]
    fn the_removal_patch_deletes_exactly_the_keys_if_the_version_is_unchanged() {
        let inventory = Inventory {
            resource_version: Some("7".into()),
            keys: vec![],
        };
        let patch = inventory.removal_patch(&["kube-system_cilium_apps_DaemonSet".into()]);
        assert_eq!(
            patch,
            json!({"metadata": {"resourceVersion": "7"}, "data": {"kube-system_cilium_apps_DaemonSet": null}})
        );
        let fix = manual_fix(&["a_b_c_D".into(), "_e_f_G".into()]);
        assert_eq!(
            fix,
            "kubectl -n kube-system patch configmap talos-bootstrap-manifests-inventory --type=json -p '[{\"op\":\"remove\",\"path\":\"/data/a_b_c_D\"},{\"op\":\"remove\",\"path\":\"/data/_e_f_G\"}]'"
        );
    }

    #[test]
    fn messages_name_the_configmap_the_annotation_and_each_entry() {
        let entries: Vec<Entry> = (0..14)
            .map(|i| Entry {
                namespace: "kube-system".into(),
                name: format!("o{i}"),
                group: String::new(),
                kind: "ConfigMap".into(),
            })
            .collect();
        let released = Released {
            inventory_found: true,
            entries,
            annotations: vec!["ConfigMap kube-system/o0".into()],
        };
        let (summary, detail) = released_message("kube-system/cilium", &released);
        assert!(summary.contains("Talos' manifest inventory"));
        for needle in [
            "14 entries",
            "ConfigMap kube-system/o11",
            "... and 2 more",
            OWNING_INVENTORY,
            "from 1 object(s)",
            INVENTORY_NAME,
        ] {
            assert!(detail.contains(needle), "{needle}: {detail}");
        }
        assert!(!detail.contains("o12\n"), "{detail}");
        // Only annotations removed (the inventory listed none of the release's objects): one
        // sentence, no "took 0 entries".
        let only_annotations = Released {
            inventory_found: true,
            entries: Vec::new(),
            annotations: vec![
                "ConfigMap kube-system/o0".into(),
                "Secret kube-system/s".into(),
            ],
        };
        let (_, detail) = released_message("kube-system/cilium", &only_annotations);
        assert!(
            detail.contains(&format!(
                "talosboot removed the annotation `{OWNING_INVENTORY}` from 2 object(s). Now remove"
            )),
            "{detail}"
        );
        assert!(
            !detail.contains("0 entries") && !detail.contains(".\nand"),
            "{detail}"
        );
        let (_, plan) = before_adoption("kube-system/cilium", 31);
        assert!(
            plan.contains("31 entries") && plan.contains(OWNING_INVENTORY),
            "{plan}"
        );
        let matched = vec![(
            "kube-system_cilium_apps_DaemonSet".to_owned(),
            Entry::parse("kube-system_cilium_apps_DaemonSet").unwrap(),
        )];
        let (_, again) = still_listed("kube-system/cilium", &matched);
        assert!(
            again.contains("DaemonSet.apps kube-system/cilium")
                && again.contains("/data/kube-system_cilium_apps_DaemonSet"),
            "{again}"
        );
    }
}
