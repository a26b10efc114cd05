//! The HTTPS front: TLS (rustls, ALPN h2/http1.1), authentication, faults, routing.
//!
//! Routes: `/version`, `/healthz`, `/livez`, `/readyz`, `/openapi/v2`, `/api`, `/apis`,
//! discovery per group version, resources under `/api/v1/...` and `/apis/<group>/<version>/...`,
//! and the admin endpoint `/talos-sim/faults`.

mod discovery;
mod resources;
mod response;
mod table;
mod watch;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::pki_types::CertificateDer;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::faults::{Action, FaultSpec, Faults};
use crate::pki::Pki;
use crate::store::{ApiError, GroupResource, Store, UserInfo};
pub use response::Body;

/// Everything request handlers need.
pub(crate) struct ServerState {
    pub store: Store,
    pub faults: Faults,
    pub pki: Arc<Pki>,
    pub shutdown: CancellationToken,
}

/// Who sent a request.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Identity {
    Admin,
    Anonymous,
}

/// Accepts connections until `shutdown` is cancelled.
pub(crate) async fn serve(listener: TcpListener, state: Arc<ServerState>) {
    let acceptor = TlsAcceptor::from(state.pki.tls.clone());
    loop {
        let (tcp, peer) = tokio::select! {
            _ = state.shutdown.cancelled() => return,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        if state.faults.is_unreachable() {
            tracing::debug!(%peer, "fault: API unreachable, closing connection");
            drop(tcp);
            continue;
        }
        let _ = tcp.set_nodelay(true);
        let state = state.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move { connection(state, acceptor, tcp, peer).await });
    }
}

async fn connection(
    state: Arc<ServerState>,
    acceptor: TlsAcceptor,
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
) {
    let tls = match tokio::time::timeout(std::time::Duration::from_secs(10), acceptor.accept(tcp))
        .await
    {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => return,
    };
    let certs: Vec<CertificateDer<'static>> = tls
        .get_ref()
        .1
        .peer_certificates()
        .map(|c| c.to_vec())
        .unwrap_or_default();
    let identity = if !certs.is_empty() && state.pki.verify_client(&certs) {
        Identity::Admin
    } else {
        Identity::Anonymous
    };
    let st = state.clone();
    let service = hyper::service::service_fn(move |req| {
        let st = st.clone();
        let identity = identity.clone();
        async move { handle(st, identity, req).await }
    });
    let builder = auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection(TokioIo::new(tls), service);
    tokio::select! {
        r = conn => {
            if let Err(e) = r {
                tracing::debug!(%peer, error = %e, "connection ended");
            }
        }
        _ = state.shutdown.cancelled() => {}
        _ = state.faults.until_unreachable() => tracing::debug!(%peer, "fault: cutting connection"),
    }
}

/// Whether a resource path names a collection (`.../configmaps`) rather than an object.
fn is_collection(path: &str) -> bool {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let rest = match segs.as_slice() {
        ["api", _, rest @ ..] => rest,
        ["apis", _, _, rest @ ..] => rest,
        _ => return false,
    };
    match rest {
        ["namespaces", _, tail @ ..] if !tail.is_empty() => tail.len() == 1,
        _ => rest.len() == 1,
    }
}

/// The Kubernetes verb of a request, for faults and logs.
fn verb_of(req: &Request<Incoming>) -> &'static str {
    let q = req.uri().query().unwrap_or("");
    let watch = q
        .split('&')
        .any(|p| p == "watch=true" || p == "watch=1" || p == "watch");
    let collection = is_collection(req.uri().path());
    match *req.method() {
        Method::GET if watch => "watch",
        Method::GET if collection => "list",
        Method::GET => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if collection => "deletecollection",
        Method::DELETE => "delete",
        _ => "other",
    }
}

async fn handle(
    state: Arc<ServerState>,
    identity: Identity,
    req: Request<Incoming>,
) -> Result<Response<Body>, std::io::Error> {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    let verb = verb_of(&req);
    if state.faults.is_unreachable() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "fault: API unreachable",
        ));
    }
    if !path.starts_with("/talos-sim/") {
        let (delay, action) = state.faults.on_request(&path, verb, method.as_str());
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        match action {
            Action::Pass => {}
            Action::Fail {
                status,
                retry_after,
            } => {
                tracing::debug!(%method, %path, status, "fault: failing request");
                return Ok(response::error(&response::fault_error(status, retry_after)));
            }
            Action::Drop => {
                tracing::debug!(%method, %path, "fault: dropping connection");
                return Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "fault: dropped",
                ));
            }
        }
    }
    let resp = route(&state, identity, req).await;
    tracing::debug!(%method, %path, status = resp.status().as_u16(), "request");
    Ok(resp)
}

