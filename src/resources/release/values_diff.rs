//! Which value paths an upgrade changes, from the values a release runs with (its record) to the
//! ones the configuration makes, pure: `path: running -> planned` lines for the plan, so a `moved`,
//! an `import` or drift never hides a change to what runs behind an opaque hash.
//!
//! Paths are written as `set` names (`ipam.mode`, `annotations.foo\.io/x`, `list[1].name`), so a
//! line can be copied into `set`. Maps are compared key by key (an unset side as an empty map);
//! anything else (lists, scalars, a map replaced by a scalar) is one change, as Helm replaces it
//! whole. A value is shown as
//! `(sensitive)` when its path is, is under, or holds a sensitive path (from `set_sensitive`,
//! `set_wo`, or the record's own marking), or when a key on or under its path names a credential
//! (`password`, `token`, `secret`, `...key`): values set by hand in the cluster carry no marking.

use serde_json::Value as Json;

/// One step of a value path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// A value as the plan shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shown {
    /// Not set in the values (the chart's default applies).
    Unset,
    Sensitive,
    /// From a write-only input (`values_wo`): its value is never shown, not even masked.
    WriteOnly,
    /// Compact JSON (strings quoted), shortened when long.
    Value(String),
}

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shown::Unset => f.write_str("(unset)"),
            Shown::Sensitive => f.write_str("(sensitive)"),
            Shown::WriteOnly => f.write_str("(write-only)"),
            Shown::Value(v) => f.write_str(v),
        }
    }
}

/// One changed value path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueChange {
    pub path: String,
    pub running: Shown,
    pub planned: Shown,
}

impl std::fmt::Display for ValueChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} -> {}", self.path, self.running, self.planned)
    }
}

/// Value paths whose values are secret, as `set` names.
#[derive(Debug, Clone, Default)]
pub struct SensitivePaths(Vec<Vec<Step>>, Vec<Vec<Step>>);

impl SensitivePaths {
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> SensitivePaths {
        SensitivePaths(
            names.into_iter().filter_map(parse_path).collect(),
            Vec::new(),
        )
    }

    /// Adds the paths of every leaf of `doc` (a `values_wo` document) as write-only: shown as
    /// `(write-only)` on both sides, and sensitive too.
    pub fn with_write_only(mut self, doc: &Json) -> SensitivePaths {
        fn leaves(v: &Json, path: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
            match v {
                Json::Object(map) if !map.is_empty() => {
                    for (k, child) in map {
                        path.push(Step::Key(k.clone()));
                        leaves(child, path, out);
                        path.pop();
                    }
                }
                _ => out.push(path.clone()),
            }
        }
        let mut found = Vec::new();
        leaves(doc, &mut Vec::new(), &mut found);
        let found: Vec<Vec<Step>> = found.into_iter().filter(|p| !p.is_empty()).collect();
        self.0.extend(found.iter().cloned());
        self.1.extend(found);
        self
    }

    /// The `set` names of the write-only paths (for the release record's marking).
    pub fn write_only_names(&self) -> Vec<String> {
        self.1.iter().map(|p| render_path(p)).collect()
    }

    /// Whether `path` is, is under, or holds a write-only path.
    fn write_only(&self, path: &[Step]) -> bool {
        self.1.iter().any(|s| {
            let n = s.len().min(path.len());
            s[..n] == path[..n]
        })
    }

    /// Whether `path` is or is under a sensitive path.
    fn contains(&self, path: &[Step]) -> bool {
        self.0
            .iter()
            .any(|s| s.len() <= path.len() && s[..] == path[..s.len()])
    }

    /// Whether `path` is, is under, or holds a sensitive path.
    fn covers(&self, path: &[Step]) -> bool {
        self.0.iter().any(|s| {
            let n = s.len().min(path.len());
            s[..n] == path[..n]
        })
    }
}

/// A `set` name as steps (`\.` escapes a dot, `[n]` indexes); `None` when it is not one.
fn parse_path(name: &str) -> Option<Vec<Step>> {
    let mut steps = Vec::new();
    let mut key = String::new();
    let mut chars = name.chars();
    let flush = |key: &mut String, steps: &mut Vec<Step>| {
        if !key.is_empty() {
            steps.push(Step::Key(std::mem::take(key)));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\\' => key.extend(chars.next()),
            '.' => flush(&mut key, &mut steps),
            '[' => {
                flush(&mut key, &mut steps);
                let index: String = chars.by_ref().take_while(|c| *c != ']').collect();
                steps.push(Step::Index(index.parse().ok()?));
            }
            _ => key.push(c),
        }
    }
    flush(&mut key, &mut steps);
    (!steps.is_empty()).then_some(steps)
}

