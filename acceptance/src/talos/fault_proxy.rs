//! The fault proxy: an authenticating front proxy in front of the real kube-apiserver, on the
//! endpoints that the provider's kubeconfig and every node's KubePrism point at. It injects the
//! chaos suite's faults ([`Faults`]) where a real cluster has them, between the clients and the
//! apiserver: 5xx and 429 answers (with `Retry-After`), latency, dropped connections, and
//! unreachable periods (the port closed: connections are refused, open ones cut).
//!
//! TLS ends here, with the apiserver's own serving certificate. A client certificate's subject
//! is forwarded as the front-proxy headers (`X-Remote-User`, `X-Remote-Group`) over a connection
//! authenticated by the proxy's front-proxy client certificate, the way any authenticating proxy
//! in front of a kube-apiserver does (`--requestheader-*` flags), so the apiserver sees the same
//! identity and RBAC, Node authorization and impersonation apply unchanged. Bearer tokens (the
//! pods' ServiceAccount tokens) pass as they are. Upgrades (`exec`, `port-forward`) are refused:
//! nothing the provider or the tests do needs them.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::OnceCell;
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tokio_util::sync::CancellationToken;

use super::pki::CertPair;
use crate::faults::{Action, Faults};

type Body = UnsyncBoxBody<Bytes, hyper::Error>;

/// What the proxy needs from the control plane.
pub struct FaultProxyConfig {
    /// The apiserver's serving certificate (its SANs cover `127.0.0.1` and `localhost`).
    pub serving: CertPair,
    /// The cluster CA: it signs the clients' certificates and the apiserver's.
    pub ca_pem: String,
    /// The proxy's client certificate, signed by the front-proxy CA the apiserver trusts for
    /// `X-Remote-*` headers.
    pub front_proxy_client: CertPair,
    pub upstream: SocketAddr,
}

/// A running fault proxy; dropping it stops it.
pub struct FaultProxy {
    addr: SocketAddr,
    faults: Faults,
    stop: CancellationToken,
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// Everything a connection needs, shared by all of them.
struct Shared {
    acceptor: TlsAcceptor,
    connector: TlsConnector,
    upstream: SocketAddr,
    faults: Faults,
}

impl FaultProxy {
    /// Listens on a random loopback port.
    pub async fn start(config: FaultProxyConfig) -> anyhow::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            acceptor: TlsAcceptor::from(server_tls(&config)?),
            connector: TlsConnector::from(client_tls(&config)?),
            upstream: config.upstream,
            faults: Faults::default(),
        });
        let stop = CancellationToken::new();
        tokio::spawn(accept_loop(listener, addr, shared.clone(), stop.clone()));
        Ok(FaultProxy {
            addr,
            faults: shared.faults.clone(),
            stop,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The faults this proxy injects.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn server_tls(config: &FaultProxyConfig) -> anyhow::Result<Arc<ServerConfig>> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let chain = CertificateDer::pem_slice_iter(config.serving.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .context("invalid serving certificate PEM")?;
    let key = PrivateKeyDer::from_pem_slice(config.serving.key_pem.as_bytes())
        .context("invalid serving key PEM")?;
    let roots = Arc::new(roots(&config.ca_pem)?);
    // Certificates are optional: ServiceAccount tokens come without one.
    let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider.clone())
        .allow_unauthenticated()
        .build()
        .context("failed to build the client certificate verifier")?;
    let mut tls = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .context("invalid serving certificate or key")?;
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(tls))
}

fn client_tls(config: &FaultProxyConfig) -> anyhow::Result<Arc<ClientConfig>> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let chain = CertificateDer::pem_slice_iter(config.front_proxy_client.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .context("invalid front-proxy client certificate PEM")?;
    let key = PrivateKeyDer::from_pem_slice(config.front_proxy_client.key_pem.as_bytes())
        .context("invalid front-proxy client key PEM")?;
    let mut tls = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots(&config.ca_pem)?)
        .with_client_auth_cert(chain, key)
        .context("invalid front-proxy client certificate or key")?;
    tls.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(tls))
}

fn roots(ca_pem: &str) -> anyhow::Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(ca.context("invalid CA PEM")?)?;
    }
    anyhow::ensure!(!roots.is_empty(), "no CA certificate in PEM");
    Ok(roots)
}

