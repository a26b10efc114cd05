//! Applying a release's rendered objects the way Helm does: CRDs created if missing (never
//! updated), other objects created or replaced, with Helm's ownership metadata checked
//! (`app.kubernetes.io/managed-by: Helm`, `meta.helm.sh/release-name`/`-namespace`), and
//! deleted again on uninstall. The manifest text is the objects as YAML documents.

use serde_json::{Value, json};

use crate::cluster::obj;
use crate::store::{ApiError, GroupResource, ResourceType, Store};

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error(
        "resource mapping not found for name: \"{name}\" namespace: \"{namespace}\" from \"\": no matches for kind \"{kind}\" in version \"{api_version}\"\nensure CRDs are installed first"
    )]
    NoKind {
        name: String,
        namespace: String,
        kind: String,
        api_version: String,
    },
    #[error(
        "Unable to continue with {action}: {kind} \"{name}\" in namespace \"{namespace}\" exists and cannot be imported into the current release: invalid ownership metadata; {detail}"
    )]
    Ownership {
        /// `install` or `update` (Helm's wording for install and upgrade).
        action: &'static str,
        kind: String,
        name: String,
        namespace: String,
        detail: String,
    },
    #[error(
        "Unable to continue with {action}: could not get information about the resource {kind} \"{name}\" in namespace \"{namespace}\": {source}"
    )]
    Lookup {
        action: &'static str,
        kind: String,
        name: String,
        namespace: String,
        #[source]
        source: Box<ApiError>,
    },
    #[error("failed to {verb} {kind} \"{name}\": {source}")]
    Api {
        verb: &'static str,
        kind: String,
        name: String,
        #[source]
        source: Box<ApiError>,
    },
}

/// The manifest text of a release (`---\n# Source: ...` documents).
pub fn manifest_text(chart: &str, objects: &[Value]) -> String {
    objects
        .iter()
        .map(|o| {
            let kind = obj::s(o, "/kind").to_lowercase();
            let yaml = serde_saphyr::to_string(o).unwrap_or_else(|_| o.to_string());
            format!("---\n# Source: {chart}/templates/{kind}.yaml\n{yaml}")
        })
        .collect()
}

/// The objects of a manifest text.
pub fn parse_manifest(text: &str) -> Vec<Value> {
    text.split("\n---\n")
        .flat_map(|doc| doc.split("---\n"))
        .filter_map(|doc| serde_saphyr::from_str::<Value>(doc).ok())
        .filter(|v| v.is_object())
        .collect()
}

fn type_of(store: &Store, o: &Value, ns: &str) -> Result<ResourceType, ManifestError> {
    store
        .find_type(obj::s(o, "/apiVersion"), obj::s(o, "/kind"))
        .ok_or_else(|| ManifestError::NoKind {
            name: obj::name(o).into(),
            namespace: ns.into(),
            kind: obj::s(o, "/kind").into(),
            api_version: obj::s(o, "/apiVersion").into(),
        })
}

fn api_err<'a>(verb: &'static str, o: &'a Value) -> impl FnOnce(ApiError) -> ManifestError + 'a {
    move |source| ManifestError::Api {
        verb,
        kind: obj::s(o, "/kind").into(),
        name: obj::name(o).into(),
        source: Box::new(source),
    }
}

