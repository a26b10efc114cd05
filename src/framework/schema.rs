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
    /// What is planned when the configuration leaves this optional+computed attribute null:
    /// applied by the dispatcher before the resource plans (terraform-plugin-framework's
    /// attribute `Default`). Top-level attributes only.
    pub default: Option<Value>,
    /// A change of this input updates the remote object in place (for a release: an upgrade).
    pub updates: bool,
    /// A computed attribute an in-place update changes: planned unknown when one is planned.
    pub changed_by_update: bool,
}

#[derive(Debug, Clone)]
pub struct NestedBlock {
    pub type_name: String,
    pub block: Block,
    pub nesting: Nesting,
    pub min_items: i64,
    pub max_items: i64,
}

impl NestedBlock {
    /// A nested block without item limits.
    pub fn new(type_name: &str, nesting: Nesting, block: Block) -> Self {
        Self {
            type_name: type_name.to_owned(),
            block,
            nesting,
            min_items: 0,
            max_items: 0,
        }
    }
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
            default: None,
            updates: false,
            changed_by_update: false,
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
    /// The value planned when the configuration leaves the attribute null (optional+computed).
    pub fn default(mut self, value: impl Into<Value>) -> Self {
        debug_assert!(
            self.optional && self.computed,
            "{}: a default needs optional+computed",
            self.name
        );
        self.default = Some(value.into());
        self
    }
    /// A change of this input updates the remote object in place.
    pub fn updates(mut self) -> Self {
        self.updates = true;
        self
    }
    /// A computed attribute an in-place update changes.
    pub fn changed_by_update(mut self) -> Self {
        self.changed_by_update = true;
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

    /// Adds nested blocks (`step { ... }` syntax).
    pub fn with_blocks(mut self, blocks: Vec<NestedBlock>) -> Self {
        self.blocks = blocks;
        self
    }

    /// The object type that config, plan and state values of this block have.
    pub fn value_type(&self) -> Type {
        object_type(&self.attributes, &self.blocks)
    }

    /// The top-level inputs whose change updates the remote object in place.
    pub fn update_inputs(&self) -> Vec<&str> {
        self.names(|a| a.updates)
    }

    /// The top-level computed attributes an in-place update changes.
    pub fn changed_by_update(&self) -> Vec<&str> {
        self.names(|a| a.changed_by_update)
    }

    fn names(&self, pick: impl Fn(&Attribute) -> bool) -> Vec<&str> {
        self.attributes
            .iter()
            .filter(|a| pick(a))
            .map(|a| a.name.as_str())
            .collect()
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