/// Accepts until stopped. While the API is unreachable the port is closed (connections are
/// refused, as from a control plane that is down) and open connections are cut.
async fn accept_loop(
    mut listener: TcpListener,
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            _ = shared.faults.until_unreachable() => None,
            r = listener.accept() => Some(r),
        };
        match accepted {
            Some(Ok((tcp, _))) => {
                let _ = tcp.set_nodelay(true);
                tokio::spawn(serve_connection(tcp, shared.clone(), stop.clone()));
            }
            Some(Err(e)) => {
                tracing::warn!(error = %e, "fault proxy: accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            None => {
                drop(listener);
                while shared.faults.is_unreachable() {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                    }
                }
                listener = loop {
                    // Rebinding the same port: another process could have taken it meanwhile,
                    // which on loopback with random ports does not happen in practice.
                    match TcpListener::bind(addr).await {
                        Ok(l) => break l,
                        Err(e) => {
                            tracing::debug!(error = %e, "fault proxy: rebinding");
                            tokio::select! {
                                _ = stop.cancelled() => return,
                                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                            }
                        }
                    }
                };
            }
        }
    }
}

/// Who a client certificate names: the user (CN) and groups (O), as the apiserver reads them.
#[derive(Clone, Debug, Default, PartialEq)]
struct Identity {
    user: String,
    groups: Vec<String>,
}

fn identity_of(der: &[u8]) -> Option<Identity> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let user = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())?
        .to_owned();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_owned))
        .collect();
    Some(Identity { user, groups })
}

async fn serve_connection(tcp: TcpStream, shared: Arc<Shared>, stop: CancellationToken) {
    let tls = match tokio::time::timeout(Duration::from_secs(10), shared.acceptor.accept(tcp)).await
    {
        Ok(Ok(tls)) => tls,
        _ => return,
    };
    let identity = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(|cert| identity_of(cert));
    let upstream: Arc<OnceCell<SendRequest<Incoming>>> = Arc::new(OnceCell::new());
    let service = {
        let shared = shared.clone();
        hyper::service::service_fn(move |req| {
            let shared = shared.clone();
            let identity = identity.clone();
            let upstream = upstream.clone();
            async move { handle(req, &shared, identity.as_ref(), &upstream).await }
        })
    };
    let builder = auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection(TokioIo::new(tls), service);
    tokio::select! {
        r = conn => if let Err(e) = r {
            tracing::debug!(error = %e, "fault proxy: connection ended");
        },
        _ = shared.faults.until_unreachable() => {}
        _ = stop.cancelled() => {}
    }
}

/// Why a request got no answer: hyper closes the connection (HTTP/1.1) or resets the stream
/// (HTTP/2), as a proxy or load balancer that drops it does.
#[derive(Debug, thiserror::Error)]
enum Dropped {
    #[error("connection dropped by an injected fault")]
    Injected,
    #[error("the apiserver is unreachable from the proxy: {0}")]
    Upstream(String),
}

/// The Kubernetes verb of a request, as far as the matcher needs it.
fn verb_of(method: &http::Method, query: Option<&str>) -> &'static str {
    let watch = query.is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    match method.as_str() {
        "GET" if watch => "watch",
        "GET" | "HEAD" => "get",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "unknown",
    }
}

async fn handle(
    req: Request<Incoming>,
    shared: &Shared,
    identity: Option<&Identity>,
    upstream: &OnceCell<SendRequest<Incoming>>,
) -> Result<Response<Body>, Dropped> {
    let path = req.uri().path().to_owned();
    let verb = verb_of(req.method(), req.uri().query());
    let (delay, action) = shared.faults.on_request(&path, verb, req.method().as_str());
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    match action {
        Action::Pass => {}
        Action::Drop => return Err(Dropped::Injected),
        Action::Fail {
            status,
            retry_after,
        } => return Ok(status_response(status, retry_after)),
    }
    if req.headers().contains_key(header::UPGRADE) {
        return Ok(status_response_with(
            501,
            "NotImplemented",
            "the test cluster's fault proxy does not relay upgrades (exec, port-forward)",
            None,
        ));
    }
    let send = upstream
        .get_or_try_init(|| connect_upstream(shared))
        .await
        .map_err(|e| Dropped::Upstream(format!("{e:#}")))?;
    let forwarded = forwarded_request(req, identity, shared.upstream)?;
    let mut send = send.clone();
    send.ready()
        .await
        .map_err(|e| Dropped::Upstream(e.to_string()))?;
    let method = forwarded.method().clone();
    let response = send
        .send_request(forwarded)
        .await
        .map_err(|e| Dropped::Upstream(e.to_string()))?;
    // One event per request the apiserver answered (the engine bench counts them).
    tracing::trace!(%method, %path, status = response.status().as_u16(), "request");
    Ok(response.map(|b| b.boxed_unsync()))
}

