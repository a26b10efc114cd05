//! Fuzzing support for the provider's cty codecs.
//!
//! The codec module is compiled in directly from the provider's source tree: it depends only on
//! `rmp`, `serde_json` and `thiserror`, so fuzzing does not build kube, tonic and rustls under
//! sanitizers.

#[path = "../../src/values/mod.rs"]
pub mod values;

use values::Type;

/// Schemas the fuzz targets decode against; the first input byte picks one.
pub fn schemas() -> Vec<Type> {
    let job = Type::object([
        ("name", Type::String),
        ("namespace", Type::String),
        ("timeout_seconds", Type::Number),
        ("env", Type::map(Type::String)),
        ("args", Type::list(Type::String)),
        ("wait", Type::Bool),
    ]);
    let resource = Type::Object {
        attributes: [
            ("id".to_string(), Type::String),
            ("values".to_string(), Type::Dynamic),
            ("jobs".to_string(), Type::list(job.clone())),
            ("labels".to_string(), Type::set(Type::String)),
            (
                "pair".to_string(),
                Type::Tuple(vec![Type::Number, Type::Dynamic]),
            ),
            (
                "nested".to_string(),
                Type::map(Type::list(Type::map(Type::Number))),
            ),
        ]
        .into(),
        optional: vec!["labels".to_string()],
    };
    vec![
        resource,
        job,
        Type::Dynamic,
        Type::list(Type::Dynamic),
        Type::Number,
        Type::String,
        Type::set(Type::object([("k", Type::String), ("v", Type::Dynamic)])),
    ]
}

/// Splits fuzz input into (schema, payload).
pub fn pick(data: &[u8]) -> Option<(Type, &[u8])> {
    let (first, rest) = data.split_first()?;
    let schemas = schemas();
    let ty = schemas[usize::from(*first) % schemas.len()].clone();
    Some((ty, rest))
}
