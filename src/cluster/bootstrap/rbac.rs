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
//! [`helm_install_rules`] derives the rules a `helm upgrade --install` of a chart needs from the
//! kinds the chart renders: read and write on each kind, Helm's release records (Secrets in the
//! release namespace only), and — when the chart renders Roles, ClusterRoles or bindings —
//! `escalate` and `bind` on them. The API server refuses to let anyone create a role granting
//! permissions they do not hold, or bind a role whose permissions they do not hold, unless they
//! have `escalate` / `bind`; a chart that ships RBAC (Cilium does) therefore needs them, and a
//! ServiceAccount with `escalate` and `bind` can in principle grant itself anything. `minimal`
//! narrows what a run can touch by mistake; it is not a sandbox for an untrusted chart.

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

/// A kind a chart renders, by API group and plural resource (`("apps", "daemonsets")`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Kind {
    pub group: String,
    pub resource: String,
}

impl Kind {
    pub fn new(group: &str, resource: &str) -> Kind {
        Kind {
            group: group.to_owned(),
            resource: resource.to_owned(),
        }
    }
}

/// What a resource's `rbac` input asks for; chart installs turn [`RbacPolicy::Minimal`] into
/// an [`Rbac::Minimal`](super::Rbac::Minimal) with the rules of what the chart renders
/// (see [`crate::cluster::chart_rbac`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RbacPolicy {
    #[default]
    ClusterAdmin,
    Minimal,
}

/// The verbs Helm uses on the objects of a release: look up (ownership check), create,
/// three-way-merge patch or update, delete what a new revision drops, watch for `--wait`.
pub const HELM_OBJECT_VERBS: &[&str] = &[
    "get", "list", "watch", "create", "update", "patch", "delete",
];

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
const RBAC_KINDS: &[&str] = &[
    "roles",
    "clusterroles",
    "rolebindings",
    "clusterrolebindings",
];

/// The rules a `helm upgrade --install` (and `helm uninstall`) of a chart rendering `kinds` into
/// `release_namespace` needs: [`HELM_OBJECT_VERBS`] on every kind (cluster-wide: charts put
/// objects in other namespaces and cluster-scoped ones), the release records (Secrets in
/// `release_namespace`: list, get, create, update, patch, delete), and `escalate`/`bind` on
/// ClusterRoles and Roles when the chart renders any RBAC kind (see the module docs).
pub fn helm_install_rules(release_namespace: &str, kinds: &[Kind]) -> Vec<Rule> {
    let mut by_group: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for k in kinds {
        let resources = by_group.entry(k.group.as_str()).or_default();
        if !resources.contains(&k.resource.as_str()) {
            resources.push(k.resource.as_str());
        }
    }
    let mut rules: Vec<Rule> = by_group
        .iter()
        .map(|(group, resources)| Rule::new(&[group], resources, HELM_OBJECT_VERBS))
        .collect();
    let chart_writes_secrets = kinds
        .iter()
        .any(|k| k.group.is_empty() && k.resource == "secrets");
    if !chart_writes_secrets {
        rules.push(
            Rule::new(
                &[""],
                &["secrets"],
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
            )
            .in_namespace(release_namespace),
        );
    }
    let ships_rbac = kinds
        .iter()
        .any(|k| k.group == RBAC_GROUP && RBAC_KINDS.contains(&k.resource.as_str()));
    if ships_rbac {
        rules.push(Rule::new(
            &[RBAC_GROUP],
            &["clusterroles", "roles"],
            &["escalate", "bind"],
        ));
    }
    rules
}

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
    fn a_chart_without_rbac_gets_its_kinds_and_its_release_records_only() {
        let rules = helm_install_rules(
            "apps-ns",
            &[
                Kind::new("", "configmaps"),
                Kind::new("apps", "deployments"),
            ],
        );
        assert_eq!(rules.len(), 3, "{rules:?}");
        let secrets = rules
            .iter()
            .find(|r| r.resources == ["secrets"])
            .expect("records");
        assert_eq!(secrets.namespace.as_deref(), Some("apps-ns"));
        assert!(
            !rules
                .iter()
                .any(|r| r.verbs.contains(&"escalate".to_owned()))
        );
        let deployments = rules
            .iter()
            .find(|r| r.api_groups == ["apps"])
            .expect("apps");
        assert_eq!(deployments.verbs, strings(HELM_OBJECT_VERBS));
    }

    #[test]
    fn a_chart_shipping_rbac_needs_escalate_and_bind() {
        // What the Cilium chart renders with the Talos values.
        let kinds: Vec<Kind> = [
            ("", "serviceaccounts"),
            ("", "secrets"),
            ("", "configmaps"),
            ("", "services"),
            (RBAC_GROUP, "clusterroles"),
            (RBAC_GROUP, "clusterrolebindings"),
            ("apps", "daemonsets"),
            ("apps", "deployments"),
        ]
        .iter()
        .map(|(g, r)| Kind::new(g, r))
        .collect();
        let rules = helm_install_rules("kube-system", &kinds);
        let special = rules
            .iter()
            .find(|r| r.verbs == ["escalate", "bind"])
            .expect("escalate/bind");
        assert_eq!(special.resources, ["clusterroles", "roles"]);
        assert!(
            rules.iter().all(|r| r.namespace.is_none()),
            "secrets are a chart kind: granted like the others"
        );
        let core = rules.iter().find(|r| r.api_groups == [""]).expect("core");
        for r in ["secrets", "serviceaccounts", "configmaps", "services"] {
            assert!(core.resources.contains(&r.to_owned()), "{r}");
        }
        assert!(!core.resources.contains(&"namespaces".to_owned()));
    }

    #[test]
    fn namespaced_rules_become_roles_and_the_rest_the_cluster_role() {
        let rules = helm_install_rules("kube-system", &[Kind::new("", "configmaps")]);
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
