//! Plan helpers shared by resources (the equivalent of terraform-plugin-framework's plan modifiers):
//! defaults, "known after apply" for computed values, "these computed values become unknown when
//! these inputs change", and requires-replace-if. Terraform's proposed new state already keeps the
//! prior value of every computed attribute the configuration leaves unset ("use state for unknown"),
//! so a resource only declares what changes that.

use super::Block;
use crate::values::Value;

/// On create, Terraform proposes null for computed attributes the config leaves unset; they become
/// "known after apply". On update the proposal already carries prior values, which we keep.
pub fn mark_unset_computed_unknown(block: &Block, proposed: &mut Value, config: &Value) {
    let Some(attrs) = proposed.attrs_mut() else {
        return;
    };
    for a in block.attributes.iter().filter(|a| a.computed) {
        let set_in_config = config.attr(&a.name).is_some_and(|v| !v.is_null());
        let current = attrs.entry(a.name.clone()).or_default();
        if !set_in_config && current.is_null() {
            *current = Value::unknown();
        }
    }
}

/// Marks the listed computed attributes unknown (they will change on apply).
pub fn mark_unknown(proposed: &mut Value, names: &[&str]) {
    if let Some(attrs) = proposed.attrs_mut() {
        for name in names {
            attrs.insert((*name).to_owned(), Value::unknown());
        }
    }
}

/// Sets `name` to `default` when the configuration leaves it null (optional+computed attributes).
pub fn default_value(planned: &mut Value, config: &Value, name: &str, default: Value) {
    let set_in_config = config.attr(name).is_some_and(|v| !v.is_null());
    if let Some(attrs) = planned.attrs_mut() {
        if !set_in_config {
            attrs.insert(name.to_owned(), default);
        }
    }
}

/// The inputs (top-level attribute names) whose value differs between prior state and plan.
pub fn changed_inputs<'a>(prior: &Value, planned: &Value, inputs: &[&'a str]) -> Vec<&'a str> {
    if prior.is_null() {
        return Vec::new();
    }
    inputs
        .iter()
        .copied()
        .filter(|name| !same_value(prior.attr(name), planned.attr(name)))
        .collect()
}

/// When any of `inputs` changed since the prior state, the `computed` attributes become unknown
/// ("known after apply"); otherwise they keep their prior values. Returns whether they changed.
pub fn unknown_when_changed(
    prior: &Value,
    planned: &mut Value,
    inputs: &[&str],
    computed: &[&str],
) -> bool {
    let changed = !changed_inputs(prior, planned, inputs).is_empty();
    if changed {
        mark_unknown(planned, computed);
    }
    changed
}

/// Requires-replace-if: the paths of `inputs` that changed and for which `replace` says yes.
pub fn requires_replace_if(
    prior: &Value,
    planned: &Value,
    inputs: &[&str],
    replace: impl Fn(&str, Option<&Value>, Option<&Value>) -> bool,
) -> Vec<crate::values::AttributePath> {
    changed_inputs(prior, planned, inputs)
        .into_iter()
        .filter(|name| replace(name, prior.attr(name), planned.attr(name)))
        .map(crate::values::AttributePath::attr)
        .collect()
}

/// Equality as Terraform sees it: sets compare as sets, null equals an absent attribute.
pub fn same_value(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a.unwrap_or(&Value::Null), b.unwrap_or(&Value::Null)) {
        (Value::Set(x), Value::Set(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|i| y.iter().any(|j| same_value(Some(i), Some(j))))
        }
        (Value::Object(x), Value::Object(y)) | (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| same_value(Some(v), y.get(k)))
        }
        (Value::List(x), Value::List(y)) | (Value::Tuple(x), Value::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(i, j)| same_value(Some(i), Some(j)))
        }
        (x, y) => x == y,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::framework::Attribute;
    use crate::values::Type;

    #[test]
    fn computed_attributes_unset_in_config_become_unknown_on_create() {
        let block = Block::new(
            "",
            vec![
                Attribute::required("name", Type::String, ""),
                Attribute::computed("id", Type::String, ""),
                Attribute::optional_computed("namespace", Type::String, ""),
            ],
        );
        let config = Value::Object(BTreeMap::from([
            ("name".into(), Value::from("a")),
            ("id".into(), Value::Null),
            ("namespace".into(), Value::from("x")),
        ]));
        let mut proposed = config.clone();
        mark_unset_computed_unknown(&block, &mut proposed, &config);
        assert!(proposed.attr("id").is_some_and(Value::is_unknown));
        assert_eq!(proposed.attr("namespace"), Some(&Value::from("x")));
        assert_eq!(proposed.attr("name"), Some(&Value::from("a")));
    }

    #[test]
    fn sets_compare_as_sets_and_changes_mark_computed_unknown() {
        let prior = Value::Object(BTreeMap::from([
            ("tags".into(), Value::Set(vec!["a".into(), "b".into()])),
            ("version".into(), Value::from("1")),
            ("revision".into(), Value::int(3)),
        ]));
        let mut planned = prior.clone();
        planned
            .attrs_mut()
            .unwrap()
            .insert("tags".into(), Value::Set(vec!["b".into(), "a".into()]));
        assert!(!unknown_when_changed(
            &prior,
            &mut planned,
            &["tags", "version"],
            &["revision"]
        ));
        assert_eq!(planned.attr("revision"), Some(&Value::int(3)));
        planned
            .attrs_mut()
            .unwrap()
            .insert("version".into(), Value::from("2"));
        assert!(unknown_when_changed(
            &prior,
            &mut planned,
            &["tags", "version"],
            &["revision"]
        ));
        assert!(planned.attr("revision").is_some_and(Value::is_unknown));
        let replace = requires_replace_if(&prior, &planned, &["version"], |_, _, _| true);
        assert_eq!(replace, vec![crate::values::AttributePath::attr("version")]);
    }
}
