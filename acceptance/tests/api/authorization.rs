//! RBAC enforcement for ServiceAccounts, through the Kubernetes API with ServiceAccount tokens:
//! refusals worded like the real server, Role/ClusterRole bindings, namespace scoping,
//! resourceNames, subresources, aggregated ClusterRoles, escalation prevention, admin stays admin.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use talos_sim::SimCluster;

use crate::common::{client_for, cm, start, status};

fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("valid object")
}

async fn namespace(admin: &Client, name: &str) {
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": name}})),
        )
        .await
        .expect("namespace");
}

/// A ServiceAccount `ns/name` and a client authenticated as it.
async fn service_account(sim: &SimCluster, admin: &Client, ns: &str, name: &str) -> Client {
    Api::<ServiceAccount>::namespaced(admin.clone(), ns)
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": name}})),
        )
        .await
        .expect("service account");
    client_for(&sim.service_account_kubeconfig_yaml(ns, name)).await
}

async fn role(admin: &Client, ns: &str, name: &str, rules: Value) {
    Api::<Role>::namespaced(admin.clone(), ns)
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": name}, "rules": rules})),
        )
        .await
        .expect("role");
}

async fn bind(admin: &Client, ns: Option<&str>, kind: &str, role: &str, sa: (&str, &str)) {
    let body = json!({"metadata": {"name": format!("{role}-{}", sa.1)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "namespace": sa.0, "name": sa.1}]});
    match ns {
        Some(ns) => {
            Api::<RoleBinding>::namespaced(admin.clone(), ns)
                .create(&PostParams::default(), &from(body))
                .await
                .expect("rolebinding");
        }
        None => {
            Api::<ClusterRoleBinding>::all(admin.clone())
                .create(&PostParams::default(), &from(body))
                .await
                .expect("clusterrolebinding");
        }
    }
}

