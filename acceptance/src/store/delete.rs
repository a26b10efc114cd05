//! Deletion: finalizers, propagation policies, namespace termination, pod grace periods, and the
//! housekeeping pass (ownerReference garbage collection and the asynchronous ends of deletions).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use serde_json::{Value, json};

use super::types::{GroupResource, ResourceType};
use super::{ApiError, DeleteOptions, EventKind, Propagation, State, Store, meta_str};
use crate::util::now_rfc3339;

const FOREGROUND: &str = "foregroundDeletion";
const ORPHAN: &str = "orphan";

fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn set_finalizers(obj: &mut Value, f: Vec<String>) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if f.is_empty() {
            m.remove("finalizers");
        } else {
            m.insert("finalizers".into(), json!(f));
        }
    }
}

impl Store {
    /// Deletes an object. Returns the object: gone (`Deleted` event) or, when finalizers,
    /// Foreground/Orphan propagation, a pod grace period or namespace termination keep it for
    /// now, with `metadata.deletionTimestamp` set. Errors: 404, 409 (failed precondition).
    pub fn delete(
        &self,
        gr: &GroupResource,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let mut st = self.lock();
        let ty = st
            .registry
            .get(gr)
            .cloned()
            .ok_or_else(ApiError::no_route)?;
        let ns = if ty.namespaced { namespace } else { "" };
        self.authorize_locked(&st, &super::access("delete", gr, None, ns, name))?;
        self.delete_locked(&mut st, &ty, namespace, name, opts)
    }

