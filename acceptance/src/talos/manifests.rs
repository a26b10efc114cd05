//! Talos' bootstrap manifests (inline manifests) in the node layer, by Talos version, and the
//! manifest half of `talosctl upgrade-k8s`.
//!
//! What each version does, as read in siderolabs/talos and siderolabs/go-kubernetes (file and
//! version for each rule in the acceptance README's table of emulated components):
//! - **1.12**: the node applies every manifest object (server-side apply, field manager `talos`);
//!   nothing records what it applied and `upgrade-k8s` re-applies without ever deleting.
//! - **1.13 and 1.14** (`internal/app/machined/pkg/controllers/k8s/manifest_apply.go`, identical
//!   in v1.13.9 and release-1.14): the node keeps an *inventory*, ConfigMap
//!   `kube-system/talos-bootstrap-manifests-inventory`, one `data` key per object
//!   (`<namespace>_<name>_<group>_<kind>`, value empty). For each object of each manifest: already
//!   in the inventory, skipped; existing in the cluster, added to the inventory untouched (the
//!   migration from 1.12: no annotation); absent, created by server-side apply as `talos` with the
//!   annotation `config.k8s.io/owning-inventory: talos-bootstrap-manifests-inventory` and added.
//!   The node never deletes anything.
//! - `upgrade-k8s` on 1.13+ (go-kubernetes `kubernetes/ssa/apply.go`, v0.2.38 and v0.2.41):
//!   the desired set is what the machine config lists now; every desired object gets the
//!   annotation and is applied (forced, as `talos`) and recorded; then, unless
//!   `--manifests-no-prune`, every inventory entry the desired set no longer lists is deleted if
//!   the inventory policy allows it (default `AdoptIfNoInventory`: the live annotation names this
//!   inventory **or is absent**), and a live object naming another inventory stops the upgrade
//!   with an error. An object missing from the inventory is never pruned.
//!
//! Talos keeps the machine config on its nodes; talos-sim keeps what it needs of it (the Talos
//! version and each inline manifest by name) in Secret [`MACHINE_CONFIG_SECRET`] in
//! `kube-system`, so that [`upgrade_k8s`] (and `talos-sim upgrade-k8s` against a running cluster)
//! knows the objects of each name. It is a Secret because a rendered manifest can hold keys (a
//! rendered Cilium has its Hubble certificates). Only inline manifests are in the inventory
//! here: the other manifests Talos generates (CoreDNS, kube-proxy, ...) are not emulated as
//! manifests, so `upgrade-k8s` here never touches them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, PropagationPolicy,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;
use serde_json::{Value as Json, json};

/// Where Talos keeps its inventory (`constants.KubernetesInventoryNamespace`).
pub const INVENTORY_NAMESPACE: &str = "kube-system";
/// Talos' inventory ConfigMap (`constants.KubernetesBootstrapManifestsInventoryName`), also the
/// inventory ID the annotation carries.
pub const INVENTORY_NAME: &str = "talos-bootstrap-manifests-inventory";
/// go-kubernetes' `ssa.InventoryAnnotationKey`.
pub const OWNING_INVENTORY: &str = "config.k8s.io/owning-inventory";
/// Talos' field manager (`constants.KubernetesFieldManagerName`).
pub const FIELD_MANAGER: &str = "talos";
/// talos-sim's record of the machine config's inline manifests (see the module docs).
pub const MACHINE_CONFIG_SECRET: &str = "talos-sim-machine-config";
const VERSION_KEY: &str = "talos-version";
const MANIFEST_KEY_PREFIX: &str = "inline-manifest.";

/// The Talos minor version the node layer behaves as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum TalosVersion {
    V1_12,
    V1_13,
    #[default]
    V1_14,
}