fn render_path(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&k.replace('.', "\\."));
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Key names that hold credentials in the charts users run (case-insensitive).
fn names_a_credential(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["password", "passwd", "secret", "token", "credential"]
        .iter()
        .any(|word| key.contains(word))
        || key.ends_with("key")
}

/// Whether a value holds a key that names a credential, at any depth.
fn holds_credential(value: &Json) -> bool {
    match value {
        Json::Object(map) => map
            .iter()
            .any(|(k, v)| names_a_credential(k) || holds_credential(v)),
        Json::Array(items) => items.iter().any(holds_credential),
        _ => false,
    }
}

/// A value left out of generated configuration because it is, or may be, a credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// The value path as a `set` name.
    pub path: String,
    /// The value is a string (so it goes back with `type = "string"`).
    pub string: bool,
}

/// `values` without what may be a credential, for generated configuration (`terraform query
/// -generate-config-out`): every non-empty string or number at a path that is or is under one of
/// `marked`, or under a key that names a credential (the rule the plan uses to hide values). What
/// is left out is returned by path, never by value; booleans, nulls and empty values stay (they
/// are no secret, and leaving them keeps the values the release runs with).
pub fn without_credentials(values: &Json, marked: &SensitivePaths) -> (Json, Vec<LeftOut>) {
    let mut left_out = Vec::new();
    let kept = strip(values, &mut Vec::new(), marked, &mut left_out);
    (kept.unwrap_or(Json::Null), left_out)
}

/// `value` at `path` with its credentials removed; `None` when nothing of it is kept.
fn strip(
    value: &Json,
    path: &mut Vec<Step>,
    marked: &SensitivePaths,
    left_out: &mut Vec<LeftOut>,
) -> Option<Json> {
    let secret_here =
        marked.contains(path) || matches!(path.last(), Some(Step::Key(k)) if names_a_credential(k));
    match value {
        Json::Object(map) => {
            let mut kept = serde_json::Map::new();
            for (k, v) in map {
                path.push(Step::Key(k.clone()));
                let child = match secret_here {
                    // Everything under a credential key is secret; recurse to name each leaf.
                    true => strip_all(v, path, left_out),
                    false => strip(v, path, marked, left_out),
                };
                path.pop();
                if let Some(child) = child {
                    kept.insert(k.clone(), child);
                }
            }
            (map.is_empty() || !kept.is_empty()).then_some(Json::Object(kept))
        }
        Json::Array(items) => {
            let mut kept = Vec::new();
            for (i, v) in items.iter().enumerate() {
                path.push(Step::Index(i));
                let child = match secret_here {
                    true => strip_all(v, path, left_out),
                    false => strip(v, path, marked, left_out),
                };
                path.pop();
                // An element left out keeps its place (null), so the indexes of the others hold.
                kept.push(child.unwrap_or(Json::Null));
            }
            Some(Json::Array(kept))
        }
        scalar if secret_here => strip_all(scalar, path, left_out),
        scalar => Some(scalar.clone()),
    }
}

/// `value` at `path`, all secret: every non-empty string or number is left out.
fn strip_all(value: &Json, path: &mut Vec<Step>, left_out: &mut Vec<LeftOut>) -> Option<Json> {
    match value {
        Json::String(s) if !s.is_empty() => {
            left_out.push(LeftOut {
                path: render_path(path),
                string: true,
            });
            None
        }
        Json::Number(_) => {
            left_out.push(LeftOut {
                path: render_path(path),
                string: false,
            });
            None
        }
        Json::Object(_) | Json::Array(_) => strip(
            value,
            path,
            &SensitivePaths(vec![path.clone()], Vec::new()),
            left_out,
        ),
        other => Some(other.clone()),
    }
}

/// Longest value shown in full; longer ones are cut (the path says where to look).
const MAX_SHOWN: usize = 120;

fn shown(value: Option<&Json>, secret: bool) -> Shown {
    match value {
        None | Some(Json::Null) => Shown::Unset,
        Some(_) if secret => Shown::Sensitive,
        Some(v) => {
            let text = v.to_string();
            match text.char_indices().nth(MAX_SHOWN) {
                Some((cut, _)) => Shown::Value(format!("{}...", &text[..cut])),
                None => Shown::Value(text),
            }
        }
    }
}

/// The changed value paths from `running` to `planned`, in path order.
pub fn value_changes(
    running: &Json,
    planned: &Json,
    sensitive: &SensitivePaths,
) -> Vec<ValueChange> {
    let mut out = Vec::new();
    walk(
        Some(running),
        Some(planned),
        &mut Vec::new(),
        sensitive,
        &mut out,
    );
    out
}

