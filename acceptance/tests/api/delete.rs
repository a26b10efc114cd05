//! Deletion: finalizers, propagation policies, ownerReference GC, namespace termination.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use serde_json::json;

use crate::common::{cm, eventually, start, status};

async fn gone(api: &Api<ConfigMap>, name: &str) -> Option<()> {
    api.get_opt(name).await.unwrap().is_none().then_some(())
}

#[tokio::test]
async fn finalizers_hold_the_object_until_removed() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut c = cm("fin", json!({}));
    c.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &c).await.unwrap();
    let r = api.delete("fin", &DeleteParams::default()).await.unwrap();
    let held = r.left().expect("object returned while finalizers remain");
    assert!(held.metadata.deletion_timestamp.is_some());
    let still = api.get("fin").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());
    api.patch(
        "fin",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually(5, || gone(&api, "fin")).await;
}

fn child(name: &str, owner: &ConfigMap) -> ConfigMap {
    let mut c = cm(name, json!({}));
    c.metadata.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name, "uid": owner.metadata.uid, "blockOwnerDeletion": true
    })).unwrap()]);
    c
}

#[tokio::test]
async fn background_deletion_collects_dependents() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let owner = api
        .create(&PostParams::default(), &cm("owner", json!({})))
        .await
        .unwrap();
    api.create(&PostParams::default(), &child("dep", &owner))
        .await
        .unwrap();
    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually(5, || gone(&api, "owner")).await;
    eventually(5, || gone(&api, "dep")).await;
}

#[tokio::test]
async fn foreground_deletion_removes_dependents_first() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let owner = api
        .create(&PostParams::default(), &cm("owner", json!({})))
        .await
        .unwrap();
    let mut dep = child("dep", &owner);
    dep.metadata.finalizers = Some(vec!["example.com/slow".into()]);
    api.create(&PostParams::default(), &dep).await.unwrap();
    let r = api
        .delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    let o = r.left().expect("owner kept while dependents exist");
    assert!(
        o.metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_string())
    );
    // the dependent gets deleted (held by its finalizer), the owner waits
    eventually(5, || async {
        api.get("dep")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .map(|_| ())
    })
    .await;
    assert!(api.get_opt("owner").await.unwrap().is_some());
    api.patch(
        "dep",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually(5, || gone(&api, "dep")).await;
    eventually(5, || gone(&api, "owner")).await;
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let owner = api
        .create(&PostParams::default(), &cm("owner", json!({})))
        .await
        .unwrap();
    api.create(&PostParams::default(), &child("dep", &owner))
        .await
        .unwrap();
    api.delete(
        "owner",
        &DeleteParams {
            propagation_policy: Some(PropagationPolicy::Orphan),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    eventually(5, || gone(&api, "owner")).await;
    let dep = api.get("dep").await.unwrap();
    assert!(dep.metadata.owner_references.unwrap_or_default().is_empty());
}

#[tokio::test]
async fn namespace_termination() {
    let (_sim, client) = start().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let e = status(
        namespaces
            .delete("default", &DeleteParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            403,
            "namespaces \"default\" is forbidden: this namespace may not be deleted"
        )
    );
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap();
    let created = namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Active"));
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "doomed");
    let mut held = cm("held", json!({}));
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    api.create(&PostParams::default(), &cm("free", json!({})))
        .await
        .unwrap();
    namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    let ns = namespaces.get("doomed").await.unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    let e = status(
        api.create(&PostParams::default(), &cm("late", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 403);
    assert_eq!(e.reason, "Forbidden");
    assert_eq!(
        e.message,
        "configmaps \"late\" is forbidden: unable to create new content in namespace doomed because it is being terminated"
    );
    eventually(5, || gone(&api, "free")).await;
    assert!(
        namespaces.get_opt("doomed").await.unwrap().is_some(),
        "held by the finalized ConfigMap"
    );
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually(5, || async {
        namespaces
            .get_opt("doomed")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn delete_preconditions() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &cm("pre", json!({})))
        .await
        .unwrap();
    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("wrong".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let e = status(api.delete("pre", &dp).await.unwrap_err());
    assert_eq!(e.code, 409);
    assert!(
        e.message
            .contains("Precondition failed: UID in precondition: wrong"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn background_re_delete_drops_the_orphan_finalizer() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut c = cm("re", json!({}));
    c.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &c).await.unwrap();
    let orphan = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..Default::default()
    };
    let held = api.delete("re", &orphan).await.unwrap().left().unwrap();
    assert!(
        held.metadata
            .finalizers
            .unwrap()
            .contains(&"orphan".to_string())
    );
    let held = api
        .delete("re", &DeleteParams::background())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(
        held.metadata.finalizers,
        Some(vec!["example.com/hold".to_string()])
    );
    let held = api
        .delete("re", &DeleteParams::foreground())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(
        held.metadata.finalizers,
        Some(vec![
            "example.com/hold".to_string(),
            "foregroundDeletion".to_string()
        ])
    );
}

#[tokio::test]
async fn default_job_delete_warns_that_pods_are_kept() {
    let (_sim, client) = start().await;
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client.clone(), "default");
    let job = |name: &str| -> k8s_openapi::api::batch::v1::Job {
        serde_json::from_value(
            json!({"metadata": {"name": name}, "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1"}]}}}}),
        )
        .unwrap()
    };
    const WARNING: &str = "299 - \"child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning\"";
    for (name, query, warned) in [
        ("a", "", true),
        ("b", "?propagationPolicy=Background", false),
        ("c", "?propagationPolicy=Orphan", false),
    ] {
        jobs.create(&PostParams::default(), &job(name))
            .await
            .unwrap();
        let req = http::Request::delete(format!(
            "/apis/batch/v1/namespaces/default/jobs/{name}{query}"
        ))
        .body(kube::client::Body::empty())
        .unwrap();
        let resp = client.send(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        let warning = resp
            .headers()
            .get("warning")
            .map(|v| v.to_str().unwrap().to_string());
        assert_eq!(warning.as_deref(), warned.then_some(WARNING), "{name}");
    }
}
