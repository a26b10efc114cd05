//! Fixtures checked against cty's own bytes, and properties over generated values.

use super::*;
use crate::values::Refinements;
use crate::values::testgen::{self, name_count, obj};
use proptest::prelude::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn refined(r: Refinements) -> Value {
    Value::Unknown(Some(Box::new(r)))
}

fn decode_err(bytes: &[u8], ty: &Type) -> String {
    from_msgpack(bytes, ty).unwrap_err().to_string()
}

/// What Terraform sends for `{ name = "x" }` when `count` is unset: every attribute present,
/// keys sorted, null as nil.
#[test]
fn object_with_null_attribute_matches_terraform_bytes() {
    let bytes = hex("82 a5 636f756e74 c0 a4 6e616d65 a1 78");
    let value = obj(&[("name", "x".into()), ("count", Value::Null)]);
    assert_eq!(from_msgpack(&bytes, &name_count()).unwrap(), value);
    assert_eq!(to_msgpack(&value, &name_count()).unwrap(), bytes);
    // An attribute absent from the value is written as nil too.
    let partial = obj(&[("name", "x".into())]);
    assert_eq!(to_msgpack(&partial, &name_count()).unwrap(), bytes);
}

#[test]
fn plain_unknown_is_fixext1_type_0() {
    let bytes = hex("d4 00 00");
    assert_eq!(
        from_msgpack(&bytes, &Type::String).unwrap(),
        Value::unknown()
    );
    assert_eq!(to_msgpack(&Value::unknown(), &Type::String).unwrap(), bytes);
    // Inside an object, as Terraform plans a computed attribute.
    let planned = hex("82 a5 636f756e74 d4 00 00 a4 6e616d65 a1 78");
    let value = from_msgpack(&planned, &name_count()).unwrap();
    assert_eq!(
        value,
        obj(&[("name", "x".into()), ("count", Value::unknown())])
    );
    assert_eq!(to_msgpack(&value, &name_count()).unwrap(), planned);
}

#[test]
fn any_extension_decodes_as_unknown() {
    for bytes in [
        "d4 05 ff",
        "d6 05 01020304",
        "c7 00 00",
        "c7 02 07 0102",
        "d5 0c 0000",
        "c7 03 0c c0c0c0",
    ] {
        assert_eq!(
            from_msgpack(&hex(bytes), &Type::String).unwrap(),
            Value::unknown(),
            "{bytes}"
        );
    }
}

#[test]
fn refined_unknowns_match_cty_bytes() {
    let not_null = Refinements {
        not_null: true,
        ..Default::default()
    };
    let cases = [
        // {1: false}: definitely not null (what Terraform sends for most computed strings).
        (Type::String, "c7 03 0c 81 01 c2", refined(not_null.clone())),
        // {1: false, 2: "ab"}: string prefix.
        (
            Type::String,
            "c7 07 0c 82 01 c2 02 a2 6162",
            refined(Refinements {
                string_prefix: Some("ab".into()),
                ..not_null.clone()
            }),
        ),
        // {3: [0, true]}: number lower bound, inclusive.
        (
            Type::Number,
            "c7 05 0c 81 03 92 00 c3",
            refined(Refinements {
                number_lower: Some((Number::Int(0), true)),
                ..Default::default()
            }),
        ),
        // {1: false, 4: ["0.1", false]}: exact decimal upper bound.
        (
            Type::Number,
            "c7 0a 0c 82 01 c2 04 92 a3 302e31 c2",
            refined(Refinements {
                number_upper: Some((Number::Big("0.1".into()), false)),
                ..not_null.clone()
            }),
        ),
        // {1: false, 5: 1, 6: 3}: collection length bounds.
        (
            Type::list(Type::String),
            "c7 07 0c 83 01 c2 05 01 06 03",
            refined(Refinements {
                length_lower: Some(1),
                length_upper: Some(3),
                ..not_null.clone()
            }),
        ),
    ];
    for (ty, bytes, value) in cases {
        assert_eq!(from_msgpack(&hex(bytes), &ty).unwrap(), value, "{bytes}");
        assert_eq!(to_msgpack(&value, &ty).unwrap(), hex(bytes), "{bytes}");
    }
}