/// `Some(map)` of a map, `Some(None)` of an unset value, `None` of anything else.
fn as_map(v: Option<&Json>) -> Option<Option<&serde_json::Map<String, Json>>> {
    match v {
        Some(Json::Object(m)) => Some(Some(m)),
        None | Some(Json::Null) => Some(None),
        Some(_) => None,
    }
}

fn walk(
    running: Option<&Json>,
    planned: Option<&Json>,
    path: &mut Vec<Step>,
    sensitive: &SensitivePaths,
    out: &mut Vec<ValueChange>,
) {
    let unset = |v: Option<&Json>| v.is_none_or(Json::is_null);
    if running == planned || (unset(running) && unset(planned)) {
        return;
    }
    // Maps are compared key by key, an unset side as an empty map: each line is one leaf.
    if let (Some(a), Some(b)) = (as_map(running), as_map(planned)) {
        let keys: std::collections::BTreeSet<&String> = a
            .iter()
            .flat_map(|m| m.keys())
            .chain(b.iter().flat_map(|m| m.keys()))
            .collect();
        for key in keys {
            path.push(Step::Key(key.clone()));
            walk(
                a.and_then(|m| m.get(key)),
                b.and_then(|m| m.get(key)),
                path,
                sensitive,
                out,
            );
            path.pop();
        }
        return;
    }
    let secret = sensitive.covers(path)
        || path
            .iter()
            .any(|s| matches!(s, Step::Key(k) if names_a_credential(k)))
        || running.is_some_and(holds_credential)
        || planned.is_some_and(holds_credential);
    let show = |v: Option<&Json>| match sensitive.write_only(path) {
        true if !unset(v) => Shown::WriteOnly,
        _ => shown(v, secret),
    };
    out.push(ValueChange {
        path: render_path(path),
        running: show(running),
        planned: show(planned),
    });
}

/// At most this many lines are listed; the rest are counted.
const MAX_LINES: usize = 40;