    pub(super) fn delete_locked(
        &self,
        st: &mut State,
        ty: &ResourceType,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let gr = ty.group_resource();
        let ns = if ty.namespaced { namespace } else { "" };
        let obj = st
            .object(&gr, ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&gr, name))?;
        if let Some(uid) = &opts.precondition_uid {
            if Some(uid.as_str()) != meta_str(&obj, "uid") {
                return Err(ApiError::conflict(
                    &gr,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        meta_str(&obj, "uid").unwrap_or("")
                    ),
                ));
            }
        }
        if let Some(rv) = &opts.precondition_resource_version {
            if Some(rv.as_str()) != meta_str(&obj, "resourceVersion") {
                return Err(ApiError::conflict(
                    &gr,
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        meta_str(&obj, "resourceVersion").unwrap_or("")
                    ),
                ));
            }
        }
        if gr == GroupResource::core("namespaces")
            && ["default", "kube-system", "kube-public", "kube-node-lease"].contains(&name)
        {
            return Err(ApiError::forbidden(
                &gr,
                name,
                "this namespace may not be deleted",
            ));
        }
        let default = if gr == GroupResource::new("batch", "jobs") {
            Propagation::Orphan
        } else {
            Propagation::Background
        };
        let mut fins = finalizers(&obj);
        // Like the real server: an explicit policy wins, then a GC finalizer already on the
        // object (an earlier delete), then the resource's default. The GC finalizers are then
        // set to match it, so a later Background delete removes `orphan`/`foregroundDeletion`.
        let policy = opts.propagation.unwrap_or_else(|| {
            if fins.iter().any(|f| f == ORPHAN) {
                Propagation::Orphan
            } else if fins.iter().any(|f| f == FOREGROUND) {
                Propagation::Foreground
            } else {
                default
            }
        });
        let extra = match policy {
            Propagation::Foreground => Some(FOREGROUND),
            Propagation::Orphan => Some(ORPHAN),
            Propagation::Background => None,
        };
        fins.retain(|f| (f != ORPHAN && f != FOREGROUND) || Some(f.as_str()) == extra);
        if let Some(f) = extra {
            if !fins.iter().any(|x| x == f) {
                fins.push(f.to_string());
            }
        }
        if opts.dry_run {
            return Ok(obj);
        }
        let deleting = obj.pointer("/metadata/deletionTimestamp").is_some();
        let is_ns = gr == GroupResource::core("namespaces");
        let grace = if gr == GroupResource::core("pods")
            && obj
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty())
        {
            opts.grace_period_seconds
                .or_else(|| {
                    obj.pointer("/spec/terminationGracePeriodSeconds")
                        .and_then(Value::as_u64)
                })
                .unwrap_or(30)
        } else {
            0
        };
        if fins.is_empty() && grace == 0 && !is_ns {
            let out = st.commit(
                &self.inner.events,
                &gr,
                EventKind::Deleted,
                obj.clone(),
                Some(obj),
            );
            self.after_removal(st, ty, &out);
            return Ok(out);
        }
        if deleting
            && fins == finalizers(&obj)
            && !(grace == 0
                && st
                    .pod_deadlines
                    .contains_key(&(ns.to_string(), name.to_string())))
        {
            return Ok(obj);
        }
        let mut updated = obj.clone();
        set_finalizers(&mut updated, fins);
        if !deleting {
            updated["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
            updated["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
        }
        if is_ns {
            if !updated.get("status").is_some_and(Value::is_object) {
                updated["status"] = json!({});
            }
            updated["status"]["phase"] = json!("Terminating");
        }
        if grace > 0 {
            let deadline = Instant::now()
                + self
                    .pace()
                    .pod_grace()
                    .min(std::time::Duration::from_secs(grace));
            st.pod_deadlines
                .entry((ns.to_string(), name.to_string()))
                .or_insert(deadline);
        } else if gr == GroupResource::core("pods") {
            st.pod_deadlines.remove(&(ns.to_string(), name.to_string()));
            if finalizers(&updated).is_empty() {
                let out = st.commit(
                    &self.inner.events,
                    &gr,
                    EventKind::Deleted,
                    updated,
                    Some(obj),
                );
                self.after_removal(st, ty, &out);
                return Ok(out);
            }
        }
        Ok(st.commit(
            &self.inner.events,
            &gr,
            EventKind::Modified,
            updated,
            Some(obj),
        ))
    }

    /// Side effects of an object being gone for good.
    pub(super) fn after_removal(&self, st: &mut State, ty: &ResourceType, obj: &Value) {
        let ns = meta_str(obj, "namespace").unwrap_or("").to_string();
        let name = meta_str(obj, "name").unwrap_or("").to_string();
        match (ty.group.as_str(), ty.resource.as_str()) {
            ("", "pods") => {
                st.pod_deadlines.remove(&(ns.clone(), name.clone()));
                self.logs().remove_pod(&ns, &name);
            }
            ("apiextensions.k8s.io", "customresourcedefinitions") => {
                let gr = GroupResource::new(
                    obj.pointer("/spec/group")
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                    obj.pointer("/spec/names/plural")
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                );
                let instances: Vec<Value> = st
                    .objects
                    .get(&gr)
                    .map(|m| m.values().cloned().collect())
                    .unwrap_or_default();
                for inst in instances {
                    st.commit(
                        &self.inner.events,
                        &gr,
                        EventKind::Deleted,
                        inst.clone(),
                        Some(inst),
                    );
                }
                st.registry.remove(&gr);
            }
            _ => {}
        }
    }

    /// One housekeeping pass: ends pod grace periods, empties and removes terminating
    /// namespaces, garbage-collects by ownerReferences (Background: dependents of missing
    /// owners; Foreground: dependents first, then the owner; Orphan: ownerReferences removed),
    /// and recreates a missing `default` ServiceAccount in active namespaces.
    pub fn housekeeping(&self) {
        let mut st = self.lock();
        self.end_grace_periods(&mut st);
        self.terminate_namespaces(&mut st);
        self.collect_garbage(&mut st);
        let namespaces: Vec<String> = st
            .objects
            .get(&GroupResource::core("namespaces"))
            .map(|m| m.keys().map(|(_, name)| name.clone()).collect())
            .unwrap_or_default();
        for ns in namespaces {
            self.ensure_default_service_account(&mut st, &ns);
        }
    }

    fn end_grace_periods(&self, st: &mut State) {
        let now = Instant::now();
        let due: Vec<(String, String)> = st
            .pod_deadlines
            .iter()
            .filter(|(_, d)| **d <= now)
            .map(|(k, _)| k.clone())
            .collect();
        let pods = GroupResource::core("pods");
        let Some(ty) = st.registry.get(&pods).cloned() else {
            return;
        };
        for (ns, name) in due {
            st.pod_deadlines.remove(&(ns.clone(), name.clone()));
            let Some(obj) = st.object(&pods, &ns, &name).cloned() else {
                continue;
            };
            if finalizers(&obj).is_empty() {
                let out = st.commit(
                    &self.inner.events,
                    &pods,
                    EventKind::Deleted,
                    obj.clone(),
                    Some(obj),
                );
                self.after_removal(st, &ty, &out);
            }
        }
    }

    fn terminate_namespaces(&self, st: &mut State) {
        let nsgr = GroupResource::core("namespaces");
        let terminating: Vec<Value> = st
            .objects
            .get(&nsgr)
            .map(|m| {
                m.values()
                    .filter(|n| n.pointer("/metadata/deletionTimestamp").is_some())
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        for ns_obj in terminating {
            let ns = meta_str(&ns_obj, "name").unwrap_or("").to_string();
            let mut remaining = 0;
            let contents: Vec<(ResourceType, String, bool)> = st
                .objects
                .iter()
                .filter_map(|(gr, m)| {
                    st.registry
                        .get(gr)
                        .filter(|t| t.namespaced)
                        .map(|t| (t.clone(), m))
                })
                .flat_map(|(t, m)| {
                    m.iter()
                        .filter(|((n, _), _)| *n == ns)
                        .map(|((_, name), o)| {
                            (
                                t.clone(),
                                name.clone(),
                                o.pointer("/metadata/deletionTimestamp").is_some(),
                            )
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            for (t, name, deleting) in contents {
                remaining += 1;
                if !deleting {
                    let _ = self.delete_locked(
                        st,
                        &t,
                        &ns,
                        &name,
                        &DeleteOptions {
                            propagation: Some(Propagation::Background),
                            ..Default::default()
                        },
                    );
                }
            }
            if remaining == 0 && finalizers(&ns_obj).is_empty() {
                st.commit(
                    &self.inner.events,
                    &nsgr,
                    EventKind::Deleted,
                    ns_obj.clone(),
                    Some(ns_obj),
                );
            }
        }
    }

    fn collect_garbage(&self, st: &mut State) {
        // uid -> (type, namespace, name, finalizers, deleting)
        let mut owners: HashMap<String, (ResourceType, String, String, Vec<String>, bool)> =
            HashMap::new();
        let mut dependents: Vec<(ResourceType, String, String, Vec<Value>, bool)> = Vec::new();
        for (gr, m) in &st.objects {
            let Some(t) = st.registry.get(gr) else {
                continue;
            };
            for ((ns, name), o) in m {
                let deleting = o.pointer("/metadata/deletionTimestamp").is_some();
                if let Some(uid) = meta_str(o, "uid") {
                    owners.insert(
                        uid.to_string(),
                        (t.clone(), ns.clone(), name.clone(), finalizers(o), deleting),
                    );
                }
                if let Some(refs) = o
                    .pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .filter(|r| !r.is_empty())
                {
                    dependents.push((t.clone(), ns.clone(), name.clone(), refs.clone(), deleting));
                }
            }
        }
        let mut has_dependents: HashSet<String> = HashSet::new();
        for (t, ns, name, refs, deleting) in &dependents {
            let mut all_missing = true;
            let mut foreground = false;
            let mut orphaned = Vec::new();
            for r in refs {
                let uid = r.get("uid").and_then(Value::as_str).unwrap_or("");
                if let Some((_, _, _, fins, owner_deleting)) = owners.get(uid) {
                    all_missing = false;
                    has_dependents.insert(uid.to_string());
                    if *owner_deleting && fins.iter().any(|f| f == ORPHAN) {
                        orphaned.push(uid.to_string());
                    } else if *owner_deleting && fins.iter().any(|f| f == FOREGROUND) {
                        foreground = true;
                    }
                }
            }
            if !orphaned.is_empty() {
                let gr = t.group_resource();
                if let Some(obj) = st.object(&gr, ns, name).cloned() {
                    let mut updated = obj.clone();
                    if let Some(a) = updated
                        .pointer_mut("/metadata/ownerReferences")
                        .and_then(Value::as_array_mut)
                    {
                        a.retain(|r| {
                            !orphaned
                                .iter()
                                .any(|u| Some(u.as_str()) == r.get("uid").and_then(Value::as_str))
                        });
                    }
                    st.commit(
                        &self.inner.events,
                        &gr,
                        EventKind::Modified,
                        updated,
                        Some(obj),
                    );
                }
                continue;
            }
            if (all_missing || foreground) && !deleting {
                let policy = if foreground {
                    Propagation::Foreground
                } else {
                    Propagation::Background
                };
                let _ = self.delete_locked(
                    st,
                    t,
                    ns,
                    name,
                    &DeleteOptions {
                        propagation: Some(policy),
                        ..Default::default()
                    },
                );
            }
        }
        // Owners waiting in Foreground/Orphan: done once no dependent refers to them.
        for (uid, (t, ns, name, fins, deleting)) in owners {
            let waiting = fins.iter().any(|f| f == FOREGROUND || f == ORPHAN);
            if !deleting || !waiting || has_dependents.contains(&uid) {
                continue;
            }
            let gr = t.group_resource();
            let Some(obj) = st.object(&gr, &ns, &name).cloned() else {
                continue;
            };
            let mut updated = obj.clone();
            set_finalizers(
                &mut updated,
                finalizers(&obj)
                    .into_iter()
                    .filter(|f| f != FOREGROUND && f != ORPHAN)
                    .collect(),
            );
            let _ = self.update_locked(
                st,
                &t,
                &ns,
                &name,
                updated,
                &super::WriteOptions::manager("garbage-collector"),
                None,
                false,
            );
        }
    }
}