impl TalosVersion {
    pub const ALL: [TalosVersion; 3] = [Self::V1_12, Self::V1_13, Self::V1_14];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::V1_12 => "1.12",
            Self::V1_13 => "1.13",
            Self::V1_14 => "1.14",
        }
    }

    /// Accepts `1.13`, `v1.13` and patch versions (`1.13.9`).
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let text = text.trim().trim_start_matches('v');
        let minor = text.split('.').take(2).collect::<Vec<_>>().join(".");
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == minor)
            .ok_or_else(|| {
                anyhow::anyhow!("unsupported Talos version {text:?}: one of 1.12, 1.13, 1.14")
            })
    }

    /// Talos 1.13 brought the inventory and `upgrade-k8s`' prune
    /// (`compatibility.TalosVersion.SupportsSSAManifestSync`).
    pub fn has_inventory(self) -> bool {
        self >= Self::V1_13
    }
}

impl std::fmt::Display for TalosVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of an inventory: cli-utils' `ObjMetadata` (no version).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjRef {
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
    /// Empty for the core group.
    pub group: String,
    pub kind: String,
}

const RBAC_KINDS: [&str; 4] = ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"];

impl ObjRef {
    /// The ConfigMap key: `<namespace>_<name>_<group>_<kind>`, a `:` in an RBAC object's name
    /// written `__`.
    pub fn key(&self) -> String {
        let name = match self.group == "rbac.authorization.k8s.io"
            && RBAC_KINDS.contains(&self.kind.as_str())
        {
            true => self.name.replace(':', "__"),
            false => self.name.clone(),
        };
        format!("{}_{}_{}_{}", self.namespace, name, self.group, self.kind)
    }

    /// Parses a key: namespace up to the first `_`, kind after the last, group between the last
    /// two, the rest the name (`__` read as `:`).
    pub fn parse(key: &str) -> Option<ObjRef> {
        let (namespace, rest) = key.split_once('_')?;
        let (rest, kind) = rest.rsplit_once('_')?;
        let (name, group) = rest.rsplit_once('_')?;
        Some(ObjRef {
            namespace: namespace.to_owned(),
            name: name.replace("__", ":"),
            group: group.to_owned(),
            kind: kind.to_owned(),
        })
    }

    /// Whether a desired object is this entry: same group, kind and name, and the same namespace
    /// unless the entry has none (go-kubernetes' `calculatePruneObjects`).
    fn is(&self, other: &ObjRef) -> bool {
        self.group == other.group
            && self.kind == other.kind
            && self.name == other.name
            && (self.namespace == other.namespace || self.namespace.is_empty())
    }
}

impl std::fmt::Display for ObjRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = match self.group.as_str() {
            "" => String::new(),
            g => format!(".{g}"),
        };
        match self.namespace.as_str() {
            "" => write!(f, "{}{group} {}", self.kind, self.name),
            ns => write!(f, "{}{group} {ns}/{}", self.kind, self.name),
        }
    }
}

/// go-kubernetes' inventory policies (`kubernetes/ssa/inventory_policy.go`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum InventoryPolicy {
    MustMatch,
    /// `talosctl upgrade-k8s --manifests-inventory-policy`'s default.
    #[default]
    AdoptIfNoInventory,
    AdoptAll,
}

impl InventoryPolicy {
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        match text {
            "MustMatch" => Ok(Self::MustMatch),
            "AdoptIfNoInventory" => Ok(Self::AdoptIfNoInventory),
            "AdoptAll" => Ok(Self::AdoptAll),
            other => anyhow::bail!(
                "invalid inventory policy {other:?}: must be one of MustMatch, AdoptIfNoInventory, or AdoptAll"
            ),
        }
    }

    /// Whether the live object may be applied over or pruned, by its owning-inventory
    /// annotation: absent ("Empty"), this inventory ("Match") or another ("NoMatch").
    pub fn allows(self, live_annotation: Option<&str>) -> bool {
        match live_annotation {
            Some(INVENTORY_NAME) => true,
            None => self != Self::MustMatch,
            Some(_) => self == Self::AdoptAll,
        }
    }
}

