//! Plan helpers shared by resources (the equivalent of terraform-plugin-framework's plan modifiers).

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
}