#[test]
fn refinement_edge_cases() {
    // Unknown keys are skipped, whatever their value.
    let bytes = hex("c7 0a 0c 82 63 92 81 01 02 a1 78 01 c2");
    let value = from_msgpack(&bytes, &Type::String).unwrap();
    assert_eq!(
        value,
        refined(Refinements {
            not_null: true,
            ..Default::default()
        })
    );
    // Malformed payloads give a plain unknown, never an error.
    for bytes in [
        "c7 03 0c 81 01 a1",
        "c7 02 0c 81 01",
        "c7 03 0c 91 01 c2",
        "c7 03 0c 81 a1 c2",
        "c7 03 0c 81 05 ff",
    ] {
        assert_eq!(
            from_msgpack(&hex(bytes), &Type::list(Type::Bool)).unwrap(),
            Value::unknown(),
            "{bytes}"
        );
    }
    // "Definitely null" collapses to a known null, as in cty.
    assert_eq!(
        from_msgpack(&hex("c7 03 0c 81 01 c3"), &Type::String).unwrap(),
        Value::Null
    );
    // Refinements that do not apply to the type are dropped on both sides.
    let prefix = refined(Refinements {
        string_prefix: Some("a".into()),
        ..Default::default()
    });
    assert_eq!(
        from_msgpack(&hex("c7 04 0c 81 02 a1 61"), &Type::Number).unwrap(),
        Value::unknown()
    );
    assert_eq!(to_msgpack(&prefix, &Type::Number).unwrap(), hex("d4 00 00"));
    // Unknowns of dynamic type are never refined.
    assert_eq!(
        from_msgpack(&hex("c7 03 0c 81 01 c2"), &Type::Dynamic).unwrap(),
        Value::unknown()
    );
    let not_null = refined(Refinements {
        not_null: true,
        ..Default::default()
    });
    assert_eq!(
        to_msgpack(&not_null, &Type::Dynamic).unwrap(),
        hex("d4 00 00")
    );
    // Refinements stay under cty's 1 KiB limit: a long prefix is cut at a character boundary,
    // an over-long number bound is dropped.
    let long = refined(Refinements {
        string_prefix: Some("é".repeat(1000)),
        ..Default::default()
    });
    let expected = refined(Refinements {
        string_prefix: Some("é".repeat(128)),
        ..Default::default()
    });
    let bytes = to_msgpack(&long, &Type::String).unwrap();
    assert_eq!(from_msgpack(&bytes, &Type::String).unwrap(), expected);
    let huge_bound = refined(Refinements {
        not_null: true,
        number_lower: Some((Number::Big("1".repeat(2000)), true)),
        ..Default::default()
    });
    let bytes = to_msgpack(&huge_bound, &Type::Number).unwrap();
    assert_eq!(bytes, hex("c7 03 0c 81 01 c2"));
    // Empty refinements are a plain unknown.
    assert_eq!(
        to_msgpack(&refined(Refinements::default()), &Type::String).unwrap(),
        hex("d4 00 00")
    );
}

