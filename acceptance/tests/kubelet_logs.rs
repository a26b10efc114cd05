//! The kubelet's log endpoint over real HTTPS, as the API server calls it: a client certificate
//! signed by the cluster CA, the serving certificate checked against that CA for the node's IP.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use talos_sim::talos::kubelet_logs::{KubeletLogServer, LogStore};

const NODE_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

fn ca(name: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key).unwrap();
    Ca {
        pem: cert.pem(),
        issuer: Issuer::new(params, key),
    }
}

/// A leaf like the cluster PKI's: (cert PEM, key PEM).
fn leaf(ca: &Ca, cn: &str, orgs: &[&str], ip: Option<IpAddr>, server: bool) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.subject_alt_names = ip.map(SanType::IpAddress).into_iter().collect();
    params.distinguished_name.push(DnType::CommonName, cn);
    for org in orgs {
        params
            .distinguished_name
            .push(DnType::OrganizationName, *org);
    }
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![if server {
        ExtendedKeyUsagePurpose::ServerAuth
    } else {
        ExtendedKeyUsagePurpose::ClientAuth
    }];
    let cert = params.signed_by(&key, &ca.issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

struct Setup {
    ca: Ca,
    store: LogStore,
    server: KubeletLogServer,
}

fn setup() -> Setup {
    let ca = ca("talos-sim-ca");
    let (cert, key) = leaf(&ca, "node-1", &[], Some(NODE_IP), true);
    let store = LogStore::new();
    let server = KubeletLogServer::start(NODE_IP, 0, &cert, &key, &ca.pem, store.clone()).unwrap();
    Setup { ca, store, server }
}

/// A TLS client trusting `trust`, presenting `client` (cert PEM, key PEM) if any.
fn client_config(trust: &Ca, client: Option<(String, String)>) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(trust.pem.as_bytes()).unwrap())
        .unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    Arc::new(config)
}

/// The API server's kubelet client certificate.
fn apiserver_client(ca: &Ca) -> Arc<rustls::ClientConfig> {
    client_config(
        ca,
        Some(leaf(
            ca,
            "apiserver-kubelet-client",
            &["system:masters"],
            None,
            false,
        )),
    )
}

/// `GET path` over HTTPS/1.1 to the node's IP.
async fn get(
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    path: &str,
) -> anyhow::Result<http::Response<Incoming>> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let stream = tokio_rustls::TlsConnector::from(tls)
        .connect(ServerName::IpAddress(addr.ip().into()), tcp)
        .await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let req = http::Request::get(path)
        .header(http::header::HOST, addr.to_string())
        .body(http_body_util::Empty::<Bytes>::new())?;
    Ok(sender.send_request(req).await?)
}

/// `GET path` over HTTP/2 (what the API server's Go client negotiates).
async fn get_h2(
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    path: &str,
) -> anyhow::Result<http::Response<Incoming>> {
    let mut tls = (*tls).clone();
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let stream = tokio_rustls::TlsConnector::from(Arc::new(tls))
        .connect(ServerName::IpAddress(addr.ip().into()), tcp)
        .await?;
    anyhow::ensure!(stream.get_ref().1.alpn_protocol() == Some(&b"h2"[..]));
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let req = http::Request::get(format!("https://{addr}{path}"))
        .body(http_body_util::Empty::<Bytes>::new())?;
    Ok(sender.send_request(req).await?)
}

async fn body_text(resp: http::Response<Incoming>) -> String {
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

async fn get_text(s: &Setup, path: &str) -> (u16, String) {
    let resp = get(s.server.addr(), apiserver_client(&s.ca), path)
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, body_text(resp).await)
}

async fn next_chunk(body: &mut Incoming) -> Option<Bytes> {
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("no log chunk within 10s")?
            .unwrap();
        if let Ok(data) = frame.into_data() {
            if !data.is_empty() {
                return Some(data);
            }
        }
    }
}

#[tokio::test]
async fn follow_streams_appended_lines_and_ends_on_close() {
    let s = setup();
    assert_eq!(s.server.addr().ip(), NODE_IP);
    s.store
        .set_waiting("kube-system", "p", "uid-1", "c", "ContainerCreating");
    s.store.open("kube-system", "p", "uid-1", "c");
    s.store.append("kube-system", "p", "c", b"one\n");
    let resp = get(
        s.server.addr(),
        apiserver_client(&s.ca),
        "/containerLogs/kube-system/p/c?follow=true",
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers().get(http::header::TRANSFER_ENCODING).unwrap(),
        "chunked"
    );
    let mut body = resp.into_body();
    assert_eq!(next_chunk(&mut body).await.unwrap(), "one\n");
    s.store.append("kube-system", "p", "c", b"two\n");
    assert_eq!(next_chunk(&mut body).await.unwrap(), "two\n");
    s.store.append("kube-system", "p", "c", b"three\n");
    s.store.close("kube-system", "p", "c");
    assert_eq!(next_chunk(&mut body).await.unwrap(), "three\n");
    assert_eq!(next_chunk(&mut body).await, None);
}

