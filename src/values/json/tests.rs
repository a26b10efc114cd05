//! Fixtures in the form Terraform state holds, and properties over generated values.

use super::*;
use crate::values::testgen::{self, name_count, obj};
use proptest::prelude::*;

fn decode(text: &str, ty: &Type) -> Result<Value, JsonError> {
    from_json(text.as_bytes(), ty)
}

fn encode(value: &Value, ty: &Type) -> String {
    String::from_utf8(to_json(value, ty).unwrap()).unwrap()
}

#[test]
fn objects_as_terraform_state_holds_them() {
    let value = obj(&[("name", "x".into()), ("count", Value::Null)]);
    assert_eq!(
        decode(r#"{"name":"x","count":null}"#, &name_count()).unwrap(),
        value
    );
    // Missing attributes (older state) decode as null.
    assert_eq!(
        decode(r#" { "name" : "x" } "#, &name_count()).unwrap(),
        value
    );
    assert_eq!(
        encode(&value, &name_count()),
        r#"{"count":null,"name":"x"}"#
    );
    let err = decode(r#"{"name":"x","bogus":1}"#, &name_count()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to decode JSON value at (root): unsupported attribute \"bogus\""
    );
    assert!(to_json(&obj(&[("bogus", Value::Null)]), &name_count()).is_err());
    // State written by an older schema may hold attributes since removed.
    let lenient = JsonDecodeOptions {
        ignore_undefined_attributes: true,
    };
    let old_state = br#"{"name":"x","bogus":{"deep":[1]}}"#;
    assert_eq!(
        from_json_with(old_state, &name_count(), lenient).unwrap(),
        value
    );
}

#[test]
fn numbers_are_read_from_their_text() {
    let cases = [
        ("12", Number::Int(12)),
        ("-9223372036854775808", Number::Int(i64::MIN)),
        (
            "18446744073709551616",
            Number::Big("18446744073709551616".into()),
        ),
        (
            "123456789012345678901234567890",
            Number::Big("123456789012345678901234567890".into()),
        ),
        ("1e400", Number::Big("1e400".into())),
        ("0.1", Number::Big("0.1".into())),
        ("2.50", Number::Big("2.5".into())),
        ("1.5e1", Number::Int(15)),
        ("\"42\"", Number::Int(42)),
    ];
    for (text, n) in cases {
        assert_eq!(
            decode(text, &Type::Number).unwrap(),
            Value::Number(n.clone()),
            "{text}"
        );
    }
    for (n, text) in [
        (Number::Int(-7), "-7"),
        (Number::Float(0.5), "0.5"),
        (Number::Float(3.0), "3"),
        (Number::Float(1e21), "1000000000000000000000"),
        (
            Number::Big("18446744073709551616".into()),
            "18446744073709551616",
        ),
        (Number::Big("1E+400".into()), "1e400"),
    ] {
        assert_eq!(
            encode(&Value::Number(n.clone()), &Type::Number),
            text,
            "{n:?}"
        );
    }
    for bad in [
        Number::Float(f64::NAN),
        Number::Float(f64::INFINITY),
        Number::Big("x".into()),
    ] {
        assert!(to_json(&Value::Number(bad), &Type::Number).is_err());
    }
    for bad in ["01", "1.", ".5", "-", "1e", "+1", "0x10", "NaN", "\"abc\""] {
        assert!(decode(bad, &Type::Number).is_err(), "{bad}");
    }
}

#[test]
fn primitive_conversions_as_cty() {
    assert_eq!(decode("42", &Type::String).unwrap(), "42".into());
    assert_eq!(decode("1e400", &Type::String).unwrap(), "1e400".into());
    assert_eq!(decode("true", &Type::String).unwrap(), "true".into());
    assert_eq!(decode("\"false\"", &Type::Bool).unwrap(), false.into());
    assert!(decode("\"yes\"", &Type::Bool).is_err());
    assert!(decode("1", &Type::Bool).is_err());
}

#[test]
fn dynamic_values_carry_their_type() {
    let value = Value::Dynamic(Type::String, Box::new("x".into()));
    assert_eq!(
        encode(&value, &Type::Dynamic),
        r#"{"value":"x","type":"string"}"#
    );
    assert_eq!(
        decode(r#"{"type":"string","value":"x"}"#, &Type::Dynamic).unwrap(),
        value
    );
    assert_eq!(
        encode(&Value::from("x"), &Type::Dynamic),
        r#"{"value":"x","type":"string"}"#
    );
    assert_eq!(decode("null", &Type::Dynamic).unwrap(), Value::Null);
    assert_eq!(encode(&Value::Null, &Type::Dynamic), "null");
    let typed_null = Value::Dynamic(Type::list(Type::Number), Box::new(Value::Null));
    assert_eq!(
        encode(&typed_null, &Type::Dynamic),
        r#"{"value":null,"type":["list","number"]}"#
    );
    let nested = r#"{"value":{"value":"x","type":"string"},"type":"dynamic"}"#;
    assert_eq!(decode(nested, &Type::Dynamic).unwrap(), value);
    for (text, msg) in [
        (r#"{"value":"x"}"#, "missing type"),
        (r#"{"type":"string"}"#, "missing value"),
        (r#"{"value":"x","type":"string","extra":1}"#, "invalid key"),
        (r#""x""#, "must be an object"),
    ] {
        assert!(
            decode(text, &Type::Dynamic)
                .unwrap_err()
                .to_string()
                .contains(msg),
            "{text}"
        );
    }
    let err = decode(r#"{"value":"x","type":"text"}"#, &Type::Dynamic).unwrap_err();
    assert!(matches!(err, JsonError::DynamicType { .. }), "{err}");
}

#[test]
fn nested_collections_and_paths() {
    let ty = Type::object([
        ("env", Type::map(Type::list(Type::String))),
        ("pair", Type::Tuple(vec![Type::Number, Type::Bool])),
        ("ports", Type::set(Type::Number)),
    ]);
    let text = r#"{"env":{"K":["a","b"]},"pair":[1,true],"ports":[443,80]}"#;
    let value = decode(text, &ty).unwrap();
    assert_eq!(encode(&value, &ty), text);
    let err = decode(r#"{"env":{"K":["a",[]]}}"#, &ty).unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to decode JSON value at env[\"K\"][1]: string is required, found array"
    );
    assert_eq!(
        err.path(),
        &AttributePath::attr("env").then_key("K").then_index(1)
    );
    assert!(
        decode(r#"{"pair":[1]}"#, &ty)
            .unwrap_err()
            .to_string()
            .contains("tuple of length 2")
    );
    let unknown = obj(&[(
        "env",
        Value::Map([("K".to_string(), Value::List(vec![Value::unknown()]))].into()),
    )]);
    let err = to_json(&unknown, &ty).unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to encode JSON value at env[\"K\"][0]: value is not known, and JSON cannot carry unknown values"
    );
}

#[test]
fn strings_and_escapes() {
    let text = r#""a\"b\\c\/d\n\u00e9\ud83d\ude00\ud800x""#;
    assert_eq!(
        decode(text, &Type::String).unwrap(),
        "a\"b\\c/d\né😀\u{FFFD}x".into()
    );
    let tricky = Value::from("\"\\\u{0}\u{1f}\n\u{2028}é😀");
    let bytes = to_json(&tricky, &Type::String).unwrap();
    assert_eq!(from_json(&bytes, &Type::String).unwrap(), tricky);
    for bad in ["\"abc", "\"\\x\"", "\"\\u12\"", "\"a\nb\"", "'a'"] {
        assert!(decode(bad, &Type::String).is_err(), "{bad}");
    }
    assert!(from_json(b"\"\xff\"", &Type::String).is_err());
}

#[test]
fn malformed_json_is_an_error() {
    let list = Type::list(Type::String);
    for bad in [
        "",
        "[",
        "[\"a\",]",
        "[\"a\" \"b\"]",
        "[] []",
        "{\"a\":1",
        "nul",
        "[\"a\"]x",
        "{1:2}",
    ] {
        assert!(decode(bad, &list).is_err(), "{bad}");
    }
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    let err = decode(&deep, &list).unwrap_err();
    assert!(matches!(err, JsonError::Syntax { .. }), "{err}");
    let mut ty = Type::String;
    for _ in 0..MAX_DEPTH + 1 {
        ty = Type::list(ty);
    }
    let text = "[".repeat(MAX_DEPTH + 1) + "\"x\"" + &"]".repeat(MAX_DEPTH + 1);
    assert!(
        decode(&text, &ty)
            .unwrap_err()
            .to_string()
            .contains("nested deeper")
    );
}

/// Whatever decodes is in normal form: it encodes, and decodes back unchanged.
fn assert_survives_round_trip(bytes: &[u8], ty: &Type) -> Result<(), TestCaseError> {
    let Ok(value) = from_json(bytes, ty) else {
        return Ok(());
    };
    let encoded = to_json(&value, ty).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(from_json(&encoded, ty).unwrap(), value);
    Ok(())
}

proptest! {
    #![proptest_config(testgen::config(512))]

    #[test]
    fn round_trip_is_identity_for_known_values((ty, value) in testgen::typed_known_value()) {
        let bytes = to_json(&value, &ty).unwrap();
        prop_assert_eq!(from_json(&bytes, &ty).unwrap(), value);
    }

    /// The property the `decode_json` fuzz target checks, for machines without nightly.
    #[test]
    fn arbitrary_bytes_never_panic(ty in testgen::any_type(), bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        assert_survives_round_trip(&bytes, &ty)?;
    }

    #[test]
    fn json_like_text_never_panics(ty in testgen::any_type(), text in r#"[\[\]{}",:0-9a-z.eE+\\ -]{0,64}"#) {
        assert_survives_round_trip(text.as_bytes(), &ty)?;
    }

    #[test]
    fn mutated_encodings_never_panic(
        (ty, value) in testgen::typed_known_value(),
        other in testgen::any_type(),
        edits in prop::collection::vec((any::<usize>(), any::<u8>()), 0..4),
    ) {
        let mut bytes = to_json(&value, &ty).unwrap();
        for (at, b) in edits {
            let i = at % bytes.len();
            bytes[i] = b;
        }
        assert_survives_round_trip(&bytes, &ty)?;
        assert_survives_round_trip(&bytes, &other)?;
    }
}

#[test]
fn decode_errors_never_quote_the_offending_value() {
    let marker = "MARKER-deploy-key-4f2a";
    for (text, ty) in [
        (format!("\"{marker}\""), Type::Bool),
        (format!("\"{marker}\""), Type::Number),
        (
            format!("{{\"name\": \"{marker}\", \"count\": \"{marker}\"}}"),
            name_count(),
        ),
        (format!("[\"{marker}\"]"), Type::list(Type::Bool)),
        (
            format!("{{\"name\": \"{marker}\", \"extra\": 1}}"),
            name_count(),
        ),
        (format!("\"{marker}"), Type::String),
    ] {
        let err = decode(&text, &ty).expect_err("mismatch");
        assert!(!err.to_string().contains("MARKER"), "{err}");
    }
}
