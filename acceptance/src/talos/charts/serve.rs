//! HTTPS serving: TLS (rustls, ALPN h2 and http/1.1), routing by `Host`, the classic
//! repositories' files and the OCI distribution API (pull side).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::json;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::catalog::{Catalog, Content, OciRepository};

pub(super) struct State {
    pub catalog: Catalog,
    pub log: Mutex<Vec<String>>,
    pub shutdown: CancellationToken,
}

type Resp = Response<Full<Bytes>>;

pub(super) async fn serve(listener: TcpListener, tls: TlsAcceptor, state: Arc<State>) {
    loop {
        let (tcp, peer) = tokio::select! {
            _ = state.shutdown.cancelled() => return,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "chart server: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let state = state.clone();
        let tls = tls.clone();
        tokio::spawn(async move { connection(state, tls, tcp, peer).await });
    }
}

async fn connection(
    state: Arc<State>,
    tls: TlsAcceptor,
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
) {
    let stream =
        match tokio::time::timeout(std::time::Duration::from_secs(10), tls.accept(tcp)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "chart server: TLS handshake failed");
                return;
            }
            Err(_) => return,
        };
    // SNI: the host a request without `Host` (none should) is for.
    let sni = stream
        .get_ref()
        .1
        .server_name()
        .map(str::to_ascii_lowercase);
    let st = state.clone();
    let service = hyper::service::service_fn(move |req| {
        let st = st.clone();
        let sni = sni.clone();
        async move { Ok::<_, Infallible>(handle(&st, sni.as_deref(), req)) }
    });
    let builder = auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        r = conn => {
            if let Err(e) = r {
                tracing::debug!(%peer, error = %e, "chart server: connection ended");
            }
        }
        _ = state.shutdown.cancelled() => {}
    }
}

/// The request's host, lowercased, without port: the URI authority (HTTP/2), else `Host`, else
/// the TLS server name.
fn host_of(req: &Request<Incoming>, sni: Option<&str>) -> String {
    let raw = req
        .uri()
        .host()
        .map(str::to_string)
        .or_else(|| {
            req.headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_string)
        })
        .or_else(|| sni.map(str::to_string))
        .unwrap_or_default();
    let host = match raw.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h.to_string(),
        _ => raw,
    };
    host.to_ascii_lowercase()
}

fn handle(state: &State, sni: Option<&str>, req: Request<Incoming>) -> Resp {
    let host = host_of(&req, sni);
    let path = req.uri().path().to_string();
    let target = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| path.clone());
    if let Ok(mut log) = state.log.lock() {
        log.push(format!("{} {host}{target}", req.method()));
    }
    let method = req.method().clone();
    let resp = route(state, &host, &method, &path, req.uri().query());
    tracing::debug!(%method, %host, %target, status = %resp.status(), "chart server");
    resp
}

fn route(state: &State, host: &str, method: &Method, path: &str, query: Option<&str>) -> Resp {
    let catalog = &state.catalog;
    if let Some(repos) = catalog.oci.get(host) {
        if path == "/v2" || path.starts_with("/v2/") {
            return oci(repos, method, path, query);
        }
    }
    if method != Method::GET && method != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "405 method not allowed\n");
    }
    match catalog.files.get(&(host.to_string(), path.to_string())) {
        Some(file) => content(StatusCode::OK, file, &[]),
        None => text(StatusCode::NOT_FOUND, "404 page not found\n"),
    }
}

