//! Plan helpers shared by resources (the equivalent of terraform-plugin-framework's plan modifiers):
//! the defaults declared on attributes, "known after apply" for computed values, which inputs
//! changed, and the planned object with its write-only values for apply. Terraform's proposed new state already keeps the
//! prior value of every computed attribute the configuration leaves unset ("use state for unknown"),
//! so a resource only declares what changes that.

use super::Block;
use crate::values::Value;

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

/// The defaults the schema declares ([`super::Attribute::default`]), planned for every attribute
/// the configuration leaves null. The dispatcher applies them before a resource plans; import
/// and move apply them to a state made from nothing (`config` null).
pub fn apply_defaults(block: &Block, planned: &mut Value, config: &Value) {
    for a in &block.attributes {
        if let Some(default) = &a.default {
            default_value(planned, config, &a.name, default.clone());
        }
    }
}

/// The planned object with the configuration's write-only attributes (those with a write-only
/// value anywhere inside) put back: what apply decodes, since plans never carry write-only values.
pub fn with_write_only(block: &Block, planned: &Value, config: &Value) -> Value {
    let mut out = planned.clone();
    if let Some(attrs) = out.attrs_mut() {
        for a in block.attributes.iter().filter(|a| has_write_only(a)) {
            attrs.insert(
                a.name.clone(),
                config.attr(&a.name).cloned().unwrap_or_default(),
            );
        }
    }
    out
}

fn has_write_only(a: &super::Attribute) -> bool {
    a.write_only
        || match &a.ty {
            super::AttributeType::Nested { attributes, .. } => {
                attributes.iter().any(has_write_only)
            }
            super::AttributeType::Type(_) => false,
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

/// A configuration for the object `state` describes (GenerateResourceConfig's default): every
/// top-level attribute the configuration cannot set (computed-only) null, write-only and
/// deprecated ones null (as terraform-plugin-framework generates), and those at their declared
/// default null too (the default applies: generated configuration
/// says only what differs); the rest as the state has it.
pub fn config_of_state(block: &Block, state: &Value) -> Value {
    let mut config = state.clone();
    if let Some(attrs) = config.attrs_mut() {
        for a in &block.attributes {
            let settable = a.required || a.optional;
            let at_default = a.default.is_some() && attrs.get(&a.name) == a.default.as_ref();
            let deprecated = a.deprecated.is_some();
            if !settable || a.write_only || deprecated || (at_default && !a.required) {
                attrs.insert(a.name.clone(), Value::Null);
            }
        }
    }
    config
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::framework::Attribute;
    use crate::values::Type;

    #[test]
    fn declared_defaults_fill_what_the_configuration_leaves_null() {
        let block = Block::new(
            "",
            vec![
                Attribute::optional_computed("namespace", Type::String, "").default("default"),
                Attribute::optional_computed("wait", Type::Bool, "").default(true),
                Attribute::optional("set_wo", Type::String, "").write_only(),
            ],
        );
        let config = Value::Object(BTreeMap::from([
            ("namespace".into(), Value::from("x")),
            ("wait".into(), Value::Null),
            ("set_wo".into(), Value::from("secret")),
        ]));
        let mut planned = config.clone();
        planned
            .attrs_mut()
            .unwrap()
            .insert("set_wo".into(), Value::Null);
        apply_defaults(&block, &mut planned, &config);
        assert_eq!(planned.attr("namespace"), Some(&Value::from("x")));
        assert_eq!(planned.attr("wait"), Some(&Value::from(true)));
        let decoded = with_write_only(&block, &planned, &config);
        assert_eq!(decoded.attr("set_wo"), Some(&Value::from("secret")));
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
        assert!(changed_inputs(&prior, &planned, &["tags", "version"]).is_empty());
        assert_eq!(planned.attr("revision"), Some(&Value::int(3)));
        planned
            .attrs_mut()
            .unwrap()
            .insert("version".into(), Value::from("2"));
        assert_eq!(
            changed_inputs(&prior, &planned, &["tags", "version"]),
            vec!["version"]
        );
        mark_unknown(&mut planned, &["revision"]);
        assert!(planned.attr("revision").is_some_and(Value::is_unknown));
    }
}