/// An inline manifest of the machine config: its name and its YAML documents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlineManifest {
    pub name: String,
    pub contents: String,
}

/// The inventory as Talos reads and writes it.
pub struct Inventory {
    pub entries: BTreeSet<ObjRef>,
}

impl Inventory {
    /// Reads the inventory, creating it empty if absent (go-kubernetes `GetInventory`); a key
    /// that does not parse fails the read, as it fails Talos'.
    pub async fn read_or_create(client: &kube::Client) -> anyhow::Result<Inventory> {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), INVENTORY_NAMESPACE);
        let cm = match api.get_opt(INVENTORY_NAME).await? {
            Some(cm) => cm,
            None => {
                let empty: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": INVENTORY_NAME, "namespace": INVENTORY_NAMESPACE}
                }))?;
                api.create(&PostParams::default(), &empty).await?
            }
        };
        Self::from_data(&cm.data.unwrap_or_default())
    }

    /// The entries of a ConfigMap's data.
    pub fn from_data(data: &BTreeMap<String, String>) -> anyhow::Result<Inventory> {
        let mut entries = BTreeSet::new();
        for key in data.keys() {
            let entry = ObjRef::parse(key).ok_or_else(|| {
                anyhow::anyhow!(
                    "failed to parse object metadata: unable to parse stored object metadata: {key}"
                )
            })?;
            entries.insert(entry);
        }
        Ok(Inventory { entries })
    }

    /// Rewrites the whole ConfigMap: name, namespace and one empty value per entry, replacing
    /// whatever it held (an unconditional update, as Talos writes it).
    pub async fn write(&self, client: &kube::Client) -> anyhow::Result<()> {
        let data: BTreeMap<String, String> = self
            .entries
            .iter()
            .map(|e| (e.key(), String::new()))
            .collect();
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": INVENTORY_NAME, "namespace": INVENTORY_NAMESPACE},
            "data": data,
        }))?;
        Api::<ConfigMap>::namespaced(client.clone(), INVENTORY_NAMESPACE)
            .replace(INVENTORY_NAME, &PostParams::default(), &cm)
            .await
            .map_err(|e| anyhow::anyhow!("failed to update the inventory: {e}"))?;
        Ok(())
    }

    /// The inventory in the cluster, or `None` (Talos 1.12, or before the node's first run).
    pub async fn read(client: &kube::Client) -> anyhow::Result<Option<Inventory>> {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), INVENTORY_NAMESPACE);
        match api.get_opt(INVENTORY_NAME).await? {
            Some(cm) => Ok(Some(Self::from_data(&cm.data.unwrap_or_default())?)),
            None => Ok(None),
        }
    }
}

/// The objects of a multi-document YAML manifest (empty documents skipped).
pub fn manifest_objects(contents: &str) -> anyhow::Result<Vec<Json>> {
    let mut out = Vec::new();
    for doc in contents.split("\n---") {
        let doc = doc.trim_start_matches("---");
        if doc.trim().is_empty() {
            continue;
        }
        let value: Json = serde_saphyr::from_str(doc)
            .map_err(|e| anyhow::anyhow!("manifest document does not parse: {e}"))?;
        if value.is_object() {
            out.push(value);
        }
    }
    Ok(out)
}

/// Talos' apply order: Namespaces, then CRDs, then the rest in manifest order.
fn sort_for_apply(objects: &mut [Json]) {
    let rank = |o: &Json| match (
        o["apiVersion"].as_str().unwrap_or_default(),
        o["kind"].as_str().unwrap_or_default(),
    ) {
        ("v1", "Namespace") => 0,
        (v, "CustomResourceDefinition") if v.starts_with("apiextensions.k8s.io/") => 1,
        _ => 2,
    };
    objects.sort_by_key(rank);
}

/// A desired object resolved against the cluster's discovery.
struct Resolved {
    object: Json,
    resource: ApiResource,
    reference: ObjRef,
}