/// The changes as indented lines, for a diagnostic.
pub fn lines(changes: &[ValueChange]) -> String {
    let mut text: Vec<String> = changes
        .iter()
        .take(MAX_LINES)
        .map(|c| format!("  {c}"))
        .collect();
    if changes.len() > MAX_LINES {
        text.push(format!("  ... and {} more", changes.len() - MAX_LINES));
    }
    text.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn changes(running: Json, planned: Json, sensitive: &[&str]) -> Vec<String> {
        value_changes(
            &running,
            &planned,
            &SensitivePaths::new(sensitive.iter().copied()),
        )
        .iter()
        .map(ToString::to_string)
        .collect()
    }

    #[test]
    fn each_changed_leaf_is_named_with_its_running_and_planned_value() {
        let running = json!({
            "k8sServiceHost": "localhost", "k8sServicePort": "7445",
            "ipam": {}, "hubble": {"relay": {"enabled": true}},
            "securityContext": {"capabilities": {"ciliumAgent": ["CHOWN", "SYS_MODULE"]}},
        });
        let planned = json!({
            "k8sServiceHost": "localhost", "k8sServicePort": 7445,
            "ipam": {"mode": "kubernetes"}, "hubble": {"relay": {"enabled": true}},
            "securityContext": {"capabilities": {"ciliumAgent": ["CHOWN"]}},
            "annotations": {"example.io/team": "net"},
        });
        assert_eq!(
            changes(running, planned, &[]),
            [
                r#"annotations.example\.io/team: (unset) -> "net""#,
                r#"ipam.mode: (unset) -> "kubernetes""#,
                r#"k8sServicePort: "7445" -> 7445"#,
                r#"securityContext.capabilities.ciliumAgent: ["CHOWN","SYS_MODULE"] -> ["CHOWN"]"#,
            ]
        );
    }

    #[test]
    fn nothing_is_listed_when_the_values_are_the_same() {
        let values = json!({"a": {"b": [1, 2]}, "c": null});
        assert!(changes(values.clone(), json!({"a": {"b": [1, 2]}}), &[]).is_empty());
        assert!(changes(json!({}), json!({"x": null}), &[]).is_empty());
    }

    #[test]
    fn write_only_keys_are_named_write_only_and_never_show_a_value() {
        let running = json!({"hubble": {"tls": {"key": "OLD-MARKER"}}, "debug": false});
        let planned = json!({"hubble": {"tls": {"key": "NEW-MARKER"}}, "debug": true});
        let paths = SensitivePaths::new([])
            .with_write_only(&json!({"hubble": {"tls": {"key": "NEW-MARKER"}}}));
        let lines: Vec<String> = value_changes(&running, &planned, &paths)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            lines,
            [
                "debug: false -> true",
                "hubble.tls.key: (write-only) -> (write-only)"
            ]
        );
        assert_eq!(paths.write_only_names(), ["hubble.tls.key"]);
    }

    #[test]
    fn sensitive_paths_and_credential_keys_never_show_their_values() {
        let running = json!({
            "auth": {"token": "old-token"}, "db": {"pass": "old-pass"},
            "tls": {"ca": {"key": "old-key"}}, "extra": {"config": "a"},
            "list": [{"name": "n", "pass": "p1"}],
        });
        let planned = json!({
            "auth": {"token": "new-token"}, "db": {"pass": "new-pass"},
            "tls": {"ca": {"key": "new-key"}}, "extra": "b",
            "list": [{"name": "n", "pass": "p2"}],
        });
        let found = changes(
            running,
            planned,
            &["db.pass", "extra.config.inner", "list[0].pass"],
        );
        assert_eq!(
            found,
            [
                "auth.token: (sensitive) -> (sensitive)",
                "db.pass: (sensitive) -> (sensitive)",
                "extra: (sensitive) -> (sensitive)",
                "list: (sensitive) -> (sensitive)",
                "tls.ca.key: (sensitive) -> (sensitive)",
            ]
        );
        let text = found.join("\n");
        for secret in [
            "old-token",
            "new-token",
            "old-pass",
            "new-pass",
            "old-key",
            "new-key",
            "p1",
            "p2",
        ] {
            assert!(!text.contains(secret), "{text}");
        }
        assert_eq!(
            changes(json!({}), json!({"password": "x"}), &[]),
            ["password: (unset) -> (sensitive)"]
        );
    }

    #[test]
    fn credentials_are_left_out_of_generated_values_by_path() {
        let values = json!({
            "replicaCount": 2,
            "auth": {"username": "app", "password": "hunter2", "enabled": true},
            "apiToken": 1234,
            "db": {"credentials": {"user": "u", "pass": "p"}},
            "extra": [{"name": "a", "secretValue": "s"}],
            "marked": {"value": "m", "other": "o"},
            "existingSecret": ""
        });
        let marked = SensitivePaths::new(["marked.value"]);
        let (kept, left_out) = without_credentials(&values, &marked);
        assert_eq!(
            kept,
            json!({
                "replicaCount": 2,
                "auth": {"username": "app", "enabled": true},
                "extra": [{"name": "a"}],
                "marked": {"other": "o"},
                "existingSecret": ""
            })
        );
        let paths: Vec<(&str, bool)> = left_out
            .iter()
            .map(|l| (l.path.as_str(), l.string))
            .collect();
        assert_eq!(
            paths,
            [
                ("apiToken", false),
                ("auth.password", true),
                ("db.credentials.pass", true),
                ("db.credentials.user", true),
                ("extra[0].secretValue", true),
                ("marked.value", true),
            ]
        );
        let text = serde_json::to_string(&kept).unwrap();
        for secret in ["hunter2", "1234", "\"u\"", "\"p\"", "\"s\"", "\"m\""] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
    }

    #[test]
    fn paths_are_written_as_set_names() {
        assert_eq!(
            changes(json!({}), json!({"podAnnotations": {"a.io/b": "c"}}), &[]),
            [r#"podAnnotations.a\.io/b: (unset) -> "c""#]
        );
        assert!(SensitivePaths::new(["a\\.io/b"]).covers(&[Step::Key("a.io/b".into())]));
        assert!(SensitivePaths::new(["l[1].x"]).covers(&[Step::Key("l".into())]));
        assert!(!SensitivePaths::new(["l[1].x"]).covers(&[Step::Key("m".into())]));
    }

    #[test]
    fn long_values_and_long_lists_of_changes_are_cut() {
        let long = "x".repeat(500);
        let found = changes(json!({}), json!({ "v": long }), &[]);
        assert!(
            found[0].len() < 160 && found[0].ends_with("..."),
            "{found:?}"
        );
        let many: serde_json::Map<String, Json> =
            (0..50).map(|i| (format!("k{i:02}"), json!(i))).collect();
        let all = value_changes(&json!({}), &Json::Object(many), &SensitivePaths::default());
        let text = lines(&all);
        assert_eq!(text.lines().count(), MAX_LINES + 1);
        assert!(text.ends_with("... and 10 more"), "{text}");
    }
}
