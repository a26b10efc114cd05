//! Faults: throttling with Retry-After, errors, an unreachable period and recovery, dropped
//! connections, latency, and the admin endpoint.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use talos_sim::faults::Matcher;

use crate::common::{start, status};

/// A client without kube's built-in retry of 429/503/504, to see the raw answers.
async fn no_retry_client(sim: &talos_sim::SimCluster) -> kube::Client {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

#[tokio::test]
async fn throttling_answers_429_with_retry_after() {
    let (sim, _) = start().await;
    let client = no_retry_client(&sim).await;
    sim.faults().throttle(1, 2, Matcher::path("/configmaps"));
    let req = http::Request::get("/api/v1/namespaces/default/configmaps")
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers().get("retry-after").unwrap(), "2");
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.list(&ListParams::default())
        .await
        .expect("the fault is used up");
}

#[tokio::test]
async fn kube_client_honours_retry_after() {
    let (sim, client) = start().await;
    sim.faults().throttle(1, 1, Matcher::path("/configmaps"));
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let t = Instant::now();
    api.list(&ListParams::default())
        .await
        .expect("retried after the throttle");
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "waited for Retry-After: {:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn injected_server_errors_are_status_bodies() {
    let (sim, _) = start().await;
    let client = no_retry_client(&sim).await;
    sim.faults().fail_requests(
        503,
        2,
        Matcher {
            path_contains: Some("/secrets".into()),
            verb: Some("list".into()),
        },
    );
    let api: Api<Secret> = Api::namespaced(client, "default");
    for _ in 0..2 {
        let e = status(api.list(&ListParams::default()).await.unwrap_err());
        assert_eq!((e.code, e.reason.as_str()), (503, "ServiceUnavailable"));
    }
    api.get_opt("x").await.expect("get is not matched");
    api.list(&ListParams::default()).await.expect("recovered");
}

#[tokio::test]
async fn unreachable_period_then_recovery() {
    let (sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.list(&ListParams::default()).await.unwrap();
    sim.faults().unreachable_for(Duration::from_millis(800));
    let e = api.list(&ListParams::default()).await.unwrap_err();
    assert!(
        !matches!(e, kube::Error::Api(_)),
        "a transport error, not an API answer: {e:?}"
    );
    tokio::time::sleep(Duration::from_millis(900)).await;
    api.list(&ListParams::default())
        .await
        .expect("the API is back");
}

#[tokio::test]
async fn dropped_connection_then_recovery() {
    let (sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    sim.faults()
        .drop_connections(1, Matcher::path("/configmaps"));
    let e = api.list(&ListParams::default()).await.unwrap_err();
    assert!(!matches!(e, kube::Error::Api(_)), "{e:?}");
    api.list(&ListParams::default())
        .await
        .expect("next request works");
}

#[tokio::test]
async fn latency_delays_requests() {
    let (sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    sim.faults()
        .delay_requests(Duration::from_millis(300), 1, Matcher::any());
    let t = Instant::now();
    api.list(&ListParams::default()).await.unwrap();
    let delayed = t.elapsed();
    assert!(delayed >= Duration::from_millis(300));
    // The fault was used up: the next request is not delayed (compared with the delayed one,
    // not an absolute bound, so a loaded machine does not fail this).
    let t = Instant::now();
    api.list(&ListParams::default()).await.unwrap();
    let undelayed = t.elapsed();
    assert!(
        undelayed + Duration::from_millis(150) < delayed,
        "undelayed {undelayed:?} vs delayed {delayed:?}"
    );
}

#[tokio::test]
async fn admin_endpoint_injects_faults() {
    let (sim, _) = start().await;
    let client = no_retry_client(&sim).await;
    let spec =
        serde_json::json!({"type": "error", "status": 500, "count": 1, "pathContains": "/secrets"});
    let req = http::Request::post("/talos-sim/faults")
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&spec).unwrap())
        .unwrap();
    let _: serde_json::Value = client.request(req).await.unwrap();
    let active: serde_json::Value = client
        .request(
            http::Request::get("/talos-sim/faults")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(active.as_array().unwrap().len(), 1);
    let api: Api<Secret> = Api::namespaced(client.clone(), "default");
    assert_eq!(
        status(api.list(&ListParams::default()).await.unwrap_err()).code,
        500
    );
    api.list(&ListParams::default()).await.unwrap();
    let bad = http::Request::post("/talos-sim/faults")
        .body(b"{\"type\":\"nope\"}".to_vec())
        .unwrap();
    assert_eq!(
        status(client.request::<serde_json::Value>(bad).await.unwrap_err()).code,
        400
    );
}
