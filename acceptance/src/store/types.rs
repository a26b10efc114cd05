//! The resource-type table: which (group, version, resource) the server serves, with kind, scope,
//! short names and subresources. Built-in types are a static table; CRDs add entries at runtime.

use std::collections::BTreeMap;
use std::fmt;

/// A resource type without version: `("", "secrets")`, `("batch", "jobs")`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: &str, resource: &str) -> Self {
        GroupResource {
            group: group.into(),
            resource: resource.into(),
        }
    }

    /// A core (`v1`) resource: `GroupResource::core("pods")`.
    pub fn core(resource: &str) -> Self {
        Self::new("", resource)
    }
}

/// `secrets` for core, `jobs.batch` otherwise, as in the real server's messages.
impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}", self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// One served resource type.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceType {
    pub group: String,
    /// Served versions; the first is the preferred (and storage) version. Objects are stored once
    /// and served under every version without conversion.
    pub versions: Vec<String>,
    /// Plural name (`configmaps`).
    pub resource: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// `<resource>/status` exists: the main endpoint ignores `.status`, `/status` only writes it.
    pub status_subresource: bool,
    /// `metadata.generation` is maintained (bumped on changes outside metadata/status).
    pub generation: bool,
    /// Created from a CustomResourceDefinition.
    pub custom: bool,
}

impl ResourceType {
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.resource)
    }

    /// `v1` or `batch/v1` for the preferred version.
    pub fn api_version(&self) -> String {
        self.api_version_for(&self.versions[0])
    }

    pub fn api_version_for(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    pub fn serves(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v == version)
    }
}

/// Registry of served types, keyed by group/resource.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    types: BTreeMap<GroupResource, ResourceType>,
}

impl Registry {
    /// The built-in types of this simulated server.
    pub fn builtin() -> Self {
        let mut r = Registry::default();
        for t in builtin_types() {
            r.insert(t);
        }
        r
    }

    pub fn insert(&mut self, t: ResourceType) {
        self.types.insert(t.group_resource(), t);
    }

    pub fn remove(&mut self, gr: &GroupResource) -> Option<ResourceType> {
        self.types.remove(gr)
    }

    pub fn get(&self, gr: &GroupResource) -> Option<&ResourceType> {
        self.types.get(gr)
    }

    /// Lookup by URL parts; `None` if the version is not served.
    pub fn lookup(&self, group: &str, version: &str, resource: &str) -> Option<&ResourceType> {
        self.types
            .get(&GroupResource::new(group, resource))
            .filter(|t| t.serves(version))
    }

    /// Lookup by `apiVersion` + `kind` (used for ownerReferences and helpers).
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<&ResourceType> {
        let (group, version) = split_api_version(api_version);
        self.types
            .values()
            .find(|t| t.group == group && t.kind == kind && t.serves(version))
    }

    pub fn all(&self) -> impl Iterator<Item = &ResourceType> {
        self.types.values()
    }

    /// Groups (other than core) with their versions, preferred first.
    pub fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for t in self.types.values().filter(|t| !t.group.is_empty()) {
            let vs = out.entry(t.group.clone()).or_default();
            for v in &t.versions {
                if !vs.contains(v) {
                    vs.push(v.clone());
                }
            }
        }
        out
    }
}

/// `batch/v1` → (`batch`, `v1`), `v1` → (``, `v1`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

#[allow(clippy::too_many_arguments)]
fn t(
    group: &str,
    version: &str,
    resource: &str,
    kind: &str,
    namespaced: bool,
    short: &[&str],
    status: bool,
    generation: bool,
) -> ResourceType {
    ResourceType {
        group: group.into(),
        versions: vec![version.into()],
        resource: resource.into(),
        singular: kind.to_lowercase(),
        kind: kind.into(),
        namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: Vec::new(),
        status_subresource: status,
        generation,
        custom: false,
    }
}

fn builtin_types() -> Vec<ResourceType> {
    let mut v = vec![
        t(
            "",
            "v1",
            "namespaces",
            "Namespace",
            false,
            &["ns"],
            true,
            false,
        ),
        t("", "v1", "nodes", "Node", false, &["no"], true, false),
        t("", "v1", "pods", "Pod", true, &["po"], true, false),
        t("", "v1", "secrets", "Secret", true, &[], false, false),
        t(
            "",
            "v1",
            "configmaps",
            "ConfigMap",
            true,
            &["cm"],
            false,
            false,
        ),
        t(
            "",
            "v1",
            "serviceaccounts",
            "ServiceAccount",
            true,
            &["sa"],
            false,
            false,
        ),
        t("", "v1", "services", "Service", true, &["svc"], true, false),
        t(
            "",
            "v1",
            "endpoints",
            "Endpoints",
            true,
            &["ep"],
            false,
            false,
        ),
        t("", "v1", "events", "Event", true, &["ev"], false, false),
        t(
            "apps",
            "v1",
            "deployments",
            "Deployment",
            true,
            &["deploy"],
            true,
            true,
        ),
        t(
            "apps",
            "v1",
            "daemonsets",
            "DaemonSet",
            true,
            &["ds"],
            true,
            true,
        ),
        t(
            "apps",
            "v1",
            "replicasets",
            "ReplicaSet",
            true,
            &["rs"],
            true,
            true,
        ),
        t(
            "apps",
            "v1",
            "statefulsets",
            "StatefulSet",
            true,
            &["sts"],
            true,
            true,
        ),
        t("batch", "v1", "jobs", "Job", true, &[], true, true),
        t(
            "coordination.k8s.io",
            "v1",
            "leases",
            "Lease",
            true,
            &[],
            false,
            false,
        ),
        t(
            "events.k8s.io",
            "v1",
            "events",
            "Event",
            true,
            &["ev"],
            false,
            false,
        ),
        t(
            "rbac.authorization.k8s.io",
            "v1",
            "roles",
            "Role",
            true,
            &[],
            false,
            false,
        ),
        t(
            "rbac.authorization.k8s.io",
            "v1",
            "rolebindings",
            "RoleBinding",
            true,
            &[],
            false,
            false,
        ),
        t(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterroles",
            "ClusterRole",
            false,
            &[],
            false,
            false,
        ),
        t(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            "ClusterRoleBinding",
            false,
            &[],
            false,
            false,
        ),
        t(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
            &["crd", "crds"],
            true,
            true,
        ),
    ];
    for ty in v.iter_mut() {
        if matches!(
            ty.resource.as_str(),
            "pods"
                | "services"
                | "deployments"
                | "daemonsets"
                | "replicasets"
                | "statefulsets"
                | "jobs"
        ) {
            ty.categories = vec!["all".into()];
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_up_by_kind_and_url() {
        let r = Registry::builtin();
        assert_eq!(
            r.by_kind("batch/v1", "Job").map(|t| t.resource.as_str()),
            Some("jobs")
        );
        assert!(r.lookup("", "v1", "secrets").is_some());
        assert!(r.lookup("", "v2", "secrets").is_none());
        assert_eq!(
            GroupResource::new("batch", "jobs").to_string(),
            "jobs.batch"
        );
    }
}
