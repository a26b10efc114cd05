//! Resource endpoints: list/get/create/update/patch/delete/deletecollection, `/status`,
//! `pods/log`, and the hand-off to watch streams.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, header};
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::response::{self, Body};
use super::{ServerState, discovery, parse_body, read_body, table, watch};
use crate::store::{
    ApiError, DeleteOptions, GroupResource, ListOptions, LogView, Patch, Propagation, ResourceType,
    WriteOptions, tail_lines,
};
use crate::util::parse_query;

/// Query parameters, decoded.
pub(crate) struct Query(Vec<(String, String)>);

impl Query {
    pub fn get(&self, k: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    }
    pub fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true") | Some("1") | Some(""))
    }
    pub fn num(&self, k: &str) -> Result<Option<u64>, ApiError> {
        self.get(k)
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| ApiError::bad_request(format!("invalid value for {k}: {v:?}")))
            })
            .transpose()
    }
    pub fn list_options(&self) -> Result<ListOptions, ApiError> {
        Ok(ListOptions {
            label_selector: self.get("labelSelector").map(String::from),
            field_selector: self.get("fieldSelector").map(String::from),
            limit: self.num("limit")?.map(|l| l as usize),
            continue_token: self.get("continue").map(String::from),
        })
    }
}

/// A parsed resource path.
struct Target<'a> {
    namespace: Option<&'a str>,
    resource: &'a str,
    name: Option<&'a str>,
    sub: Option<&'a str>,
}

fn parse_target<'a>(group: &str, rest: &[&'a str]) -> Option<Target<'a>> {
    let t = |namespace, resource, name, sub| {
        Some(Target {
            namespace,
            resource,
            name,
            sub,
        })
    };
    match rest {
        ["namespaces", ns, sub @ ("status" | "finalize")] if group.is_empty() => {
            t(None, "namespaces", Some(*ns), Some(*sub))
        }
        ["namespaces", ns, res] => t(Some(*ns), res, None, None),
        ["namespaces", ns, res, name] => t(Some(*ns), res, Some(*name), None),
        ["namespaces", ns, res, name, sub] => t(Some(*ns), res, Some(*name), Some(*sub)),
        [res] => t(None, res, None, None),
        [res, name] => t(None, res, Some(*name), None),
        [res, name, sub] => t(None, res, Some(*name), Some(*sub)),
        _ => None,
    }
}

pub(crate) async fn dispatch(
    state: &Arc<ServerState>,
    group: &str,
    version: &str,
    rest: &[&str],
    req: Request<Incoming>,
) -> Response<Body> {
    if rest.is_empty() {
        return match discovery::resource_list(&state.store, group, version) {
            Some(v) => response::ok(&v),
            None => response::error(&ApiError::no_route()),
        };
    }
    match handle(state, group, version, rest, req).await {
        Ok(r) => r,
        Err(e) => response::error(&e),
    }
}

/// Sets the apiVersion a client asked for (objects are stored once for all served versions).
pub(crate) fn present(mut obj: Value, ty: &ResourceType, version: &str) -> Value {
    if obj.is_object() {
        obj["apiVersion"] = json!(ty.api_version_for(version));
    }
    obj
}

