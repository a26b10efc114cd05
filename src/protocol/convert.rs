//! Conversions at the protocol edge: prost types <-> framework types. Nothing outside `protocol`
//! sees a prost type.

use super::proto as pb;
use crate::framework::{
    Attribute, AttributeType, Block, ClientCapabilities, Diagnostic, Diagnostics, ForImport,
    IdentitySchema, NestedBlock, Nesting, Schema, Severity,
};
use crate::values::{AttributePath, PathStep, Type, Value, from_json, from_msgpack, to_msgpack};

/// Decodes a DynamicValue (msgpack preferred, JSON accepted); an absent value is null.
pub fn decode(
    value: Option<&pb::DynamicValue>,
    ty: &Type,
    what: &str,
) -> Result<Value, Diagnostic> {
    let Some(value) = value else {
        return Ok(Value::Null);
    };
    let decoded = if !value.msgpack.is_empty() {
        from_msgpack(&value.msgpack, ty).map_err(|e| (e.to_string(), e.path().clone()))
    } else if !value.json.is_empty() {
        from_json(&value.json, ty).map_err(|e| (e.to_string(), e.path().clone()))
    } else {
        Ok(Value::Null)
    };
    decoded.map_err(|(e, path)| {
        let d = Diagnostic::error(
            format!("Failed to decode the {what}"),
            format!("OpenTofu/Terraform sent a value this provider could not decode: {e}. This usually means the CLI and the provider disagree on the schema; run `tofu init -upgrade` (or `terraform init -upgrade`)."),
        );
        if path.is_root() { d } else { d.at(path) }
    })
}

/// The capabilities a request announced; none when the client predates them (Terraform < 1.9).
pub fn capabilities_of(capabilities: Option<pb::ClientCapabilities>) -> ClientCapabilities {
    capabilities.map_or_else(ClientCapabilities::default, |c| ClientCapabilities {
        deferral_allowed: c.deferral_allowed,
        write_only_attributes_allowed: c.write_only_attributes_allowed,
    })
}

pub fn encode(value: &Value, ty: &Type, what: &str) -> Result<pb::DynamicValue, Diagnostic> {
    to_msgpack(value, ty)
        .map(|msgpack| pb::DynamicValue {
            msgpack,
            json: Vec::new(),
        })
        .map_err(|e| {
            Diagnostic::error(
                format!("Failed to encode the {what}"),
                format!("{e}. This is a bug in the provider; please report it."),
            )
        })
}

pub fn path_to_proto(path: &AttributePath) -> pb::AttributePath {
    use pb::attribute_path::step::Selector;
    pb::AttributePath {
        steps: path
            .steps
            .iter()
            .map(|s| pb::attribute_path::Step {
                selector: Some(match s {
                    PathStep::Attribute(n) => Selector::AttributeName(n.clone()),
                    PathStep::ElementKeyString(k) => Selector::ElementKeyString(k.clone()),
                    PathStep::ElementKeyInt(i) => Selector::ElementKeyInt(*i),
                }),
            })
            .collect(),
    }
}

pub fn diagnostics(diagnostics: Diagnostics) -> Vec<pb::Diagnostic> {
    diagnostics.into_iter().map(diagnostic).collect()
}

pub fn diagnostic(d: Diagnostic) -> pb::Diagnostic {
    pb::Diagnostic {
        severity: match d.severity {
            Severity::Error => pb::diagnostic::Severity::Error,
            Severity::Warning => pb::diagnostic::Severity::Warning,
        } as i32,
        summary: d.summary,
        detail: d.detail,
        attribute: d.attribute.as_ref().map(path_to_proto),
    }
}

pub fn schema(schema: &Schema) -> pb::Schema {
    pb::Schema {
        version: schema.version,
        block: Some(block(&schema.block, schema.version)),
    }
}

fn block(b: &Block, version: i64) -> pb::schema::Block {
    pb::schema::Block {
        version,
        attributes: b.attributes.iter().map(attribute).collect(),
        block_types: b.blocks.iter().map(nested_block).collect(),
        description: b.description.clone(),
        description_kind: pb::StringKind::Markdown as i32,
        deprecated: b.deprecated,
        ..Default::default()
    }
}

fn nested_block(b: &NestedBlock) -> pb::schema::NestedBlock {
    use pb::schema::nested_block::NestingMode as M;
    pb::schema::NestedBlock {
        type_name: b.type_name.clone(),
        block: Some(block(&b.block, 0)),
        nesting: match b.nesting {
            Nesting::Single => M::Single,
            Nesting::List => M::List,
            Nesting::Set => M::Set,
            Nesting::Map => M::Map,
            Nesting::Group => M::Group,
        } as i32,
        min_items: b.min_items,
        max_items: b.max_items,
    }
}

fn attribute(a: &Attribute) -> pb::schema::Attribute {
    use pb::schema::object::NestingMode as M;
    let (ty, nested_type) = match &a.ty {
        AttributeType::Type(ty) => (ty.to_json_bytes(), None),
        AttributeType::Nested {
            nesting,
            attributes,
        } => (
            Vec::new(),
            Some(pb::schema::Object {
                attributes: attributes.iter().map(attribute).collect(),
                nesting: match nesting {
                    Nesting::Single | Nesting::Group => M::Single,
                    Nesting::List => M::List,
                    Nesting::Set => M::Set,
                    Nesting::Map => M::Map,
                } as i32,
                ..Default::default()
            }),
        ),
    };
    let mut description = a.description.clone();
    if let Some(message) = &a.deprecated {
        description = format!("**Deprecated**: {message} {description}");
    }
    pb::schema::Attribute {
        name: a.name.clone(),
        r#type: ty,
        nested_type,
        description,
        required: a.required,
        optional: a.optional,
        computed: a.computed,
        sensitive: a.sensitive,
        description_kind: pb::StringKind::Markdown as i32,
        deprecated: a.deprecated.is_some(),
        write_only: a.write_only,
        // 6.11 clients show this instead of a generic warning; older ones read the description.
        deprecation_message: a.deprecated.clone().unwrap_or_default(),
    }
}

/// A resource's identity schema (GetResourceIdentitySchemas).
pub fn identity_schema(schema: &IdentitySchema) -> pb::ResourceIdentitySchema {
    use pb::resource_identity_schema::IdentityAttribute;
    pb::ResourceIdentitySchema {
        version: schema.version,
        identity_attributes: schema
            .attributes
            .iter()
            .map(|a| IdentityAttribute {
                name: a.name.to_owned(),
                r#type: Type::String.to_json_bytes(),
                required_for_import: a.for_import == ForImport::Required,
                optional_for_import: a.for_import == ForImport::Optional,
                description: a.description.to_owned(),
            })
            .collect(),
    }
}

/// Identity data as the protocol carries it, or why it cannot be encoded.
pub fn identity_data(identity: &Value, ty: &Type) -> Result<pb::ResourceIdentityData, Diagnostic> {
    encode(identity, ty, "identity").map(|v| pb::ResourceIdentityData {
        identity_data: Some(v),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_capabilities_are_decoded_and_absent_means_none() {
        let caps = capabilities_of(Some(pb::ClientCapabilities {
            deferral_allowed: true,
            write_only_attributes_allowed: false,
            ..Default::default()
        }));
        assert!(caps.deferral_allowed && !caps.write_only_attributes_allowed);
        assert_eq!(capabilities_of(None), ClientCapabilities::default());
    }
}