#[tokio::test]
async fn an_unbound_service_account_is_refused_with_the_real_message() {
    let (sim, admin) = start().await;
    let sa = service_account(&sim, &admin, "default", "bot").await;
    let e = status(
        Api::<Secret>::namespaced(sa.clone(), "kube-system")
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        e.message,
        "secrets is forbidden: User \"system:serviceaccount:default:bot\" cannot list resource \"secrets\" in API group \"\" in the namespace \"kube-system\""
    );
    let e = status(
        Api::<ConfigMap>::namespaced(sa.clone(), "default")
            .get("x")
            .await
            .unwrap_err(),
    );
    assert_eq!(
        e.message,
        "configmaps \"x\" is forbidden: User \"system:serviceaccount:default:bot\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    let e = status(
        Api::<ClusterRole>::all(sa.clone())
            .create(
                &PostParams::default(),
                &from(json!({"metadata": {"name": "r"}, "rules": []})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        e.message,
        "clusterroles.rbac.authorization.k8s.io is forbidden: User \"system:serviceaccount:default:bot\" cannot create resource \"clusterroles\" in API group \"rbac.authorization.k8s.io\" at the cluster scope"
    );
    let e = status(
        Api::<Pod>::all(sa)
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert!(
        e.message
            .ends_with("cannot list resource \"pods\" in API group \"\" at the cluster scope"),
        "{}",
        e.message
    );
    // The admin stays admin.
    Api::<Secret>::namespaced(admin, "kube-system")
        .list(&ListParams::default())
        .await
        .expect("admin lists secrets");
}

#[tokio::test]
async fn a_role_grants_only_in_its_namespace_and_only_its_verbs() {
    let (sim, admin) = start().await;
    namespace(&admin, "team").await;
    let sa = service_account(&sim, &admin, "team", "bot").await;
    role(&admin, "team", "cm-rw", json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create"]}])).await;
    bind(&admin, Some("team"), "Role", "cm-rw", ("team", "bot")).await;
    let team: Api<ConfigMap> = Api::namespaced(sa.clone(), "team");
    team.create(&PostParams::default(), &cm("a", json!({"k": "v"})))
        .await
        .expect("create allowed");
    team.get("a").await.expect("get allowed");
    let e = status(team.delete("a", &Default::default()).await.unwrap_err());
    assert!(
        e.message.contains("cannot delete resource \"configmaps\""),
        "{}",
        e.message
    );
    let e = status(
        Api::<ConfigMap>::namespaced(sa.clone(), "default")
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert!(
        e.message.contains("in the namespace \"default\""),
        "{}",
        e.message
    );
    // A patch is its own verb.
    let e = status(
        team.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "w"}})),
        )
        .await
        .unwrap_err(),
    );
    assert!(
        e.message.contains("cannot patch resource \"configmaps\""),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn resource_names_and_subresources_are_matched() {
    let (sim, admin) = start().await;
    let sa = service_account(&sim, &admin, "default", "bot").await;
    role(&admin, "default", "one", json!([
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "update"], "resourceNames": ["mine"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["get"]},
    ]))
    .await;
    bind(&admin, Some("default"), "Role", "one", ("default", "bot")).await;
    let admin_cms: Api<ConfigMap> = Api::namespaced(admin.clone(), "default");
    for name in ["mine", "other"] {
        admin_cms
            .create(&PostParams::default(), &cm(name, json!({})))
            .await
            .unwrap();
    }
    let cms: Api<ConfigMap> = Api::namespaced(sa.clone(), "default");
    cms.get("mine").await.expect("named object allowed");
    let e = status(cms.get("other").await.unwrap_err());
    assert!(
        e.message.starts_with("configmaps \"other\" is forbidden"),
        "{}",
        e.message
    );
    let e = status(cms.list(&ListParams::default()).await.unwrap_err());
    assert!(
        e.message.contains("cannot list"),
        "a named rule never grants list: {}",
        e.message
    );
    // pods/status does not grant pods.
    let e = status(
        Api::<Pod>::namespaced(sa, "default")
            .get("p")
            .await
            .unwrap_err(),
    );
    assert!(
        e.message.contains("cannot get resource \"pods\""),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn aggregated_cluster_roles_and_cluster_bindings_grant_everywhere() {
    let (sim, admin) = start().await;
    let sa = service_account(&sim, &admin, "default", "viewer").await;
    bind(&admin, None, "ClusterRole", "view", ("default", "viewer")).await;
    Api::<Pod>::all(sa.clone())
        .list(&ListParams::default())
        .await
        .expect("view lists pods everywhere");
    let e = status(
        Api::<ConfigMap>::namespaced(sa.clone(), "default")
            .create(&PostParams::default(), &cm("x", json!({})))
            .await
            .unwrap_err(),
    );
    assert!(e.message.contains("cannot create"), "{}", e.message);
    // view does not read Secrets.
    assert_eq!(
        status(
            Api::<Secret>::namespaced(sa.clone(), "default")
                .list(&ListParams::default())
                .await
                .unwrap_err()
        )
        .code,
        403
    );
    // A ClusterRole labelled for aggregation into `view` adds its rules to it.
    Api::<ClusterRole>::all(admin.clone())
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "view-leases", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
                "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["list"]}]})),
        )
        .await
        .unwrap();
    Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(sa, "kube-node-lease")
        .list(&ListParams::default())
        .await
        .expect("aggregated rule applies");
}

#[tokio::test]
async fn creating_roles_and_bindings_needs_the_permissions_or_escalate_and_bind() {
    let (sim, admin) = start().await;
    let sa = service_account(&sim, &admin, "default", "installer").await;
    Api::<ClusterRole>::all(admin.clone())
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "rbac-writer"},
                "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles", "clusterrolebindings"], "verbs": ["create", "get"]}]})),
        )
        .await
        .unwrap();
    bind(
        &admin,
        None,
        "ClusterRole",
        "rbac-writer",
        ("default", "installer"),
    )
    .await;
    let roles: Api<ClusterRole> = Api::all(sa.clone());
    let grant_secrets = json!({"metadata": {"name": "reads-secrets"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]});
    let e = status(
        roles
            .create(&PostParams::default(), &from(grant_secrets.clone()))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 403);
    assert!(
        e.message
            .contains("is attempting to grant RBAC permissions not currently held")
            && e.message
                .contains("{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\"]}"),
        "{}",
        e.message
    );
    // A role granting only what the creator holds is fine.
    roles
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "subset"},
                "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["get"]}]})),
        )
        .await
        .expect("no escalation");
    let bindings: Api<ClusterRoleBinding> = Api::all(sa.clone());
    let bind_admin = json!({"metadata": {"name": "to-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "namespace": "default", "name": "installer"}]});
    let e = status(
        bindings
            .create(&PostParams::default(), &from(bind_admin.clone()))
            .await
            .unwrap_err(),
    );
    assert!(e.message.contains("not currently held"), "{}", e.message);
    // With escalate and bind it may.
    Api::<ClusterRole>::all(admin.clone())
        .patch(
            "rbac-writer",
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": [{"apiGroups": ["rbac.authorization.k8s.io"],
                "resources": ["clusterroles", "clusterrolebindings"], "verbs": ["create", "get", "escalate", "bind"]}]})),
        )
        .await
        .unwrap();
    roles
        .create(&PostParams::default(), &from(grant_secrets))
        .await
        .expect("escalate allows");
    bindings
        .create(&PostParams::default(), &from(bind_admin))
        .await
        .expect("bind allows");
    // ... and now it is cluster-admin.
    Api::<Secret>::namespaced(sa, "kube-system")
        .list(&ListParams::default())
        .await
        .expect("bound to cluster-admin");
}

#[tokio::test]
async fn tokens_of_deleted_or_forged_service_accounts_are_rejected() {
    let (sim, admin) = start().await;
    let sa = service_account(&sim, &admin, "default", "gone").await;
    Api::<ServiceAccount>::namespaced(admin.clone(), "default")
        .delete("gone", &Default::default())
        .await
        .unwrap();
    let e = status(
        Api::<ConfigMap>::namespaced(sa, "default")
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 401);
    let token = sim.service_account_token("default", "default");
    let forged = format!("{}x", &token[..token.len() - 1]);
    let kc = sim
        .service_account_kubeconfig_yaml("default", "default")
        .replace(&token, &forged);
    let forged = client_for(&kc).await;
    let e = status(
        Api::<ConfigMap>::namespaced(forged, "default")
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 401);
}
