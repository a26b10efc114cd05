//! Server-side apply: field-manager checks, conflict detection, the merge with removal of
//! dropped fields, then the ordinary create/update path with the computed managed fields.

use serde_json::{Value, json};

use super::error::{ApiError, Cause, required};
use super::managed::{Managers, conflict_message};
use super::types::{GroupResource, ResourceType};
use super::write::check_type_meta;
use super::{State, Store, WriteOptions, meta_str};
use crate::util::now_rfc3339;

impl Store {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn apply_locked(
        &self,
        st: &mut State,
        ty: &ResourceType,
        ns: &str,
        name: &str,
        config: Value,
        opts: &WriteOptions,
        sub: Option<&str>,
    ) -> Result<Value, ApiError> {
        let gr = ty.group_resource();
        let Some(manager) = opts.field_manager.as_deref().filter(|m| !m.is_empty()) else {
            return Err(ApiError::invalid(
                "PatchOptions",
                &GroupResource::new("meta.k8s.io", ""),
                "",
                vec![required("fieldManager", "is required for apply patch")],
            ));
        };
        if !config.is_object() {
            return Err(ApiError::bad_request(
                "error decoding YAML: the apply configuration is not an object",
            ));
        }
        check_type_meta(ty, &config)?;
        if meta_str(&config, "name").is_some_and(|n| n != name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta_str(&config, "name").unwrap_or("")
            )));
        }
        let mut config = config;
        if sub.is_some() {
            let status = config.get("status").cloned();
            let keep = ["apiVersion", "kind", "metadata"];
            if let Some(m) = config.as_object_mut() {
                m.retain(|k, _| keep.contains(&k.as_str()));
                if let Some(s) = status {
                    m.insert("status".into(), s);
                }
            }
        } else if ty.status_subresource {
            // The main resource ignores `.status`: an apply there neither sets nor owns it.
            if let Some(m) = config.as_object_mut() {
                m.remove("status");
            }
        }
        let api_version = ty.api_version();
        let now = now_rfc3339();
        let live = st.object(&gr, ns, name).cloned();
        let base = live.clone().unwrap_or_else(|| json!({}));
        if live.is_none() && sub.is_some() {
            return Err(ApiError::not_found(&gr, name));
        }
        let mut managers = Managers::read(&base);
        let mut merged = managers
            .apply(manager, &api_version, sub, &now, &base, &config, opts.force)
            .map_err(|conflicts| {
                let causes = conflicts
                    .iter()
                    .map(|c| Cause {
                        reason: "FieldManagerConflict".into(),
                        message: format!("conflict with {}", c.manager),
                        field: super::fields::path_string(&c.path),
                    })
                    .collect();
                ApiError::apply_conflicts(&gr, name, conflict_message(&conflicts), causes)
            })?;
        if !merged.get("metadata").is_some_and(Value::is_object) {
            merged["metadata"] = json!({});
        }
        merged["metadata"]["name"] = json!(name);
        managers.write(&mut merged);
        match live {
            Some(_) => self.update_locked(st, ty, ns, name, merged, opts, sub, true),
            None => self.create_locked(st, ty, ns, merged, opts, true),
        }
    }
}