async fn handle(
    state: &Arc<ServerState>,
    group: &str,
    version: &str,
    rest: &[&str],
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let target = parse_target(group, rest).ok_or_else(ApiError::no_route)?;
    let store = &state.store;
    let gr = GroupResource::new(group, target.resource);
    let ty = store
        .resource_type(&gr)
        .filter(|t| t.serves(version))
        .ok_or_else(ApiError::no_route)?;
    if (ty.namespaced && target.namespace.is_none() && target.name.is_some())
        || (!ty.namespaced && target.namespace.is_some())
    {
        return Err(ApiError::no_route());
    }
    let ns = target.namespace.unwrap_or("");
    let query = Query(parse_query(req.uri().query()));
    let method = req.method().clone();
    match (&method, target.name, target.sub) {
        (&Method::GET, None, None) if query.flag("watch") => {
            watch::serve(state, ty, version, target.namespace, &query, accept(&req))
        }
        (&Method::GET, None, None) => {
            list(state, &ty, version, target.namespace, &query, accept(&req))
        }
        (&Method::GET, Some(name), None | Some("status")) => {
            let obj = present(store.get(&gr, ns, name)?, &ty, version);
            if table::wants_table(accept(&req)) {
                let rv = crate::store::rv_of(&obj);
                let include = query.get("includeObject").unwrap_or("Metadata");
                return Ok(response::ok(&table::table(&ty, &[obj], rv, include)));
            }
            Ok(response::ok(&obj))
        }
        (&Method::GET, Some(name), Some("log")) if gr == GroupResource::core("pods") => {
            logs(state, ns, name, &query)
        }
        (&Method::POST, None, None) => {
            let opts = write_options(&query, &req);
            let (parts, body) = read_body(req).await?;
            let obj = parse_body(content_type(&parts.headers), &body)?;
            let created = store.create(&gr, ns, obj, &opts)?;
            let warning = store.pod_security_warning(&gr, ns, &created);
            Ok(with_warning(
                response::json_response(201, &present(created, &ty, version)),
                warning,
            ))
        }
        (&Method::PUT, Some(name), sub @ (None | Some("status"))) => {
            let opts = write_options(&query, &req);
            let (parts, body) = read_body(req).await?;
            let obj = parse_body(content_type(&parts.headers), &body)?;
            let existed = store.get(&gr, ns, name).is_ok();
            let updated = store.update_named(&gr, ns, name, obj, &opts, sub)?;
            let warning = workload_warning(store, &gr, ns, sub, &updated);
            Ok(with_warning(
                response::json_response(
                    if existed || opts.dry_run { 200 } else { 201 },
                    &present(updated, &ty, version),
                ),
                warning,
            ))
        }
        (&Method::PATCH, Some(name), sub @ (None | Some("status"))) => {
            let opts = write_options(&query, &req);
            let (parts, body) = read_body(req).await?;
            let ct = content_type(&parts.headers).to_string();
            let value = parse_body(
                if ct.contains("apply-patch") {
                    "application/yaml"
                } else {
                    &ct
                },
                &body,
            )?;
            let patch = Patch::from_content_type(&ct, value)?;
            let existed = store.get(&gr, ns, name).is_ok();
            let out = store.patch_sub(&gr, ns, name, patch, &opts, sub)?;
            let warning = if existed {
                workload_warning(store, &gr, ns, sub, &out)
            } else {
                store.pod_security_warning(&gr, ns, &out)
            };
            Ok(with_warning(
                response::json_response(
                    if existed { 200 } else { 201 },
                    &present(out, &ty, version),
                ),
                warning,
            ))
        }
        (&Method::DELETE, Some(name), None) => {
            let (_, body) = read_body(req).await?;
            let opts = delete_options(&query, &body)?;
            let out = store.delete(&gr, ns, name, &opts)?;
            let still_there = store.get(&gr, ns, name).is_ok();
            let resp = if still_there || gr == GroupResource::core("pods") {
                response::ok(&present(out, &ty, version))
            } else {
                let mut details = json!({"name": name, "kind": ty.resource, "uid": out.pointer("/metadata/uid").cloned().unwrap_or(Value::Null)});
                if !group.is_empty() {
                    details["group"] = json!(group);
                }
                response::ok(&response::success_status(details))
            };
            Ok(job_delete_warning(&gr, &opts, resp))
        }
        (&Method::DELETE, None, None) => {
            let (_, body) = read_body(req).await?;
            let opts = delete_options(&query, &body)?;
            let listed = store.list(&gr, target.namespace, &query.list_options()?)?;
            let mut deleted = Vec::new();
            for item in listed.items {
                let name = item
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let item_ns = item
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                match store.delete(&gr, &item_ns, &name, &opts) {
                    Ok(o) => deleted.push(present(o, &ty, version)),
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            let resp = response::ok(&list_body(
                &ty,
                version,
                deleted,
                store.resource_version(),
                None,
                None,
            ));
            Ok(job_delete_warning(&gr, &opts, resp))
        }
        (_, _, Some(_)) => Err(ApiError::no_route()),
        _ => Err(ApiError::method_not_allowed()),
    }
}

/// PodSecurity warns on writes of workloads (their pod template); pods only on create.
fn workload_warning(
    store: &crate::store::Store,
    gr: &GroupResource,
    ns: &str,
    sub: Option<&str>,
    obj: &Value,
) -> Option<String> {
    if sub.is_some() || *gr == GroupResource::core("pods") {
        return None;
    }
    store.pod_security_warning(gr, ns, obj)
}

/// Adds a `Warning: 299 - "<text>"` header (RFC 7234 quoting, as the real server sends it).
fn with_warning(mut resp: Response<Body>, warning: Option<String>) -> Response<Body> {
    if let Some(text) = warning {
        let quoted = text.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = http::HeaderValue::from_str(&format!("299 - \"{quoted}\"")) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

/// The real server warns when a Job is deleted with its default policy (Orphan): its pods stay.
fn job_delete_warning(
    gr: &GroupResource,
    opts: &DeleteOptions,
    mut resp: Response<Body>,
) -> Response<Body> {
    if *gr == GroupResource::new("batch", "jobs") && opts.propagation.is_none() {
        resp.headers_mut().append(
            header::WARNING,
            http::HeaderValue::from_static(
                "299 - \"child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning\"",
            ),
        );
    }
    resp
}

fn content_type(headers: &http::HeaderMap) -> &str {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
}

fn write_options(query: &Query, req: &Request<Incoming>) -> WriteOptions {
    let from_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(|ua| ua.split('/').next().unwrap_or(ua).to_string());
    let explicit = query
        .get("fieldManager")
        .filter(|m| !m.is_empty())
        .map(String::from);
    let is_apply = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.contains("apply-patch"));
    WriteOptions {
        field_manager: if is_apply {
            explicit
        } else {
            explicit.or(from_agent)
        },
        force: query.flag("force"),
        dry_run: query.get("dryRun").is_some_and(|v| v == "All"),
    }
}

fn delete_options(query: &Query, body: &Bytes) -> Result<DeleteOptions, ApiError> {
    let body: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
    };
    let policy = query
        .get("propagationPolicy")
        .map(String::from)
        .or_else(|| {
            body.get("propagationPolicy")
                .and_then(Value::as_str)
                .map(String::from)
        });
    let orphan = query
        .get("orphanDependents")
        .map(|v| v == "true")
        .or_else(|| body.get("orphanDependents").and_then(Value::as_bool));
    let propagation = match policy.as_deref() {
        Some("Foreground") => Some(Propagation::Foreground),
        Some("Background") => Some(Propagation::Background),
        Some("Orphan") => Some(Propagation::Orphan),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
            )));
        }
        None => orphan.map(|o| {
            if o {
                Propagation::Orphan
            } else {
                Propagation::Background
            }
        }),
    };
    let dry_run = query.get("dryRun").is_some_and(|v| v == "All")
        || body
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v == "All"));
    Ok(DeleteOptions {
        propagation,
        grace_period_seconds: query
            .num("gracePeriodSeconds")?
            .or_else(|| body.get("gracePeriodSeconds").and_then(Value::as_u64)),
        precondition_uid: body
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(String::from),
        precondition_resource_version: body
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(String::from),
        dry_run,
    })
}

