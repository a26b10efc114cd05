//! Authentication: client certificates, bearer tokens, and rejections (401 Status).

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

use crate::common::{client_for, start, status};

#[tokio::test]
async fn bearer_token_works_and_bad_token_is_rejected() {
    let (sim, _) = start().await;
    let good = client_for(&sim.token_kubeconfig_yaml()).await;
    Api::<Namespace>::all(good)
        .list(&ListParams::default())
        .await
        .unwrap();
    let bad_yaml = sim
        .token_kubeconfig_yaml()
        .replace(sim.admin_token(), "not-the-token");
    let bad = client_for(&bad_yaml).await;
    let e = status(
        Api::<Namespace>::all(bad)
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.reason.as_str(), e.message.as_str()),
        (401, "Unauthorized", "Unauthorized")
    );
}

#[tokio::test]
async fn unknown_client_certificate_is_rejected() {
    let (sim, _) = start().await;
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "evil-ca");
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, "admin");
    params
        .distinguished_name
        .push(DnType::OrganizationName, "system:masters");
    let cert = params.signed_by(&key, &issuer).unwrap();
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let yaml = sim
        .kubeconfig_yaml()
        .replace(&b64(sim.admin_cert_pem()), &b64(&cert.pem()))
        .replace(&b64(sim.admin_key_pem()), &b64(&key.serialize_pem()));
    let client = client_for(&yaml).await;
    let e = status(
        Api::<Namespace>::all(client)
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 401);
}

#[tokio::test]
async fn anonymous_requests_get_401_except_health_and_version() {
    let (sim, _) = start().await;
    let yaml = sim
        .token_kubeconfig_yaml()
        .replace(&format!("    token: {}\n", sim.admin_token()), "    {}\n");
    let yaml = yaml.replace("  user:\n    {}\n", "  user: {}\n");
    let anon = client_for(&yaml).await;
    anon.apiserver_version().await.expect("/version is public");
    let health = anon
        .request_text(http::Request::get("/readyz").body(Vec::new()).unwrap())
        .await
        .unwrap();
    assert_eq!(health, "ok");
    let e = status(
        Api::<Namespace>::all(anon.clone())
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 401);
    let e = status(
        anon.request::<serde_json::Value>(
            http::Request::post("/talos-sim/faults")
                .body(b"{}".to_vec())
                .unwrap(),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 401);
}

#[tokio::test]
async fn http2_and_http1_both_work() {
    // kube negotiates h2 via ALPN when offered; a raw HTTP/1.1 client is covered by kubectl.
    let (_sim, client) = start().await;
    let resp = client
        .send(
            http::Request::get("/api")
                .body(kube::client::Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}
