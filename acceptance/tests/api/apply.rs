//! Server-side apply: managed fields, conflicts, force, removal of dropped fields, keyed lists.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::common::{start, status};

fn cm_apply(data: serde_json::Value) -> Patch<serde_json::Value> {
    Patch::Apply(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": data}),
    )
}

#[tokio::test]
async fn apply_creates_and_records_managers() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let c = api
        .patch(
            "ssa",
            &PatchParams::apply("alice"),
            &cm_apply(json!({"key": "1"})),
        )
        .await
        .unwrap();
    assert_eq!(c.data.unwrap()["key"], "1");
    let mf = c.metadata.managed_fields.unwrap();
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0].manager.as_deref(), Some("alice"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
    let fields = serde_json::to_value(&mf[0].fields_v1).unwrap();
    assert_eq!(fields["f:data"]["f:key"], json!({}));
}

#[tokio::test]
async fn conflicting_apply_fails_unless_forced() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.patch(
        "ssa",
        &PatchParams::apply("alice"),
        &cm_apply(json!({"key": "1", "other": "x"})),
    )
    .await
    .unwrap();
    let e = status(
        api.patch(
            "ssa",
            &PatchParams::apply("bob"),
            &cm_apply(json!({"key": "2"})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"alice\": .data.key"
    );
    // same value: shared ownership, no conflict
    api.patch(
        "ssa",
        &PatchParams::apply("bob"),
        &cm_apply(json!({"other": "x"})),
    )
    .await
    .unwrap();
    let forced = api
        .patch(
            "ssa",
            &PatchParams::apply("bob").force(),
            &cm_apply(json!({"key": "2", "other": "x"})),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["key"], "2");
    // alice lost .data.key; re-applying her config without force now conflicts with bob
    let e = status(
        api.patch(
            "ssa",
            &PatchParams::apply("alice"),
            &cm_apply(json!({"key": "1", "other": "x"})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"bob\": .data.key"
    );
}

#[tokio::test]
async fn update_by_another_manager_conflicts_with_using_version() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.patch(
        "ssa",
        &PatchParams::apply("alice"),
        &cm_apply(json!({"key": "1"})),
    )
    .await
    .unwrap();
    api.patch(
        "ssa",
        &PatchParams {
            field_manager: Some("editor".into()),
            ..Default::default()
        },
        &Patch::Merge(json!({"data": {"key": "2"}})),
    )
    .await
    .unwrap();
    let e = status(
        api.patch(
            "ssa",
            &PatchParams::apply("alice"),
            &cm_apply(json!({"key": "1"})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"editor\" using v1: .data.key"
    );
}

#[tokio::test]
async fn fields_dropped_from_apply_are_removed() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.patch(
        "ssa",
        &PatchParams::apply("alice"),
        &cm_apply(json!({"a": "1", "b": "2"})),
    )
    .await
    .unwrap();
    api.patch(
        "ssa",
        &PatchParams::apply("bob"),
        &cm_apply(json!({"c": "3"})),
    )
    .await
    .unwrap();
    let c = api
        .patch(
            "ssa",
            &PatchParams::apply("alice"),
            &cm_apply(json!({"a": "1"})),
        )
        .await
        .unwrap();
    let data = c.data.unwrap();
    assert!(!data.contains_key("b"), "b owned only by alice: removed");
    assert_eq!(data["c"], "3", "c owned by bob: kept");
}

#[tokio::test]
async fn apply_without_field_manager_is_invalid() {
    let (_sim, client) = start().await;
    let req = http::Request::patch("/api/v1/namespaces/default/configmaps/x")
        .header("Content-Type", "application/apply-patch+yaml")
        .body(b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n".to_vec())
        .unwrap();
    let e = status(client.request::<serde_json::Value>(req).await.unwrap_err());
    assert_eq!(e.code, 422);
    assert!(
        e.message
            .contains("fieldManager: Required value: is required for apply patch"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn apply_accepts_yaml_and_merges_containers_by_name() {
    let (_sim, client) = start().await;
    let yaml = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: app\n        image: nginx:1\n";
    let req =
        http::Request::patch("/apis/apps/v1/namespaces/default/deployments/web?fieldManager=alice")
            .header("Content-Type", "application/apply-patch+yaml")
            .body(yaml.as_bytes().to_vec())
            .unwrap();
    let d: Deployment = client.request(req).await.unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    let api: Api<Deployment> = Api::namespaced(client, "default");
    // bob adds an env var to the same container: no conflict, both kept
    let bob = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "env": [{"name": "X", "value": "1"}]}]}}}});
    let d = api
        .patch("web", &PatchParams::apply("bob"), &Patch::Apply(bob))
        .await
        .unwrap();
    let c = &d
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0];
    assert_eq!(c.image.as_deref(), Some("nginx:1"));
    assert_eq!(c.env.as_ref().unwrap()[0].name, "X");
    // bob changing the image conflicts with alice at the keyed path
    let bob2 = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}}});
    let e = status(
        api.patch("web", &PatchParams::apply("bob"), &Patch::Apply(bob2))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"alice\": .spec.template.spec.containers[name=\"app\"].image"
    );
}