pub(crate) fn list_body(
    ty: &ResourceType,
    version: &str,
    items: Vec<Value>,
    rv: u64,
    cont: Option<String>,
    remaining: Option<u64>,
) -> Value {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = cont {
        meta["continue"] = json!(c);
    }
    if let Some(r) = remaining {
        meta["remainingItemCount"] = json!(r);
    }
    json!({"kind": format!("{}List", ty.kind), "apiVersion": ty.api_version_for(version), "metadata": meta, "items": items})
}

fn accept(req: &Request<Incoming>) -> &str {
    req.headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn list(
    state: &Arc<ServerState>,
    ty: &ResourceType,
    version: &str,
    ns: Option<&str>,
    query: &Query,
    accept: &str,
) -> Result<Response<Body>, ApiError> {
    let l = state
        .store
        .list(&ty.group_resource(), ns, &query.list_options()?)?;
    let items: Vec<Value> = l
        .items
        .into_iter()
        .map(|o| present(o, ty, version))
        .collect();
    if table::wants_table(accept) {
        let include = query.get("includeObject").unwrap_or("Metadata");
        let mut t = table::table(ty, &items, l.resource_version, include);
        if let Some(c) = &l.continue_token {
            t["metadata"]["continue"] = json!(c);
        }
        return Ok(response::ok(&t));
    }
    Ok(response::ok(&list_body(
        ty,
        version,
        items,
        l.resource_version,
        l.continue_token,
        l.remaining,
    )))
}

/// Why a container of a scheduled pod has not started (the kubelet's answer to a log request),
/// or `None` when logs can be read (unscheduled pods answer an empty log, as on a real server).
fn waiting_reason(pod: &Value, container: &str) -> Option<String> {
    pod.pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())?;
    let statuses = ["/status/initContainerStatuses", "/status/containerStatuses"]
        .iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
        .flatten()
        .find(|c| c.get("name").and_then(Value::as_str) == Some(container));
    match statuses {
        None => Some("ContainerCreating".into()),
        Some(c) if c.pointer("/lastState/terminated").is_some() => None,
        Some(c) => c.pointer("/state/waiting").map(|w| {
            w.get("reason")
                .and_then(Value::as_str)
                .unwrap_or("ContainerCreating")
                .to_string()
        }),
    }
}