#[test]
fn numbers_keep_precision() {
    let cases = [
        ("05", Number::Int(5)),
        ("e0", Number::Int(-32)),
        ("d0 df", Number::Int(-33)),
        ("cf 7fffffffffffffff", Number::Int(i64::MAX)),
        ("d3 8000000000000000", Number::Int(i64::MIN)),
        (
            "cf ffffffffffffffff",
            Number::Big("18446744073709551615".into()),
        ),
        ("cb 3fb999999999999a", Number::Float(0.1)),
        ("ca 3fc00000", Number::Float(1.5)),
        // cty sends numbers float64 cannot hold exactly as decimal strings.
        (
            "b4 3138343436373434303733373039353531363136",
            Number::Big("18446744073709551616".into()),
        ),
        ("a3 302e31", Number::Big("0.1".into())),
        ("a5 3165343030", Number::Big("1e400".into())),
        ("a2 3432", Number::Int(42)),
        ("c4 02 3432", Number::Int(42)),
    ];
    for (bytes, n) in cases {
        assert_eq!(
            from_msgpack(&hex(bytes), &Type::Number).unwrap(),
            Value::Number(n),
            "{bytes}"
        );
    }
    let encoded = [
        (Number::Int(5), "05"),
        (Number::Int(-33), "d0 df"),
        (Number::Int(300), "cd 012c"),
        (Number::Float(3.0), "03"),
        (Number::Float(-0.0), "00"),
        (Number::Float(0.5), "cb 3fe0000000000000"),
        (Number::Float(1e20), "cb 4415af1d78b58c40"),
        (Number::Float(f64::INFINITY), "cb 7ff0000000000000"),
        (
            Number::Big("18446744073709551616".into()),
            "b4 3138343436373434303733373039353531363136",
        ),
        (Number::Big("0.10".into()), "a3 302e31"),
        (Number::Big("7".into()), "07"),
    ];
    for (n, bytes) in encoded {
        assert_eq!(
            to_msgpack(&Value::Number(n.clone()), &Type::Number).unwrap(),
            hex(bytes),
            "{n:?}"
        );
    }
    for bad in [Number::Float(f64::NAN), Number::Big("one".into())] {
        assert!(to_msgpack(&Value::Number(bad), &Type::Number).is_err());
    }
    assert!(decode_err(&hex("a3 616263"), &Type::Number).contains("number is required"));
}

#[test]
fn dynamic_values_carry_their_type_as_json_bin() {
    // ["\"string\"" as bin, "x"], as cty writes it.
    let bytes = hex("92 c4 08 22737472696e6722 a1 78");
    let value = Value::Dynamic(Type::String, Box::new("x".into()));
    assert_eq!(from_msgpack(&bytes, &Type::Dynamic).unwrap(), value);
    assert_eq!(to_msgpack(&value, &Type::Dynamic).unwrap(), bytes);
    // A plain value under a dynamic type is written with its implied type.
    assert_eq!(
        to_msgpack(&Value::from("x"), &Type::Dynamic).unwrap(),
        bytes
    );
    // The type may also come as a msgpack string.
    assert_eq!(
        from_msgpack(&hex("92 a8 22737472696e6722 a1 78"), &Type::Dynamic).unwrap(),
        value
    );
    // Null and unknown of unknown type are written directly; a typed null is wrapped.
    assert_eq!(to_msgpack(&Value::Null, &Type::Dynamic).unwrap(), hex("c0"));
    assert_eq!(
        from_msgpack(&hex("c0"), &Type::Dynamic).unwrap(),
        Value::Null
    );
    assert_eq!(
        to_msgpack(&Value::unknown(), &Type::Dynamic).unwrap(),
        hex("d4 00 00")
    );
    let typed_null = Value::Dynamic(Type::String, Box::new(Value::Null));
    assert_eq!(
        to_msgpack(&typed_null, &Type::Dynamic).unwrap(),
        hex("92 c4 08 22737472696e6722 c0")
    );
    // A dynamic value whose type is "dynamic" is the inner dynamic value.
    let nested = hex("92 c4 09 2264796e616d696322 92 c4 08 22737472696e6722 a1 78");
    assert_eq!(from_msgpack(&nested, &Type::Dynamic).unwrap(), value);
    // A list under a dynamic type.
    let list = Value::List(vec!["a".into(), Value::Null]);
    let encoded = to_msgpack(&list, &Type::Dynamic).unwrap();
    assert_eq!(
        encoded,
        hex("92 c4 11 5b226c697374222c22737472696e67225d 92 a1 61 c0")
    );
    assert_eq!(
        from_msgpack(&encoded, &Type::Dynamic).unwrap(),
        Value::Dynamic(Type::list(Type::String), Box::new(list))
    );
    let err = from_msgpack(&hex("92 c4 04 226e6f22 c0"), &Type::Dynamic).unwrap_err();
    assert!(matches!(err, MsgpackError::DynamicType { .. }), "{err}");
    assert!(decode_err(&hex("91 c0"), &Type::Dynamic).contains("[type, value]"));
}

