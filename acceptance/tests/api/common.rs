//! Shared setup: a simulated cluster and clients for it.

use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use talos_sim::{SimCluster, SimConfig};

pub async fn client_for(kubeconfig_yaml: &str) -> Client {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let kc = Kubeconfig::from_yaml(kubeconfig_yaml).expect("kubeconfig parses");
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig loads");
    Client::try_from(config).expect("client builds")
}

/// A fresh cluster and an admin (client-certificate) client.
pub async fn start() -> (SimCluster, Client) {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .try_init();
    let sim = SimCluster::start(SimConfig::default())
        .await
        .expect("cluster starts");
    let client = client_for(&sim.kubeconfig_yaml()).await;
    (sim, client)
}

/// The `Status` of an API error (panics on other errors).
pub fn status(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Polls `f` until it returns `Some`, for at most `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met within {secs}s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn cm(name: &str, data: serde_json::Value) -> k8s_openapi::api::core::v1::ConfigMap {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data
    }))
    .expect("valid ConfigMap")
}
