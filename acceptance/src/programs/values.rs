//! Helm-style values: `--set` expressions (`a.b=c`, `a[0]=x`, `a={x,y}`, `a=1,b=2`, `\,`
//! escapes, typed scalars), `--set-string`, YAML values files, deep merge, dotted lookup.

use serde_json::{Map, Value, json};

#[derive(Debug, thiserror::Error)]
pub enum ValuesError {
    #[error("failed parsing --set data: key \"{0}\" has no value")]
    NoValue(String),
    #[error("failed to parse {file}: error converting YAML to JSON: {message}")]
    Yaml { file: String, message: String },
}

/// Applies one `--set` (or `--set-string` when `strings`) argument to `values`.
pub fn apply_set(values: &mut Value, arg: &str, strings: bool) -> Result<(), ValuesError> {
    for assignment in split_top(arg, ',') {
        let Some((key, raw)) = assignment.split_once('=') else {
            return Err(ValuesError::NoValue(assignment));
        };
        let value = if raw.starts_with('{') && raw.ends_with('}') {
            let inner = &raw[1..raw.len() - 1];
            json!(
                split_top(inner, ',')
                    .iter()
                    .map(|v| typed(v, strings))
                    .collect::<Vec<_>>()
            )
        } else {
            typed(raw, strings)
        };
        set_path(values, key, value);
    }
    Ok(())
}

/// Splits on `sep` outside `{...}`, honouring `\` escapes.
fn split_top(s: &str, sep: char) -> Vec<String> {
    let (mut out, mut cur, mut depth, mut esc) = (Vec::new(), String::new(), 0i32, false);
    for c in s.chars() {
        match c {
            _ if esc => {
                cur.push(c);
                esc = false;
            }
            '\\' => esc = true,
            '{' => {
                depth += 1;
                cur.push(c);
            }
            '}' => {
                depth -= 1;
                cur.push(c);
            }
            c if c == sep && depth == 0 => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    if !cur.is_empty() || !out.is_empty() {
        out.push(cur);
    }
    out
}

fn typed(raw: &str, strings: bool) -> Value {
    if strings {
        return json!(raw);
    }
    match raw {
        "true" => json!(true),
        "false" => json!(false),
        "null" => Value::Null,
        _ => raw
            .parse::<i64>()
            .map(|n| json!(n))
            .unwrap_or_else(|_| json!(raw)),
    }
}

/// Sets `a.b[1].c` in `values`, creating maps and lists on the way.
pub fn set_path(values: &mut Value, key: &str, value: Value) {
    let mut cur = values;
    let parts: Vec<&str> = key.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let (name, index) = match part.split_once('[') {
            Some((n, rest)) => (n, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (*part, None),
        };
        if !cur.is_object() {
            *cur = json!({});
        }
        let last = i + 1 == parts.len();
        let slot = cur
            .as_object_mut()
            .map(|m| m.entry(name.to_string()).or_insert(Value::Null));
        let Some(slot) = slot else { return };
        cur = match index {
            Some(idx) => {
                if !slot.is_array() {
                    *slot = json!([]);
                }
                let Some(list) = slot.as_array_mut() else {
                    return;
                };
                while list.len() <= idx {
                    list.push(Value::Null);
                }
                &mut list[idx]
            }
            None => slot,
        };
        if last {
            *cur = value;
            return;
        }
    }
}

/// Deep-merges `over` into `base` (maps merge, everything else is replaced).
pub fn merge(base: &mut Value, over: &Value) {
    match (base.as_object_mut(), over.as_object()) {
        (Some(b), Some(o)) => {
            for (k, v) in o {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        _ => *base = over.clone(),
    }
}

/// The value at a dotted path (`cgroup.autoMount.enabled`).
pub fn get<'a>(values: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(values, |v, k| v.get(k))
}

/// Parses a values file (YAML; an empty file is `{}`).
pub fn from_yaml(file: &str, text: &str) -> Result<Value, ValuesError> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    let v: Value = serde_saphyr::from_str(text).map_err(|e| ValuesError::Yaml {
        file: file.into(),
        message: e.to_string(),
    })?;
    Ok(if v.is_null() { json!({}) } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_set_like_helm() {
        let mut v = json!({});
        apply_set(&mut v, "a.b=1,c=true", false).unwrap();
        apply_set(&mut v, "caps={CHOWN,KILL}", false).unwrap();
        apply_set(&mut v, "l[1]=x", false).unwrap();
        apply_set(&mut v, "s=a\\,b", false).unwrap();
        assert_eq!(
            v,
            json!({"a": {"b": 1}, "c": true, "caps": ["CHOWN", "KILL"], "l": [null, "x"], "s": "a,b"})
        );
        assert_eq!(get(&v, "a.b"), Some(&json!(1)));
        let y = from_yaml(
            "f",
            "k8sServiceHost: localhost\ncgroup:\n  autoMount:\n    enabled: false\n",
        )
        .unwrap();
        assert_eq!(get(&y, "cgroup.autoMount.enabled"), Some(&json!(false)));
    }
}
