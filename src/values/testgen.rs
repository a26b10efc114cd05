//! proptest strategies for (type, value) pairs, shared by the codec tests.
//!
//! Values are generated in the normal form the decoders produce, so that a round trip is the
//! identity: numbers as `Int`, non-integral finite `Float` or canonical `Big`; refined unknowns
//! only with refinements that apply to the type; dynamic values as `Null`, plain `Unknown` or
//! `Dynamic(concrete type, value)`.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::{Number, Refinements, Type, Value};

/// An object value of `attrs`, written the way the codec tests list them.
pub fn obj(attrs: &[(&str, Value)]) -> Value {
    Value::object(attrs.iter().cloned())
}

/// The object type both codecs' fixtures use: `{ name = string, count = number }`.
pub fn name_count() -> Type {
    Type::object([("name", Type::String), ("count", Type::Number)])
}

pub fn any_type() -> impl Strategy<Value = Type> {
    let leaf = prop_oneof![
        Just(Type::Bool),
        Just(Type::Number),
        Just(Type::String),
        Just(Type::Dynamic),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(Type::list),
            inner.clone().prop_map(Type::set),
            inner.clone().prop_map(Type::map),
            prop::collection::vec(inner.clone(), 0..4).prop_map(Type::Tuple),
            (
                prop::collection::btree_map(attr_name(), inner, 0..4),
                any::<u8>()
            )
                .prop_map(|(attributes, bits)| {
                    let optional = attributes
                        .keys()
                        .enumerate()
                        .filter(|(i, _)| bits & (1 << i) != 0)
                        .map(|(_, k)| k.clone())
                        .collect();
                    Type::Object {
                        attributes,
                        optional,
                    }
                }),
        ]
    })
}

/// A type that is not `Dynamic` at the top (what a dynamic value carries).
fn concrete_type() -> impl Strategy<Value = Type> {
    any_type().prop_filter("concrete", |t| *t != Type::Dynamic)
}

fn attr_name() -> impl Strategy<Value = String> {
    "[a-z_][a-z0-9_]{0,6}"
}

fn any_string() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 ._-]{0,12}",
        any::<String>(),
        Just(String::new()),
        Just("\"quoted\" \\ \u{0}\n\u{2028}é😀".to_owned()),
    ]
}

/// Numbers in the form both decoders return.
pub fn any_number() -> impl Strategy<Value = Number> {
    prop_oneof![
        any::<i64>().prop_map(Number::Int),
        Just(Number::Int(i64::MIN)),
        Just(Number::Int(i64::MAX)),
        any_float().prop_map(Number::Float),
        big_number(),
    ]
}

/// Numbers as the JSON decoder returns them (it never produces `Float`).
pub fn decimal_number() -> impl Strategy<Value = Number> {
    prop_oneof![any::<i64>().prop_map(Number::Int), big_number()]
}

fn any_float() -> impl Strategy<Value = f64> {
    prop_oneof![
        -1.0e12f64..1.0e12,
        -1.0f64..1.0,
        any::<f64>(),
        Just(0.1),
        Just(-2.5),
        Just(f64::MIN_POSITIVE),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
    ]
    .prop_filter("non-integral (integral floats are encoded as ints)", |f| {
        !f.is_nan() && (f.is_infinite() || f.fract() != 0.0)
    })
}

fn big_number() -> impl Strategy<Value = Number> {
    (prop_oneof![
        Just("18446744073709551616".to_owned()),
        Just("9223372036854775808".to_owned()),
        Just("-9223372036854775809".to_owned()),
        Just("0.1".to_owned()),
        Just("1e400".to_owned()),
        Just("-2.5e-300".to_owned()),
        "-?[1-9][0-9]{19,40}",
        "-?[0-9]{1,20}\\.[0-9]{1,20}",
        "-?[1-9](\\.[0-9]{1,5})?e-?[1-9][0-9]{0,3}",
    ])
    .prop_filter_map("not an i64", |text| match Number::parse_decimal(&text) {
        Some(n @ Number::Big(_)) => Some(n),
        _ => None,
    })
}

