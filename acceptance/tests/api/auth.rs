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

/// A raw TLS client offering `alpn` and authenticating with the bearer token.
async fn raw_get(
    sim: &talos_sim::SimCluster,
    alpn: &[u8],
    path: &str,
) -> (Option<Vec<u8>>, http::Version, u16) {
    use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(sim.ca_pem().as_bytes()).unwrap())
        .unwrap();
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![alpn.to_vec()];
    let tcp = tokio::net::TcpStream::connect(sim.server_url().trim_start_matches("https://"))
        .await
        .unwrap();
    let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let negotiated = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    let io = hyper_util::rt::TokioIo::new(tls);
    let req = http::Request::get(format!("{}{path}", sim.server_url()))
        .header("Authorization", format!("Bearer {}", sim.admin_token()))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = if alpn == b"h2" {
        let (mut send, conn) =
            hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
                .await
                .unwrap();
        tokio::spawn(conn);
        send.send_request(req).await.unwrap()
    } else {
        let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        send.send_request(req).await.unwrap()
    };
    (negotiated, resp.version(), resp.status().as_u16())
}

#[tokio::test]
async fn http2_and_http1_via_alpn() {
    let (sim, _) = start().await;
    let (alpn, version, code) = raw_get(&sim, b"h2", "/api/v1/namespaces").await;
    assert_eq!(
        (alpn.as_deref(), version, code),
        (Some(&b"h2"[..]), http::Version::HTTP_2, 200)
    );
    let (alpn, version, code) = raw_get(&sim, b"http/1.1", "/api/v1/namespaces").await;
    assert_eq!(
        (alpn.as_deref(), version, code),
        (Some(&b"http/1.1"[..]), http::Version::HTTP_11, 200)
    );
}

#[tokio::test]
async fn shutdown_closes_the_port() {
    let (sim, client) = start().await;
    let addr = sim.server_url().trim_start_matches("https://").to_string();
    Api::<Namespace>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap();
    sim.shutdown().await;
    assert!(
        tokio::net::TcpStream::connect(&addr).await.is_err(),
        "nothing listens after shutdown"
    );
}
