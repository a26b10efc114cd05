//! Helm values as `helm` builds them from `-f` documents and `--set` flags, computed natively so
//! the provider knows at plan time exactly which values a release will record (and hashes them to
//! see drift): documents merge map by map (later wins, lists and scalars are replaced), `--set`
//! paths use dots (`\.` escapes one) and `[n]` indexes, and values are typed as `--set` types them.

use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

/// One `set` entry (`helm_release`'s `{name, value, type}`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
pub struct SetValue {
    /// `None` only while not known yet (validate and plan, e.g. a name built from a variable);
    /// the configuration at apply always has it (the attribute is required).
    pub name: Option<String>,
    /// `None` in plans and state for write-only entries (`set_wo`), and while not known yet: only
    /// the configuration at apply has it.
    pub value: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
}

/// The values a release installs, as Helm builds them from its inputs: `base` (e.g. chart-specific
/// defaults), then each `values` document, then `set`; and apart, for the Secret, the sensitive
/// entries: the write-only documents (`values_wo`), then the sensitive `set` entries. Returns
/// (plain, sensitive).
pub fn values_parts<'a>(
    base: Json,
    values: Option<&[String]>,
    set: Option<&[SetValue]>,
    secret_docs: &[String],
    sensitive: impl IntoIterator<Item = &'a SetValue>,
) -> Result<(Json, Json), String> {
    let mut plain = base;
    for (i, doc) in values.into_iter().flatten().enumerate() {
        let v = parse_values(doc).map_err(|e| format!("values[{i}]: {e}"))?;
        merge(&mut plain, &v);
    }
    for s in set.into_iter().flatten() {
        apply_set(&mut plain, s)?;
    }
    let mut secret = json!({});
    for (i, doc) in secret_docs.iter().enumerate() {
        let v = parse_values(doc).map_err(|e| format!("values_wo[{i}]: {e}"))?;
        merge(&mut secret, &v);
    }
    for s in sensitive {
        apply_set(&mut secret, s)?;
    }
    Ok((plain, secret))
}

/// Plain and sensitive values merged: what the release records as its values.
pub fn merged((mut plain, sensitive): (Json, Json)) -> Json {
    merge(&mut plain, &sensitive);
    plain
}

/// Helm's coalescing of user values: maps merge, everything else is replaced by the later value.
pub fn merge(base: &mut Json, over: &Json) {
    match (base.as_object_mut(), over.as_object()) {
        (Some(b), Some(o)) => {
            for (k, v) in o {
                merge(b.entry(k.clone()).or_insert(Json::Null), v);
            }
        }
        _ => *base = over.clone(),
    }
}

/// A values document: YAML (JSON is YAML too); empty is `{}`. Errors give the position only, never
/// the text (values can hold secrets).
pub fn parse_values(doc: &str) -> Result<Json, String> {
    if doc.trim().is_empty() {
        return Ok(json!({}));
    }
    let v: Json = serde_saphyr::from_str(doc).map_err(|e| match e.location() {
        Some(at) => format!(
            "not a valid YAML document (line {}, column {})",
            at.line(),
            at.column()
        ),
        None => "not a valid YAML document".to_owned(),
    })?;
    match v {
        Json::Null => Ok(json!({})),
        Json::Object(_) => Ok(v),
        _ => Err("not a YAML mapping of values (key: value)".into()),
    }
}

/// One `--set` assignment: dotted path (`\.` escapes a dot, `[n]` indexes a list).
pub fn apply_set(values: &mut Json, s: &SetValue) -> Result<(), String> {
    let Some(name) = s.name.as_deref() else {
        return Err("a `set` entry's name is not known yet".into());
    };
    let value = match s.kind.as_deref().unwrap_or("auto") {
        "string" => Json::String(s.value.clone().unwrap_or_default()),
        "auto" => typed_value(s.value.as_deref().unwrap_or_default()),
        other => {
            return Err(format!(
                "set {name:?}: type must be `auto` or `string`, not {other:?}"
            ));
        }
    };
    let path = split_path(name).map_err(|e| format!("set {name:?}: {e}"))?;
    let mut cur = values;
    for (i, step) in path.iter().enumerate() {
        let last = i + 1 == path.len();
        cur = match step {
            PathPart::Key(k) => {
                if !cur.is_object() {
                    *cur = json!({});
                }
                let map = cur.as_object_mut().expect("made an object");
                if last {
                    map.insert(k.clone(), value);
                    return Ok(());
                }
                map.entry(k.clone()).or_insert(Json::Null)
            }
            PathPart::Index(n) => {
                if !cur.is_array() {
                    *cur = json!([]);
                }
                let list = cur.as_array_mut().expect("made a list");
                if list.len() <= *n {
                    list.resize(*n + 1, Json::Null);
                }
                if last {
                    list[*n] = value;
                    return Ok(());
                }
                &mut list[*n]
            }
        };
    }
    Ok(())
}

#[derive(Debug, PartialEq)]
enum PathPart {
    Key(String),
    Index(usize),
}

fn split_path(name: &str) -> Result<Vec<PathPart>, String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => cur.extend(chars.next()),
            '.' => {
                if !cur.is_empty() {
                    parts.push(PathPart::Key(std::mem::take(&mut cur)));
                }
            }
            '[' => {
                if !cur.is_empty() {
                    parts.push(PathPart::Key(std::mem::take(&mut cur)));
                }
                let index: String = chars.by_ref().take_while(|c| *c != ']').collect();
                let n = index
                    .parse()
                    .map_err(|_| format!("[{index}] is not a list index"))?;
                parts.push(PathPart::Index(n));
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        parts.push(PathPart::Key(cur));
    }
    if parts.is_empty() {
        return Err("empty name".into());
    }
    Ok(parts)
}

/// `--set` typing: `true`/`false`, integers, `null`, `{a,b}` lists, else a string.
fn typed_value(raw: &str) -> Json {
    if let Some(inner) = raw.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
        return Json::Array(
            inner
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|s| typed_value(s.trim()))
                .collect(),
        );
    }
    match raw {
        "true" => Json::Bool(true),
        "false" => Json::Bool(false),
        "null" => Json::Null,
        _ => raw
            .parse::<i64>()
            .map(Json::from)
            .unwrap_or_else(|_| Json::String(raw.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_follows_helm_typing_and_paths() {
        let mut v = json!({});
        let set = |name: &str, value: &str, kind: Option<&str>| SetValue {
            name: Some(name.into()),
            value: Some(value.into()),
            kind: kind.map(Into::into),
        };
        apply_set(&mut v, &set("a.b", "true", None)).expect("set");
        apply_set(&mut v, &set("a.c", "12", Some("string"))).expect("set");
        apply_set(&mut v, &set("caps", "{NET_ADMIN,SYS_ADMIN}", None)).expect("set");
        apply_set(&mut v, &set("annotations.foo\\.io/x", "y", None)).expect("set");
        apply_set(&mut v, &set("list[1].name", "n", None)).expect("set");
        assert_eq!(v["a"]["b"], json!(true));
        assert_eq!(v["a"]["c"], json!("12"));
        assert_eq!(v["caps"], json!(["NET_ADMIN", "SYS_ADMIN"]));
        assert_eq!(v["annotations"]["foo.io/x"], json!("y"));
        assert_eq!(v["list"][1]["name"], json!("n"));
        assert!(apply_set(&mut v, &set("x", "1", Some("number"))).is_err());
    }
}
