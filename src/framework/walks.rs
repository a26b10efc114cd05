//! The schema's walks for the dispatcher's safety nets, apart from the schema model
//! ([`super::schema`]). They apply at every depth: nested attributes (`attr = { ... }`) and nested
//! blocks, in every nesting mode. Paths point at the attribute; inside a set (whose elements have
//! no path step the framework can name) they stop at the set.

use std::collections::BTreeMap;

use super::schema::{Attribute, AttributeType, Block, NestedBlock, Nesting};
use crate::values::{AttributePath, PathStep, Value};

/// The attributes and nested blocks of one object level.
#[derive(Clone, Copy)]
struct Level<'a> {
    attributes: &'a [Attribute],
    blocks: &'a [NestedBlock],
}

/// One attribute or nested block of a level.
struct Node<'a> {
    name: &'a str,
    /// `None` for a nested block.
    attribute: Option<&'a Attribute>,
    /// How the node nests objects, and their level (nested attributes and blocks).
    nested: Option<(Nesting, Level<'a>)>,
    /// Deprecation message (blocks: a generic one).
    deprecated: Option<String>,
}

impl<'a> Level<'a> {
    fn of(block: &'a Block) -> Self {
        Level {
            attributes: &block.attributes,
            blocks: &block.blocks,
        }
    }

    fn nodes(self) -> impl Iterator<Item = Node<'a>> {
        let attributes = self.attributes.iter().map(|a| Node {
            name: &a.name,
            attribute: Some(a),
            nested: match &a.ty {
                AttributeType::Nested {
                    nesting,
                    attributes,
                } => Some((
                    *nesting,
                    Level {
                        attributes,
                        blocks: &[],
                    },
                )),
                AttributeType::Type(_) => None,
            },
            deprecated: a.deprecated.clone(),
        });
        let blocks = self.blocks.iter().map(|b| Node {
            name: &b.type_name,
            attribute: None,
            nested: Some((b.nesting, Level::of(&b.block))),
            deprecated: b
                .block
                .deprecated
                .then(|| format!("The `{}` block is deprecated.", b.type_name)),
        });
        attributes.chain(blocks)
    }

    fn has_requires_replace(self) -> bool {
        self.nodes().any(|n| {
            n.attribute
                .is_some_and(|a| a.requires_replace && !a.write_only)
                || n.nested
                    .is_some_and(|(_, inner)| inner.has_requires_replace())
        })
    }
}

/// A path that stops growing once it enters a set.
#[derive(Clone)]
struct Cursor {
    path: AttributePath,
    in_set: bool,
}

impl Cursor {
    fn root() -> Self {
        Cursor {
            path: AttributePath::root(),
            in_set: false,
        }
    }
    fn then(&self, step: PathStep) -> Self {
        let mut next = self.clone();
        if !self.in_set {
            next.path.steps.push(step);
        }
        next
    }
    fn entering_set(&self) -> Self {
        Cursor {
            in_set: true,
            ..self.clone()
        }
    }
}