fn refinements_for(ty: &Type) -> BoxedStrategy<Refinements> {
    let not_null = any::<bool>();
    match ty {
        Type::String => (not_null, proptest::option::of("[a-z/]{1,8}"))
            .prop_map(|(not_null, string_prefix)| Refinements {
                not_null,
                string_prefix,
                ..Default::default()
            })
            .boxed(),
        Type::Number => {
            let bound = || proptest::option::of((any_number(), any::<bool>()));
            (not_null, bound(), bound())
                .prop_map(|(not_null, number_lower, number_upper)| Refinements {
                    not_null,
                    number_lower,
                    number_upper,
                    ..Default::default()
                })
                .boxed()
        }
        t if t.is_collection() => {
            let bound = proptest::option::of(any::<u64>());
            (not_null, bound.clone(), bound)
                .prop_map(|(not_null, length_lower, length_upper)| Refinements {
                    not_null,
                    length_lower,
                    length_upper,
                    ..Default::default()
                })
                .boxed()
        }
        _ => not_null
            .prop_map(|not_null| Refinements {
                not_null,
                ..Default::default()
            })
            .boxed(),
    }
}

fn unknown_for(ty: &Type) -> BoxedStrategy<Value> {
    if *ty == Type::Dynamic {
        return Just(Value::Unknown(None)).boxed();
    }
    refinements_for(ty)
        .prop_map(|r| {
            if r.is_empty() {
                Value::Unknown(None)
            } else {
                Value::Unknown(Some(Box::new(r)))
            }
        })
        .boxed()
}

/// A value of `ty` (null, unknown or known at every level).
pub fn value_for(ty: &Type, depth: u32) -> BoxedStrategy<Value> {
    value_with(ty, depth, false)
}

/// A wholly known value of `ty` (nulls allowed), with numbers as the JSON decoder returns them.
pub fn known_value_for(ty: &Type, depth: u32) -> BoxedStrategy<Value> {
    value_with(ty, depth, true)
}

fn value_with(ty: &Type, depth: u32, known: bool) -> BoxedStrategy<Value> {
    let known_value = known_value(ty, depth, known);
    if known {
        prop_oneof![1 => Just(Value::Null), 6 => known_value].boxed()
    } else {
        prop_oneof![1 => Just(Value::Null), 1 => unknown_for(ty), 6 => known_value].boxed()
    }
}

fn known_value(ty: &Type, depth: u32, known: bool) -> BoxedStrategy<Value> {
    let n = if depth > 3 { 0..2 } else { 0..4 };
    match ty {
        Type::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
        Type::Number if known => decimal_number().prop_map(Value::Number).boxed(),
        Type::Number => any_number().prop_map(Value::Number).boxed(),
        Type::String => any_string().prop_map(Value::String).boxed(),
        Type::List(e) => prop::collection::vec(value_with(e, depth + 1, known), n)
            .prop_map(Value::List)
            .boxed(),
        Type::Set(e) => prop::collection::vec(value_with(e, depth + 1, known), n)
            .prop_map(Value::Set)
            .boxed(),
        Type::Map(e) => {
            prop::collection::btree_map(any_string(), value_with(e, depth + 1, known), n)
                .prop_map(Value::Map)
                .boxed()
        }
        Type::Tuple(etys) => etys
            .iter()
            .map(|t| value_with(t, depth + 1, known))
            .collect::<Vec<_>>()
            .prop_map(Value::Tuple)
            .boxed(),
        Type::Object { attributes, .. } => attributes
            .iter()
            .map(|(k, t)| {
                let k = k.clone();
                value_with(t, depth + 1, known).prop_map(move |v| (k.clone(), v))
            })
            .collect::<Vec<_>>()
            .prop_map(|attrs| Value::Object(attrs.into_iter().collect::<BTreeMap<_, _>>()))
            .boxed(),
        Type::Dynamic if depth > 4 => {
            Just(Value::Dynamic(Type::Bool, Box::new(Value::Bool(true)))).boxed()
        }
        Type::Dynamic => concrete_type()
            .prop_flat_map(move |t| {
                value_with(&t, depth + 1, known)
                    .prop_map(move |v| Value::Dynamic(t.clone(), Box::new(v)))
            })
            .boxed(),
    }
}

/// A type with a value of it.
pub fn typed_value() -> impl Strategy<Value = (Type, Value)> {
    any_type().prop_flat_map(|t| value_for(&t, 0).prop_map(move |v| (t.clone(), v)))
}

/// A type with a wholly known value of it (numbers in JSON's normal form).
pub fn typed_known_value() -> impl Strategy<Value = (Type, Value)> {
    any_type().prop_flat_map(|t| known_value_for(&t, 0).prop_map(move |v| (t.clone(), v)))
}

/// `cases` unless `PROPTEST_CASES` asks for more (or fewer), for longer runs in place of fuzzing.
pub fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}
