//! Writes: create, update (main resource and `/status`), patch and server-side apply. All paths
//! end in `create_locked` / `update_locked`, which apply admission, generation, managed fields
//! and resourceVersion rules.

use serde_json::{Map, Value, json};

use super::admission;
use super::error::{ApiError, required};
use super::managed::Managers;
use super::patch::{Patch, apply_patch};
use super::pod_security;
use super::types::{GroupResource, ResourceType};
use super::{EventKind, State, Store, WriteOptions, access, meta_str};
use crate::util::{name_suffix, new_uid, now_rfc3339};

const STATUS: Option<&str> = Some("status");

fn manager_of(opts: &WriteOptions) -> &str {
    opts.field_manager.as_deref().unwrap_or("talos-sim")
}

impl Store {
    /// Creates an object in `namespace` (ignored for cluster-scoped types). The body's
    /// `apiVersion`/`kind` may be omitted. Errors: 409 AlreadyExists, 404 (namespace or type
    /// missing), 403 (namespace terminating), 422 Invalid, 400 BadRequest.
    pub fn create(
        &self,
        gr: &GroupResource,
        namespace: &str,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let mut st = self.lock();
        let ty = st
            .registry
            .get(gr)
            .cloned()
            .ok_or_else(ApiError::no_route)?;
        let body_ns = meta_str(&obj, "namespace").unwrap_or("");
        let ns = match (ty.namespaced, namespace.is_empty()) {
            (false, _) => "",
            (true, false) => namespace,
            (true, true) => body_ns,
        };
        self.authorize_locked(&st, &access("create", gr, None, ns, ""))?;
        self.create_locked(&mut st, &ty, namespace, obj, opts, false)
    }

    /// Replaces an object (name from the body). Errors: 404, 409 Conflict (stale
    /// `resourceVersion`), 422 Invalid (e.g. a Job's `spec.template` changed).
    pub fn update(
        &self,
        gr: &GroupResource,
        namespace: &str,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        self.update_sub(gr, namespace, obj, opts, None)
    }

    /// Replaces only `.status` (the `/status` subresource).
    pub fn update_status(
        &self,
        gr: &GroupResource,
        namespace: &str,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        self.update_sub(gr, namespace, obj, opts, STATUS)
    }

    /// Patches an object; [`Patch::Apply`] is server-side apply (creates when missing; needs
    /// `field_manager`; 409 with the conflicting fields unless `force`).
    pub fn patch(
        &self,
        gr: &GroupResource,
        namespace: &str,
        name: &str,
        patch: Patch,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        self.patch_sub(gr, namespace, name, patch, opts, None)
    }

    /// Patches only `.status` (the `/status` subresource).
    pub fn patch_status(
        &self,
        gr: &GroupResource,
        namespace: &str,
        name: &str,
        patch: Patch,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        self.patch_sub(gr, namespace, name, patch, opts, STATUS)
    }

    pub(crate) fn update_sub(
        &self,
        gr: &GroupResource,
        namespace: &str,
        obj: Value,
        opts: &WriteOptions,
        sub: Option<&str>,
    ) -> Result<Value, ApiError> {
        let name = meta_str(&obj, "name").unwrap_or("").to_string();
        self.update_named(gr, namespace, &name, obj, opts, sub)
    }