async fn connect_upstream(shared: &Shared) -> anyhow::Result<SendRequest<Incoming>> {
    let tcp = TcpStream::connect(shared.upstream).await?;
    let _ = tcp.set_nodelay(true);
    let name = ServerName::IpAddress(shared.upstream.ip().into());
    let tls = shared.connector.connect(name, tcp).await?;
    let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .handshake(TokioIo::new(tls))
        .await?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "fault proxy: upstream connection ended");
        }
    });
    Ok(send)
}

/// Headers that belong to one hop (and that HTTP/2 forbids), and the front-proxy headers a
/// client must not set itself.
fn is_hop_or_identity_header(name: &str) -> bool {
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "transfer-encoding"
            | "upgrade"
            | "te"
            | "host"
    ) || name.starts_with("x-remote-")
}

fn forwarded_request(
    req: Request<Incoming>,
    identity: Option<&Identity>,
    upstream: SocketAddr,
) -> Result<Request<Incoming>, Dropped> {
    let (mut parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "/".into());
    parts.uri = format!("https://{upstream}{path}")
        .parse()
        .map_err(|e: http::uri::InvalidUri| Dropped::Upstream(e.to_string()))?;
    parts.version = http::Version::HTTP_2;
    let names: Vec<_> = parts
        .headers
        .keys()
        .filter(|n| is_hop_or_identity_header(n.as_str()))
        .cloned()
        .collect();
    for name in names {
        parts.headers.remove(&name);
    }
    if let Some(identity) = identity {
        let value = |s: &str| HeaderValue::from_str(s).ok();
        if let Some(user) = value(&identity.user) {
            parts.headers.insert("x-remote-user", user);
        }
        for group in &identity.groups {
            if let Some(g) = value(group) {
                parts.headers.append("x-remote-group", g);
            }
        }
    }
    Ok(Request::from_parts(parts, body))
}

fn status_response(status: u16, retry_after: Option<u64>) -> Response<Body> {
    let (reason, message) = match status {
        429 => (
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later",
        ),
        503 => (
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        ),
        500 => (
            "InternalError",
            "an error on the server (\"injected fault\") has prevented the request from succeeding",
        ),
        _ => ("InternalError", "injected fault"),
    };
    status_response_with(status, reason, message, retry_after)
}

/// A `v1.Status` body, as the apiserver (or its priority-and-fairness filter) answers.
fn status_response_with(
    status: u16,
    reason: &str,
    message: &str,
    retry_after: Option<u64>,
) -> Response<Body> {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": retry_after.map(|s| serde_json::json!({"retryAfterSeconds": s})),
        "code": status,
    });
    let mut resp = Response::new(
        Full::new(Bytes::from(body.to_string()))
            .map_err(|never: Infallible| match never {})
            .boxed_unsync(),
    );
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(s) = retry_after {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_follow_the_method_and_watch() {
        assert_eq!(
            verb_of(&http::Method::GET, Some("watch=true&rv=1")),
            "watch"
        );
        assert_eq!(verb_of(&http::Method::GET, Some("limit=500")), "get");
        assert_eq!(verb_of(&http::Method::PATCH, None), "patch");
    }

    #[test]
    fn a_certificate_names_its_user_and_groups() {
        let pki = super::super::pki::ClusterPki::generate().unwrap();
        let leaf = pki
            .leaf(
                "system:node:a",
                &["system:nodes", "extra"],
                &[],
                super::super::pki::Usage::Client,
            )
            .unwrap();
        let der = CertificateDer::from_pem_slice(leaf.cert_pem.as_bytes()).unwrap();
        assert_eq!(
            identity_of(&der),
            Some(Identity {
                user: "system:node:a".into(),
                groups: vec!["system:nodes".into(), "extra".into()],
            })
        );
    }

    #[test]
    fn clients_cannot_set_the_identity_headers() {
        assert!(is_hop_or_identity_header("x-remote-user"));
        assert!(is_hop_or_identity_header("x-remote-extra-scopes"));
        assert!(!is_hop_or_identity_header("impersonate-user"));
        assert!(!is_hop_or_identity_header("authorization"));
    }
}
