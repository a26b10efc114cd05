//! Watches: raw event streams, selectors, bookmarks, 410 Gone, kube-runtime's watcher.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use serde_json::json;

use crate::common::{cm, start};

async fn next<K>(
    s: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<K>>> + Unpin),
) -> WatchEvent<K> {
    tokio::time::timeout(Duration::from_secs(5), s.next())
        .await
        .expect("event in time")
        .expect("stream open")
        .expect("no error")
}

#[tokio::test]
async fn watch_from_resource_version_sees_changes() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let list = api.list(&Default::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &cm("w", json!({"a": "1"})))
        .await
        .unwrap();
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "2"}})),
    )
    .await
    .unwrap();
    api.delete("w", &DeleteParams::default()).await.unwrap();
    assert!(
        matches!(next(&mut stream).await, WatchEvent::Added(c) if c.metadata.name.as_deref() == Some("w"))
    );
    assert!(
        matches!(next(&mut stream).await, WatchEvent::Modified(c) if c.data.as_ref().unwrap()["a"] == "2")
    );
    assert!(matches!(next(&mut stream).await, WatchEvent::Deleted(_)));
}

#[tokio::test]
async fn watch_with_label_selector_reports_leaving_objects_as_deleted() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut c = cm("sel", json!({}));
    c.metadata.labels = Some([("app".to_string(), "x".to_string())].into());
    let created = api.create(&PostParams::default(), &c).await.unwrap();
    let rv = created.metadata.resource_version.unwrap();
    let mut stream = api
        .watch(&WatchParams::default().labels("app=x"), &rv)
        .await
        .unwrap()
        .boxed();
    api.patch(
        "sel",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "y"}}})),
    )
    .await
    .unwrap();
    api.patch(
        "sel",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "x"}}})),
    )
    .await
    .unwrap();
    assert!(matches!(next(&mut stream).await, WatchEvent::Deleted(_)));
    assert!(matches!(next(&mut stream).await, WatchEvent::Added(_)));
}

#[tokio::test]
async fn bookmarks_are_sent_when_allowed() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let rv = api
        .list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    assert!(matches!(next(&mut stream).await, WatchEvent::Bookmark(_)));
}

#[tokio::test]
async fn too_old_resource_version_is_gone() {
    let (sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &cm("old", json!({})))
        .await
        .unwrap();
    sim.store().compact(); // like an etcd compaction
    let mut stream = api
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        WatchEvent::Error(s) => {
            assert_eq!(s.code, 410);
            assert_eq!(s.reason, "Expired");
            assert!(
                s.message.starts_with("too old resource version: 1 ("),
                "{}",
                s.message
            );
        }
        other => panic!("expected a 410 error event, got {other:?}"),
    }
}

#[tokio::test]
async fn watch_times_out_when_asked() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let rv = api
        .list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let stream = api
        .watch(&WatchParams::default().timeout(1).disable_bookmarks(), &rv)
        .await
        .unwrap();
    let all: Vec<_> = tokio::time::timeout(Duration::from_secs(5), stream.collect::<Vec<_>>())
        .await
        .expect("stream ends");
    assert!(all.is_empty());
}

#[tokio::test]
async fn kube_runtime_watcher_lists_then_watches() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut pre = cm("pre", json!({}));
    pre.metadata.labels = Some([("w".to_string(), "1".to_string())].into());
    api.create(&PostParams::default(), &pre).await.unwrap();
    let mut events = watcher(api.clone(), watcher::Config::default().labels("w=1")).boxed();
    let mut seen_init = false;
    loop {
        match tokio::time::timeout(Duration::from_secs(5), events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::InitApply(c) => {
                assert_eq!(c.metadata.name.as_deref(), Some("pre"));
                seen_init = true;
            }
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert!(seen_init);
    let mut post = cm("post", json!({}));
    post.metadata.labels = Some([("w".to_string(), "1".to_string())].into());
    api.create(&PostParams::default(), &post).await.unwrap();
    api.delete("pre", &DeleteParams::default()).await.unwrap();
    let mut applied = false;
    let mut deleted = false;
    while !(applied && deleted) {
        match tokio::time::timeout(Duration::from_secs(5), events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::Apply(c) if c.metadata.name.as_deref() == Some("post") => {
                applied = true
            }
            watcher::Event::Delete(c) if c.metadata.name.as_deref() == Some("pre") => {
                deleted = true
            }
            _ => {}
        }
    }
}

#[tokio::test]
async fn kube_runtime_watcher_streaming_list() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &cm("s1", json!({})))
        .await
        .unwrap();
    let mut events = watcher(api, watcher::Config::default().streaming_lists()).boxed();
    let mut names = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(5), events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::InitApply(c) => names.push(c.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert!(names.contains(&"s1".to_string()));
}

#[tokio::test]
async fn watch_serves_tables_when_asked_like_kubectl_get_w() {
    use http_body_util::BodyExt;
    let (_sim, client) = start().await;
    let req = http::Request::get("/api/v1/namespaces?watch=true")
        .header(
            "Accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let data = frame.into_data().unwrap();
    let first_line = data.split(|b| *b == b'\n').next().unwrap();
    let ev: serde_json::Value = serde_json::from_slice(first_line).unwrap();
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["kind"], "Table");
    assert_eq!(ev["object"]["rows"][0]["cells"][1], "Active");
}

#[tokio::test]
async fn bookmarks_of_a_watch_without_resource_version_carry_the_snapshot_rv() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let before: u64 = api
        .list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
        .parse()
        .unwrap();
    // No resourceVersion and nothing selected: the bookmark must still carry the snapshot's RV,
    // never "0".
    let req = http::Request::get(
        "/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true&labelSelector=none%3Dnone",
    )
    .body(kube::client::Body::empty())
    .unwrap();
    let resp = client.send(req).await.unwrap();
    use http_body_util::BodyExt;
    let mut body = resp.into_body();
    let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let data = frame.into_data().unwrap();
    let ev: serde_json::Value =
        serde_json::from_slice(data.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(ev["type"], "BOOKMARK");
    let rv: u64 = ev["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv >= before, "bookmark {rv} < {before}");
    // kube's own watch from "0" too.
    let mut stream = api
        .watch(&WatchParams::default().labels("none=none"), "0")
        .await
        .unwrap()
        .boxed();
    match next(&mut stream).await {
        WatchEvent::Bookmark(b) => {
            let rv: u64 = b.metadata.resource_version.parse().unwrap();
            assert!(rv >= before, "bookmark {rv} < {before}");
        }
        other => panic!("expected a bookmark, got {other:?}"),
    }
}

#[tokio::test]
async fn history_is_bounded_by_bytes_too() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let big = "x".repeat(1_000_000);
    let created = api
        .create(&PostParams::default(), &cm("big", json!({"big": big})))
        .await
        .unwrap();
    let start_rv = created.metadata.resource_version.unwrap();
    // Each change records the object before and after (~2 MB): 40 of them exceed the 64 MiB
    // budget long before the 10,000-event limit.
    for i in 0..40 {
        api.patch(
            "big",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"n": i.to_string()}})),
        )
        .await
        .unwrap();
    }
    let mut stream = api
        .watch(&WatchParams::default(), &start_rv)
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        WatchEvent::Error(s) => assert_eq!((s.code, s.reason.as_str()), (410, "Expired")),
        other => panic!("expected a 410 error event, got {other:?}"),
    }
}
