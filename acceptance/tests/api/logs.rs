//! `pods/log`: plain reads, `tailLines`, `container`, `follow=true` streaming, `sinceTime`,
//! `sinceSeconds` and `timestamps`.

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

async fn read_all(reader: impl futures::AsyncRead + Unpin) -> Vec<u8> {
    use futures::AsyncReadExt;
    let mut reader = reader;
    let mut out = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        reader.read_to_end(&mut out),
    )
    .await
    .expect("stream ends")
    .unwrap();
    out
}

fn follow() -> LogParams {
    LogParams {
        follow: true,
        ..Default::default()
    }
}

#[tokio::test]
async fn logs_follow_of_an_unscheduled_pod_ends_at_once() {
    let (sim, client) = start().await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &pod("u", &["main"]))
        .await
        .unwrap();
    let reader = api.log_stream("u", &follow()).await.unwrap();
    assert!(read_all(reader).await.is_empty());
    // Following did not make the container look started.
    assert!(!sim.store().logs().exists("default", "u", "main"));
}

#[tokio::test]
async fn logs_follow_ends_when_the_pod_is_deleted() {
    let (sim, client) = start().await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &pod("d", &["main"]))
        .await
        .unwrap();
    sim.store()
        .logs()
        .append("default", "d", "main", b"hello\n");
    let reader = api.log_stream("d", &follow()).await.unwrap();
    let api2 = api.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        api2.delete("d", &kube::api::DeleteParams::default())
            .await
            .unwrap();
    });
    assert_eq!(read_all(reader).await, b"hello\n");
}

#[tokio::test]
async fn logs_limit_bytes_bounds_a_followed_stream() {
    let (sim, client) = start().await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &pod("l", &["main"]))
        .await
        .unwrap();
    let logs = sim.store().logs().clone();
    logs.append("default", "l", "main", b"0123456789");
    let reader = api
        .log_stream(
            "l",
            &LogParams {
                follow: true,
                limit_bytes: Some(15),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        logs.append("default", "l", "main", b"abcdefghij");
    });
    // Ends once 15 bytes are sent, although the container keeps running.
    assert_eq!(read_all(reader).await, b"0123456789abcde");
}

#[tokio::test]
async fn logs_keep_at_most_ten_mebibytes_per_container() {
    let (sim, client) = start().await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &pod("big", &["main"]))
        .await
        .unwrap();
    let line = vec![b'x'; 1023]
        .into_iter()
        .chain([b'\n'])
        .collect::<Vec<u8>>();
    for _ in 0..(11 * 1024) {
        sim.store().logs().append("default", "big", "main", &line);
    }
    sim.store()
        .logs()
        .append("default", "big", "main", b"last\n");
    let all = api.logs("big", &LogParams::default()).await.unwrap();
    assert!(all.len() <= 10 * 1024 * 1024, "{}", all.len());
    assert!(all.ends_with("x\nlast\n"));
}

/// `GET .../pods/NAME/log?QUERY` as text.
async fn raw_log(client: &kube::Client, pod: &str, query: &str) -> String {
    let req = http::Request::get(format!("/api/v1/namespaces/default/pods/{pod}/log?{query}"))
        .body(Vec::new())
        .unwrap();
    client.request_text(req).await.unwrap()
}

/// `2026-12-01T13:00:00.123456789Z line` → (timestamp, line).
fn split_stamp(line: &str) -> (&str, &str) {
    let (ts, rest) = line.split_once(' ').expect("timestamped line");
    assert!(
        ts.len() >= 20 && ts.ends_with('Z') && ts.as_bytes()[10] == b'T',
        "RFC 3339 timestamp: {ts}"
    );
    (ts, rest)
}

/// (`YYYY-MM-DDTHH:MM:SS`, nanoseconds) of an RFC 3339 UTC timestamp, ordered like the time.
fn instant(ts: &str) -> (String, u32) {
    let frac = ts[19..].trim_start_matches('.').trim_end_matches('Z');
    let nanos = format!("{frac:0<9}").parse().unwrap_or(0);
    (ts[..19].to_string(), nanos)
}

#[tokio::test]
async fn logs_since_time_and_timestamps_let_a_relay_resume_without_duplicates() {
    let (sim, client) = start().await;
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &pod("relay", &["main"]))
        .await
        .unwrap();
    let logs = sim.store().logs();
    logs.append("default", "relay", "main", b"old\n");
    // The next lines are written in a later second (sinceTime has second precision).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(
        1050 - u64::from(now.subsec_millis()),
    ))
    .await;
    logs.append("default", "relay", "main", b"new 1\nnew 2\n");

    let stamped = raw_log(&client, "relay", "timestamps=true").await;
    let lines: Vec<(&str, &str)> = stamped.lines().map(split_stamp).collect();
    assert_eq!(
        lines.iter().map(|(_, l)| *l).collect::<Vec<_>>(),
        ["old", "new 1", "new 2"]
    );
    assert!(instant(lines[0].0) < instant(lines[1].0), "{stamped}");

    // Resume from the last line seen ("old"): the lines at or after its second, then drop
    // those at or before the last timestamp seen.
    let second = &lines[1].0[..19];
    let resumed = raw_log(
        &client,
        "relay",
        &format!("timestamps=true&sinceTime={second}Z"),
    )
    .await;
    // Compare parsed times, not strings: RFC3339Nano trims trailing zeros.
    let last_seen = instant(lines[0].0);
    let fresh: Vec<&str> = resumed
        .lines()
        .map(split_stamp)
        .filter(|(ts, _)| instant(ts) > last_seen)
        .map(|(_, l)| l)
        .collect();
    assert_eq!(fresh, ["new 1", "new 2"]);
    assert_eq!(
        raw_log(&client, "relay", &format!("sinceTime={second}Z")).await,
        "new 1\nnew 2\n"
    );
    // Future sinceTime: nothing; sinceSeconds counts back from now.
    assert_eq!(
        raw_log(&client, "relay", "sinceTime=2999-01-01T00:00:00Z").await,
        ""
    );
    assert_eq!(
        raw_log(&client, "relay", "sinceSeconds=3600").await,
        "old\nnew 1\nnew 2\n"
    );

    // Following with timestamps prefixes streamed lines too.
    let reader = api
        .log_stream(
            "relay",
            &LogParams {
                follow: true,
                timestamps: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut stream = reader.lines().boxed();
    for want in ["old", "new 1", "new 2"] {
        let line = stream.next().await.unwrap().unwrap();
        assert_eq!(split_stamp(&line).1, want);
    }
    logs.append("default", "relay", "main", b"live\n");
    let line = stream.next().await.unwrap().unwrap();
    assert_eq!(split_stamp(&line).1, "live");
    logs.close("default", "relay", "main");
    assert!(stream.next().await.is_none());
}