/// The objects a nested node's value holds, with their cursors (null and unknown hold none).
fn elements<'v>(nesting: Nesting, value: &'v Value, at: &Cursor) -> Vec<(&'v Value, Cursor)> {
    match (nesting, value) {
        (Nesting::Single | Nesting::Group, v @ Value::Object(_)) => vec![(v, at.clone())],
        (Nesting::List, Value::List(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (v, at.then(PathStep::ElementKeyInt(i as i64))))
            .collect(),
        (Nesting::Set, Value::Set(items)) => items.iter().map(|v| (v, at.entering_set())).collect(),
        (Nesting::Map, Value::Map(items)) => items
            .iter()
            .map(|(k, v)| (v, at.then(PathStep::ElementKeyString(k.clone()))))
            .collect(),
        _ => Vec::new(),
    }
}

fn elements_mut(value: &mut Value) -> Vec<&mut Value> {
    match value {
        v @ Value::Object(_) => vec![v],
        Value::List(items) | Value::Set(items) => items.iter_mut().collect(),
        Value::Map(items) => items.values_mut().collect(),
        _ => Vec::new(),
    }
}

/// Sets every write-only attribute, at any depth of nested attributes and blocks, to null:
/// write-only values reach the provider in config only and must never be stored.
pub fn null_write_only(block: &Block, value: &mut Value) {
    null_write_only_at(Level::of(block), value);
}

fn null_write_only_at(level: Level<'_>, value: &mut Value) {
    let Some(attrs) = value.attrs_mut() else {
        return;
    };
    for node in level.nodes() {
        if node.attribute.is_some_and(|a| a.write_only) {
            attrs.insert(node.name.to_owned(), Value::Null);
            continue;
        }
        if let (Some((_, inner)), Some(v)) = (node.nested, attrs.get_mut(node.name)) {
            for element in elements_mut(v) {
                null_write_only_at(inner, element);
            }
        }
    }
}

/// The paths of write-only attributes set (non-null) in `config`, at any depth: only clients that
/// announced write-only support (Terraform/OpenTofu 1.11+) may set them; older ones would store the
/// value in state.
pub fn write_only_set(block: &Block, config: &Value) -> Vec<AttributePath> {
    collect_set(block, config, |node, at| {
        node.attribute
            .is_some_and(|a| a.write_only)
            .then(|| at.path.clone())
    })
}

/// The deprecated attributes and blocks set in `config`, at any depth, with their messages.
pub fn deprecated_set(block: &Block, config: &Value) -> Vec<(AttributePath, String)> {
    collect_set(block, config, |node, at| {
        let message = node.deprecated.as_ref()?;
        Some((at.path.clone(), message.clone()))
    })
}

/// What `pick` finds in the nodes set in `config`, at any depth.
fn collect_set<T>(
    block: &Block,
    config: &Value,
    pick: impl Fn(&Node<'_>, &Cursor) -> Option<T>,
) -> Vec<T> {
    let mut out = Vec::new();
    visit_set(
        Level::of(block),
        config,
        &Cursor::root(),
        &mut |node, _, at| {
            out.extend(pick(node, at));
        },
    );
    out
}

/// Calls `f` for every node whose value in `value` is set (not null), at any depth.
fn visit_set(
    level: Level<'_>,
    value: &Value,
    at: &Cursor,
    f: &mut dyn FnMut(&Node<'_>, &Value, &Cursor),
) {
    for node in level.nodes() {
        let Some(v) = value.attr(node.name).filter(|v| !v.is_null()) else {
            continue;
        };
        let here = at.then(PathStep::Attribute(node.name.to_owned()));
        f(&node, v, &here);
        if let Some((nesting, inner)) = node.nested {
            for (element, cursor) in elements(nesting, v, &here) {
                visit_set(inner, element, &cursor, f);
            }
        }
    }
}

/// On create (and whenever Terraform proposes null), computed attributes the config leaves unset
/// become "known after apply": at the top level and inside nested single objects (attributes and
/// single/group blocks). Values Terraform proposed (prior state on update) are kept.
pub fn mark_unset_computed_unknown(block: &Block, proposed: &mut Value, config: &Value) {
    mark_unset_computed_at(Level::of(block), proposed, config);
}

fn mark_unset_computed_at(level: Level<'_>, proposed: &mut Value, config: &Value) {
    let Some(attrs) = proposed.attrs_mut() else {
        return;
    };
    for node in level.nodes() {
        let in_config = config.attr(node.name).unwrap_or(&Value::Null);
        let current = attrs.entry(node.name.to_owned()).or_default();
        if node.attribute.is_some_and(|a| a.computed) && in_config.is_null() && current.is_null() {
            *current = Value::unknown();
            continue;
        }
        if let Some((Nesting::Single | Nesting::Group, inner)) = node.nested {
            mark_unset_computed_at(inner, current, in_config);
        }
    }
}

/// The paths whose change from `prior` to `planned` replaces the resource: attributes marked
/// requires-replace, at any depth. Sets are compared as sets: a set of nested objects replaces
/// when the requires-replace parts of its elements differ as a multiset (the path is the set's).
pub fn requires_replace(block: &Block, prior: &Value, planned: &Value) -> Vec<AttributePath> {
    let mut out = Vec::new();
    replace_at(
        Level::of(block),
        prior,
        planned,
        &AttributePath::root(),
        &mut out,
    );
    out
}

fn replace_at(
    level: Level<'_>,
    prior: &Value,
    planned: &Value,
    at: &AttributePath,
    out: &mut Vec<AttributePath>,
) {
    for node in level.nodes() {
        let path = at.clone().then_attr(node.name);
        let before = prior.attr(node.name).unwrap_or(&Value::Null);
        let after = planned.attr(node.name).unwrap_or(&Value::Null);
        // Write-only values are never in prior state: comparing them would replace every time.
        if node.attribute.is_some_and(|a| a.write_only) {
            continue;
        }
        if node.attribute.is_some_and(|a| a.requires_replace) {
            if before != after {
                out.push(path);
            }
            continue;
        }
        let Some((nesting, inner)) = node.nested else {
            continue;
        };
        if !inner.has_requires_replace() || after.is_unknown() {
            continue;
        }
        match nesting {
            Nesting::Single | Nesting::Group => replace_at(inner, before, after, &path, out),
            Nesting::List => {
                let (b, a) = (items(before), items(after));
                for i in 0..b.len().max(a.len()) {
                    let (x, y) = (
                        b.get(i).unwrap_or(&Value::Null),
                        a.get(i).unwrap_or(&Value::Null),
                    );
                    replace_at(inner, x, y, &path.clone().then_index(i as i64), out);
                }
            }
            Nesting::Map => {
                let (b, a) = (entries(before), entries(after));
                let keys: std::collections::BTreeSet<&String> = b.keys().chain(a.keys()).collect();
                for key in keys {
                    let x = b.get(key).unwrap_or(&Value::Null);
                    let y = a.get(key).unwrap_or(&Value::Null);
                    replace_at(inner, x, y, &path.clone().then_key(key.clone()), out);
                }
            }
            Nesting::Set => {
                let project = |v: &Value| {
                    Value::Set(
                        items(v)
                            .iter()
                            .map(|e| replace_projection(inner, e))
                            .collect(),
                    )
                };
                if project(before) != project(after) {
                    out.push(path);
                }
            }
        }
    }
}

/// The parts of an object that decide replacement (for comparing set elements as a whole).
fn replace_projection(level: Level<'_>, value: &Value) -> Value {
    let Value::Object(_) = value else {
        return value.clone();
    };
    let mut out = BTreeMap::new();
    for node in level.nodes() {
        let v = value.attr(node.name).unwrap_or(&Value::Null);
        if node
            .attribute
            .is_some_and(|a| a.requires_replace && !a.write_only)
        {
            out.insert(node.name.to_owned(), v.clone());
        } else if let Some((nesting, inner)) = node.nested {
            if inner.has_requires_replace() {
                let projected = match (nesting, v) {
                    (Nesting::List, Value::List(xs)) => {
                        Value::List(xs.iter().map(|x| replace_projection(inner, x)).collect())
                    }
                    (Nesting::Set, Value::Set(xs)) => {
                        Value::Set(xs.iter().map(|x| replace_projection(inner, x)).collect())
                    }
                    (Nesting::Map, Value::Map(xs)) => Value::Map(
                        xs.iter()
                            .map(|(k, x)| (k.clone(), replace_projection(inner, x)))
                            .collect(),
                    ),
                    (_, x) => replace_projection(inner, x),
                };
                out.insert(node.name.to_owned(), projected);
            }
        }
    }
    Value::Object(out)
}

fn items(value: &Value) -> &[Value] {
    match value {
        Value::List(items) | Value::Set(items) => items,
        _ => &[],
    }
}

fn entries(value: &Value) -> &BTreeMap<String, Value> {
    static EMPTY: BTreeMap<String, Value> = BTreeMap::new();
    match value {
        Value::Map(items) => items,
        _ => &EMPTY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::Type;

    #[test]
    fn nested_attributes_shape_the_object_type() {
        let block = Block::new(
            "",
            vec![
                Attribute::required("name", Type::String, ""),
                Attribute::optional("job", Type::Dynamic, "").nested(
                    Nesting::Single,
                    vec![Attribute::optional("env", Type::map(Type::String), "")],
                ),
            ],
        );
        let Type::Object { attributes, .. } = block.value_type() else {
            panic!("block type must be an object");
        };
        assert_eq!(attributes["name"], Type::String);
        assert_eq!(
            attributes["job"],
            Type::object([("env", Type::map(Type::String))])
        );
    }

    fn obj(pairs: &[(&str, Value)]) -> Value {
        Value::object(pairs.iter().cloned())
    }

    /// Top level, a nested single attribute, a list block and a set of nested attributes, each with
    /// a write-only, a deprecated, a computed and a requires-replace attribute.
    fn nested_schema() -> Block {
        let leaf = || {
            vec![
                Attribute::optional("name", Type::String, "").requires_replace(),
                Attribute::optional("key", Type::String, "").write_only(),
                Attribute::optional("old", Type::String, "").deprecated("use name"),
                Attribute::optional_computed("uid", Type::String, ""),
            ]
        };
        Block::new(
            "",
            vec![
                Attribute::optional("token", Type::String, "").write_only(),
                Attribute::optional("inner", Type::Dynamic, "").nested(Nesting::Single, leaf()),
                Attribute::optional("items", Type::Dynamic, "").nested(Nesting::Set, leaf()),
                Attribute::optional("tags", Type::set(Type::String), "").requires_replace(),
            ],
        )
        .with_blocks(vec![NestedBlock::new(
            "step",
            Nesting::List,
            Block::new("", leaf()),
        )])
    }

    fn leaf(name: &str, key: Value, old: Value) -> Value {
        obj(&[
            ("name", name.into()),
            ("key", key),
            ("old", old),
            ("uid", Value::Null),
        ])
    }

    fn config() -> Value {
        obj(&[
            ("token", "s3cr3t".into()),
            ("inner", leaf("a", "k1".into(), "o".into())),
            (
                "items",
                Value::Set(vec![
                    leaf("x", "k2".into(), Value::Null),
                    leaf("y", Value::Null, Value::Null),
                ]),
            ),
            ("tags", Value::Set(vec!["t1".into(), "t2".into()])),
            (
                "step",
                Value::List(vec![
                    leaf("s0", Value::Null, Value::Null),
                    leaf("s1", "k3".into(), "o".into()),
                ]),
            ),
        ])
    }

    #[test]
    fn write_only_values_are_nulled_in_nested_attributes_and_blocks() {
        let mut value = config();
        null_write_only(&nested_schema(), &mut value);
        assert_eq!(value.attr("token"), Some(&Value::Null));
        let printed = format!(
            "{:?}",
            crate::values::to_json(&value, &nested_schema().value_type()).map(String::from_utf8)
        );
        for secret in ["s3cr3t", "k1", "k2", "k3"] {
            assert!(!printed.contains(secret), "{secret} survived: {printed}");
        }
        assert!(printed.contains("s1"), "other values are kept: {printed}");
    }

    #[test]
    fn write_only_and_deprecated_values_are_found_with_nested_paths() {
        let paths: Vec<String> = write_only_set(&nested_schema(), &config())
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(paths, ["token", "inner.key", "items", "step[1].key"]);
        let deprecated: Vec<String> = deprecated_set(&nested_schema(), &config())
            .iter()
            .map(|(p, _)| p.to_string())
            .collect();
        assert_eq!(deprecated, ["inner.old", "step[1].old"]);
    }

    #[test]
    fn unset_computed_values_in_nested_single_objects_become_unknown() {
        let config = config();
        let mut proposed = config.clone();
        mark_unset_computed_unknown(&nested_schema(), &mut proposed, &config);
        let inner = proposed.attr("inner").expect("inner");
        assert!(inner.attr("uid").is_some_and(Value::is_unknown));
        assert_eq!(inner.attr("name"), Some(&Value::from("a")));
        // Not inside collections: their elements have no identity to keep a value for.
        let Some(Value::List(steps)) = proposed.attr("step") else {
            panic!("step list");
        };
        assert_eq!(steps[0].attr("uid"), Some(&Value::Null));
        // A value Terraform proposed (from prior state) is kept.
        let mut proposed = config.clone();
        if let Some(Value::Object(inner)) = proposed.attrs_mut().and_then(|a| a.get_mut("inner")) {
            inner.insert("uid".into(), "u-1".into());
        }
        mark_unset_computed_unknown(&nested_schema(), &mut proposed, &config);
        assert_eq!(
            proposed.attr("inner").and_then(|i| i.attr("uid")),
            Some(&Value::from("u-1"))
        );
    }

    fn replaced(prior: &Value, planned: &Value) -> Vec<String> {
        requires_replace(&nested_schema(), prior, planned)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn with(base: &Value, name: &str, value: Value) -> Value {
        let mut out = base.clone();
        if let Some(attrs) = out.attrs_mut() {
            attrs.insert(name.into(), value);
        }
        out
    }

    #[test]
    fn requires_replace_paths_are_nested_and_sets_compare_as_sets() {
        let prior = config();
        assert!(replaced(&prior, &prior).is_empty());
        // Reordered sets are the same set: no replacement.
        let reordered = with(
            &with(&prior, "tags", Value::Set(vec!["t2".into(), "t1".into()])),
            "items",
            Value::Set(vec![
                leaf("y", Value::Null, Value::Null),
                leaf("x", "other-write-only".into(), Value::Null),
            ]),
        );
        assert!(
            replaced(&prior, &reordered).is_empty(),
            "{:?}",
            replaced(&prior, &reordered)
        );
        let planned = with(
            &with(&prior, "inner", leaf("b", Value::Null, Value::Null)),
            "step",
            Value::List(vec![
                leaf("s0", Value::Null, Value::Null),
                leaf("s1-renamed", Value::Null, Value::Null),
                leaf("s2", Value::Null, Value::Null),
            ]),
        );
        assert_eq!(
            replaced(&prior, &planned),
            ["inner.name", "step[1].name", "step[2].name"]
        );
        let changed_set = with(
            &prior,
            "items",
            Value::Set(vec![
                leaf("x", Value::Null, Value::Null),
                leaf("z", Value::Null, Value::Null),
            ]),
        );
        assert_eq!(replaced(&prior, &changed_set), ["items"]);
        let changed_tags = with(&prior, "tags", Value::Set(vec!["t1".into()]));
        assert_eq!(replaced(&prior, &changed_tags), ["tags"]);
    }
}
