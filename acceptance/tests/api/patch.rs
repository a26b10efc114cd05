//! Merge, JSON and strategic merge patches.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{cm, start, status};

#[tokio::test]
async fn merge_and_json_patches() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(
        &PostParams::default(),
        &cm("p", json!({"a": "1", "b": "2"})),
    )
    .await
    .unwrap();
    let c = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": null, "c": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        c.data.unwrap(),
        [
            ("b".to_string(), "2".to_string()),
            ("c".to_string(), "3".to_string())
        ]
        .into()
    );
    let ops: json_patch::Patch = serde_json::from_value(json!([{"op": "replace", "path": "/data/b", "value": "9"}, {"op": "add", "path": "/metadata/labels", "value": {"x": "y"}}])).unwrap();
    let c = api
        .patch("p", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    assert_eq!(c.data.unwrap()["b"], "9");
    assert_eq!(c.metadata.labels.unwrap()["x"], "y");
    let bad: json_patch::Patch =
        serde_json::from_value(json!([{"op": "remove", "path": "/data/zzz"}])).unwrap();
    let e = status(
        api.patch("p", &PatchParams::default(), &Patch::<()>::Json(bad))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    let e = status(
        api.patch("missing", &PatchParams::default(), &Patch::Merge(json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 404);
}

#[tokio::test]
async fn strategic_merge_merges_containers_by_name() {
    let (_sim, client) = start().await;
    let api: Api<Deployment> = Api::namespaced(client, "default");
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "s"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "one", "image": "i:1"}, {"name": "two", "image": "i:1"}]}}}})).unwrap();
    api.create(&PostParams::default(), &d).await.unwrap();
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "two", "image": "i:2"}, {"name": "three", "image": "i:3"}]}}}});
    let d = api
        .patch("s", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    let cs = d.spec.unwrap().template.spec.unwrap().containers;
    let got: Vec<(String, String)> = cs.into_iter().map(|c| (c.name, c.image.unwrap())).collect();
    assert_eq!(
        got,
        [
            ("one".into(), "i:1".into()),
            ("two".into(), "i:2".into()),
            ("three".into(), "i:3".into())
        ]
    );
    let del = json!({"spec": {"template": {"spec": {"containers": [{"name": "one", "$patch": "delete"}]}}}});
    let d = api
        .patch("s", &PatchParams::default(), &Patch::Strategic(del))
        .await
        .unwrap();
    assert_eq!(d.spec.unwrap().template.spec.unwrap().containers.len(), 2);
}
