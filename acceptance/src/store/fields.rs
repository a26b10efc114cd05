//! Field ownership for server-side apply: field sets (the `fieldsV1` format), per-manager entries in
//! `metadata.managedFields`, and the apply merge.
//!
//! Granularity: every leaf (scalar, atomic list, empty map) is a field; maps merge per key; lists
//! whose items are all objects with a string `name` (containers, env, ports, volumes, ...) are
//! keyed by `name` (`k:{"name":"x"}`); every other list is atomic (owned and replaced whole).
//! The real server uses per-type schemas (e.g. ports keyed by `containerPort`); this is the
//! schema-less approximation.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElem {
    /// A map key / struct field (`f:name`).
    Field(String),
    /// An item of a keyed list, by its key object as canonical JSON (`k:{"name":"x"}`).
    Key(String),
}

pub type FieldPath = Vec<PathElem>;

/// A set of owned fields.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSet(pub BTreeSet<FieldPath>);

const SYSTEM_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
];

/// Whether a list is merged by item `name`: every item is an object with a string `name`, and
/// the names are unique (otherwise the list is atomic, so no item can be lost in a merge).
pub fn is_keyed_list(items: &[Value]) -> bool {
    let mut seen = std::collections::HashSet::new();
    !items.is_empty()
        && items.iter().all(|i| {
            i.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| seen.insert(n))
        })
}

fn item_key(item: &Value) -> String {
    json!({"name": item.get("name").cloned().unwrap_or(Value::Null)}).to_string()
}

impl FieldSet {
    /// The fields an object (or apply configuration) sets, ignoring `apiVersion`, `kind` and
    /// system-managed metadata.
    pub fn from_object(obj: &Value) -> Self {
        let mut set = BTreeSet::new();
        if let Some(map) = obj.as_object() {
            for (k, v) in map {
                if k == "apiVersion" || k == "kind" {
                    continue;
                }
                let path = vec![PathElem::Field(k.clone())];
                if k == "metadata" {
                    if let Some(meta) = v.as_object() {
                        for (mk, mv) in meta
                            .iter()
                            .filter(|(mk, _)| !SYSTEM_META.contains(&mk.as_str()))
                        {
                            let mut p = path.clone();
                            p.push(PathElem::Field(mk.clone()));
                            walk(mv, p, &mut set);
                        }
                    }
                    continue;
                }
                walk(v, path, &mut set);
            }
        }
        FieldSet(set)
    }

    /// Parses `fieldsV1`.
    pub fn from_fields_v1(v: &Value) -> Self {
        let mut set = BTreeSet::new();
        parse_v1(v, Vec::new(), &mut set);
        FieldSet(set)
    }

    /// Renders `fieldsV1`: `{"f:data":{"f:key":{}}}`, with `".":{}` on owned nodes with children.
    pub fn to_fields_v1(&self) -> Value {
        let mut root = Value::Object(Map::new());
        for path in &self.0 {
            let mut node = &mut root;
            for el in path {
                let key = match el {
                    PathElem::Field(f) => format!("f:{f}"),
                    PathElem::Key(k) => format!("k:{k}"),
                };
                node = node
                    .as_object_mut()
                    .map(|m| m.entry(key).or_insert_with(|| json!({})))
                    .expect("field-set nodes are objects");
            }
        }
        for path in &self.0 {
            let mut node = &mut root;
            for el in path {
                let key = match el {
                    PathElem::Field(f) => format!("f:{f}"),
                    PathElem::Key(k) => format!("k:{k}"),
                };
                node = &mut node[key];
            }
            if let Some(m) = node.as_object_mut() {
                if !m.is_empty() && !m.contains_key(".") {
                    m.insert(".".into(), json!({}));
                }
            }
        }
        root
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, p: &FieldPath) -> bool {
        self.0.contains(p)
    }

    /// Whether the set holds `p` or anything below it.
    pub fn owns_at_or_below(&self, p: &FieldPath) -> bool {
        self.0.iter().any(|q| q.starts_with(p))
    }

    /// Removes `p` and everything below it.
    pub fn remove_subtree(&mut self, p: &FieldPath) {
        self.0.retain(|q| !q.starts_with(p));
    }
}

fn walk(v: &Value, path: FieldPath, set: &mut BTreeSet<FieldPath>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                let mut p = path.clone();
                p.push(PathElem::Field(k.clone()));
                walk(child, p, set);
            }
        }
        Value::Array(items) if is_keyed_list(items) => {
            for item in items {
                let mut p = path.clone();
                p.push(PathElem::Key(item_key(item)));
                set.insert(p.clone());
                walk(item, p, set);
            }
        }
        _ => {
            set.insert(path);
        }
    }
}

fn parse_v1(v: &Value, path: FieldPath, set: &mut BTreeSet<FieldPath>) {
    let Some(m) = v.as_object() else { return };
    if (m.is_empty() || m.contains_key(".")) && !path.is_empty() {
        set.insert(path.clone());
    }
    for (k, child) in m {
        let el = if let Some(f) = k.strip_prefix("f:") {
            PathElem::Field(f.to_string())
        } else if let Some(key) = k.strip_prefix("k:") {
            let canonical = serde_json::from_str::<Value>(key)
                .map(|v| v.to_string())
                .unwrap_or_else(|_| key.to_string());
            PathElem::Key(canonical)
        } else {
            continue; // "." and unsupported "v:"/"i:" entries
        };
        let mut p = path.clone();
        p.push(el);
        parse_v1(child, p, set);
    }
}

