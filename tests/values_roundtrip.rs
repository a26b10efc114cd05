//! The cty codecs through the public API, the way the provider uses them: a schema type read from
//! its JSON form, a planned value as Terraform encodes it (refined unknown, set, dynamic), the
//! applied value written back as msgpack, and the state carried through JSON (`UpgradeResourceState`)
//! without changing a byte of its msgpack form.

use talosboot::values::{
    JsonDecodeOptions, Number, Refinements, Type, Value, from_json, from_json_with, from_msgpack,
    to_json, to_msgpack,
};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn schema_type() -> Type {
    let json = br#"["object",{"id":"string","name":"string","ports":["set","number"],"values":"dynamic"}]"#;
    Type::from_json_bytes(json).expect("schema type")
}

/// `{ name = "cilium", ports = [443, 80], values = { replicas = 2 } }` with `id` computed, as
/// Terraform plans it: every attribute present, keys sorted, `id` a not-null unknown.
fn planned_bytes() -> Vec<u8> {
    let values_type = br#"["object",{"replicas":"number"}]"#;
    let mut bytes = hex("84 a2 6964 c7 03 0c 81 01 c2");
    bytes.extend(hex("a4 6e616d65 a6 63696c69756d"));
    bytes.extend(hex("a5 706f727473 92 cd 01bb 50"));
    bytes.extend(hex("a6 76616c756573 92 c4"));
    bytes.push(values_type.len() as u8);
    bytes.extend_from_slice(values_type);
    bytes.extend(hex("81 a8 7265706c69636173 02"));
    bytes
}

#[test]
fn planned_value_from_terraform_round_trips() {
    let ty = schema_type();
    let planned = from_msgpack(&planned_bytes(), &ty).expect("decodes");
    let not_null = Refinements {
        not_null: true,
        ..Default::default()
    };
    assert_eq!(
        planned.attr("id"),
        Some(&Value::Unknown(Some(Box::new(not_null))))
    );
    assert_eq!(planned.attr("name").and_then(Value::as_str), Some("cilium"));
    assert_eq!(
        planned.attr("ports"),
        Some(&Value::Set(vec![Value::int(443), Value::int(80)]))
    );
    let Some(Value::Dynamic(values_type, values)) = planned.attr("values") else {
        panic!("values is a dynamic value: {planned:?}");
    };
    assert_eq!(*values_type, Type::object([("replicas", Type::Number)]));
    assert_eq!(
        values.attr("replicas"),
        Some(&Value::Number(Number::Int(2)))
    );
    assert_eq!(to_msgpack(&planned, &ty).expect("encodes"), planned_bytes());
}

#[test]
fn applied_state_survives_json() {
    let ty = schema_type();
    let mut state = from_msgpack(&planned_bytes(), &ty).expect("decodes");
    // JSON cannot carry the unknown id; apply fills it in.
    assert!(to_json(&state, &ty).is_err());
    state
        .attrs_mut()
        .expect("object")
        .insert("id".into(), "cilium/kube-system".into());
    let msgpack = to_msgpack(&state, &ty).expect("encodes");
    let json = to_json(&state, &ty).expect("encodes as JSON");
    assert_eq!(
        String::from_utf8(json.clone()).expect("UTF-8"),
        r#"{"id":"cilium/kube-system","name":"cilium","ports":[443,80],"values":{"value":{"replicas":2},"type":["object",{"replicas":"number"}]}}"#
    );
    let upgraded = from_json(&json, &ty).expect("decodes JSON");
    assert_eq!(upgraded, state);
    assert_eq!(to_msgpack(&upgraded, &ty).expect("encodes"), msgpack);
}

#[test]
fn stored_state_from_an_older_schema() {
    let ty = schema_type();
    // An attribute the schema no longer has, a missing one, and a number too big for i64.
    let stored = br#"{"id":"x","name":"n","ports":[18446744073709551616],"removed":true}"#;
    assert!(from_json(stored, &ty).is_err());
    let options = JsonDecodeOptions {
        ignore_undefined_attributes: true,
    };
    let state = from_json_with(stored, &ty, options).expect("decodes leniently");
    assert_eq!(state.attr("values"), Some(&Value::Null));
    let big = Value::Number(Number::Big("18446744073709551616".into()));
    assert_eq!(state.attr("ports"), Some(&Value::Set(vec![big])));
    let msgpack = to_msgpack(&state, &ty).expect("encodes");
    assert_eq!(from_msgpack(&msgpack, &ty).expect("decodes"), state);
}
