//! RBAC for pod identities: the authorizer of the real API server's RBAC mode, for the requests
//! programs make through the store as their pod's ServiceAccount.
//!
//! A [`Store`](super::Store) handle made with [`Store::as_user`](super::Store::as_user) checks every
//! `get`, `list`, `watch`, `create`, `update`, `patch` and `delete` against the Roles and
//! ClusterRoles bound to the user by RoleBindings and ClusterRoleBindings, as the RBAC
//! authorizer does: rules match by apiGroup, resource (`resource/subresource`, `*`, `*/sub`),
//! verb and resourceNames (a rule with resourceNames never matches a request without a name,
//! e.g. `create` or `list`); RoleBindings grant only in their namespace, ClusterRoleBindings
//! everywhere; subjects are ServiceAccounts (namespace defaulting to the RoleBinding's), Users
//! and Groups; aggregated ClusterRoles (`aggregationRule.clusterRoleSelectors` with
//! `matchLabels`) add the rules of the ClusterRoles they select. Members of `system:masters`
//! bypass authorization. Creating or updating a Role/ClusterRole needs `escalate` on it or every
//! permission it grants; creating or updating a binding needs `bind` on the referenced role or
//! every permission of that role (the real server's escalation prevention, with covering checked
//! rule by rule: a `*` in a granted rule needs a `*` in the creator's rules).
//!
//! Refusals are the real 403 `Forbidden` Status: `secrets "x" is forbidden: User
//! "system:serviceaccount:ns:sa" cannot get resource "secrets" in API group "" in the namespace
//! "ns"` (`... at the cluster scope` for cluster-scoped resources and all-namespace requests).
//!
//! Not enforced: non-resource URLs, `impersonate`, the watch event stream of
//! [`Store::subscribe`](super::Store::subscribe) (in-process, unauthenticated), requests of the
//! in-process controllers (kubelet, scheduler, workload controllers: they act as the system).

use std::sync::Arc;

use serde_json::Value;

use super::error::ApiError;
use super::types::GroupResource;
use super::{State, Store};

/// The API group of the RBAC objects.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// An authenticated user: name and groups, as the authenticator hands them to the authorizer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub groups: Vec<String>,
}

impl UserInfo {
    /// `system:serviceaccount:NS:NAME` with groups `system:serviceaccounts`,
    /// `system:serviceaccounts:NS` and `system:authenticated`.
    pub fn service_account(namespace: &str, name: &str) -> UserInfo {
        UserInfo {
            name: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
        }
    }

    /// The ServiceAccount `(namespace, name)` this user is, if it is one.
    pub fn as_service_account(&self) -> Option<(&str, &str)> {
        let rest = self.name.strip_prefix("system:serviceaccount:")?;
        rest.split_once(':')
    }

    fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }
}

/// What a request asks for (the authorizer's attributes).
#[derive(Clone, Debug)]
pub struct Request<'a> {
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: Option<&'a str>,
    /// `""`: cluster scope (cluster-scoped resources, or all namespaces).
    pub namespace: &'a str,
    /// `""`: no name (create, list, watch of a collection).
    pub name: &'a str,
}

impl Request<'_> {
    fn resource_path(&self) -> String {
        match self.subresource {
            Some(s) => format!("{}/{s}", self.resource),
            None => self.resource.to_string(),
        }
    }
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether one PolicyRule allows `req`.
pub fn rule_allows(rule: &Value, req: &Request<'_>) -> bool {
    let has = |key: &str, want: &str| strings(rule, key).iter().any(|v| v == "*" || v == want);
    if !has("verbs", req.verb) || !has("apiGroups", req.group) {
        return false;
    }
    let resources = strings(rule, "resources");
    let resource_ok = resources.iter().any(|r| match req.subresource {
        None => r == "*" || r == req.resource,
        Some(sub) => {
            *r == req.resource_path()
                || r == "*"
                || *r == format!("*/{sub}")
                || *r == format!("{}/*", req.resource)
        }
    });
    if !resource_ok {
        return false;
    }
    let names = strings(rule, "resourceNames");
    names.is_empty() || names.iter().any(|n| n == req.name)
}

fn rbac(resource: &str) -> GroupResource {
    GroupResource::new(RBAC_GROUP, resource)
}

