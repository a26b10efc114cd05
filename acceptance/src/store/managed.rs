//! `metadata.managedFields`: per-manager ownership entries, updated by writes (operation
//! `Update`) and by server-side apply (operation `Apply`, with conflict detection).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::fields::{
    FieldPath, FieldSet, PathElem, get_path, merge_apply, path_string, remove_path,
};

/// One `managedFields` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: Option<String>,
    pub fields: FieldSet,
}

impl Entry {
    fn same_owner(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }
}

/// One field that another manager owns with a different value.
#[derive(Clone, Debug, PartialEq)]
pub struct Conflict {
    /// How the manager is named in messages: `"mgr"` or `"mgr" using v1` for Update entries.
    pub manager: String,
    pub path: FieldPath,
}

/// All entries of one object.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Managers(pub Vec<Entry>);

impl Managers {
    /// Reads `metadata.managedFields` (invalid entries are dropped).
    pub fn read(obj: &Value) -> Self {
        let entries = obj
            .pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|e| {
                        Some(Entry {
                            manager: e.get("manager")?.as_str()?.to_string(),
                            operation: e.get("operation")?.as_str()?.to_string(),
                            api_version: e
                                .get("apiVersion")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .into(),
                            time: e.get("time").and_then(Value::as_str).unwrap_or("").into(),
                            subresource: e
                                .get("subresource")
                                .and_then(Value::as_str)
                                .map(String::from),
                            fields: FieldSet::from_fields_v1(
                                e.get("fieldsV1").unwrap_or(&Value::Null),
                            ),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        Managers(entries)
    }

    /// Writes `metadata.managedFields` (removing it when empty).
    pub fn write(&self, obj: &mut Value) {
        let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        let entries: Vec<Value> = self
            .0
            .iter()
            .filter(|e| !e.fields.is_empty())
            .map(|e| {
                let mut v = json!({
                    "manager": e.manager,
                    "operation": e.operation,
                    "apiVersion": e.api_version,
                    "time": e.time,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": e.fields.to_fields_v1(),
                });
                if let Some(s) = &e.subresource {
                    v["subresource"] = json!(s);
                }
                v
            })
            .collect();
        if entries.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(entries));
        }
    }

    fn entry_mut(
        &mut self,
        manager: &str,
        operation: &str,
        subresource: Option<&str>,
        api_version: &str,
        time: &str,
    ) -> &mut Entry {
        let idx = match self
            .0
            .iter()
            .position(|e| e.same_owner(manager, operation, subresource))
        {
            Some(i) => i,
            None => {
                self.0.push(Entry {
                    manager: manager.into(),
                    operation: operation.into(),
                    api_version: api_version.into(),
                    time: time.into(),
                    subresource: subresource.map(String::from),
                    fields: FieldSet::default(),
                });
                self.0.len() - 1
            }
        };
        let e = &mut self.0[idx];
        e.api_version = api_version.into();
        e.time = time.into();
        e
    }

    /// Records a non-apply write: `manager` takes every field whose value changed from `old` to
    /// `new`; other managers lose changed and removed fields.
    pub fn record_update(
        &mut self,
        manager: &str,
        api_version: &str,
        subresource: Option<&str>,
        time: &str,
        old: Option<&Value>,
        new: &Value,
    ) {
        let new_set = FieldSet::from_object(new);
        let changed: Vec<FieldPath> = new_set
            .0
            .iter()
            .filter(|p| old.and_then(|o| get_path(o, p)) != get_path(new, p))
            .cloned()
            .collect();
        let removed: Vec<FieldPath> = old
            .map(|o| {
                FieldSet::from_object(o)
                    .0
                    .into_iter()
                    .filter(|p| get_path(new, p).is_none())
                    .collect()
            })
            .unwrap_or_default();
        for e in self.0.iter_mut() {
            for p in changed.iter().chain(removed.iter()) {
                if !e.same_owner(manager, "Update", subresource) {
                    e.fields.0.remove(p);
                }
            }
            for p in &removed {
                e.fields.remove_subtree(p);
            }
        }
        if !changed.is_empty() {
            let e = self.entry_mut(manager, "Update", subresource, api_version, time);
            e.fields.0.extend(changed);
        }
        self.0.retain(|e| !e.fields.is_empty());
    }

    /// Server-side apply of `config` by `manager` onto `live` (an empty object when creating).
    /// Returns the merged object, or the conflicts when `force` is false.
    #[allow(clippy::too_many_arguments)]
    pub fn apply(
        &mut self,
        manager: &str,
        api_version: &str,
        subresource: Option<&str>,
        time: &str,
        live: &Value,
        config: &Value,
        force: bool,
    ) -> Result<Value, Vec<Conflict>> {
        let new_set = FieldSet::from_object(config);
        let mut conflicts = Vec::new();
        for e in self
            .0
            .iter()
            .filter(|e| !e.same_owner(manager, "Apply", subresource))
        {
            for p in new_set
                .0
                .iter()
                .filter(|p| !matches!(p.last(), Some(PathElem::Key(_))))
            {
                if e.fields.contains(p) && get_path(live, p) != get_path(config, p) {
                    let who = if e.operation == "Update" {
                        format!("\"{}\" using {}", e.manager, e.api_version)
                    } else {
                        format!("\"{}\"", e.manager)
                    };
                    conflicts.push(Conflict {
                        manager: who,
                        path: p.clone(),
                    });
                }
            }
        }
        if !conflicts.is_empty() && !force {
            return Err(conflicts);
        }
        let mut merged = live.clone();
        merge_apply(&mut merged, config);
        // Fields this manager applied before, no longer applies, and nobody else owns: removed.
        let previous = self
            .0
            .iter()
            .find(|e| e.same_owner(manager, "Apply", subresource))
            .map(|e| e.fields.clone())
            .unwrap_or_default();
        let mut dropped: Vec<&FieldPath> =
            previous.0.iter().filter(|p| !new_set.contains(p)).collect();
        dropped.sort_by_key(|p| std::cmp::Reverse(p.len()));
        let mut removed = Vec::new();
        for p in dropped {
            let shared = self.0.iter().any(|e| {
                !e.same_owner(manager, "Apply", subresource) && e.fields.owns_at_or_below(p)
            });
            if !shared && !new_set.owns_at_or_below(p) {
                remove_path(&mut merged, p);
                removed.push(p.clone());
            }
        }
        for e in self.0.iter_mut() {
            for c in &conflicts {
                e.fields.0.remove(&c.path);
            }
            for p in &removed {
                e.fields.remove_subtree(p);
            }
        }
        let e = self.entry_mut(manager, "Apply", subresource, api_version, time);
        e.fields = new_set;
        self.0.retain(|e| !e.fields.is_empty());
        Ok(merged)
    }
}

/// `Apply failed with 1 conflict: conflict with "mgr": .data.key` (grouped per manager when more).
pub fn conflict_message(conflicts: &[Conflict]) -> String {
    let n = conflicts.len();
    if n == 1 {
        let c = &conflicts[0];
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            c.manager,
            path_string(&c.path)
        );
    }
    let mut by_manager: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for c in conflicts {
        by_manager
            .entry(&c.manager)
            .or_default()
            .push(path_string(&c.path));
    }
    let parts: Vec<String> = by_manager
        .iter()
        .map(|(m, paths)| {
            if paths.len() == 1 {
                format!("conflict with {m}: {}", paths[0])
            } else {
                format!("conflicts with {m}:\n- {}", paths.join("\n- "))
            }
        })
        .collect();
    format!("Apply failed with {n} conflicts: {}", parts.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_conflicts_force_and_removal() {
        let mut m = Managers::default();
        let empty = json!({});
        let a = m
            .apply(
                "a",
                "v1",
                None,
                "t",
                &empty,
                &json!({"data": {"x": "1", "y": "1"}}),
                false,
            )
            .unwrap();
        // b applies a different x: conflict.
        let err = m
            .apply(
                "b",
                "v1",
                None,
                "t",
                &a,
                &json!({"data": {"x": "2"}}),
                false,
            )
            .unwrap_err();
        assert_eq!(
            conflict_message(&err),
            "Apply failed with 1 conflict: conflict with \"a\": .data.x"
        );
        // same value: shared, no conflict.
        let shared = m
            .apply(
                "b",
                "v1",
                None,
                "t",
                &a,
                &json!({"data": {"y": "1"}}),
                false,
            )
            .unwrap();
        // a drops y: still owned by b, so kept; a drops x: removed.
        let after = m
            .apply(
                "a",
                "v1",
                None,
                "t",
                &shared,
                &json!({"data": {"z": "1"}}),
                false,
            )
            .unwrap();
        assert_eq!(after, json!({"data": {"y": "1", "z": "1"}}));
        // forced takeover
        let forced = m
            .apply(
                "c",
                "v1",
                None,
                "t",
                &after,
                &json!({"data": {"z": "9"}}),
                true,
            )
            .unwrap();
        assert_eq!(forced["data"]["z"], "9");
        let a_entry =
            m.0.iter()
                .find(|e| e.manager == "a")
                .map(|e| e.fields.clone());
        assert!(a_entry.is_none(), "a lost its only field");
    }

    #[test]
    fn update_takes_changed_fields() {
        let mut m = Managers::default();
        let old = m
            .apply(
                "a",
                "v1",
                None,
                "t",
                &json!({}),
                &json!({"data": {"x": "1"}}),
                false,
            )
            .unwrap();
        let new = json!({"data": {"x": "2"}});
        m.record_update("kubectl-edit", "v1", None, "t", Some(&old), &new);
        assert_eq!(m.0.len(), 1);
        assert_eq!(m.0[0].manager, "kubectl-edit");
        let err = m
            .apply(
                "a",
                "v1",
                None,
                "t",
                &new,
                &json!({"data": {"x": "3"}}),
                false,
            )
            .unwrap_err();
        assert_eq!(err[0].manager, "\"kubectl-edit\" using v1");
    }
}
