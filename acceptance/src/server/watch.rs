//! Watch streams: newline-delimited JSON events `{"type": ..., "object": ...}` over a chunked
//! (HTTP/1.1) or streamed (HTTP/2) body, with selectors, bookmarks and `timeoutSeconds`.
//!
//! Like the real server, a too-old `resourceVersion` is answered with `200` and a single
//! `ERROR` event carrying a `410 Expired` Status ("too old resource version"), which is what
//! client-go and kube-runtime's watcher expect before they re-list.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use http::{HeaderValue, Response, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use super::ServerState;
use super::resources::{Query, present};
use super::response::Body;
use crate::store::selector::{FieldSelector, LabelSelector};
use crate::store::{ApiError, EventKind, ResourceType, StoreEvent};

type Tx = mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>;

fn channel_body(content_type: &'static str) -> (Tx, Response<Body>) {
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(64);
    let body = BodyExt::boxed(StreamBody::new(
        tokio_stream::wrappers::ReceiverStream::new(rx),
    ));
    let mut resp = Response::new(body);
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    (tx, resp)
}

async fn send_json(tx: &Tx, v: &Value) -> bool {
    let mut line = v.to_string().into_bytes();
    line.push(b'\n');
    tx.send(Ok(Frame::data(Bytes::from(line)))).await.is_ok()
}

/// A streaming response of `first` and then `rest`, ending at shutdown.
pub(crate) fn stream_response(
    content_type: &'static str,
    first: Bytes,
    rest: impl Stream<Item = Bytes> + Send + 'static,
    shutdown: CancellationToken,
) -> Response<Body> {
    let (tx, resp) = channel_body(content_type);
    tokio::spawn(async move {
        if !first.is_empty() && tx.send(Ok(Frame::data(first))).await.is_err() {
            return;
        }
        let mut rest = std::pin::pin!(rest);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tx.closed() => return,
                chunk = rest.next() => match chunk {
                    Some(c) => if tx.send(Ok(Frame::data(c))).await.is_err() { return },
                    None => return,
                },
            }
        }
    });
    resp
}

struct Filter {
    /// `Some(includeObject)` when the client asked for `Table` objects (`kubectl get -w`).
    table: Option<String>,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    /// The event's object as the client asked for it (the object, or a one-row Table).
    fn render(&self, ev: &StoreEvent, ty: &ResourceType, version: &str) -> Value {
        let obj = present((*ev.object).clone(), ty, version);
        match &self.table {
            Some(include) => super::table::table(ty, &[obj], ev.resource_version, include),
            None => obj,
        }
    }

    fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }

    /// The watch event type for a store event after selectors, if any.
    fn translate(&self, ev: &StoreEvent) -> Option<&'static str> {
        if self.namespace.as_deref().is_some_and(|n| n != ev.namespace) {
            return None;
        }
        let now = self.matches(&ev.object);
        let before = ev.old.as_deref().is_some_and(|o| self.matches(o));
        match ev.kind {
            EventKind::Deleted => now.then_some("DELETED"),
            EventKind::Added => now.then_some("ADDED"),
            EventKind::Modified => match (before, now) {
                (true, true) => Some("MODIFIED"),
                (false, true) => Some("ADDED"),
                (true, false) => Some("DELETED"),
                (false, false) => None,
            },
        }
    }
}

/// Starts a watch (`?watch=true`).
pub(crate) fn serve(
    state: &Arc<ServerState>,
    ty: ResourceType,
    version: &str,
    namespace: Option<&str>,
    query: &Query,
    accept: &str,
) -> Result<Response<Body>, ApiError> {
    let filter = Filter {
        table: super::table::wants_table(accept)
            .then(|| query.get("includeObject").unwrap_or("Metadata").to_string()),
        namespace: namespace.map(String::from),
        labels: LabelSelector::parse(query.get("labelSelector").unwrap_or(""))?,
        fields: FieldSelector::parse(query.get("fieldSelector").unwrap_or(""), &ty.resource)?,
    };
    let since = match query.get("resourceVersion") {
        None | Some("") | Some("0") => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}")))?,
        ),
    };
    let send_initial = query.flag("sendInitialEvents");
    let bookmarks = query.flag("allowWatchBookmarks");
    let timeout = query.num("timeoutSeconds")?.map(Duration::from_secs);
    let gr = ty.group_resource();
    let (tx, resp) = channel_body("application/json");
    let version = version.to_string();
    let started = state
        .store
        .watch(&gr, namespace, if send_initial { None } else { since });
    let state = state.clone();
    tokio::spawn(async move {
        let start = match started {
            Ok(x) => x,
            Err(e) => {
                let _ = send_json(&tx, &json!({"type": "ERROR", "object": e.to_status()})).await;
                return;
            }
        };
        // Everything up to the snapshot's RV is in `initial`; the receiver carries only newer
        // events, so nothing committed between the snapshot and now is skipped, and bookmarks
        // never go below (or report "0" for) the state the client has seen.
        let last_rv = start.resource_version;
        let rx = start.events;
        for ev in &start.initial {
            if let Some(t) = filter.translate(ev) {
                let obj = filter.render(ev, &ty, &version);
                if !send_json(&tx, &json!({"type": t, "object": obj})).await {
                    return;
                }
            }
        }
        if send_initial {
            let mark = bookmark(&ty, &version, last_rv, true);
            if !send_json(&tx, &mark).await {
                return;
            }
        }
        run(
            state, ty, version, filter, rx, tx, last_rv, bookmarks, timeout,
        )
        .await;
    });
    Ok(resp)
}

fn bookmark(ty: &ResourceType, version: &str, rv: u64, initial_end: bool) -> Value {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({"type": "BOOKMARK", "object": {"kind": ty.kind, "apiVersion": ty.api_version_for(version), "metadata": meta}})
}

#[allow(clippy::too_many_arguments)]
async fn run(
    state: Arc<ServerState>,
    ty: ResourceType,
    version: String,
    filter: Filter,
    mut rx: broadcast::Receiver<StoreEvent>,
    tx: Tx,
    mut last_rv: u64,
    bookmarks: bool,
    timeout: Option<Duration>,
) {
    let gr = ty.group_resource();
    let deadline = tokio::time::sleep(timeout.unwrap_or(Duration::from_secs(365 * 24 * 3600)));
    tokio::pin!(deadline);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    loop {
        tokio::select! {
            _ = state.shutdown.cancelled() => return,
            _ = &mut deadline => return,
            _ = tx.closed() => return,
            _ = state.faults.until_unreachable() => {
                let _ = tx.send(Err(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "fault: API unreachable"))).await;
                return;
            }
            _ = tick.tick(), if bookmarks => {
                if !send_json(&tx, &bookmark(&ty, &version, last_rv, false)).await {
                    return;
                }
            }
            ev = rx.recv() => match ev {
                Ok(ev) => {
                    if ev.resource_version <= last_rv {
                        continue;
                    }
                    last_rv = ev.resource_version;
                    if ev.gr != gr {
                        continue;
                    }
                    if let Some(t) = filter.translate(&ev) {
                        let obj = filter.render(&ev, &ty, &version);
                        if !send_json(&tx, &json!({"type": t, "object": obj})).await {
                            return;
                        }
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(skipped = n, "watcher lagged behind; closing the watch so the client re-watches");
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
        }
    }
}