/// Helm's check before it records anything: objects of `objects` that the release does not
/// own yet (not in `owned`, the current revision's manifest) must not exist, or must carry
/// this release's ownership metadata; otherwise [`ManifestError::Ownership`]. With
/// `take_ownership` (Helm 3.17+ `--take-ownership`) they are adopted instead (see [`apply`]).
pub fn check_conflicts(
    store: &Store,
    release: &str,
    ns: &str,
    objects: &[Value],
    owned: &[Value],
    upgrade: bool,
    take_ownership: bool,
) -> Result<(), ManifestError> {
    if take_ownership {
        return Ok(());
    }
    let same = |a: &Value, b: &Value| {
        obj::name(a) == obj::name(b) && obj::s(a, "/kind") == obj::s(b, "/kind")
    };
    for o in objects.iter().filter(|o| !owned.iter().any(|w| same(o, w))) {
        let ty = type_of(store, o, ns)?;
        let target_ns = if ty.namespaced { ns } else { "" };
        let live = match store.get(&ty.group_resource(), target_ns, obj::name(o)) {
            Ok(live) => Some(live),
            Err(e) if e.code == 404 => None,
            Err(e) => {
                // Helm's wording when it cannot look the object up (e.g. RBAC forbids `get`).
                return Err(ManifestError::Lookup {
                    action: if upgrade { "update" } else { "install" },
                    kind: obj::s(o, "/kind").into(),
                    name: obj::name(o).into(),
                    namespace: target_ns.into(),
                    source: Box::new(e),
                });
            }
        };
        if let Some(live) = live {
            if let Err(mut e) = check_ownership(&live, release, ns) {
                if let ManifestError::Ownership { action, .. } = &mut e {
                    *action = if upgrade { "update" } else { "install" };
                }
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Creates or updates `objects` as release `release` in `ns` (after [`check_conflicts`]). An
/// existing object is updated the way Helm's three-way merge does it ([`three_way`], against the
/// same object in `previous`, the last revision's manifest), so what the API server set (a
/// Service's `clusterIP`) survives an upgrade. An existing object without this release's
/// ownership metadata is adopted in place: updated, keeping its `uid` and the labels and
/// annotations it had, plus Helm's ownership metadata.
pub fn apply(
    store: &Store,
    release: &str,
    ns: &str,
    objects: &[Value],
    previous: &[Value],
    manager: &str,
) -> Result<(), ManifestError> {
    let opts = obj::manager(manager);
    for o in objects {
        let ty = type_of(store, o, ns)?;
        let gr = ty.group_resource();
        let target_ns = if ty.namespaced { ns } else { "" };
        let mut desired = o.clone();
        if gr == GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions") {
            if store.get(&gr, "", obj::name(o)).is_err() {
                store
                    .create(&gr, "", desired, &opts)
                    .map_err(api_err("create", o))?;
            }
            continue;
        }
        desired["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("Helm");
        desired["metadata"]["annotations"]["meta.helm.sh/release-name"] = json!(release);
        desired["metadata"]["annotations"]["meta.helm.sh/release-namespace"] = json!(ns);
        match store.get(&gr, target_ns, obj::name(o)) {
            Err(e) if e.code == 404 => {
                store
                    .create(&gr, target_ns, desired, &opts)
                    .map_err(api_err("create", o))?;
            }
            Err(e) => return Err(api_err("get", o)(e)),
            Ok(live) => {
                let before = previous.iter().find(|p| {
                    obj::name(p) == obj::name(o) && obj::s(p, "/kind") == obj::s(o, "/kind")
                });
                let target = Target {
                    gr: &gr,
                    namespace: target_ns,
                    release,
                    release_namespace: ns,
                };
                update(store, &target, live, &desired, before, &opts).map_err(|e| match e {
                    Failed::Get(e) => api_err("get", o)(e),
                    Failed::Update(e) => api_err("update", o)(e),
                })?
            }
        }
    }
    Ok(())
}

/// Where an existing object of a release lives.
struct Target<'a> {
    gr: &'a GroupResource,
    namespace: &'a str,
    release: &'a str,
    release_namespace: &'a str,
}

/// Which request of an update failed.
enum Failed {
    Get(ApiError),
    Update(ApiError),
}

/// Updates an existing object to `desired` by the three-way merge with `before` (its previous
/// revision). Real Helm sends that merge as a PATCH, which has no resourceVersion precondition: a
/// controller writing the object meanwhile (a Deployment's status during a rollout) does not fail
/// the upgrade. Here it is an update at the live resourceVersion, so a conflict re-reads the
/// object and merges again.
fn update(
    store: &Store,
    t: &Target,
    mut live: Value,
    desired: &Value,
    before: Option<&Value>,
    opts: &crate::store::WriteOptions,
) -> Result<(), Failed> {
    let name = obj::name(desired).to_owned();
    let mut conflicts = 0;
    loop {
        let mut wanted = desired.clone();
        if check_ownership(&live, t.release, t.release_namespace).is_err() {
            keep_metadata(&live, &mut wanted);
        }
        let mut merged = three_way(&live, before, &wanted);
        merged["metadata"]["resourceVersion"] = live
            .pointer("/metadata/resourceVersion")
            .cloned()
            .unwrap_or(Value::Null);
        match store.update(t.gr, t.namespace, merged, opts) {
            Ok(_) => return Ok(()),
            Err(e) if e.code == 409 && conflicts < 5 => {
                conflicts += 1;
                live = store.get(t.gr, t.namespace, &name).map_err(Failed::Get)?;
            }
            Err(e) => return Err(Failed::Update(e)),
        }
    }
}

/// Helm's three-way merge, on JSON: the new manifest's fields win, fields the previous manifest
/// had and the new one dropped are removed, and fields only the live object has (set by the API
/// server or by controllers: a Service's `clusterIP`, defaults, `status`) are kept. Lists are
/// replaced whole (a strategic merge would merge some by key; the result is the same when the
/// manifest spells the list out, which charts do).
pub fn three_way(live: &Value, previous: Option<&Value>, desired: &Value) -> Value {
    match (live, desired) {
        (Value::Object(l), Value::Object(d)) => {
            let mut out = l.clone();
            if let Some(Value::Object(p)) = previous {
                for k in p.keys().filter(|k| !d.contains_key(*k)) {
                    out.remove(k);
                }
            }
            for (k, dv) in d {
                let merged = match out.get(k) {
                    Some(lv) => three_way(lv, previous.and_then(|p| p.get(k)), dv),
                    None => dv.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        _ => desired.clone(),
    }
}

/// An adopted object keeps the labels and annotations it had (Helm's three-way merge has no
/// previous manifest to remove them by).
fn keep_metadata(live: &Value, desired: &mut Value) {
    for key in ["labels", "annotations"] {
        let Some(old) = live
            .pointer(&format!("/metadata/{key}"))
            .and_then(Value::as_object)
        else {
            continue;
        };
        let target = &mut desired["metadata"][key];
        if !target.is_object() {
            *target = json!({});
        }
        if let Some(t) = target.as_object_mut() {
            for (k, v) in old {
                t.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
}

fn check_ownership(live: &Value, release: &str, ns: &str) -> Result<(), ManifestError> {
    let mut problems = Vec::new();
    let label = live
        .pointer("/metadata/labels/app.kubernetes.io~1managed-by")
        .and_then(Value::as_str);
    match label {
        Some("Helm") => {}
        Some(other) => problems.push(format!("label validation error: key \"app.kubernetes.io/managed-by\" must equal \"Helm\": current value is \"{other}\"")),
        None => problems.push("label validation error: missing key \"app.kubernetes.io/managed-by\": must be set to \"Helm\"".to_string()),
    }
    for (key, want) in [
        ("meta.helm.sh/release-name", release),
        ("meta.helm.sh/release-namespace", ns),
    ] {
        let pointer = format!("/metadata/annotations/{}", key.replace('/', "~1"));
        match live.pointer(&pointer).and_then(Value::as_str) {
            Some(v) if v == want => {}
            Some(v) => problems.push(format!("annotation validation error: key \"{key}\" must equal \"{want}\": current value is \"{v}\"")),
            None => problems.push(format!("annotation validation error: missing key \"{key}\": must be set to \"{want}\"")),
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(ManifestError::Ownership {
        action: "install",
        kind: obj::s(live, "/kind").into(),
        name: obj::name(live).into(),
        namespace: obj::namespace(live).into(),
        detail: problems.join("; "),
    })
}

/// Deletes a release's objects (CRDs are kept, as Helm does).
pub fn delete(store: &Store, ns: &str, objects: &[Value]) -> Result<(), ManifestError> {
    for o in objects
        .iter()
        .filter(|o| obj::s(o, "/kind") != "CustomResourceDefinition")
    {
        let ty = type_of(store, o, ns)?;
        let target_ns = if ty.namespaced { ns } else { "" };
        match store.delete(
            &ty.group_resource(),
            target_ns,
            obj::name(o),
            &Default::default(),
        ) {
            Err(e) if e.code != 404 => return Err(api_err("delete", o)(e)),
            _ => {}
        }
    }
    Ok(())
}

/// Whether `objects` are all present and, for Deployments/DaemonSets, rolled out and ready
/// (Helm's `--wait`).
pub fn ready(store: &Store, ns: &str, objects: &[Value]) -> bool {
    objects.iter().all(|o| {
        let Ok(ty) = type_of(store, o, ns) else {
            return false;
        };
        let target_ns = if ty.namespaced { ns } else { "" };
        let Ok(live) = store.get(&ty.group_resource(), target_ns, obj::name(o)) else {
            return false;
        };
        match obj::s(o, "/kind") {
            "Deployment" => workload_ready(&live, "/status/readyReplicas", "/spec/replicas"),
            "DaemonSet" => workload_ready(
                &live,
                "/status/numberReady",
                "/status/desiredNumberScheduled",
            ),
            _ => true,
        }
    })
}

/// Ready count equals the wanted count, and the controller saw the latest generation.
pub fn workload_ready(live: &Value, ready: &str, wanted: &str) -> bool {
    let observed = obj::i64_at(live, "/status/observedGeneration")
        == obj::i64_at(live, "/metadata/generation");
    observed && obj::i64_at(live, ready).unwrap_or(0) >= obj::i64_at(live, wanted).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_way_merge_keeps_what_the_server_set_and_drops_what_the_chart_dropped() {
        let live = json!({"spec": {"clusterIP": "10.96.0.7", "type": "ClusterIP", "ports": [{"port": 80, "protocol": "TCP"}], "sessionAffinity": "None"}, "metadata": {"name": "s", "labels": {"a": "1", "added-by-someone": "x"}}});
        let previous = json!({"spec": {"ports": [{"port": 80}], "sessionAffinity": "None"}, "metadata": {"name": "s", "labels": {"a": "1"}}});
        let desired = json!({"spec": {"ports": [{"port": 8080}]}, "metadata": {"name": "s", "labels": {"a": "2"}}});
        let merged = three_way(&live, Some(&previous), &desired);
        assert_eq!(
            merged["spec"]["clusterIP"], "10.96.0.7",
            "server-set field kept"
        );
        assert_eq!(
            merged["spec"]["ports"],
            json!([{"port": 8080}]),
            "lists replaced"
        );
        assert!(
            merged["spec"].get("sessionAffinity").is_none(),
            "dropped by the chart"
        );
        assert_eq!(
            merged["metadata"]["labels"],
            json!({"a": "2", "added-by-someone": "x"})
        );
        let adopted = three_way(&live, None, &desired);
        assert_eq!(
            adopted["spec"]["sessionAffinity"], "None",
            "no previous manifest: nothing removed"
        );
    }

    #[test]
    fn an_object_written_meanwhile_does_not_fail_the_update() {
        let store = Store::new(crate::config::Pace::Fast);
        let opts = crate::store::WriteOptions::manager("test");
        let ns = GroupResource::core("namespaces");
        store
            .create(&ns, "", json!({"metadata": {"name": "kube-system"}}), &opts)
            .expect("namespace");
        let cms = GroupResource::core("configmaps");
        let stale = store
            .create(
                &cms,
                "kube-system",
                json!({"metadata": {"name": "c"}, "data": {"a": "1"}}),
                &opts,
            )
            .expect("configmap");
        // A controller writes the object after the upgrade read it.
        let mut newer = stale.clone();
        newer["metadata"]["labels"] = json!({"touched": "yes"});
        store
            .update(&cms, "kube-system", newer, &opts)
            .expect("write");
        let target = Target {
            gr: &cms,
            namespace: "kube-system",
            release: "r",
            release_namespace: "kube-system",
        };
        let desired = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "2"}});
        assert!(update(&store, &target, stale, &desired, None, &opts).is_ok());
        let live = store.get(&cms, "kube-system", "c").expect("get");
        assert_eq!(live["data"]["a"], "2");
        assert_eq!(
            live["metadata"]["labels"]["touched"], "yes",
            "merged with what was written"
        );
    }
}