    /// Update with the name from the URL (the body's name must match).
    pub(crate) fn update_named(
        &self,
        gr: &GroupResource,
        namespace: &str,
        name: &str,
        obj: Value,
        opts: &WriteOptions,
        sub: Option<&str>,
    ) -> Result<Value, ApiError> {
        let mut st = self.lock();
        let ty = st
            .registry
            .get(gr)
            .cloned()
            .ok_or_else(ApiError::no_route)?;
        check_subresource(&ty, sub)?;
        let ns = if ty.namespaced { namespace } else { "" };
        self.authorize_locked(&st, &access("update", gr, sub, ns, name))?;
        let missing = st.object(&ty.group_resource(), ns, name).is_none();
        if missing && sub.is_none() && admission::allows_create_on_update(&ty) {
            // Creating through an update needs `create` as well, like the real server.
            self.authorize_locked(&st, &access("create", gr, None, ns, ""))?;
        }
        if missing && sub.is_none() && admission::allows_create_on_update(&ty) {
            // Like the real server (AllowCreateOnUpdate: leases, endpoints, events, RBAC): a PUT
            // of a missing object creates it; the body's resourceVersion is ignored then.
            let mut obj = obj;
            if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
                if !m.contains_key("name") {
                    m.insert("name".into(), json!(name));
                }
            }
            if let Some(body_name) = meta_str(&obj, "name").filter(|n| *n != name) {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({body_name}) does not match the name on the URL ({name})"
                )));
            }
            return self.create_locked(&mut st, &ty, namespace, obj, opts, false);
        }
        if !missing
            && !admission::allows_unconditional_update(&ty)
            && meta_str(&obj, "resourceVersion").is_none_or(str::is_empty)
        {
            return Err(ApiError::invalid(
                &ty.kind,
                &ty.group_resource(),
                name,
                vec![super::error::Cause {
                    reason: "FieldValueInvalid".into(),
                    message: "Invalid value: 0x0: must be specified for an update".into(),
                    field: "metadata.resourceVersion".into(),
                }],
            ));
        }
        self.update_locked(&mut st, &ty, namespace, name, obj, opts, sub, false)
    }

    pub(crate) fn patch_sub(
        &self,
        gr: &GroupResource,
        namespace: &str,
        name: &str,
        patch: Patch,
        opts: &WriteOptions,
        sub: Option<&str>,
    ) -> Result<Value, ApiError> {
        let mut st = self.lock();
        let ty = st
            .registry
            .get(gr)
            .cloned()
            .ok_or_else(ApiError::no_route)?;
        check_subresource(&ty, sub)?;
        let ns = if ty.namespaced { namespace } else { "" };
        self.authorize_locked(&st, &access("patch", gr, sub, ns, name))?;
        if let Patch::Apply(config) = patch {
            if sub.is_none() && st.object(gr, ns, name).is_none() {
                // Server-side apply of a missing object creates it: `create` is needed too.
                self.authorize_locked(&st, &access("create", gr, None, ns, ""))?;
            }
            return self.apply_locked(&mut st, &ty, ns, name, config, opts, sub);
        }
        if matches!(patch, Patch::Strategic(_)) && ty.custom {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        let old = st
            .object(&ty.group_resource(), ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&ty.group_resource(), name))?;
        let patched = apply_patch(&old, &patch)?;
        self.update_locked(&mut st, &ty, ns, name, patched, opts, sub, false)
    }

    pub(super) fn create_locked(
        &self,
        st: &mut State,
        ty: &ResourceType,
        namespace: &str,
        mut obj: Value,
        opts: &WriteOptions,
        managed_done: bool,
    ) -> Result<Value, ApiError> {
        let gr = ty.group_resource();
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request is not a JSON object",
            ));
        }
        check_type_meta(ty, &obj)?;
        obj["apiVersion"] = json!(ty.api_version());
        obj["kind"] = json!(ty.kind);
        if !obj.get("metadata").is_some_and(Value::is_object) {
            obj["metadata"] = json!({});
        }
        let meta = obj["metadata"]
            .as_object_mut()
            .expect("metadata is an object");
        if ty.namespaced {
            if let Some(body_ns) = meta.get("namespace").and_then(Value::as_str) {
                if !namespace.is_empty() && body_ns != namespace {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
            }
            let ns = if namespace.is_empty() {
                meta.get("namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            } else {
                namespace.to_string()
            };
            if ns.is_empty() {
                return Err(ApiError::bad_request(
                    "the server could not find the requested resource: namespace is required",
                ));
            }
            meta.insert("namespace".into(), json!(ns));
        } else {
            meta.remove("namespace");
        }
        let mut name = meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if name.is_empty() {
            if let Some(prefix) = meta
                .get("generateName")
                .and_then(Value::as_str)
                .filter(|p| !p.is_empty())
            {
                name = format!("{prefix}{}", name_suffix());
                meta.insert("name".into(), json!(name));
            } else {
                return Err(ApiError::invalid(
                    &ty.kind,
                    &gr,
                    "",
                    vec![required(
                        "metadata.name",
                        "name or generateName is required",
                    )],
                ));
            }
        }
        if let Some(cause) = admission::validate_name(ty, &name) {
            return Err(ApiError::invalid(&ty.kind, &gr, &name, vec![cause]));
        }
        let ns = meta
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if ty.namespaced {
            match st.object(&GroupResource::core("namespaces"), "", &ns) {
                None => return Err(ApiError::not_found(&GroupResource::core("namespaces"), &ns)),
                Some(n) if n.pointer("/metadata/deletionTimestamp").is_some() => {
                    return Err(ApiError::forbidden(
                        &gr,
                        &name,
                        &format!(
                            "unable to create new content in namespace {ns} because it is being terminated"
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
        if !managed_done
            && meta
                .get("resourceVersion")
                .is_some_and(|rv| rv.as_str().is_none_or(|s| !s.is_empty()))
        {
            // The storage layer's answer (an untyped 500 with this message) on the real server.
            return Err(ApiError::new(
                500,
                "",
                "resourceVersion should not be set on objects to be created",
            ));
        }
        if let Some(existing) = st.object(&gr, &ns, &name) {
            let mut e = ApiError::already_exists(&gr, &name);
            if existing.pointer("/metadata/deletionTimestamp").is_some() {
                e.message = format!("object is being deleted: {}", e.message);
            }
            return Err(e);
        }
        for k in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
            "selfLink",
        ] {
            meta.remove(k);
        }
        meta.insert("uid".into(), json!(new_uid()));
        meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
        if ty.generation {
            meta.insert("generation".into(), json!(1));
        } else {
            meta.remove("generation");
        }
        if ty.status_subresource && ty.resource != "nodes" {
            if let Some(m) = obj.as_object_mut() {
                m.remove("status");
            }
        }
        if gr == GroupResource::core("pods") {
            service_account_admission(st, &gr, &ns, &name, &mut obj)?;
        }
        self.check_escalation_locked(st, &gr, &ns, &obj)?;
        admission::on_create(ty, &mut obj)?;
        self.pod_security_admission(st, &gr, &ns, &name, &obj)?;
        if !managed_done {
            if let Some(m) = obj["metadata"].as_object_mut() {
                m.remove("managedFields");
            }
            let mut managers = Managers::default();
            managers.record_update(
                manager_of(opts),
                &ty.api_version(),
                None,
                &now_rfc3339(),
                None,
                &obj,
            );
            managers.write(&mut obj);
        }
        if opts.dry_run {
            return Ok(obj);
        }
        let stored = st.commit(&self.inner.events, &gr, EventKind::Added, obj, None);
        if ty.resource == "customresourcedefinitions" && ty.group == "apiextensions.k8s.io" {
            register_crd(st, &stored);
        }
        if gr == GroupResource::core("namespaces") {
            self.ensure_default_service_account(st, &name);
        }
        Ok(stored)
    }

    /// What the serviceaccount controller does: every active namespace has a `default`
    /// ServiceAccount. Done at once on namespace creation (so pods can be created right away)
    /// and again by housekeeping (a deleted `default` comes back).
    pub(super) fn ensure_default_service_account(&self, st: &mut State, ns: &str) {
        let sa = GroupResource::core("serviceaccounts");
        let active = st
            .object(&GroupResource::core("namespaces"), "", ns)
            .is_some_and(|n| n.pointer("/metadata/deletionTimestamp").is_none());
        if !active || st.object(&sa, ns, "default").is_some() {
            return;
        }
        let Some(ty) = st.registry.get(&sa).cloned() else {
            return;
        };
        let _ = self.create_locked(
            st,
            &ty,
            ns,
            json!({"metadata": {"name": "default"}}),
            &WriteOptions::manager("kube-controller-manager"),
            false,
        );
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn update_locked(
        &self,
        st: &mut State,
        ty: &ResourceType,
        ns: &str,
        name: &str,
        new: Value,
        opts: &WriteOptions,
        sub: Option<&str>,
        managed_done: bool,
    ) -> Result<Value, ApiError> {
        let gr = ty.group_resource();
        let ns = if ty.namespaced { ns } else { "" };
        if !new.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request is not a JSON object",
            ));
        }
        check_type_meta(ty, &new)?;
        let old = st
            .object(&gr, ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&gr, name))?;
        if let Some(body_name) = meta_str(&new, "name").filter(|n| *n != name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if let Some(rv) = meta_str(&new, "resourceVersion").filter(|rv| !rv.is_empty()) {
            if Some(rv) != meta_str(&old, "resourceVersion") {
                return Err(ApiError::stale(&gr, name));
            }
        }
        if let Some(uid) = meta_str(&new, "uid").filter(|u| !u.is_empty()) {
            if Some(uid) != meta_str(&old, "uid") {
                return Err(ApiError::conflict(
                    &gr,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        meta_str(&old, "uid").unwrap_or("")
                    ),
                ));
            }
        }
        let mut result = if sub.is_some() {
            let mut r = old.clone();
            match new.get("status") {
                Some(s) => r["status"] = s.clone(),
                None => {
                    if let Some(m) = r.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            if managed_done {
                r["metadata"]["managedFields"] = new
                    .pointer("/metadata/managedFields")
                    .cloned()
                    .unwrap_or(Value::Null);
            }
            r
        } else {
            let mut r = new;
            if !r.get("metadata").is_some_and(Value::is_object) {
                r["metadata"] = json!({});
            }
            let (om, rm) = (
                old["metadata"].as_object().cloned().unwrap_or_default(),
                r["metadata"].as_object_mut().expect("object"),
            );
            for k in [
                "uid",
                "creationTimestamp",
                "namespace",
                "name",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ] {
                copy_key(&om, rm, k);
            }
            if rm
                .get("managedFields")
                .and_then(Value::as_array)
                .is_none_or(|a| a.is_empty())
            {
                copy_key(&om, rm, "managedFields");
            }
            if ty.status_subresource {
                match old.get("status") {
                    Some(s) => r["status"] = s.clone(),
                    None => {
                        if let Some(m) = r.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            r
        };
        result["apiVersion"] = json!(ty.api_version());
        result["kind"] = json!(ty.kind);
        if let Some(m) = result["metadata"].as_object_mut() {
            m.remove("resourceVersion");
            if m.get("managedFields").is_some_and(Value::is_null) {
                m.remove("managedFields");
            }
        }
        admission::on_update(ty, &old, &mut result)?;
        if sub.is_none() {
            self.check_escalation_locked(st, &gr, ns, &result)?;
        }
        if sub.is_none() && gr == GroupResource::core("namespaces") {
            self.pod_security_admission(st, &gr, "", name, &result)?;
        }
        if ty.generation && spec_of(&old, ty) != spec_of(&result, ty) {
            let g = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            result["metadata"]["generation"] = json!(g + 1);
        }
        if !managed_done {
            let mut managers = Managers::read(&result);
            managers.record_update(
                manager_of(opts),
                &ty.api_version(),
                sub,
                &now_rfc3339(),
                Some(&old),
                &result,
            );
            managers.write(&mut result);
        }
        if same_ignoring_bookkeeping(&old, &result) {
            return Ok(old);
        }
        if opts.dry_run {
            return Ok(result);
        }
        let finished = result.pointer("/metadata/deletionTimestamp").is_some()
            && result
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_none_or(|f| f.is_empty())
            && !(gr == GroupResource::core("pods")
                && st
                    .pod_deadlines
                    .contains_key(&(ns.to_string(), name.to_string())))
            && gr != GroupResource::core("namespaces");
        let kind = if finished {
            EventKind::Deleted
        } else {
            EventKind::Modified
        };
        let stored = st.commit(&self.inner.events, &gr, kind, result, Some(old));
        if finished {
            self.after_removal(st, ty, &stored);
        } else if ty.resource == "customresourcedefinitions" && ty.group == "apiextensions.k8s.io" {
            register_crd(st, &stored);
        }
        Ok(stored)
    }
}

impl Store {
    /// The PodSecurity admission plugin (validating, so after defaulting and validation):
    /// pods are checked against their namespace's enforced level, namespaces' level labels
    /// must be valid. Off when [`Store::set_pod_security`] turned it off.
    fn pod_security_admission(
        &self,
        st: &State,
        gr: &GroupResource,
        ns: &str,
        name: &str,
        obj: &Value,
    ) -> Result<(), ApiError> {
        if !self.pod_security() {
            return Ok(());
        }
        if *gr == GroupResource::core("namespaces") {
            let causes = pod_security::validate_namespace_labels(obj);
            if !causes.is_empty() {
                return Err(ApiError::invalid("Namespace", gr, name, causes));
            }
            return Ok(());
        }
        if *gr != GroupResource::core("pods") {
            return Ok(());
        }
        match st.object(&GroupResource::core("namespaces"), "", ns) {
            Some(namespace) => pod_security::admit_pod(gr, name, namespace, obj),
            None => Ok(()),
        }
    }
}

/// The ServiceAccount admission plugin: defaults `spec.serviceAccountName` (and the deprecated
/// `spec.serviceAccount`) to `default` and refuses pods whose ServiceAccount does not exist.
fn service_account_admission(
    st: &State,
    gr: &GroupResource,
    ns: &str,
    name: &str,
    pod: &mut Value,
) -> Result<(), ApiError> {
    if !pod.get("spec").is_some_and(Value::is_object) {
        return Ok(());
    }
    let spec = &mut pod["spec"];
    let given = |k: &str| {
        spec.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(String::from)
    };
    let sa = given("serviceAccountName")
        .or_else(|| given("serviceAccount"))
        .unwrap_or_else(|| "default".into());
    spec["serviceAccountName"] = json!(sa);
    spec["serviceAccount"] = json!(sa);
    if st
        .object(&GroupResource::core("serviceaccounts"), ns, &sa)
        .is_none()
    {
        return Err(ApiError::forbidden(
            gr,
            name,
            &format!(
                "error looking up service account {ns}/{sa}: serviceaccount \"{sa}\" not found"
            ),
        ));
    }
    Ok(())
}

fn copy_key(from: &Map<String, Value>, to: &mut Map<String, Value>, k: &str) {
    match from.get(k) {
        Some(v) => {
            to.insert(k.into(), v.clone());
        }
        None => {
            to.remove(k);
        }
    }
}

fn check_subresource(ty: &ResourceType, sub: Option<&str>) -> Result<(), ApiError> {
    match sub {
        Some("status") if !ty.status_subresource => Err(ApiError::no_route()),
        _ => Ok(()),
    }
}

/// The body's apiVersion/kind, when given, must be this type's.
pub(super) fn check_type_meta(ty: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    if let Some(kind) = obj.get("kind").and_then(Value::as_str) {
        if kind != ty.kind {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({kind}) does not match the expected kind ({})",
                ty.kind
            )));
        }
    }
    if let Some(av) = obj.get("apiVersion").and_then(Value::as_str) {
        let (g, v) = super::types::split_api_version(av);
        if g != ty.group || !ty.serves(v) {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({})",
                ty.api_version()
            )));
        }
    }
    Ok(())
}

/// What `generation` tracks: everything but metadata (and status with a status subresource).
fn spec_of(obj: &Value, ty: &ResourceType) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        m.remove("apiVersion");
        m.remove("kind");
        if ty.status_subresource || !ty.custom {
            m.remove("status");
        }
    }
    v
}