fn logs(
    state: &Arc<ServerState>,
    ns: &str,
    name: &str,
    query: &Query,
) -> Result<Response<Body>, ApiError> {
    let pod = state.store.get(&GroupResource::core("pods"), ns, name)?;
    let names: Vec<String> = ["/spec/initContainers", "/spec/containers"]
        .iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
        .flatten()
        .filter_map(|c| c.get("name").and_then(Value::as_str).map(String::from))
        .collect();
    let regular: Vec<String> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("name").and_then(Value::as_str).map(String::from))
        .collect();
    let default_container = pod
        .pointer("/metadata/annotations/kubectl.kubernetes.io~1default-container")
        .and_then(Value::as_str);
    let container = match query
        .get("container")
        .filter(|c| !c.is_empty())
        .or(default_container)
    {
        Some(c) if names.iter().any(|n| n == c) => c.to_string(),
        Some(c) => {
            return Err(ApiError::bad_request(format!(
                "container {c} is not valid for pod {name}"
            )));
        }
        None if regular.len() == 1 => regular[0].clone(),
        None => {
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                names.join(" ")
            )));
        }
    };
    let logs = state.store.logs();
    let view = log_view(query)?;
    if query.flag("previous") {
        let previous = logs
            .read_previous_view(ns, name, &container, view)
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "previous terminated container \"{container}\" in pod \"{name}\" not found"
                ))
            })?;
        let mut resp = Response::new(response::full(previous));
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain"),
        );
        return Ok(resp);
    }
    let started = logs.exists(ns, name, &container);
    if !started {
        if let Some(reason) = waiting_reason(&pod, &container) {
            return Err(ApiError::bad_request(format!(
                "container \"{container}\" in pod \"{name}\" is waiting to start: {reason}"
            )));
        }
    }
    let (data, end) = logs.read_view(ns, name, &container, view);
    let start = match query.num("tailLines")? {
        Some(n) => data.len() - tail_lines(&data, n as usize).len(),
        None => 0,
    };
    let limit = query.num("limitBytes")?.map(|l| l as usize);
    let mut first = data[start..].to_vec();
    if let Some(limit) = limit {
        first.truncate(limit);
    }
    let ct = "text/plain";
    // Nothing to follow: not following, the limit is reached, or the container has no output
    // buffer (an unscheduled pod, or one whose container is gone): the answer ends here, and
    // no buffer is created for it.
    let left = limit.map(|l| l - first.len());
    if !query.flag("follow") || left == Some(0) || !started {
        let mut resp = Response::new(response::full(first));
        resp.headers_mut()
            .insert(header::CONTENT_TYPE, http::HeaderValue::from_static(ct));
        return Ok(resp);
    }
    let stream = logs.follow_view(ns, name, &container, end, view.timestamps);
    let stream: std::pin::Pin<Box<dyn futures::Stream<Item = Bytes> + Send>> = match left {
        Some(left) => Box::pin(limit_bytes(stream, left)),
        None => Box::pin(stream),
    };
    Ok(watch::stream_response(
        ct,
        Bytes::from(first),
        stream,
        state.shutdown.clone(),
    ))
}

/// `sinceTime` (RFC 3339; second precision, as the API server forwards it to the kubelet),
/// `sinceSeconds` and `timestamps`.
fn log_view(query: &Query) -> Result<LogView, ApiError> {
    let since = match (query.get("sinceTime"), query.num("sinceSeconds")?) {
        (Some(t), _) => {
            let secs = crate::util::parse_rfc3339(t).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "parsing time {t:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse {t:?} as \"2006\""
                ))
            })?;
            Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
        }
        (None, Some(n)) => {
            std::time::SystemTime::now().checked_sub(std::time::Duration::from_secs(n))
        }
        (None, None) => None,
    };
    Ok(LogView {
        since,
        timestamps: query.flag("timestamps"),
    })
}

/// At most `left` bytes of `stream`; it ends once they are sent (`limitBytes` while following).
fn limit_bytes(
    stream: impl futures::Stream<Item = Bytes> + Send + 'static,
    left: usize,
) -> impl futures::Stream<Item = Bytes> + Send + 'static {
    use futures::StreamExt as _;
    let stream = Box::pin(stream);
    futures::stream::unfold((stream, left), |(mut stream, left)| async move {
        if left == 0 {
            return None;
        }
        let mut chunk = stream.next().await?;
        chunk.truncate(left);
        let left = left - chunk.len();
        Some((chunk, (stream, left)))
    })
}