impl Resolved {
    fn api(&self, client: &kube::Client) -> Api<DynamicObject> {
        match self.reference.namespace.as_str() {
            "" => Api::all_with(client.clone(), &self.resource),
            ns => Api::namespaced_with(client.clone(), ns, &self.resource),
        }
    }
}

/// Resolves objects to their API resources (namespaced objects without a namespace get
/// `default`; a cluster-scoped object's namespace is dropped), caching discovery by kind.
async fn resolve(client: &kube::Client, objects: Vec<Json>) -> anyhow::Result<Vec<Resolved>> {
    let mut cache: HashMap<(String, String), (ApiResource, bool)> = HashMap::new();
    let mut out = Vec::new();
    for mut object in objects {
        let api_version = object["apiVersion"].as_str().unwrap_or_default().to_owned();
        let kind = object["kind"].as_str().unwrap_or_default().to_owned();
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        anyhow::ensure!(
            !api_version.is_empty() && !kind.is_empty() && !name.is_empty(),
            "a manifest object lacks apiVersion, kind or metadata.name"
        );
        let key = (api_version.clone(), kind.clone());
        if !cache.contains_key(&key) {
            let (group, version) = match api_version.split_once('/') {
                Some((g, v)) => (g.to_owned(), v.to_owned()),
                None => (String::new(), api_version.clone()),
            };
            let (resource, caps) = kube::discovery::pinned_kind(
                client,
                &GroupVersionKind::gvk(&group, &version, &kind),
            )
            .await
            .map_err(|e| anyhow::anyhow!("error creating mapping for {api_version} {kind}: {e}"))?;
            cache.insert(key.clone(), (resource, caps.scope == Scope::Namespaced));
        }
        let (resource, namespaced) = cache[&key].clone();
        let namespace = match namespaced {
            true => {
                let ns = object["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("default")
                    .to_owned();
                object["metadata"]["namespace"] = json!(ns);
                ns
            }
            false => {
                if let Some(meta) = object["metadata"].as_object_mut() {
                    meta.remove("namespace");
                }
                String::new()
            }
        };
        let reference = ObjRef {
            namespace,
            name,
            group: resource.group.clone(),
            kind,
        };
        out.push(Resolved {
            object,
            resource,
            reference,
        });
    }
    Ok(out)
}

fn annotation(object: &Json) -> Option<&str> {
    object["metadata"]["annotations"][OWNING_INVENTORY].as_str()
}

fn set_annotation(object: &mut Json) {
    let meta = &mut object["metadata"];
    if !meta["annotations"].is_object() {
        meta["annotations"] = json!({});
    }
    meta["annotations"][OWNING_INVENTORY] = json!(INVENTORY_NAME);
}

async fn apply(client: &kube::Client, r: &Resolved, force: bool) -> anyhow::Result<()> {
    let mut params = PatchParams::apply(FIELD_MANAGER);
    params.force = force;
    let name = r.reference.name.as_str();
    r.api(client)
        .patch(name, &params, &Patch::Apply(&r.object))
        .await
        .map_err(|e| anyhow::anyhow!("error creating {}: {e}", r.reference))?;
    Ok(())
}

/// Records the machine config's inline manifests and the Talos version (see the module docs).
pub async fn record_machine_config(
    client: &kube::Client,
    version: TalosVersion,
    manifests: &[InlineManifest],
) -> anyhow::Result<()> {
    let mut data = BTreeMap::from([(VERSION_KEY.to_owned(), version.as_str().to_owned())]);
    for m in manifests {
        data.insert(
            format!("{MANIFEST_KEY_PREFIX}{}", m.name),
            m.contents.clone(),
        );
    }
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": MACHINE_CONFIG_SECRET, "namespace": INVENTORY_NAMESPACE,
                     "labels": {"app.kubernetes.io/managed-by": "talos-sim"}},
        "type": "Opaque",
        "stringData": data,
    }))?;
    Api::<Secret>::namespaced(client.clone(), INVENTORY_NAMESPACE)
        .patch(
            MACHINE_CONFIG_SECRET,
            &PatchParams::apply("talos-sim").force(),
            &Patch::Apply(&secret),
        )
        .await?;
    Ok(())
}

