//! The schema model: what Terraform is told about the provider, its resources and data sources.
//!
//! Descriptions written here are the single source for the registry docs: keep them in markdown and
//! written for the user who reads `docs/resources/*.md`.

use std::collections::BTreeMap;

use crate::values::{Type, Value};

/// A versioned schema of a resource, data source or the provider block.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    /// Bumped when the stored state shape changes; `UpgradeResourceState` bridges old versions.
    pub version: i64,
    pub block: Block,
}

#[derive(Debug, Clone, Default)]
pub struct Block {
    pub attributes: Vec<Attribute>,
    pub blocks: Vec<NestedBlock>,
    pub description: String,
    pub deprecated: bool,
}

/// How a nested attribute or block repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nesting {
    Single,
    List,
    Set,
    Map,
    /// Like `Single`, but never null: absent means all attributes null (blocks only).
    Group,
}

#[derive(Debug, Clone)]
pub enum AttributeType {
    /// A plain cty type.
    Type(Type),
    /// Nested attributes (`attr = { ... }` syntax, protocol 6).
    Nested {
        nesting: Nesting,
        attributes: Vec<Attribute>,
    },
}

#[derive(Debug, Clone)]
pub struct Attribute {
    pub name: String,
    pub ty: AttributeType,
    pub description: String,
    pub required: bool,
    pub optional: bool,
    pub computed: bool,
    pub sensitive: bool,
    /// Never stored in state or plan (protocol 6.8+). The dispatcher nulls these before state is returned.
    pub write_only: bool,
    /// Deprecation message, shown by Terraform as a warning when the attribute is set.
    pub deprecated: Option<String>,
    /// A change of this attribute replaces the resource.
    pub requires_replace: bool,
}

#[derive(Debug, Clone)]
pub struct NestedBlock {
    pub type_name: String,
    pub block: Block,
    pub nesting: Nesting,
    pub min_items: i64,
    pub max_items: i64,
}

impl Attribute {
    fn new(name: &str, ty: Type, description: &str) -> Self {
        Self {
            name: name.to_owned(),
            ty: AttributeType::Type(ty),
            description: description.to_owned(),
            required: false,
            optional: false,
            computed: false,
            sensitive: false,
            write_only: false,
            deprecated: None,
            requires_replace: false,
        }
    }
    pub fn required(name: &str, ty: Type, description: &str) -> Self {
        Self {
            required: true,
            ..Self::new(name, ty, description)
        }
    }
    pub fn optional(name: &str, ty: Type, description: &str) -> Self {
        Self {
            optional: true,
            ..Self::new(name, ty, description)
        }
    }
    pub fn computed(name: &str, ty: Type, description: &str) -> Self {
        Self {
            computed: true,
            ..Self::new(name, ty, description)
        }
    }
    /// Optional and computed: the provider fills it in when the user leaves it out.
    pub fn optional_computed(name: &str, ty: Type, description: &str) -> Self {
        Self {
            optional: true,
            computed: true,
            ..Self::new(name, ty, description)
        }
    }
    pub fn nested(mut self, nesting: Nesting, attributes: Vec<Attribute>) -> Self {
        self.ty = AttributeType::Nested {
            nesting,
            attributes,
        };
        self
    }
    pub fn sensitive(mut self) -> Self {
        self.sensitive = true;
        self
    }
    pub fn write_only(mut self) -> Self {
        self.write_only = true;
        self
    }
    pub fn deprecated(mut self, message: &str) -> Self {
        self.deprecated = Some(message.to_owned());
        self
    }
    pub fn requires_replace(mut self) -> Self {
        self.requires_replace = true;
        self
    }

    /// The cty type of this attribute's value.
    pub fn value_type(&self) -> Type {
        match &self.ty {
            AttributeType::Type(ty) => ty.clone(),
            AttributeType::Nested {
                nesting,
                attributes,
            } => {
                let object = object_type(attributes, &[]);
                match nesting {
                    Nesting::Single | Nesting::Group => object,
                    Nesting::List => Type::list(object),
                    Nesting::Set => Type::set(object),
                    Nesting::Map => Type::map(object),
                }
            }
        }
    }
}

fn object_type(attributes: &[Attribute], blocks: &[NestedBlock]) -> Type {
    let mut types: BTreeMap<String, Type> = attributes
        .iter()
        .map(|a| (a.name.clone(), a.value_type()))
        .collect();
    for b in blocks {
        let inner = b.block.value_type();
        let ty = match b.nesting {
            Nesting::Single | Nesting::Group => inner,
            Nesting::List => Type::list(inner),
            Nesting::Set => Type::set(inner),
            Nesting::Map => Type::map(inner),
        };
        types.insert(b.type_name.clone(), ty);
    }
    Type::Object {
        attributes: types,
        optional: Vec::new(),
    }
}

impl Block {
    pub fn new(description: &str, attributes: Vec<Attribute>) -> Self {
        Self {
            attributes,
            blocks: Vec::new(),
            description: description.to_owned(),
            deprecated: false,
        }
    }

    /// The object type that config, plan and state values of this block have.
    pub fn value_type(&self) -> Type {
        object_type(&self.attributes, &self.blocks)
    }

    pub fn attribute(&self, name: &str) -> Option<&Attribute> {
        self.attributes.iter().find(|a| a.name == name)
    }
}

impl Schema {
    pub fn new(version: i64, block: Block) -> Self {
        Self { version, block }
    }
    pub fn value_type(&self) -> Type {
        self.block.value_type()
    }
}

/// Sets every write-only attribute (at any depth of nested single attributes) to null: write-only
/// values reach the provider in config only and must never be stored.
pub fn null_write_only(attributes: &[Attribute], value: &mut Value) {
    let Some(attrs) = value.attrs_mut() else {
        return;
    };
    for a in attributes {
        if a.write_only {
            attrs.insert(a.name.clone(), Value::Null);
            continue;
        }
        let (
            AttributeType::Nested {
                attributes: inner, ..
            },
            Some(v),
        ) = (&a.ty, attrs.get_mut(&a.name))
        else {
            continue;
        };
        match v {
            Value::List(items) | Value::Set(items) => items
                .iter_mut()
                .for_each(|item| null_write_only(inner, item)),
            Value::Map(items) => items
                .values_mut()
                .for_each(|item| null_write_only(inner, item)),
            object => null_write_only(inner, object),
        }
    }
}

/// Top-level write-only attributes set in `config`: only clients that announced write-only support
/// (Terraform/OpenTofu 1.11+) may set them; older ones would store the value in state.
pub fn write_only_set<'a>(attributes: &'a [Attribute], config: &Value) -> Vec<&'a Attribute> {
    attributes
        .iter()
        .filter(|a| a.write_only && config.attr(&a.name).is_some_and(|v| !v.is_null()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn write_only_values_are_nulled_at_any_depth() {
        let attributes = vec![
            Attribute::optional("token", Type::String, "").write_only(),
            Attribute::optional("inner", Type::Dynamic, "").nested(
                Nesting::Single,
                vec![Attribute::optional("key", Type::String, "").write_only()],
            ),
        ];
        let mut value = Value::Object(BTreeMap::from([
            ("token".into(), Value::from("s3cr3t")),
            (
                "inner".into(),
                Value::Object(BTreeMap::from([("key".into(), Value::from("k"))])),
            ),
        ]));
        null_write_only(&attributes, &mut value);
        assert_eq!(value.attr("token"), Some(&Value::Null));
        assert_eq!(
            value.attr("inner").and_then(|v| v.attr("key")),
            Some(&Value::Null)
        );
    }
}