fn find_item(items: &[Value], key: &str) -> Option<usize> {
    items.iter().position(|i| item_key(i) == key)
}

/// The value at a path.
pub fn get_path<'a>(obj: &'a Value, path: &[PathElem]) -> Option<&'a Value> {
    let mut cur = obj;
    for el in path {
        cur = match el {
            PathElem::Field(f) => cur.get(f)?,
            PathElem::Key(k) => {
                let items = cur.as_array()?;
                &items[find_item(items, k)?]
            }
        };
    }
    Some(cur)
}

/// Removes the value at a path (a map key or a keyed list item). Missing paths are ignored.
pub fn remove_path(obj: &mut Value, path: &[PathElem]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for el in parent_path {
        let next = match el {
            PathElem::Field(f) => cur.get_mut(f),
            PathElem::Key(k) => match cur.as_array_mut() {
                Some(items) => match find_item(items, k) {
                    Some(i) => items.get_mut(i),
                    None => None,
                },
                None => None,
            },
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match last {
        PathElem::Field(f) => {
            if let Some(m) = cur.as_object_mut() {
                m.remove(f);
            }
        }
        PathElem::Key(k) => {
            if let Some(items) = cur.as_array_mut() {
                if let Some(i) = find_item(items, k) {
                    items.remove(i);
                }
            }
        }
    }
}

/// `.spec.containers[name="app"].image`, the path syntax of apply-conflict messages.
pub fn path_string(path: &[PathElem]) -> String {
    let mut s = String::new();
    for el in path {
        match el {
            PathElem::Field(f) => {
                s.push('.');
                s.push_str(f);
            }
            PathElem::Key(k) => {
                let v: Value = serde_json::from_str(k).unwrap_or(Value::Null);
                let parts: Vec<String> = v
                    .as_object()
                    .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                    .unwrap_or_default();
                s.push_str(&format!("[{}]", parts.join(",")));
            }
        }
    }
    s
}

/// Merges an apply configuration into a live object: maps per key, keyed lists per item,
/// everything else replaced. `null` values in the configuration are ignored.
pub fn merge_apply(live: &mut Value, config: &Value) {
    match (live, config) {
        (Value::Object(l), Value::Object(c)) => {
            for (k, cv) in c {
                if cv.is_null() {
                    continue;
                }
                match l.get_mut(k) {
                    Some(lv) => merge_apply(lv, cv),
                    None => {
                        l.insert(k.clone(), cv.clone());
                    }
                }
            }
        }
        (Value::Array(l), Value::Array(c))
            if is_keyed_list(c) && (l.is_empty() || is_keyed_list(l)) =>
        {
            for citem in c {
                let key = item_key(citem);
                match find_item(l, &key) {
                    Some(i) => merge_apply(&mut l[i], citem),
                    None => l.push(citem.clone()),
                }
            }
        }
        (live, config) => *live = config.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_v1_round_trip() {
        let obj = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "app", "image": "x", "args": ["a"]}]}
        });
        let set = FieldSet::from_object(&obj);
        let v1 = set.to_fields_v1();
        assert_eq!(v1["f:metadata"]["f:labels"]["f:a"], json!({}));
        let item = &v1["f:spec"]["f:containers"]["k:{\"name\":\"app\"}"];
        assert_eq!(item["."], json!({}));
        assert_eq!(item["f:image"], json!({}));
        assert_eq!(FieldSet::from_fields_v1(&v1), set);
    }

    #[test]
    fn paths_get_remove_and_print() {
        let mut obj = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b"}]}});
        let p = vec![
            PathElem::Field("spec".into()),
            PathElem::Field("containers".into()),
            PathElem::Key(item_key(&json!({"name": "a"}))),
            PathElem::Field("image".into()),
        ];
        assert_eq!(get_path(&obj, &p), Some(&json!("x")));
        assert_eq!(path_string(&p), ".spec.containers[name=\"a\"].image");
        remove_path(&mut obj, &p[..3]);
        assert_eq!(obj, json!({"spec": {"containers": [{"name": "b"}]}}));
    }

    #[test]
    fn lists_with_duplicate_names_are_atomic() {
        let mounts = [
            json!({"name": "cfg", "mountPath": "/a"}),
            json!({"name": "cfg", "mountPath": "/b"}),
        ];
        assert!(!is_keyed_list(&mounts));
        let mut live = json!({"m": mounts});
        merge_apply(
            &mut live,
            &json!({"m": [{"name": "cfg", "mountPath": "/c"}]}),
        );
        assert_eq!(live, json!({"m": [{"name": "cfg", "mountPath": "/c"}]}));
    }

    #[test]
    fn apply_merges_keyed_lists() {
        let mut live = json!({"c": [{"name": "a", "x": 1}], "l": [1, 2], "m": {"k": 1}});
        merge_apply(
            &mut live,
            &json!({"c": [{"name": "a", "y": 2}, {"name": "b"}], "l": [3], "m": {"j": 2}}),
        );
        assert_eq!(
            live,
            json!({"c": [{"name": "a", "x": 1, "y": 2}, {"name": "b"}], "l": [3], "m": {"k": 1, "j": 2}})
        );
    }
}