/// The recorded Talos version and inline manifests.
pub async fn read_machine_config(
    client: &kube::Client,
) -> anyhow::Result<(TalosVersion, Vec<InlineManifest>)> {
    let secret = Api::<Secret>::namespaced(client.clone(), INVENTORY_NAMESPACE)
        .get_opt(MACHINE_CONFIG_SECRET)
        .await?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no Secret {INVENTORY_NAMESPACE}/{MACHINE_CONFIG_SECRET}: not a talos-sim cluster started with inline manifests"
            )
        })?;
    let data = secret.data.unwrap_or_default();
    let text = |b: &k8s_openapi::ByteString| String::from_utf8_lossy(&b.0).into_owned();
    let version = data
        .get(VERSION_KEY)
        .map(text)
        .ok_or_else(|| anyhow::anyhow!("the machine config record has no {VERSION_KEY}"))?;
    let manifests = data
        .iter()
        .filter_map(|(k, v)| {
            Some(InlineManifest {
                name: k.strip_prefix(MANIFEST_KEY_PREFIX)?.to_owned(),
                contents: text(v),
            })
        })
        .collect();
    Ok((TalosVersion::parse(&version)?, manifests))
}

/// The node's manifest apply for `manifests` (one run of Talos' ManifestApplyController, or the
/// plain apply of 1.12). Returns the objects it created.
pub async fn node_apply(
    client: &kube::Client,
    version: TalosVersion,
    manifests: &[InlineManifest],
) -> anyhow::Result<Vec<ObjRef>> {
    let mut objects = Vec::new();
    for m in manifests {
        objects.extend(manifest_objects(&m.contents)?);
    }
    sort_for_apply(&mut objects);
    let resolved = resolve(client, objects).await?;
    let mut created = Vec::new();
    if !version.has_inventory() {
        for r in &resolved {
            apply(client, r, false).await?;
            created.push(r.reference.clone());
        }
        return Ok(created);
    }
    let mut inventory = Inventory::read_or_create(client).await?;
    let mut errors = Vec::new();
    for mut r in resolved {
        if inventory.entries.contains(&r.reference) {
            continue;
        }
        match r.api(client).get_opt(&r.reference.name).await {
            Ok(Some(_)) => {
                // Existing objects join the inventory untouched (1.12 -> 1.13 migration).
                inventory.entries.insert(r.reference.clone());
                continue;
            }
            Ok(None) => {}
            Err(e) => {
                inventory.write(client).await?;
                anyhow::bail!("error checking resource existence: {e}");
            }
        }
        if annotation(&r.object).is_some_and(|a| a != INVENTORY_NAME) {
            errors.push(format!(
                "unexpected foreign inventory annotation on {}",
                r.reference
            ));
            continue;
        }
        set_annotation(&mut r.object);
        match apply(client, &r, false).await {
            Ok(()) => {
                inventory.entries.insert(r.reference.clone());
                created.push(r.reference);
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    // Written even when an apply failed half-way, as Talos does.
    inventory.write(client).await?;
    anyhow::ensure!(errors.is_empty(), "{}", errors.join("; "));
    Ok(created)
}

/// Records the machine config and runs the node's manifest apply: what a node does at boot.
pub async fn boot(
    client: &kube::Client,
    version: TalosVersion,
    manifests: &[InlineManifest],
) -> anyhow::Result<Vec<ObjRef>> {
    record_machine_config(client, version, manifests).await?;
    node_apply(client, version, manifests).await
}

/// `talosctl upgrade-k8s`' manifest options.
#[derive(Clone, Copy, Debug, Default)]
pub struct UpgradeOptions {
    /// `--manifests-no-prune`.
    pub no_prune: bool,
    /// `--manifests-inventory-policy`.
    pub policy: InventoryPolicy,
}

/// What a manifest sync did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpgradeReport {
    pub version: Option<TalosVersion>,
    pub applied: Vec<ObjRef>,
    pub pruned: Vec<ObjRef>,
}

/// The manifest sync of `talosctl upgrade-k8s`: `listed` are the names of the inline manifests
/// the machine config still lists (each must be one the cluster was started with). Re-applies
/// them; on 1.13+ then prunes what the inventory lists and they do not, unless
/// `options.no_prune`. An inventory policy refusal is an error, as in Talos.
pub async fn upgrade_k8s(
    client: &kube::Client,
    listed: &[String],
    options: UpgradeOptions,
) -> anyhow::Result<UpgradeReport> {
    let (version, recorded) = read_machine_config(client).await?;
    let mut objects = Vec::new();
    for name in listed {
        let m = recorded.iter().find(|m| &m.name == name).ok_or_else(|| {
            anyhow::anyhow!(
                "no inline manifest {name:?} in the machine config record (known: {})",
                recorded
                    .iter()
                    .map(|m| m.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        objects.extend(manifest_objects(&m.contents)?);
    }
    sort_for_apply(&mut objects);
    let mut resolved = resolve(client, objects).await?;
    let mut report = UpgradeReport {
        version: Some(version),
        ..Default::default()
    };
    if !version.has_inventory() {
        // 1.12's sync: apply, never prune.
        for r in &resolved {
            apply(client, r, true).await?;
            report.applied.push(r.reference.clone());
        }
        return Ok(report);
    }
    for r in &mut resolved {
        if annotation(&r.object).is_some_and(|a| a != INVENTORY_NAME) {
            anyhow::bail!(
                "failed to prepare objects for apply, object {} already has an inventory annotation",
                r.reference
            );
        }
        set_annotation(&mut r.object);
    }
    let mut inventory = Inventory::read_or_create(client).await?;
    // The dry run checks the policy against every live object the apply would change: one
    // whose annotation differs always changes (the desired object carries Talos').
    for r in &resolved {
        if let Some(live) = r.api(client).get_opt(&r.reference.name).await? {
            let live = serde_json::to_value(&live)?;
            let current = annotation(&live);
            if current != Some(INVENTORY_NAME) && !options.policy.allows(current) {
                anyhow::bail!(
                    "failed to diff object {}, inventory policy check failure: inventory policy prevented actuation (status: {}, policy: {:?})",
                    r.reference,
                    if current.is_none() {
                        "Empty"
                    } else {
                        "NoMatch"
                    },
                    options.policy
                );
            }
        }
    }
    for r in &resolved {
        apply(client, r, true).await?;
        inventory.entries.insert(r.reference.clone());
        report.applied.push(r.reference.clone());
    }
    inventory.write(client).await?;
    if options.no_prune {
        return Ok(report);
    }
    let desired: Vec<ObjRef> = resolved.iter().map(|r| r.reference.clone()).collect();
    let prune: Vec<ObjRef> = inventory
        .entries
        .iter()
        .filter(|entry| !desired.iter().any(|d| entry.is(d)))
        .cloned()
        .collect();
    for entry in prune {
        let group = kube::discovery::group(client, &entry.group).await?;
        let Some((resource, _)) = group.recommended_kind(&entry.kind) else {
            anyhow::bail!("failed to map kind {:?}: not served", entry.kind);
        };
        let api: Api<DynamicObject> = match entry.namespace.as_str() {
            "" => Api::all_with(client.clone(), &resource),
            ns => Api::namespaced_with(client.clone(), ns, &resource),
        };
        let Some(live) = api.get_opt(&entry.name).await? else {
            inventory.entries.remove(&entry);
            continue;
        };
        let live = serde_json::to_value(&live)?;
        let current = annotation(&live);
        if !options.policy.allows(current) {
            // Talos returns here: the prune phase's inventory write is skipped.
            anyhow::bail!(
                "inventory policy check failure for object {entry}, inventory policy prevented actuation (status: NoMatch, policy: {:?})",
                options.policy
            );
        }
        api.delete(
            &entry.name,
            &DeleteParams {
                propagation_policy: Some(PropagationPolicy::Background),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| anyhow::anyhow!("deleting {entry}: {e}"))?;
        inventory.entries.remove(&entry);
        report.pruned.push(entry);
    }
    inventory.write(client).await?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inventory_keys_round_trip_as_cli_utils_writes_them() {
        let cases = [
            (
                "kube-system_cilium_apps_DaemonSet",
                "kube-system",
                "cilium",
                "apps",
                "DaemonSet",
            ),
            (
                "kube-system_cilium-config__ConfigMap",
                "kube-system",
                "cilium-config",
                "",
                "ConfigMap",
            ),
            (
                "_cilium_rbac.authorization.k8s.io_ClusterRole",
                "",
                "cilium",
                "rbac.authorization.k8s.io",
                "ClusterRole",
            ),
            (
                "_system__kubelet-api-admin_rbac.authorization.k8s.io_ClusterRoleBinding",
                "",
                "system:kubelet-api-admin",
                "rbac.authorization.k8s.io",
                "ClusterRoleBinding",
            ),
            ("_ci__Namespace", "", "ci", "", "Namespace"),
        ];
        for (key, namespace, name, group, kind) in cases {
            let parsed = ObjRef::parse(key).unwrap_or_else(|| panic!("{key}"));
            assert_eq!(
                parsed,
                ObjRef {
                    namespace: namespace.into(),
                    name: name.into(),
                    group: group.into(),
                    kind: kind.into()
                },
                "{key}"
            );
            assert_eq!(parsed.key(), key);
        }
        assert_eq!(ObjRef::parse("no-separators"), None);
    }

    #[test]
    fn inventory_policies_allow_as_go_kubernetes_does() {
        use InventoryPolicy::*;
        let cases = [
            (MustMatch, None, false),
            (MustMatch, Some(INVENTORY_NAME), true),
            (MustMatch, Some("other"), false),
            (AdoptIfNoInventory, None, true),
            (AdoptIfNoInventory, Some(INVENTORY_NAME), true),
            (AdoptIfNoInventory, Some("other"), false),
            (AdoptAll, None, true),
            (AdoptAll, Some("other"), true),
        ];
        for (policy, annotation, allowed) in cases {
            assert_eq!(
                policy.allows(annotation),
                allowed,
                "{policy:?} {annotation:?}"
            );
        }
        assert!(InventoryPolicy::parse("adoptall").is_err());
    }

    #[test]
    fn versions_parse_and_order() {
        assert_eq!(TalosVersion::parse("v1.13.9").unwrap(), TalosVersion::V1_13);
        assert_eq!(TalosVersion::parse("1.12").unwrap(), TalosVersion::V1_12);
        assert!(TalosVersion::parse("1.11").is_err());
        assert!(!TalosVersion::V1_12.has_inventory());
        assert!(TalosVersion::V1_13.has_inventory() && TalosVersion::default().has_inventory());
    }

    #[test]
    fn a_cluster_scoped_entry_matches_whatever_namespace_the_manifest_gave() {
        let entry = ObjRef::parse("_cilium_rbac.authorization.k8s.io_ClusterRole").unwrap();
        let desired = ObjRef {
            namespace: "kube-system".into(),
            ..entry.clone()
        };
        assert!(entry.is(&desired));
        let namespaced = ObjRef::parse("kube-system_cilium_apps_DaemonSet").unwrap();
        let elsewhere = ObjRef {
            namespace: "default".into(),
            ..namespaced.clone()
        };
        assert!(!namespaced.is(&elsewhere));
    }
}