#[test]
fn nested_collections() {
    let ty = Type::object([
        ("tags", Type::map(Type::String)),
        ("ports", Type::set(Type::Number)),
        ("pair", Type::Tuple(vec![Type::String, Type::Bool])),
        (
            "items",
            Type::list(Type::object([
                ("id", Type::String),
                ("extra", Type::Dynamic),
            ])),
        ),
    ]);
    let value = obj(&[
        (
            "tags",
            Value::Map([("b".to_string(), "2".into()), ("a".to_string(), "1".into())].into()),
        ),
        ("ports", Value::Set(vec![Value::int(443), Value::int(80)])),
        ("pair", Value::Tuple(vec!["k".into(), true.into()])),
        (
            "items",
            Value::List(vec![
                obj(&[("id", "one".into()), ("extra", Value::Null)]),
                obj(&[
                    ("id", Value::unknown()),
                    (
                        "extra",
                        Value::Dynamic(Type::Number, Box::new(Value::int(1))),
                    ),
                ]),
            ]),
        ),
    ]);
    let bytes = to_msgpack(&value, &ty).unwrap();
    assert_eq!(from_msgpack(&bytes, &ty).unwrap(), value);
    // Map keys are written sorted.
    let tags = to_msgpack(value.attr("tags").unwrap(), &Type::map(Type::String)).unwrap();
    assert_eq!(tags, hex("82 a1 61 a1 31 a1 62 a1 32"));
}

#[test]
fn objects_tolerate_missing_attributes_and_refuse_unknown_ones() {
    let only_name = hex("81 a4 6e616d65 a1 78");
    assert_eq!(
        from_msgpack(&only_name, &name_count()).unwrap(),
        obj(&[("name", "x".into()), ("count", Value::Null)])
    );
    assert_eq!(
        from_msgpack(&hex("80"), &name_count()).unwrap(),
        obj(&[("name", Value::Null), ("count", Value::Null)])
    );
    let err = from_msgpack(&hex("81 a5 626f677573 c0"), &name_count()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to decode msgpack value at bogus: unsupported attribute"
    );
    assert_eq!(err.path(), &AttributePath::attr("bogus"));
    let extra = obj(&[("bogus", Value::Null)]);
    assert!(
        to_msgpack(&extra, &name_count())
            .unwrap_err()
            .to_string()
            .contains("at bogus")
    );
}

#[test]
fn errors_name_the_path() {
    let ty = Type::object([("env", Type::map(Type::list(Type::String)))]);
    // {"env": {"K": ["a", 1]}}
    let bytes = hex("81 a3 656e76 81 a1 4b 92 a1 61 01");
    let err = from_msgpack(&bytes, &ty).unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to decode msgpack value at env[\"K\"][1]: string is required, found integer"
    );
    let value = obj(&[(
        "env",
        Value::Map([("K".to_string(), Value::List(vec![true.into()]))].into()),
    )]);
    let err = to_msgpack(&value, &ty).unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to encode msgpack value at env[\"K\"][0]: string is required, found bool"
    );
    assert!(decode_err(&hex("c3"), &Type::String).contains("at (root)"));
}

#[test]
fn malformed_input_is_an_error_not_a_panic() {
    let list = Type::list(Type::String);
    for bytes in [
        "",
        "c1",
        "dd ffffffff",
        "dc ffff c0",
        "db ffffffff 61",
        "c6 ffffffff",
        "c9 ffffffff 00",
        "a5 6162",
        "92 a1 61",
        "91 a1 ff",
        "c0 c0",
    ] {
        assert!(from_msgpack(&hex(bytes), &list).is_err(), "{bytes}");
    }
    assert!(from_msgpack(&hex("92 a1 61"), &Type::Tuple(vec![Type::String])).is_err());
    assert!(from_msgpack(&hex("81 01 c0"), &Type::map(Type::String)).is_err());
}