fn same_ignoring_bookkeeping(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
            if let Some(Value::Array(entries)) = m.get_mut("managedFields") {
                for e in entries.iter_mut().filter_map(Value::as_object_mut) {
                    e.remove("time");
                }
            }
        }
        v
    };
    strip(old) == strip(new)
}

/// Adds (or refreshes) the resource type a CRD defines.
pub(super) fn register_crd(st: &mut State, crd: &Value) {
    let s = |p: &str| {
        crd.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let versions: Vec<&Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|v| v.get("served") != Some(&json!(false)))
                .collect()
        })
        .unwrap_or_default();
    let mut names: Vec<String> = versions
        .iter()
        .filter_map(|v| v.get("name").and_then(Value::as_str).map(String::from))
        .collect();
    if let Some(storage) = versions
        .iter()
        .find(|v| v.get("storage") == Some(&json!(true)))
        .and_then(|v| v.get("name"))
        .and_then(Value::as_str)
    {
        names.retain(|n| n != storage);
        names.insert(0, storage.to_string());
    }
    if names.is_empty() || s("/spec/group").is_empty() || s("/spec/names/plural").is_empty() {
        return;
    }
    let strings = |p: &str| -> Vec<String> {
        crd.pointer(p)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let kind = s("/spec/names/kind");
    let singular = Some(s("/spec/names/singular"))
        .filter(|x| !x.is_empty())
        .unwrap_or_else(|| kind.to_lowercase());
    st.registry.insert(ResourceType {
        group: s("/spec/group"),
        versions: names,
        resource: s("/spec/names/plural"),
        singular,
        kind,
        namespaced: s("/spec/scope") != "Cluster",
        short_names: strings("/spec/names/shortNames"),
        categories: strings("/spec/names/categories"),
        status_subresource: versions
            .iter()
            .any(|v| v.pointer("/subresources/status").is_some()),
        generation: true,
        custom: true,
    });
}
