//! The fault proxy in front of the real apiserver: identities pass through it unchanged, and
//! the faults it injects are what a client of a real cluster meets.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use talos_sim::Matcher;
use talos_sim::talos::control_plane::client_from_kubeconfig;

use crate::common;

#[tokio::test(flavor = "multi_thread")]
async fn identities_pass_the_proxy_and_rbac_still_applies() {
    let (cluster, _client) = common::shared().await;
    let admin = client_from_kubeconfig(&cluster.kubeconfig_yaml())
        .await
        .expect("admin through the proxy");
    Api::<Secret>::namespaced(admin, "kube-system")
        .list(&Default::default())
        .await
        .expect("the admin (O=system:masters) may list secrets through the proxy");

    // A certificate user with no RBAC: the apiserver names that user, not the proxy's.
    let cert = cluster
        .plane
        .pki
        .leaf(
            "jane",
            &["developers"],
            &[],
            talos_sim::talos::pki::Usage::Client,
        )
        .expect("leaf");
    let yaml = talos_sim::talos::control_plane::kubeconfig(
        &cluster.server_url(),
        &cluster.plane.pki.ca_pem,
        &cert,
        "jane",
    );
    let jane = client_from_kubeconfig(&yaml).await.expect("client");
    let err = Api::<Secret>::namespaced(jane, "kube-system")
        .list(&Default::default())
        .await
        .expect_err("forbidden");
    assert!(
        err.to_string()
            .contains("User \"jane\" cannot list resource \"secrets\""),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn injected_faults_are_bounded_and_the_api_recovers() {
    let (cluster, _client) = common::start().await;
    let proxied = client_from_kubeconfig(&cluster.kubeconfig_yaml())
        .await
        .expect("client");
    let cms: Api<ConfigMap> = Api::namespaced(proxied.clone(), "default");

    // kube's client retries a 429 after the server's Retry-After: the burst costs that long.
    cluster
        .faults()
        .throttle(1, 2, Matcher::path("/configmaps"));
    let began = Instant::now();
    cms.list(&Default::default())
        .await
        .expect("retried after the 429");
    assert!(
        began.elapsed() >= Duration::from_millis(1900),
        "Retry-After: 2 was honoured: {:?}",
        began.elapsed()
    );

    cluster
        .faults()
        .fail_requests(500, 1, Matcher::path("/configmaps"));
    match cms.list(&Default::default()).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 500, "{s:?}");
            assert_eq!(s.reason, "InternalError", "{s:?}");
        }
        other => panic!("a 500 Status, got {other:?}"),
    }
    cms.list(&Default::default()).await.expect("recovered");

    cluster
        .faults()
        .drop_connections(1, Matcher::path("/configmaps"));
    let err = cms.list(&Default::default()).await.expect_err("dropped");
    assert!(
        !matches!(err, kube::Error::Api(_)),
        "no answer, got {err:?}"
    );

    // Unreachable: the port is closed (connection refused), then serves again.
    cluster
        .faults()
        .unreachable_for(Duration::from_millis(1500));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let refused = tokio::net::TcpStream::connect(cluster.proxy.addr()).await;
    assert!(refused.is_err(), "the port is closed while unreachable");
    let began = Instant::now();
    common::eventually(20, "the API answers again", || {
        let cms = cms.clone();
        async move { cms.list(&Default::default()).await.ok() }
    })
    .await;
    assert!(
        began.elapsed() >= Duration::from_millis(900),
        "unreachable for its period, not less: {:?}",
        began.elapsed()
    );

    // The direct client (the node layer's, the tests' checks) never sees the proxy's faults.
    cluster
        .faults()
        .fail_requests(500, 5, Matcher::path("/configmaps"));
    let direct: Api<ConfigMap> = Api::namespaced(cluster.client().await.unwrap(), "default");
    direct
        .list(&Default::default())
        .await
        .expect("the direct path has no faults");
}