#[test]
fn nesting_is_bounded() {
    // 100 dynamic wrappers of type "dynamic" around a string.
    let mut bytes = Vec::new();
    for _ in 0..100 {
        bytes.extend(hex("92 c4 09 2264796e616d696322"));
    }
    bytes.extend(hex("a1 78"));
    assert!(decode_err(&bytes, &Type::Dynamic).contains("nested deeper than 64 levels"));

    let nested = |levels: usize| {
        let mut ty = Type::String;
        for _ in 0..levels {
            ty = Type::list(ty);
        }
        let mut bytes = vec![0x91; levels];
        bytes.extend(hex("a1 78"));
        (ty, bytes)
    };
    let (ty, bytes) = nested(MAX_DEPTH);
    let value = from_msgpack(&bytes, &ty).unwrap();
    assert_eq!(to_msgpack(&value, &ty).unwrap(), bytes);
    let (ty, bytes) = nested(MAX_DEPTH + 1);
    assert!(from_msgpack(&bytes, &ty).is_err());
}

fn mutate(mut bytes: Vec<u8>, edits: &[(usize, u8)], cut: usize) -> Vec<u8> {
    if !bytes.is_empty() {
        for (at, b) in edits {
            let i = at % bytes.len();
            bytes[i] = *b;
        }
    }
    let keep = bytes.len().saturating_sub(cut);
    bytes.truncate(keep);
    bytes
}

/// Whatever decodes re-encodes to a fixed point: decoding normalizes (e.g. an integral float
/// becomes an int), so the first encoding may differ from the input, but not the second.
fn assert_reencodes_to_fixed_point(bytes: &[u8], ty: &Type) -> Result<(), TestCaseError> {
    let Ok(value) = from_msgpack(bytes, ty) else {
        return Ok(());
    };
    // Encoding may refuse (a NaN float), but not panic.
    let Ok(first) = to_msgpack(&value, ty) else {
        return Ok(());
    };
    let again = from_msgpack(&first, ty).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(to_msgpack(&again, ty).unwrap(), first);
    Ok(())
}

proptest! {
    #![proptest_config(testgen::config(512))]

    #[test]
    fn round_trip_is_identity((ty, value) in testgen::typed_value()) {
        let bytes = to_msgpack(&value, &ty).unwrap();
        prop_assert_eq!(from_msgpack(&bytes, &ty).unwrap(), value);
    }

    /// The property the `decode_msgpack` fuzz target checks, for machines without nightly.
    #[test]
    fn arbitrary_bytes_never_panic(ty in testgen::any_type(), bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        assert_reencodes_to_fixed_point(&bytes, &ty)?;
    }

    /// Near-valid input reaches deeper code paths than random bytes.
    #[test]
    fn mutated_encodings_never_panic(
        (ty, value) in testgen::typed_value(),
        other in testgen::any_type(),
        edits in prop::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        cut in 0usize..3,
    ) {
        let bytes = mutate(to_msgpack(&value, &ty).unwrap(), &edits, cut);
        for ty in [&ty, &other, &Type::Dynamic] {
            assert_reencodes_to_fixed_point(&bytes, ty)?;
        }
    }
}

#[test]
fn decode_errors_never_quote_the_offending_value() {
    let marker = Value::from("MARKER-deploy-key-4f2a");
    let bytes = to_msgpack(&marker, &Type::String).expect("encode");
    for ty in [
        Type::Bool,
        Type::Number,
        Type::list(Type::String),
        Type::map(Type::String),
        Type::object([("a", Type::String)]),
        Type::Dynamic,
    ] {
        let err = from_msgpack(&bytes, &ty).expect_err("mismatch");
        assert!(!err.to_string().contains("MARKER"), "{err}");
    }
    let mut truncated = bytes.clone();
    truncated.pop();
    let err = from_msgpack(&truncated, &Type::String).expect_err("truncated");
    assert!(!err.to_string().contains("MARKER"), "{err}");
}