async fn route(
    state: &Arc<ServerState>,
    identity: Identity,
    req: Request<Incoming>,
) -> Response<Body> {
    let path = req.uri().path().trim_end_matches('/').to_string();
    let public = matches!(
        path.as_str(),
        "/healthz" | "/livez" | "/readyz" | "/version"
    ) || path.starts_with("/healthz/")
        || path.starts_with("/livez/")
        || path.starts_with("/readyz/");
    let admin = identity == Identity::Admin || bearer_ok(state, &req);
    let service_account = if admin {
        None
    } else {
        service_account_of(state, &req)
    };
    if !admin && service_account.is_none() {
        if public {
            return discovery::public(&path);
        }
        return response::error(&ApiError::unauthorized());
    }
    if public {
        return discovery::public(&path);
    }
    // A ServiceAccount's requests go through a store handle authorized as it (RBAC).
    let scoped;
    let state = match service_account {
        Some(user) => {
            if path.starts_with("/talos-sim/") {
                return response::error(&ApiError::new(
                    403,
                    "Forbidden",
                    "forbidden: the fault API is for the admin",
                ));
            }
            scoped = Arc::new(ServerState {
                store: state.store.as_user(user),
                faults: state.faults.clone(),
                pki: state.pki.clone(),
                shutdown: state.shutdown.clone(),
            });
            &scoped
        }
        None => state,
    };
    if path == "/talos-sim/faults" {
        return admin_faults(state, req).await;
    }
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(crate::util::percent_decode)
        .collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    match segs.as_slice() {
        ["api"] => response::ok(&discovery::api_versions(
            req.uri().authority().map(|a| a.to_string()),
        )),
        ["apis"] => response::ok(&discovery::api_groups(&state.store)),
        ["openapi", "v2"] => discovery::openapi_v2(&req),
        ["openapi", "v3"] => response::ok(&json!({"paths": {}})),
        ["api", "v1", rest @ ..] => resources::dispatch(state, "", "v1", rest, req).await,
        ["apis", group] => match discovery::api_group(&state.store, group) {
            Some(v) => response::ok(&v),
            None => response::error(&ApiError::no_route()),
        },
        ["apis", group, version, rest @ ..] => {
            resources::dispatch(state, group, version, rest, req).await
        }
        _ => response::error(&ApiError::no_route()),
    }
}

const SA_TOKEN_PREFIX: &str = "talos-sim-sa.";

/// A bearer token for ServiceAccount `namespace/name`: `talos-sim-sa.<base64url(ns/name)>.<mac>`,
/// the mac keyed with the cluster's secret (so tokens cannot be forged from another one).
pub(crate) fn service_account_token(pki: &Pki, namespace: &str, name: &str) -> String {
    use base64::Engine;
    let subject = format!("{namespace}/{name}");
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&subject);
    format!("{SA_TOKEN_PREFIX}{b64}.{}", token_mac(pki, &subject))
}

fn token_mac(pki: &Pki, subject: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{}\n{subject}", pki.admin_token).as_bytes());
    crate::util::hex(&digest[..16])
}

/// The ServiceAccount a bearer token names, if the token is valid and the ServiceAccount exists.
fn service_account_of(state: &ServerState, req: &Request<Incoming>) -> Option<UserInfo> {
    use base64::Engine;
    let token = req
        .headers()
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")?
        .trim()
        .strip_prefix(SA_TOKEN_PREFIX)?;
    let (b64, mac) = token.split_once('.')?;
    let subject = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(b64)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())?;
    if token_mac(&state.pki, &subject) != mac {
        return None;
    }
    let (ns, name) = subject.split_once('/')?;
    state
        .store
        .system()
        .get(&GroupResource::core("serviceaccounts"), ns, name)
        .ok()?;
    Some(UserInfo::service_account(ns, name))
}

fn bearer_ok(state: &ServerState, req: &Request<Incoming>) -> bool {
    req.headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| t.trim() == state.pki.admin_token)
}

/// Reads a request body (at most 3 MiB, like the real server's limit).
pub(crate) async fn read_body(
    req: Request<Incoming>,
) -> Result<(http::request::Parts, Bytes), ApiError> {
    let (parts, body) = req.into_parts();
    let collected = Limited::new(body, 3 * 1024 * 1024)
        .collect()
        .await
        .map_err(|e| {
            ApiError::new(
                413,
                "RequestEntityTooLarge",
                format!("failed to read the request body: {e}"),
            )
        })?;
    Ok((parts, collected.to_bytes()))
}

/// Parses a JSON or YAML body into a value.
pub(crate) fn parse_body(content_type: &str, bytes: &[u8]) -> Result<Value, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) => Ok(v),
        Err(json_err) => {
            if content_type.contains("yaml") {
                let text = std::str::from_utf8(bytes).map_err(|e| {
                    ApiError::bad_request(format!("the request body is not UTF-8: {e}"))
                })?;
                serde_saphyr::from_str::<Value>(text)
                    .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
            } else {
                Err(ApiError::bad_request(format!(
                    "couldn't get version/kind; json parse error: {json_err}"
                )))
            }
        }
    }
}

async fn admin_faults(state: &Arc<ServerState>, req: Request<Incoming>) -> Response<Body> {
    match *req.method() {
        Method::GET => {
            response::ok(&serde_json::to_value(state.faults.active()).unwrap_or(Value::Null))
        }
        Method::DELETE => {
            state.faults.clear();
            response::ok(&json!({"cleared": true}))
        }
        Method::POST => {
            let (_, body) = match read_body(req).await {
                Ok(x) => x,
                Err(e) => return response::error(&e),
            };
            match serde_json::from_slice::<FaultSpec>(&body) {
                Ok(spec) => {
                    state.faults.inject(spec.clone());
                    response::json_response(201, &serde_json::to_value(spec).unwrap_or(Value::Null))
                }
                Err(e) => {
                    response::error(&ApiError::bad_request(format!("invalid fault spec: {e}")))
                }
            }
        }
        _ => response::error(&ApiError::method_not_allowed()),
    }
}
