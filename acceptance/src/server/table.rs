//! Server-side printing: `meta.k8s.io/v1` `Table` answers for clients that ask for them
//! (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, as `kubectl get` does), with the
//! columns kubectl shows for the common kinds, NAME/AGE for the others, and a CRD's
//! `additionalPrinterColumns` ignored.

use serde_json::{Value, json};

use crate::store::ResourceType;
use crate::util::{human_duration, now_secs, parse_rfc3339};

/// Whether the `Accept` header asks for a Table (kubectl lists JSON as a fallback after it).
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table") && first.contains("g=meta.k8s.io"))
}

fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

fn n(v: &Value, p: &str) -> i64 {
    v.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

fn arr<'a>(v: &'a Value, p: &str) -> &'a [Value] {
    v.pointer(p)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn age(obj: &Value) -> String {
    parse_rfc3339(s(obj, "/metadata/creationTimestamp"))
        .map(|t| human_duration(now_secs().saturating_sub(t)))
        .unwrap_or_else(|| "<unknown>".into())
}

fn pod_status(p: &Value) -> String {
    if p.pointer("/metadata/deletionTimestamp").is_some() {
        return "Terminating".into();
    }
    for c in arr(p, "/status/containerStatuses") {
        let reason = s(c, "/state/waiting/reason");
        if !reason.is_empty() {
            return reason.into();
        }
        let reason = s(c, "/state/terminated/reason");
        if !reason.is_empty() && s(p, "/status/phase") != "Succeeded" {
            return reason.into();
        }
    }
    let reason = s(p, "/status/reason");
    if !reason.is_empty() {
        return reason.into();
    }
    match s(p, "/status/phase") {
        "Succeeded" => "Completed".into(),
        "" => "Pending".into(),
        other => other.into(),
    }
}

/// Column names and the cells of one object, per kind.
fn columns(ty: &ResourceType) -> Vec<(&'static str, &'static str, i32)> {
    let name = ("Name", "string", 0);
    let age = ("Age", "string", 0);
    match (ty.group.as_str(), ty.resource.as_str()) {
        ("", "pods") => vec![
            name,
            ("Ready", "string", 0),
            ("Status", "string", 0),
            ("Restarts", "string", 0),
            age,
            ("IP", "string", 1),
            ("Node", "string", 1),
        ],
        ("", "nodes") => vec![
            name,
            ("Status", "string", 0),
            ("Roles", "string", 0),
            age,
            ("Version", "string", 0),
        ],
        ("", "namespaces") => vec![name, ("Status", "string", 0), age],
        ("", "services") => vec![
            name,
            ("Type", "string", 0),
            ("Cluster-IP", "string", 0),
            ("External-IP", "string", 0),
            ("Port(s)", "string", 0),
            age,
        ],
        ("", "secrets") => vec![name, ("Type", "string", 0), ("Data", "string", 0), age],
        ("", "configmaps") => vec![name, ("Data", "string", 0), age],
        ("apps", "deployments") => vec![
            name,
            ("Ready", "string", 0),
            ("Up-to-date", "string", 0),
            ("Available", "string", 0),
            age,
        ],
        ("apps", "daemonsets") => vec![
            name,
            ("Desired", "string", 0),
            ("Current", "string", 0),
            ("Ready", "string", 0),
            ("Up-to-date", "string", 0),
            ("Available", "string", 0),
            age,
        ],
        ("batch", "jobs") => vec![
            name,
            ("Status", "string", 0),
            ("Completions", "string", 0),
            age,
        ],
        ("apps", "replicasets") => vec![
            name,
            ("Desired", "string", 0),
            ("Current", "string", 0),
            ("Ready", "string", 0),
            age,
        ],
        ("", "events") => vec![
            ("Last Seen", "string", 0),
            ("Type", "string", 0),
            ("Reason", "string", 0),
            ("Object", "string", 0),
            ("Message", "string", 0),
        ],
        _ => vec![name, age],
    }
}

