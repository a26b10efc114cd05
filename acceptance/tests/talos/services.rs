//! The Service dataplane once the CNI is up (`talos_sim::talos::services`): a client pod fetches
//! from a server pod by the Service's names (created after the client started), through the
//! Service port to the named target port in the server's own network namespace; once the server
//! pod is gone the connection is refused.

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use super::common::{self, eventually, from_json};

const NS: &str = "svc-test";

/// A pod of `image` running `script` once. The clients run Debian's userland (the host's GNU
/// wget): the static glibc busybox installed here crashes resolving names from `/etc/hosts`,
/// which Alpine's musl busybox does not.
fn pod(
    name: &str,
    image: &str,
    labels: serde_json::Value,
    script: &str,
    ports: serde_json::Value,
) -> Pod {
    from_json(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": image, "command": ["sh", "-c", script], "ports": ports}],
        },
    }))
}

async fn log_of(cluster: &talos_sim::talos::TalosCluster, pod: &str) -> String {
    common::run_kubectl(cluster, &["logs", "-n", NS, pod]).1
}

#[tokio::test(flavor = "multi_thread")]
async fn pods_reach_a_service_by_name_and_are_refused_without_endpoints() {
    let (cluster, client) = common::start().await;
    common::cni_up(&cluster, &client).await;
    common::privileged_namespace(&client, NS).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let post = PostParams::default();

    // The client starts before the Service exists: its names and listener come later.
    let fetch = "for i in $(seq 90); do wget -q -T 2 -t 1 -O- http://web/ && wget -q -T 2 -t 1 -O- http://web.svc-test.svc.cluster.local./index.html && exit 0; sleep 1; done; exit 1";
    pods.create(
        &post,
        &pod("early", "debian:12", json!({}), fetch, json!([])),
    )
    .await
    .expect("client");
    common::wait_pod(&client, NS, "early", 60, |p| common::phase(p) == "Running").await;

    let server =
        "mkdir -p /www && echo hello-from-web > /www/index.html && exec httpd -f -p 8080 -h /www";
    pods.create(
        &post,
        &pod(
            "web",
            "busybox:1.36",
            json!({"app": "web"}),
            server,
            json!([{"name": "http", "containerPort": 8080}]),
        ),
    )
    .await
    .expect("server");
    let service: Service = from_json(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "web", "port": 80, "targetPort": "http"}]},
    }));
    Api::<Service>::namespaced(client.clone(), NS)
        .create(&post, &service)
        .await
        .expect("service");

    let early = common::wait_pod(&client, NS, "early", 120, |p| {
        matches!(common::phase(p), "Succeeded" | "Failed")
    })
    .await;
    let log = log_of(&cluster, "early").await;
    assert_eq!(common::phase(&early), "Succeeded", "{log}");
    assert_eq!(log.matches("hello-from-web").count(), 2, "{log}");

    // A pod started after the Service resolves it at once; names of other namespaces'
    // Services need the namespace.
    pods.create(
        &post,
        &pod(
            "later",
            "debian:12",
            json!({}),
            "wget -q -T 2 -t 1 -O- http://web.svc-test:80/ && wget -q -T 2 -t 1 -O- http://web.svc-test.svc/",
            json!([]),
        ),
    )
    .await
    .expect("later");
    let later = common::wait_pod(&client, NS, "later", 60, |p| {
        matches!(common::phase(p), "Succeeded" | "Failed")
    })
    .await;
    let log = log_of(&cluster, "later").await;
    assert_eq!(common::phase(&later), "Succeeded", "{log}");
    assert_eq!(log.matches("hello-from-web").count(), 2, "{log}");

    // A Go program (kubectl) resolves the fully qualified name with its trailing dot from the
    // hosts file, as source-controller's `--storage-adv-addr` default is written.
    let go: Pod = from_json(json!({
        "metadata": {"name": "go-client"},
        "spec": {
            "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "bitnami/kubectl:1.33",
                "args": ["--server", "http://web.svc-test.svc.cluster.local.", "get", "--raw", "/index.html"]}],
        },
    }));
    pods.create(&post, &go).await.expect("go client");
    let go = common::wait_pod(&client, NS, "go-client", 60, |p| {
        matches!(common::phase(p), "Succeeded" | "Failed")
    })
    .await;
    let log = log_of(&cluster, "go-client").await;
    assert_eq!(common::phase(&go), "Succeeded", "{log}");
    assert!(log.contains("hello-from-web"), "{log}");

    // The server pod is gone: no Ready endpoint, connection refused.
    pods.delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(60, "the server pod gone", || async {
        pods.get_opt("web")
            .await
            .ok()
            .and_then(|p| p.is_none().then_some(()))
    })
    .await;
    let refused = "for i in $(seq 30); do out=$(wget -T 2 -t 1 -O- http://web/ 2>&1); echo \"$out\"; case \"$out\" in *refused*) exit 0;; esac; sleep 1; done; exit 1";
    pods.create(
        &post,
        &pod("after", "debian:12", json!({}), refused, json!([])),
    )
    .await
    .expect("after");
    let after = common::wait_pod(&client, NS, "after", 90, |p| {
        matches!(common::phase(p), "Succeeded" | "Failed")
    })
    .await;
    let log = log_of(&cluster, "after").await;
    assert_eq!(common::phase(&after), "Succeeded", "{log}");
    assert!(log.contains("Connection refused"), "{log}");
}