fn text(status: StatusCode, body: &'static str) -> Resp {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// A body with `Content-Type` and `Content-Length` (HEAD answers carry them too; hyper drops
/// the body of a HEAD response).
fn content(status: StatusCode, c: &Content, extra: &[(&'static str, String)]) -> Resp {
    let mut r = Response::new(Full::new(c.body.clone()));
    *r.status_mut() = status;
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&c.media_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(c.body.len()));
    for (k, v) in extra {
        if let Ok(v) = HeaderValue::from_str(v) {
            h.insert(*k, v);
        }
    }
    r
}

const API_VERSION: (&str, &str) = ("docker-distribution-api-version", "registry/2.0");

/// An OCI distribution error response (`{"errors": [{"code", "message", "detail"}]}`).
fn oci_error(status: StatusCode, code: &str, message: &str, detail: serde_json::Value) -> Resp {
    let body = json!({"errors": [{"code": code, "message": message, "detail": detail}]});
    let c = Content {
        media_type: "application/json".into(),
        body: Bytes::from(body.to_string()),
    };
    content(status, &c, &[(API_VERSION.0, API_VERSION.1.into())])
}

/// `GET /v2/`, `GET|HEAD /v2/<name>/tags/list`, `.../manifests/<tag|digest>`, `.../blobs/<digest>`.
fn oci(
    repos: &std::collections::BTreeMap<String, OciRepository>,
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> Resp {
    let api = [(API_VERSION.0, API_VERSION.1.to_string())];
    if method != Method::GET && method != Method::HEAD {
        return oci_error(
            StatusCode::METHOD_NOT_ALLOWED,
            "UNSUPPORTED",
            "The operation is unsupported.",
            json!({"method": method.as_str()}),
        );
    }
    let rest = path.trim_start_matches("/v2").trim_start_matches('/');
    if rest.is_empty() {
        let c = Content {
            media_type: "application/json".into(),
            body: Bytes::from_static(b"{}"),
        };
        return content(StatusCode::OK, &c, &api);
    }
    let split = |marker: &str| rest.rsplit_once(marker);
    let (name, op, arg) = if let Some(name) = rest.strip_suffix("/tags/list") {
        (name, "tags", "")
    } else if let Some((name, reference)) = split("/manifests/") {
        (name, "manifests", reference)
    } else if let Some((name, digest)) = split("/blobs/") {
        (name, "blobs", digest)
    } else {
        return oci_error(
            StatusCode::NOT_FOUND,
            "NAME_UNKNOWN",
            "repository name not known to registry",
            json!({"name": rest}),
        );
    };
    let Some(repo) = repos.get(name) else {
        return oci_error(
            StatusCode::NOT_FOUND,
            "NAME_UNKNOWN",
            "repository name not known to registry",
            json!({"name": name}),
        );
    };
    match op {
        "tags" => {
            let params = parse_query(query);
            let mut tags: Vec<&str> = repo.tags.iter().map(|(t, _)| t.as_str()).collect();
            tags.sort_unstable();
            if let Some(last) = params.get("last") {
                tags.retain(|t| *t > last.as_str());
            }
            let mut headers = api.to_vec();
            if let Some(n) = params.get("n").and_then(|n| n.parse::<usize>().ok()) {
                if tags.len() > n {
                    tags.truncate(n);
                    if let Some(last) = tags.last() {
                        headers.push((
                            "link",
                            format!("</v2/{name}/tags/list?n={n}&last={last}>; rel=\"next\""),
                        ));
                    }
                }
            }
            let c = Content {
                media_type: "application/json".into(),
                body: Bytes::from(json!({"name": name, "tags": tags}).to_string()),
            };
            content(StatusCode::OK, &c, &headers)
        }
        "manifests" => {
            let digest = if arg.starts_with("sha256:") {
                Some(arg.to_string())
            } else {
                repo.tags
                    .iter()
                    .find(|(t, _)| t == arg)
                    .map(|(_, d)| d.clone())
            };
            match digest.and_then(|d| repo.manifests.get(&d).map(|m| (d, m))) {
                Some((d, m)) => {
                    let mut headers = api.to_vec();
                    headers.push(("docker-content-digest", d));
                    content(StatusCode::OK, m, &headers)
                }
                None => oci_error(
                    StatusCode::NOT_FOUND,
                    "MANIFEST_UNKNOWN",
                    "manifest unknown",
                    json!({"name": name, "reference": arg}),
                ),
            }
        }
        _ => match repo.blobs.get(arg) {
            Some(b) => {
                let mut headers = api.to_vec();
                headers.push(("docker-content-digest", arg.to_string()));
                // The registry's generic type, as ghcr.io answers blob GETs.
                let c = Content {
                    media_type: "application/octet-stream".into(),
                    body: b.body.clone(),
                };
                content(StatusCode::OK, &c, &headers)
            }
            None => oci_error(
                StatusCode::NOT_FOUND,
                "BLOB_UNKNOWN",
                "blob unknown to registry",
                json!({"name": name, "digest": arg}),
            ),
        },
    }
}

fn parse_query(query: Option<&str>) -> std::collections::HashMap<String, String> {
    query
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
