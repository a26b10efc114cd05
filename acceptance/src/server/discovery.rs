//! Discovery: `/version`, health endpoints, `/api`, `/apis`, per-group-version resource lists
//! (generated from the type table, so CRDs appear once established), and `/openapi/v2`.
//!
//! `/openapi/v2` serves a valid but empty document (no definitions), in protobuf when asked
//! (kubectl asks for `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`). kubectl's
//! client-side validation skips kinds it finds no schema for, so `kubectl apply` works with
//! validation on; it just validates nothing.

use http::{HeaderValue, Request, Response, header};
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::response::{self, Body};
use crate::store::{ResourceType, Store};

pub const GIT_VERSION: &str = "v1.33.0";

pub fn version() -> Value {
    json!({
        "major": "1", "minor": "33", "gitVersion": GIT_VERSION, "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean", "buildDate": "2025-04-23T00:00:00Z", "goVersion": "go1.24.2", "compiler": "gc",
        "platform": "linux/amd64", "emulationMajor": "1", "emulationMinor": "33",
    })
}

/// Endpoints open to everyone.
pub fn public(path: &str) -> Response<Body> {
    if path == "/version" {
        return response::ok(&version());
    }
    response::text(200, "ok")
}

pub fn api_versions(authority: Option<String>) -> Value {
    json!({
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": authority.unwrap_or_else(|| "127.0.0.1:6443".into())}],
    })
}

fn group_entry(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

pub fn api_groups(store: &Store) -> Value {
    let mut registry = crate::store::types::Registry::default();
    for t in store.resource_types() {
        registry.insert(t);
    }
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .map(|(g, vs)| group_entry(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn api_group(store: &Store, group: &str) -> Option<Value> {
    let mut registry = crate::store::types::Registry::default();
    for t in store.resource_types() {
        registry.insert(t);
    }
    let groups = registry.groups();
    let vs = groups.get(group)?;
    let mut v = group_entry(group, vs);
    v["kind"] = json!("APIGroup");
    v["apiVersion"] = json!("v1");
    Some(v)
}

fn verbs(list: &[&str]) -> Value {
    json!(list)
}

/// The `APIResourceList` for one group version, or `None` if nothing is served there.
pub fn resource_list(store: &Store, group: &str, version: &str) -> Option<Value> {
    let types: Vec<ResourceType> = store
        .resource_types()
        .into_iter()
        .filter(|t| t.group == group && t.serves(version))
        .collect();
    if types.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for t in &types {
        let mut r = json!({
            "name": t.resource, "singularName": t.singular, "namespaced": t.namespaced, "kind": t.kind,
            "verbs": verbs(&["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]),
        });
        if !t.short_names.is_empty() {
            r["shortNames"] = json!(t.short_names);
        }
        if !t.categories.is_empty() {
            r["categories"] = json!(t.categories);
        }
        resources.push(r);
        if t.status_subresource {
            resources.push(json!({"name": format!("{}/status", t.resource), "singularName": "", "namespaced": t.namespaced, "kind": t.kind, "verbs": verbs(&["get", "patch", "update"])}));
        }
        if t.group.is_empty() && t.resource == "pods" {
            resources.push(json!({"name": "pods/log", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": verbs(&["get"])}));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

/// A minimal OpenAPI v2 document: `swagger: "2.0"`, `info {title, version}`, nothing else.
pub fn openapi_v2(req: &Request<Incoming>) -> Response<Body> {
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if accept.contains("protobuf") {
        let mut resp = Response::new(response::full(openapi_protobuf()));
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        return resp;
    }
    response::ok(
        &json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": GIT_VERSION}, "paths": {}, "definitions": {}}),
    )
}

/// gnostic `openapi_v2.Document` in protobuf: field 1 `swagger`, field 2 `info` (`title` = 1,
/// `version` = 2).
fn openapi_protobuf() -> Vec<u8> {
    fn field(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
        out.push((tag << 3) | 2);
        out.push(bytes.len() as u8);
        out.extend_from_slice(bytes);
    }
    let mut info = Vec::new();
    field(&mut info, 1, b"Kubernetes");
    field(&mut info, 2, GIT_VERSION.as_bytes());
    let mut doc = Vec::new();
    field(&mut doc, 1, b"2.0");
    field(&mut doc, 2, &info);
    doc
}
