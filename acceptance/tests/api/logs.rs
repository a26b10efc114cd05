//! `pods/log`: plain reads, `tailLines`, `container`, `follow=true` streaming.

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams, PostParams};
use serde_json::json;

use crate::common::{start, status};

fn pod(name: &str, containers: &[&str]) -> Pod {
    let cs: Vec<_> = containers
        .iter()
        .map(|c| json!({"name": c, "image": "busybox:1"}))
        .collect();
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"containers": cs}})).unwrap()
}

#[tokio::test]
async fn logs_plain_tail_and_container() {
    let (sim, client) = start().await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &pod("one", &["main"]))
        .await
        .unwrap();
    sim.store()
        .logs()
        .append("default", "one", "main", b"a\nb\nc\n");
    assert_eq!(
        api.logs("one", &LogParams::default()).await.unwrap(),
        "a\nb\nc\n"
    );
    assert_eq!(
        api.logs(
            "one",
            &LogParams {
                tail_lines: Some(1),
                ..Default::default()
            }
        )
        .await
        .unwrap(),
        "c\n"
    );
    api.create(&PostParams::default(), &pod("two", &["a", "b"]))
        .await
        .unwrap();
    let e = status(api.logs("two", &LogParams::default()).await.unwrap_err());
    assert_eq!(e.code, 400);
    assert_eq!(
        e.message,
        "a container name must be specified for pod two, choose one of: [a b]"
    );
    sim.store()
        .logs()
        .append("default", "two", "b", b"from b\n");
    assert_eq!(
        api.logs(
            "two",
            &LogParams {
                container: Some("b".into()),
                ..Default::default()
            }
        )
        .await
        .unwrap(),
        "from b\n"
    );
    let e = status(api.logs("nope", &LogParams::default()).await.unwrap_err());
    assert_eq!(e.message, "pods \"nope\" not found");
}

#[tokio::test]
async fn logs_of_a_container_that_has_not_started() {
    let (_sim, client) = start().await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    // unscheduled: an empty log, as from a real API server
    api.create(&PostParams::default(), &pod("pending", &["main"]))
        .await
        .unwrap();
    assert_eq!(
        api.logs("pending", &LogParams::default()).await.unwrap(),
        ""
    );
    // bound to a node but not started: the kubelet's "waiting to start" answer
    let mut bound = pod("bound", &["main"]);
    bound.spec.as_mut().unwrap().node_name = Some("no-such-node".into());
    api.create(&PostParams::default(), &bound).await.unwrap();
    let e = status(api.logs("bound", &LogParams::default()).await.unwrap_err());
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            400,
            "container \"main\" in pod \"bound\" is waiting to start: ContainerCreating"
        )
    );
}

#[tokio::test]
async fn logs_follow_streams_until_the_container_ends() {
    let (sim, client) = start().await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &pod("f", &["main"]))
        .await
        .unwrap();
    let logs = sim.store().logs().clone();
    logs.append("default", "f", "main", b"first\n");
    let reader = api
        .log_stream(
            "f",
            &LogParams {
                follow: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut lines = reader.lines().boxed();
    assert_eq!(lines.next().await.unwrap().unwrap(), "first");
    logs.append("default", "f", "main", b"second\n");
    assert_eq!(lines.next().await.unwrap().unwrap(), "second");
    logs.close("default", "f", "main");
    let rest = tokio::time::timeout(std::time::Duration::from_secs(5), lines.next())
        .await
        .expect("stream ends");
    assert!(rest.is_none());
}
