//! Patch kinds other than apply: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and the
//! common subset of strategic merge patch.

use serde_json::Value;

use super::error::ApiError;
use super::fields::is_keyed_list;

/// A patch body, by `Content-Type`.
#[derive(Clone, Debug, PartialEq)]
pub enum Patch {
    /// `application/apply-patch+yaml`: server-side apply (needs a field manager).
    Apply(Value),
    /// `application/merge-patch+json`.
    Merge(Value),
    /// `application/json-patch+json`.
    Json(Value),
    /// `application/strategic-merge-patch+json` (built-in types only).
    Strategic(Value),
}

impl Patch {
    /// The patch type for a content type (parameters such as `; charset=utf-8` ignored).
    pub fn from_content_type(ct: &str, body: Value) -> Result<Patch, ApiError> {
        match ct.split(';').next().unwrap_or("").trim() {
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Ok(Patch::Apply(body))
            }
            "application/merge-patch+json" => Ok(Patch::Merge(body)),
            "application/json-patch+json" => Ok(Patch::Json(body)),
            "application/strategic-merge-patch+json" => Ok(Patch::Strategic(body)),
            other => Err(ApiError::unsupported_media_type(other)),
        }
    }
}

/// Applies a non-apply patch to a copy of `target`.
pub fn apply_patch(target: &Value, patch: &Patch) -> Result<Value, ApiError> {
    let mut out = target.clone();
    match patch {
        Patch::Merge(p) => json_patch::merge(&mut out, p),
        Patch::Json(p) => {
            let ops: json_patch::Patch = serde_json::from_value(p.clone())
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            json_patch::patch(&mut out, &ops).map_err(|e| {
                ApiError::new(
                    422,
                    "Invalid",
                    format!("the server rejected our request due to an error in our request: {e}"),
                )
            })?;
        }
        Patch::Strategic(p) => strategic_merge(&mut out, p),
        Patch::Apply(_) => {
            return Err(ApiError::internal(
                "apply patches go through server-side apply",
            ));
        }
    }
    Ok(out)
}

/// Strategic merge: maps merge (null deletes), lists of named objects merge by `name`
/// (`$patch: delete` on an item removes it, `$patch: replace` on a map replaces it), other lists
/// are replaced.
pub fn strategic_merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replaced = patch.clone();
        if let Some(m) = replaced.as_object_mut() {
            m.remove("$patch");
        }
        *target = replaced;
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let Some(t) = target.as_object_mut() else {
        return;
    };
    for (k, pv) in p {
        if k.starts_with("$") {
            continue;
        }
        match pv {
            Value::Null => {
                t.remove(k);
            }
            Value::Object(_) => strategic_merge(t.entry(k.clone()).or_insert(Value::Null), pv),
            Value::Array(items)
                if is_keyed_list(items)
                    && t.get(k)
                        .and_then(Value::as_array)
                        .is_some_and(|a| a.is_empty() || is_keyed_list(a)) =>
            {
                let Some(Value::Array(live)) = t.get_mut(k) else {
                    continue;
                };
                for item in items {
                    let name = item.get("name");
                    let pos = live.iter().position(|l| l.get("name") == name);
                    let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                    match (pos, delete) {
                        (Some(i), true) => {
                            live.remove(i);
                        }
                        (None, true) => {}
                        (Some(i), false) => strategic_merge(&mut live[i], item),
                        (None, false) => {
                            let mut fresh = Value::Null;
                            strategic_merge(&mut fresh, item);
                            live.push(fresh);
                        }
                    }
                }
            }
            other => {
                t.insert(k.clone(), other.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merges_named_lists() {
        let mut t =
            json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b"}], "x": 1}});
        strategic_merge(
            &mut t,
            &json!({"spec": {"containers": [{"name": "a", "image": "2"}, {"name": "b", "$patch": "delete"}, {"name": "c"}], "x": null}}),
        );
        assert_eq!(
            t,
            json!({"spec": {"containers": [{"name": "a", "image": "2"}, {"name": "c"}]}})
        );
    }

    #[test]
    fn json_patch_errors_are_422() {
        let e = apply_patch(
            &json!({}),
            &Patch::Json(json!([{"op": "remove", "path": "/x"}])),
        )
        .unwrap_err();
        assert_eq!(e.code, 422);
    }
}