fn cells(ty: &ResourceType, o: &Value) -> Vec<Value> {
    let name = json!(s(o, "/metadata/name"));
    let a = json!(age(o));
    let v = |x: String| json!(x);
    match (ty.group.as_str(), ty.resource.as_str()) {
        ("", "pods") => {
            let statuses = arr(o, "/status/containerStatuses");
            let ready = statuses
                .iter()
                .filter(|c| c.get("ready") == Some(&json!(true)))
                .count();
            let restarts: i64 = statuses.iter().map(|c| n(c, "/restartCount")).sum();
            let node = Some(s(o, "/spec/nodeName"))
                .filter(|x| !x.is_empty())
                .unwrap_or("<none>");
            let ip = Some(s(o, "/status/podIP"))
                .filter(|x| !x.is_empty())
                .unwrap_or("<none>");
            vec![
                name,
                v(format!("{ready}/{}", arr(o, "/spec/containers").len())),
                v(pod_status(o)),
                v(restarts.to_string()),
                a,
                json!(ip),
                json!(node),
            ]
        }
        ("", "nodes") => {
            let ready = arr(o, "/status/conditions")
                .iter()
                .any(|c| s(c, "/type") == "Ready" && s(c, "/status") == "True");
            let mut roles: Vec<&str> = o
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/"))
                .collect();
            if roles.is_empty() {
                roles.push("<none>");
            }
            let status = if ready { "Ready" } else { "NotReady" };
            vec![
                name,
                json!(status),
                v(roles.join(",")),
                a,
                json!(s(o, "/status/nodeInfo/kubeletVersion")),
            ]
        }
        ("", "namespaces") => vec![name, json!(s(o, "/status/phase")), a],
        ("", "services") => {
            let ports: Vec<String> = arr(o, "/spec/ports")
                .iter()
                .map(|p| {
                    format!(
                        "{}/{}",
                        n(p, "/port"),
                        Some(s(p, "/protocol"))
                            .filter(|x| !x.is_empty())
                            .unwrap_or("TCP")
                    )
                })
                .collect();
            let ip = Some(s(o, "/spec/clusterIP"))
                .filter(|x| !x.is_empty())
                .unwrap_or("<none>");
            vec![
                name,
                json!(s(o, "/spec/type")),
                json!(ip),
                json!("<none>"),
                v(if ports.is_empty() {
                    "<none>".into()
                } else {
                    ports.join(",")
                }),
                a,
            ]
        }
        ("", "secrets") => vec![
            name,
            json!(s(o, "/type")),
            v(count(o, "/data").to_string()),
            a,
        ],
        ("", "configmaps") => vec![
            name,
            v((count(o, "/data") + count(o, "/binaryData")).to_string()),
            a,
        ],
        ("apps", "deployments") => vec![
            name,
            v(format!(
                "{}/{}",
                n(o, "/status/readyReplicas"),
                n(o, "/spec/replicas")
            )),
            v(n(o, "/status/updatedReplicas").to_string()),
            v(n(o, "/status/availableReplicas").to_string()),
            a,
        ],
        ("apps", "daemonsets") => {
            let f = |p: &str| v(n(o, p).to_string());
            vec![
                name,
                f("/status/desiredNumberScheduled"),
                f("/status/currentNumberScheduled"),
                f("/status/numberReady"),
                f("/status/updatedNumberScheduled"),
                f("/status/numberAvailable"),
                a,
            ]
        }
        ("batch", "jobs") => {
            let cond = |t: &str| {
                arr(o, "/status/conditions")
                    .iter()
                    .any(|c| s(c, "/type") == t && s(c, "/status") == "True")
            };
            let status = if cond("Complete") {
                "Complete"
            } else if cond("Failed") {
                "Failed"
            } else if o.pointer("/metadata/deletionTimestamp").is_some() {
                "Terminating"
            } else {
                "Running"
            };
            let completions = o
                .pointer("/spec/completions")
                .and_then(Value::as_i64)
                .map(|c| c.to_string())
                .unwrap_or_else(|| "1".into());
            vec![
                name,
                json!(status),
                v(format!("{}/{completions}", n(o, "/status/succeeded"))),
                a,
            ]
        }
        ("apps", "replicasets") => {
            let f = |p: &str| v(n(o, p).to_string());
            vec![
                name,
                f("/spec/replicas"),
                f("/status/replicas"),
                f("/status/readyReplicas"),
                a,
            ]
        }
        ("", "events") => {
            let last = [
                s(o, "/lastTimestamp"),
                s(o, "/eventTime"),
                s(o, "/metadata/creationTimestamp"),
            ]
            .into_iter()
            .find_map(parse_rfc3339)
            .map(|t| human_duration(now_secs().saturating_sub(t)))
            .unwrap_or_else(|| "<unknown>".into());
            let object = format!(
                "{}/{}",
                s(o, "/involvedObject/kind").to_lowercase(),
                s(o, "/involvedObject/name")
            );
            vec![
                v(last),
                json!(s(o, "/type")),
                json!(s(o, "/reason")),
                v(object),
                json!(s(o, "/message")),
            ]
        }
        _ => vec![name, a],
    }
}

fn count(o: &Value, p: &str) -> usize {
    o.pointer(p)
        .and_then(Value::as_object)
        .map(|m| m.len())
        .unwrap_or(0)
}

/// A `Table` of `items`. `include_object`: `Metadata` (default), `Object` or `None`.
pub fn table(
    ty: &ResourceType,
    items: &[Value],
    resource_version: u64,
    include_object: &str,
) -> Value {
    let defs: Vec<Value> = columns(ty)
        .into_iter()
        .map(|(name, kind, priority)| {
            let format = if name == "Name" { "name" } else { "" };
            json!({"name": name, "type": kind, "format": format, "description": "", "priority": priority})
        })
        .collect();
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let mut row = json!({"cells": cells(ty, o)});
            match include_object {
                "None" => {}
                "Object" => row["object"] = o.clone(),
                _ => {
                    row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o.get("metadata").cloned().unwrap_or(json!({}))})
                }
            }
            row
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": resource_version.to_string()}, "columnDefinitions": defs, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::GroupResource;
    use crate::store::types::Registry;

    #[test]
    fn pods_get_kubectl_columns() {
        let ty = Registry::builtin()
            .get(&GroupResource::core("pods"))
            .cloned()
            .unwrap();
        // Half an hour old: the AGE column reads "30m" for a whole minute, so a slow machine
        // cannot cross a boundary between creating the pod and rendering the table.
        let created = crate::util::format_rfc3339(crate::util::now_secs() - 1800);
        let pod = json!({"metadata": {"name": "p", "creationTimestamp": created},
            "spec": {"containers": [{"name": "c"}], "nodeName": "n1"},
            "status": {"phase": "Running", "containerStatuses": [{"ready": true, "restartCount": 2}]}});
        let t = table(&ty, &[pod], 7, "Metadata");
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["p", "1/1", "Running", "2", "30m", "<none>", "n1"])
        );
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
    }
}
