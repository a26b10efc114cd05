//! Decode and encode of models against inline values.

use super::*;

#[derive(Deserialize, Serialize, Debug, PartialEq)]
struct Job {
    image: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

#[derive(Deserialize, Serialize, Debug, PartialEq)]
struct Model {
    name: String,
    timeout: Maybe<String>,
    #[serde(default)]
    values: Vec<String>,
    replicas: Option<i64>,
    job: Option<Job>,
}

fn obj(pairs: &[(&str, Value)]) -> Value {
    Value::object(pairs.iter().cloned())
}

fn sample() -> Value {
    obj(&[
        ("name", "cilium".into()),
        ("timeout", Value::unknown()),
        ("values", Value::List(vec!["a: 1".into()])),
        ("replicas", Value::Number(Number::Float(2.0))),
        (
            "job",
            obj(&[
                ("image", Value::Null),
                (
                    "env",
                    Value::Map([("A".to_string(), Value::from("1"))].into()),
                ),
            ]),
        ),
    ])
}

#[test]
fn decodes_nested_models_with_explicit_unknowns() {
    let m: Model = decode(&sample(), Unknowns::Reject).expect("decodes");
    assert_eq!(m.name, "cilium");
    assert!(m.timeout.is_unknown());
    assert_eq!(m.values, vec!["a: 1"]);
    assert_eq!(m.replicas, Some(2));
    let job = m.job.expect("job");
    assert_eq!(job.image, None);
    assert_eq!(job.env["A"], "1");
}

#[test]
fn an_unknown_plain_field_is_an_error_with_its_path_unless_lenient() {
    let mut v = sample();
    v.attrs_mut().expect("object").insert(
        "job".into(),
        obj(&[("image", Value::unknown()), ("env", Value::Null)]),
    );
    let err = decode::<Model>(&v, Unknowns::Reject).expect_err("unknown image");
    assert_eq!(err.path, AttributePath::attr("job").then_attr("image"));
    let m: Model = decode(&v, Unknowns::AsNull).expect("lenient");
    assert_eq!(m.job.and_then(|j| j.image), None);
}

#[test]
fn unknown_map_values_and_list_elements_are_dropped_when_lenient() {
    let mut v = sample();
    v.attrs_mut().expect("object").insert(
        "job".into(),
        obj(&[
            ("image", "x".into()),
            (
                "env",
                Value::Map(
                    [
                        ("A".to_string(), Value::from("1")),
                        ("B".to_string(), Value::unknown()),
                    ]
                    .into(),
                ),
            ),
        ]),
    );
    v.attrs_mut().expect("object").insert(
        "values".into(),
        Value::List(vec![Value::unknown(), "b: 2".into()]),
    );
    let m: Model = decode(&v, Unknowns::AsNull).expect("lenient decode");
    assert_eq!(m.job.expect("job").env.len(), 1);
    assert_eq!(m.values, vec!["b: 2"]);
    assert!(
        decode::<Model>(&v, Unknowns::Reject).is_err(),
        "strict decode refuses unknowns"
    );
}

#[test]
fn type_errors_carry_the_path() {
    let mut v = sample();
    v.attrs_mut()
        .expect("object")
        .insert("values".into(), Value::List(vec![Value::Bool(true)]));
    let err = decode::<Model>(&v, Unknowns::Reject).expect_err("bool in list of strings");
    assert_eq!(err.path, AttributePath::attr("values").then_index(0));
}

#[test]
fn encode_fills_every_attribute_of_the_schema_type() {
    let ty = Type::object([
        ("name", Type::String),
        ("values", Type::list(Type::String)),
        ("labels", Type::map(Type::String)),
        ("count", Type::Number),
    ]);
    #[derive(Serialize)]
    struct State {
        name: String,
        values: Vec<String>,
        count: i64,
    }
    let v = encode(
        &State {
            name: "x".into(),
            values: vec!["a".into()],
            count: 3,
        },
        &ty,
    )
    .expect("encodes");
    assert_eq!(v.attr("labels"), Some(&Value::Null));
    assert_eq!(v.attr("count"), Some(&Value::int(3)));
    assert_eq!(v.attr("values"), Some(&Value::List(vec!["a".into()])));
}

#[test]
fn a_value_that_cannot_be_decoded_is_named_by_its_path_in_the_diagnostic() {
    #[derive(Deserialize, Debug)]
    struct Entry {
        #[allow(dead_code)]
        name: String,
    }
    #[derive(Deserialize, Debug)]
    struct WithList {
        #[allow(dead_code)]
        set: Vec<Entry>,
    }
    let value = obj(&[(
        "set",
        Value::List(vec![
            obj(&[("name", "a".into())]),
            obj(&[("name", Value::Null)]),
        ]),
    )]);
    let error = decode::<WithList>(&value, Unknowns::Reject).expect_err("a null name");
    let d = error.diagnostic("configuration");
    // A null field reads as a missing one: the element is named, and the field.
    assert!(
        d.detail.contains("at `set[1]`") && d.detail.contains("`name`"),
        "the text names the element: {}",
        d.detail
    );
    assert_eq!(
        d.attribute.map(|p| p.to_string()).as_deref(),
        Some("set[1]")
    );
}
