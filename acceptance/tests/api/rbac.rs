//! RBAC objects: bootstrap ClusterRoles, roleRef required and immutable.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::common::{start, status};

#[tokio::test]
async fn bootstrap_cluster_roles_exist() {
    let (_sim, client) = start().await;
    let roles: Api<ClusterRole> = Api::all(client.clone());
    for name in ["cluster-admin", "admin", "edit", "view"] {
        let r = roles.get(name).await.unwrap();
        assert_eq!(
            r.metadata.labels.unwrap()["kubernetes.io/bootstrapping"],
            "rbac-defaults"
        );
    }
    let admin = roles.get("cluster-admin").await.unwrap();
    let rule = &admin.rules.unwrap()[0];
    assert_eq!(rule.verbs, vec!["*".to_string()]);
    let bindings: Api<ClusterRoleBinding> = Api::all(client);
    let b = bindings.get("cluster-admin").await.unwrap();
    assert_eq!(b.role_ref.name, "cluster-admin");
    let subject = &b.subjects.unwrap()[0];
    assert_eq!(
        (subject.kind.as_str(), subject.name.as_str()),
        ("Group", "system:masters")
    );
}

fn binding(role: &str) -> RoleBinding {
    serde_json::from_value(json!({"metadata": {"name": "rb"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}]}))
    .unwrap()
}

#[tokio::test]
async fn role_ref_is_required_and_immutable() {
    let (_sim, client) = start().await;
    let api: Api<RoleBinding> = Api::namespaced(client.clone(), "default");
    let created = api
        .create(&PostParams::default(), &binding("view"))
        .await
        .unwrap();
    let mut changed = binding("edit");
    changed.metadata.resource_version = created.metadata.resource_version.clone();
    let e = status(
        api.replace("rb", &PostParams::default(), &changed)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "RoleBinding.rbac.authorization.k8s.io \"rb\" is invalid: roleRef: Invalid value: \"rbac.RoleRef{APIGroup:\\\"rbac.authorization.k8s.io\\\", Kind:\\\"ClusterRole\\\", Name:\\\"edit\\\"}\": cannot change roleRef"
    );
    let mut bad = binding("");
    bad.metadata.name = Some("bad".into());
    bad.role_ref.kind = "Nope".into();
    let e = status(api.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "RoleBinding.rbac.authorization.k8s.io \"bad\" is invalid: [roleRef.kind: Unsupported value: \"Nope\": supported values: \"Role\", \"ClusterRole\", roleRef.name: Required value]"
    );
    let crbs: Api<ClusterRoleBinding> = Api::all(client);
    let crb: ClusterRoleBinding = serde_json::from_value(json!({"metadata": {"name": "crb"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "x"}}))
    .unwrap();
    let e = status(crbs.create(&PostParams::default(), &crb).await.unwrap_err());
    assert_eq!(
        e.message,
        "ClusterRoleBinding.rbac.authorization.k8s.io \"crb\" is invalid: roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\""
    );
}