fn subject_matches(subject: &Value, user: &UserInfo, binding_ns: &str) -> bool {
    let s = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or("");
    match s("kind") {
        "ServiceAccount" => {
            let ns = if s("namespace").is_empty() {
                binding_ns
            } else {
                s("namespace")
            };
            user.as_service_account() == Some((ns, s("name")))
        }
        "User" => s("name") == user.name,
        "Group" => user.groups.iter().any(|g| g == s("name")),
        _ => false,
    }
}

fn labels_match(selector: &Value, obj: &Value) -> bool {
    let Some(wanted) = selector.get("matchLabels").and_then(Value::as_object) else {
        return false;
    };
    let labels = obj.pointer("/metadata/labels");
    !wanted.is_empty()
        && wanted
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

impl State {
    /// The rules of a ClusterRole, with the rules of the ClusterRoles its aggregationRule selects.
    fn cluster_role_rules(&self, name: &str) -> Vec<Value> {
        let Some(role) = self.object(&rbac("clusterroles"), "", name) else {
            return Vec::new();
        };
        let mut rules = role
            .get("rules")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let selectors = role
            .pointer("/aggregationRule/clusterRoleSelectors")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if !selectors.is_empty() {
            for ((_, other), obj) in self
                .objects
                .get(&rbac("clusterroles"))
                .into_iter()
                .flatten()
            {
                if other != name && selectors.iter().any(|s| labels_match(s, obj)) {
                    rules.extend(
                        obj.get("rules")
                            .and_then(Value::as_array)
                            .cloned()
                            .unwrap_or_default(),
                    );
                }
            }
        }
        rules
    }

    fn role_ref_rules(&self, role_ref: Option<&Value>, binding_ns: &str) -> Vec<Value> {
        let Some(r) = role_ref else {
            return Vec::new();
        };
        let name = r.get("name").and_then(Value::as_str).unwrap_or("");
        match r.get("kind").and_then(Value::as_str) {
            Some("ClusterRole") => self.cluster_role_rules(name),
            Some("Role") if !binding_ns.is_empty() => self
                .object(&rbac("roles"), binding_ns, name)
                .and_then(|o| o.get("rules"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// Every rule that applies to `user` in `namespace` (`""`: only cluster-wide grants).
    fn rules_for(&self, user: &UserInfo, namespace: &str) -> Vec<Value> {
        let bound = |b: &Value, ns: &str| {
            b.get("subjects")
                .and_then(Value::as_array)
                .is_some_and(|s| s.iter().any(|s| subject_matches(s, user, ns)))
        };
        let mut rules = Vec::new();
        for b in self
            .objects
            .get(&rbac("clusterrolebindings"))
            .into_iter()
            .flat_map(|m| m.values())
        {
            if bound(b, "") {
                rules.extend(self.role_ref_rules(b.get("roleRef"), ""));
            }
        }
        if !namespace.is_empty() {
            for ((ns, _), b) in self
                .objects
                .get(&rbac("rolebindings"))
                .into_iter()
                .flatten()
            {
                if ns == namespace && bound(b, ns) {
                    rules.extend(self.role_ref_rules(b.get("roleRef"), ns));
                }
            }
        }
        rules
    }

    /// Whether `user` may do `req`.
    pub(crate) fn allowed(&self, user: &UserInfo, req: &Request<'_>) -> bool {
        user.is_master()
            || self
                .rules_for(user, req.namespace)
                .iter()
                .any(|r| rule_allows(r, req))
    }

    /// `Ok` when allowed; the real server's 403 otherwise.
    pub(crate) fn authorize(&self, user: &UserInfo, req: &Request<'_>) -> Result<(), ApiError> {
        if self.allowed(user, req) {
            return Ok(());
        }
        Err(forbidden(user, req))
    }

    /// The rules of `rules` that `user` does not hold in `namespace`, compacted as the real
    /// server lists them: one line per group/resource/name with the missing verbs
    /// (`{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}`).
    fn not_held(&self, user: &UserInfo, namespace: &str, rules: &[Value]) -> Vec<String> {
        let mut missing: Vec<((String, String, String), Vec<String>)> = Vec::new();
        for rule in rules {
            let names = strings(rule, "resourceNames");
            let names: Vec<&str> = if names.is_empty() {
                vec![""]
            } else {
                names.iter().map(String::as_str).collect()
            };
            for group in strings(rule, "apiGroups") {
                for resource in strings(rule, "resources") {
                    let (res, sub) = match resource.split_once('/') {
                        Some((r, s)) => (r.to_string(), Some(s.to_string())),
                        None => (resource.clone(), None),
                    };
                    for name in &names {
                        for verb in strings(rule, "verbs") {
                            let req = Request {
                                verb: &verb,
                                group: &group,
                                resource: &res,
                                subresource: sub.as_deref(),
                                namespace,
                                name,
                            };
                            if self.allowed(user, &req) {
                                continue;
                            }
                            let key = (group.clone(), resource.clone(), name.to_string());
                            match missing.iter_mut().find(|(k, _)| *k == key) {
                                Some((_, verbs)) if !verbs.contains(&verb) => verbs.push(verb),
                                Some(_) => {}
                                None => missing.push((key, vec![verb])),
                            }
                        }
                    }
                }
            }
        }
        missing
            .into_iter()
            .map(|((group, resource, name), verbs)| {
                let names = if name.is_empty() {
                    String::new()
                } else {
                    format!(", ResourceNames:[\"{name}\"]")
                };
                format!(
                    "{{APIGroups:[\"{group}\"], Resources:[\"{resource}\"]{names}, Verbs:[\"{}\"]}}",
                    verbs.join("\" \"")
                )
            })
            .collect()
    }

    /// Escalation prevention for a Role/ClusterRole or binding `obj` written by `user`.
    pub(crate) fn check_escalation(
        &self,
        user: &UserInfo,
        gr: &GroupResource,
        ns: &str,
        obj: &Value,
    ) -> Result<(), ApiError> {
        if gr.group != RBAC_GROUP || user.is_master() {
            return Ok(());
        }
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let (rules, special) = match gr.resource.as_str() {
            "roles" | "clusterroles" => {
                let mut rules = obj
                    .get("rules")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if gr.resource == "clusterroles" {
                    // An aggregated role grants what it selects.
                    let mut probe = self.clone_role_rules(obj);
                    rules.append(&mut probe);
                }
                let req = Request {
                    verb: "escalate",
                    group: RBAC_GROUP,
                    resource: &gr.resource,
                    subresource: None,
                    namespace: ns,
                    name,
                };
                (rules, self.allowed(user, &req))
            }
            "rolebindings" | "clusterrolebindings" => {
                let role_ref = obj.get("roleRef");
                let kind = role_ref
                    .and_then(|r| r.get("kind"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let role_name = role_ref
                    .and_then(|r| r.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let resource = if kind == "Role" {
                    "roles"
                } else {
                    "clusterroles"
                };
                let req = Request {
                    verb: "bind",
                    group: RBAC_GROUP,
                    resource,
                    subresource: None,
                    namespace: ns,
                    name: role_name,
                };
                (self.role_ref_rules(role_ref, ns), self.allowed(user, &req))
            }
            _ => return Ok(()),
        };
        if special {
            return Ok(());
        }
        let missing = self.not_held(user, ns, &rules);
        if missing.is_empty() {
            return Ok(());
        }
        let why = format!(
            "user \"{}\" (groups=[\"{}\"]) is attempting to grant RBAC permissions not currently held:\n{}",
            user.name,
            user.groups.join("\" \""),
            missing.join("\n")
        );
        Err(ApiError::forbidden(gr, name, &why))
    }

    /// The rules of the ClusterRoles an aggregated ClusterRole `obj` (not stored yet) selects.
    fn clone_role_rules(&self, obj: &Value) -> Vec<Value> {
        let selectors = obj
            .pointer("/aggregationRule/clusterRoleSelectors")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if selectors.is_empty() {
            return Vec::new();
        }
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        self.objects
            .get(&rbac("clusterroles"))
            .into_iter()
            .flatten()
            .filter(|((_, n), o)| n != name && selectors.iter().any(|s| labels_match(s, o)))
            .flat_map(|(_, o)| {
                o.get("rules")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            })
            .collect()
    }
}

/// The real server's refusal: `<resource> ["name"] is forbidden: User "u" cannot VERB resource
/// "R" in API group "G" in the namespace "NS"` (or `at the cluster scope`).
pub fn forbidden(user: &UserInfo, req: &Request<'_>) -> ApiError {
    let gr = GroupResource::new(req.group, req.resource);
    let scope = if req.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{}\"", req.namespace)
    };
    let why = format!(
        "User \"{}\" cannot {} resource \"{}\" in API group \"{}\" {scope}",
        user.name,
        req.verb,
        req.resource_path(),
        req.group
    );
    let qualified = gr.to_string();
    let message = if req.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} \"{}\" is forbidden: {why}", req.name)
    };
    let mut e = ApiError::new(403, "Forbidden", message);
    let mut details = serde_json::json!({"kind": req.resource});
    if !req.name.is_empty() {
        details["name"] = serde_json::json!(req.name);
    }
    if !req.group.is_empty() {
        details["group"] = serde_json::json!(req.group);
    }
    e.details = Some(details);
    e
}

impl Store {
    /// A handle on the same store whose requests are authorized as `user` (RBAC, see
    /// [`rbac`](self)). The kubelet hands programs such a handle for their pod's ServiceAccount.
    pub fn as_user(&self, user: UserInfo) -> Store {
        Store {
            inner: self.inner.clone(),
            user: Some(Arc::new(user)),
        }
    }

    /// A handle on the same store without a user: unrestricted, as the in-process controllers.
    pub fn system(&self) -> Store {
        Store {
            inner: self.inner.clone(),
            user: None,
        }
    }

    /// The user requests of this handle are authorized as (`None`: the system).
    pub fn user(&self) -> Option<&UserInfo> {
        self.user.as_deref()
    }

    /// Whether `user` may do `req`, by the RBAC objects stored now (a SubjectAccessReview).
    pub fn allowed(&self, user: &UserInfo, req: &Request<'_>) -> bool {
        self.lock().allowed(user, req)
    }

    /// Authorizes `req` for this handle's user (always `Ok` for the system), under the lock.
    pub(crate) fn authorize_locked(&self, st: &State, req: &Request<'_>) -> Result<(), ApiError> {
        match (
            &self.user,
            self.inner.rbac.load(std::sync::atomic::Ordering::Relaxed),
        ) {
            (Some(user), true) => st.authorize(user, req),
            _ => Ok(()),
        }
    }

    /// Escalation prevention for RBAC writes by this handle's user, under the lock.
    pub(crate) fn check_escalation_locked(
        &self,
        st: &State,
        gr: &GroupResource,
        ns: &str,
        obj: &Value,
    ) -> Result<(), ApiError> {
        match (
            &self.user,
            self.inner.rbac.load(std::sync::atomic::Ordering::Relaxed),
        ) {
            (Some(user), true) => st.check_escalation(user, gr, ns, obj),
            _ => Ok(()),
        }
    }

    /// Turns RBAC enforcement for pod identities on (the default) or off.
    pub fn set_rbac(&self, enabled: bool) {
        self.inner
            .rbac
            .store(enabled, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether RBAC is enforced for pod identities.
    pub fn rbac(&self) -> bool {
        self.inner.rbac.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req<'a>(
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        ns: &'a str,
        name: &'a str,
    ) -> Request<'a> {
        Request {
            verb,
            group,
            resource,
            subresource: None,
            namespace: ns,
            name,
        }
    }

    #[test]
    fn rules_match_by_group_resource_verb_and_name() {
        let rule = json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["a"]});
        assert!(rule_allows(&rule, &req("get", "", "secrets", "ns", "a")));
        assert!(!rule_allows(&rule, &req("get", "", "secrets", "ns", "b")));
        assert!(!rule_allows(&rule, &req("list", "", "secrets", "ns", "")));
        assert!(!rule_allows(
            &rule,
            &req("get", "apps", "secrets", "ns", "a")
        ));
        let star = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]});
        let mut sub = req("get", "", "pods", "ns", "p");
        sub.subresource = Some("log");
        assert!(rule_allows(&star, &sub));
        let pods = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]});
        assert!(!rule_allows(&pods, &sub), "pods does not grant pods/log");
        let logs = json!({"apiGroups": [""], "resources": ["*/log"], "verbs": ["get"]});
        assert!(rule_allows(&logs, &sub));
    }

    #[test]
    fn the_refusal_reads_like_the_real_server() {
        let u = UserInfo::service_account("ns", "sa");
        let e = forbidden(&u, &req("list", "", "secrets", "kube-system", ""));
        assert_eq!(
            e.message,
            "secrets is forbidden: User \"system:serviceaccount:ns:sa\" cannot list resource \"secrets\" in API group \"\" in the namespace \"kube-system\""
        );
        let e = forbidden(&u, &req("create", RBAC_GROUP, "clusterroles", "", "x"));
        assert_eq!(
            e.message,
            "clusterroles.rbac.authorization.k8s.io \"x\" is forbidden: User \"system:serviceaccount:ns:sa\" cannot create resource \"clusterroles\" in API group \"rbac.authorization.k8s.io\" at the cluster scope"
        );
        assert_eq!(e.code, 403);
    }
}
