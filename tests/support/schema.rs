//! Value types from what a provider's schema *told* the client (as Terraform builds them), nested
//! attributes (a `cluster`) included.

use talosboot::protocol::proto as pb;
use talosboot::values::Type;

/// The type of an attribute as the schema describes it.
pub fn attribute_type(a: &pb::schema::Attribute) -> Type {
    use pb::schema::object::NestingMode;
    match &a.nested_type {
        None => Type::from_json_bytes(&a.r#type).expect("attribute type JSON"),
        Some(nested) => {
            let object = Type::object(
                nested
                    .attributes
                    .iter()
                    .map(|n| (n.name.clone(), attribute_type(n))),
            );
            match NestingMode::try_from(nested.nesting).expect("nesting") {
                NestingMode::List => Type::list(object),
                NestingMode::Set => Type::set(object),
                NestingMode::Map => Type::map(object),
                _ => object,
            }
        }
    }
}

/// The object type of a schema block's attributes.
pub fn block_type(block: &pb::schema::Block) -> Type {
    Type::object(
        block
            .attributes
            .iter()
            .map(|a| (a.name.clone(), attribute_type(a))),
    )
}
