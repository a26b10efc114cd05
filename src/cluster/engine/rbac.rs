//! What the bootstrap ServiceAccount may do: [`Rbac::ClusterAdmin`](super::Rbac::ClusterAdmin)
//! (the `cluster-admin` ClusterRole, as the Talos guides and the Flux bootstrap module do) or
//! [`Rbac::Minimal`](super::Rbac::Minimal): exactly the given [`Rule`]s, granted only for the run.
//!
//! A minimal run creates, besides the ServiceAccount:
//! - ClusterRole + ClusterRoleBinding `<run object name>` with the rules without a namespace;
//! - per namespace that rules name: Role + RoleBinding `<run object name>` in it;
//!
//! all labelled like the run's other objects and deleted with them after the run (and by the next
//! run of the same target when a killed run left them).
//!
//! The rules come from the caller, which knows what its program does (chart installs derive them
//! from the chart's render, in the helm subsystem).

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde_json::{Value, json};

use super::objects::RunNames;

/// One PolicyRule, optionally limited to a namespace (then granted by a Role in it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rule {
    /// `None`: everywhere (ClusterRole); `Some(ns)`: only in `ns` (Role).
    pub namespace: Option<String>,
    /// `""` is the core group.
    pub api_groups: Vec<String>,
    /// Plural resources, `resource/subresource`, or `*`.
    pub resources: Vec<String>,
    pub verbs: Vec<String>,
    /// Empty: every object.
    pub resource_names: Vec<String>,
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

impl Rule {
    /// A cluster-wide rule.
    pub fn new(api_groups: &[&str], resources: &[&str], verbs: &[&str]) -> Rule {
        Rule {
            namespace: None,
            api_groups: strings(api_groups),
            resources: strings(resources),
            verbs: strings(verbs),
            resource_names: Vec::new(),
        }
    }

    /// The same rule, granted only in `namespace`.
    pub fn in_namespace(mut self, namespace: &str) -> Rule {
        self.namespace = Some(namespace.to_owned());
        self
    }

    /// The same rule, limited to objects of these names.
    pub fn named(mut self, names: &[&str]) -> Rule {
        self.resource_names = strings(names);
        self
    }

    /// The rule as a Kubernetes `PolicyRule` (JSON).
    pub fn policy_rule(&self) -> Value {
        let mut rule = json!({
            "apiGroups": self.api_groups,
            "resources": self.resources,
            "verbs": self.verbs,
        });
        if !self.resource_names.is_empty() {
            rule["resourceNames"] = json!(self.resource_names);
        }
        rule
    }
}

/// What a resource's `rbac` input asks for; the caller turns [`RbacPolicy::Minimal`] into an
/// [`Rbac::Minimal`](super::Rbac::Minimal) with the rules its program needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RbacPolicy {
    #[default]
    ClusterAdmin,
    Minimal,
}

pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

fn typed<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("RBAC object matches its API type")
}

/// The run's ClusterRole with the cluster-wide rules (possibly none).
pub fn cluster_role(names: &RunNames, rules: &[Rule]) -> ClusterRole {
    let rules: Vec<Value> = rules
        .iter()
        .filter(|r| r.namespace.is_none())
        .map(Rule::policy_rule)
        .collect();
    typed(json!({
        "metadata": {"name": names.object, "labels": names.labels()},
        "rules": rules,
    }))
}

/// The binding of the run's ServiceAccount (in `sa_namespace`) to the ClusterRole `role`.
pub fn cluster_role_binding(
    names: &RunNames,
    sa_namespace: &str,
    role: &str,
) -> ClusterRoleBinding {
    typed(json!({
        "metadata": {"name": names.object, "labels": names.labels()},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": names.object, "namespace": sa_namespace}],
    }))
}

/// One Role and RoleBinding per namespace that rules are limited to.
pub fn namespaced(
    names: &RunNames,
    sa_namespace: &str,
    rules: &[Rule],
) -> Vec<(Role, RoleBinding)> {
    let mut by_ns: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for r in rules {
        if let Some(ns) = &r.namespace {
            by_ns.entry(ns).or_default().push(r.policy_rule());
        }
    }
    by_ns
        .into_iter()
        .map(|(ns, rules)| {
            let role: Role = typed(json!({
                "metadata": {"name": names.object, "namespace": ns, "labels": names.labels()},
                "rules": rules,
            }));
            let binding: RoleBinding = typed(json!({
                "metadata": {"name": names.object, "namespace": ns, "labels": names.labels()},
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": names.object},
                "subjects": [{"kind": "ServiceAccount", "name": names.object, "namespace": sa_namespace}],
            }));
            (role, binding)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> RunNames {
        RunNames {
            object: "talosboot-x-1".into(),
            run_id: "1".into(),
            target_label: "t".into(),
        }
    }

    #[test]
    fn namespaced_rules_become_roles_and_the_rest_the_cluster_role() {
        let rules = vec![
            Rule::new(&[""], &["secrets"], &["get", "create"]).in_namespace("kube-system"),
            Rule::new(&["apps"], &["deployments"], &["get"]),
        ];
        let role = cluster_role(&names(), &rules);
        assert_eq!(role.rules.as_ref().map(Vec::len), Some(1));
        let ns = namespaced(&names(), "boot", &rules);
        assert_eq!(ns.len(), 1);
        let (r, b) = &ns[0];
        assert_eq!(r.metadata.namespace.as_deref(), Some("kube-system"));
        assert_eq!(b.role_ref.kind, "Role");
        let subject = &b.subjects.as_ref().expect("subjects")[0];
        assert_eq!(subject.namespace.as_deref(), Some("boot"));
    }
}