#[tokio::test]
async fn follow_works_over_http2() {
    let s = setup();
    s.store.open("ns", "p", "uid-1", "c");
    s.store.append("ns", "p", "c", b"one\n");
    let resp = get_h2(
        s.server.addr(),
        apiserver_client(&s.ca),
        "/containerLogs/ns/p/c?follow=true&timestamps=true",
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let first = next_chunk(&mut body).await.unwrap();
    assert!(first.ends_with(b"Z one\n"), "{first:?}");
    s.store.append("ns", "p", "c", b"two\n");
    assert!(next_chunk(&mut body).await.unwrap().ends_with(b"Z two\n"));
    s.store.remove_pod("ns", "p");
    assert_eq!(next_chunk(&mut body).await, None);
}

#[tokio::test]
async fn query_parameters_work_like_the_kubelet() {
    let s = setup();
    s.store.open("ns", "p", "uid-1", "c");
    s.store.append("ns", "p", "c", b"first 1\nfirst 2\n");
    s.store.open("ns", "p", "uid-1", "c");
    s.store.append("ns", "p", "c", b"one\ntwo\nthree\n");

    assert_eq!(
        get_text(&s, "/containerLogs/ns/p/c").await,
        (200, "one\ntwo\nthree\n".into())
    );
    assert_eq!(
        get_text(&s, "/containerLogs/ns/p/c?tailLines=2").await,
        (200, "two\nthree\n".into())
    );
    assert_eq!(
        get_text(&s, "/containerLogs/ns/p/c?limitBytes=6").await,
        (200, "one\ntw".into())
    );
    assert_eq!(
        get_text(&s, "/containerLogs/ns/p/c?previous=true&tailLines=1").await,
        (200, "first 2\n".into())
    );
    let (status, text) = get_text(&s, "/containerLogs/ns/p/c?timestamps=true&tailLines=1").await;
    assert_eq!(status, 200);
    let (ts, line) = text.split_once(' ').unwrap();
    assert_eq!(line, "three\n");
    // RFC 3339 with nanoseconds, trailing zeros trimmed: 2026-12-01T13:00:00.123456789Z
    assert!(ts.len() >= 20 && ts.len() <= 30, "{ts}");
    assert!(ts.ends_with('Z') && &ts[10..11] == "T", "{ts}");
    if let Some((_, frac)) = ts.split_once('.') {
        assert!(!frac.trim_end_matches('Z').ends_with('0'), "{ts}");
    }
    // A since in the future leaves everything out.
    assert_eq!(
        get_text(&s, "/containerLogs/ns/p/c?sinceTime=2999-01-01T00:00:00Z").await,
        (200, String::new())
    );
    assert_eq!(
        get_text(&s, "/containerLogs/ns/p/c?sinceSeconds=3600").await,
        (200, "one\ntwo\nthree\n".into())
    );
}

#[tokio::test]
async fn errors_are_the_kubelets() {
    let s = setup();
    s.store
        .set_waiting("ns", "p", "uid-1", "c", "ContainerCreating");
    assert_eq!(
        get_text(&s, "/containerLogs/ns/p/c?follow=true").await,
        (
            400,
            r#"container "c" in pod "p" is waiting to start: ContainerCreating"#.into()
        )
    );
    assert_eq!(
        get_text(&s, "/containerLogs/ns/p/c?previous=true").await,
        (
            400,
            r#"previous terminated container "c" in pod "p" not found"#.into()
        )
    );
    assert_eq!(
        get_text(&s, "/containerLogs/ns/gone/c").await,
        (404, r#"pod "gone" does not exist"#.into())
    );
    assert_eq!(
        get_text(&s, "/containerLogs/ns/p/other").await,
        (404, r#"container "other" not found in pod "p""#.into())
    );
    assert_eq!(
        get_text(&s, "/containerLogs/ns/p/c?tailLines=-1").await,
        (422, r#"{"message": "Invalid request."}"#.into())
    );
    assert_eq!(
        get_text(&s, "/containerLogs/ns/p/c?sinceTime=soon").await,
        (400, r#"{"message": "Unable to decode query."}"#.into())
    );
    assert_eq!(get_text(&s, "/pods").await.0, 404);
    assert_eq!(get_text(&s, "/containerLogs/ns/p").await.0, 404);
    assert_eq!(get_text(&s, "/healthz").await, (200, "ok".into()));
}

#[tokio::test]
async fn clients_without_a_cluster_certificate_are_refused() {
    let s = setup();
    s.store.open("ns", "p", "uid-1", "c");
    s.store.append("ns", "p", "c", b"secret\n");
    let path = "/containerLogs/ns/p/c";

    let anonymous = get(s.server.addr(), client_config(&s.ca, None), path).await;
    let refused = format!(
        "{:#}",
        anonymous.expect_err("no client certificate: accepted")
    );
    assert!(refused.contains("CertificateRequired"), "{refused}");

    let other = ca("other-ca");
    let foreign = client_config(
        &s.ca,
        Some(leaf(
            &other,
            "apiserver-kubelet-client",
            &["system:masters"],
            None,
            false,
        )),
    );
    let foreign = get(s.server.addr(), foreign, path).await;
    let refused = format!(
        "{:#}",
        foreign.expect_err("certificate of another CA: accepted")
    );
    assert!(refused.contains("UnknownCA"), "{refused}");

    assert_eq!(get_text(&s, path).await, (200, "secret\n".into()));
}

#[tokio::test]
async fn dropping_the_server_stops_it_and_ends_streams() {
    let s = setup();
    s.store.open("ns", "p", "uid-1", "c");
    s.store.append("ns", "p", "c", b"running\n");
    let addr = s.server.addr();
    let resp = get(
        addr,
        apiserver_client(&s.ca),
        "/containerLogs/ns/p/c?follow=1",
    )
    .await
    .unwrap();
    let mut body = resp.into_body();
    assert_eq!(next_chunk(&mut body).await.unwrap(), "running\n");
    let Setup { ca, store, server } = s;
    drop(server);
    // The follower's stream ends (cut) although the container still runs.
    let ended = tokio::time::timeout(Duration::from_secs(10), body.collect()).await;
    assert!(ended.is_ok(), "stream not ended by shutdown");
    store.append("ns", "p", "c", b"still running\n");
    let again = get(addr, apiserver_client(&ca), "/healthz").await;
    assert!(again.is_err(), "served after shutdown: {again:?}");
}
