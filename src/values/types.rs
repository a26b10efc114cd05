//! The cty type system, and its JSON form (`"string"`, `["list","string"]`, `["object",{...}]`).

use std::collections::BTreeMap;

/// A cty type. `Dynamic` is cty's `DynamicPseudoType`: the concrete type travels with the value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Type {
    Bool,
    Number,
    String,
    Dynamic,
    List(Box<Type>),
    Set(Box<Type>),
    Map(Box<Type>),
    /// Attribute types; `optional` lists attributes that may be omitted (Terraform object type constraints).
    Object {
        attributes: BTreeMap<String, Type>,
        optional: Vec<String>,
    },
    Tuple(Vec<Type>),
}

/// Why `found` elements are no tuple of `elements`, if they are not: the codecs' one message.
pub(crate) fn tuple_length_mismatch(elements: &[Type], found: usize) -> Option<String> {
    (found != elements.len()).then(|| {
        format!(
            "a tuple of length {} is required, found {found} elements",
            elements.len()
        )
    })
}

impl Type {
    pub fn list(element: Type) -> Type {
        Type::List(Box::new(element))
    }
    pub fn set(element: Type) -> Type {
        Type::Set(Box::new(element))
    }
    pub fn map(element: Type) -> Type {
        Type::Map(Box::new(element))
    }
    pub fn object<I, K>(attributes: I) -> Type
    where
        I: IntoIterator<Item = (K, Type)>,
        K: Into<String>,
    {
        Type::Object {
            attributes: attributes.into_iter().map(|(k, t)| (k.into(), t)).collect(),
            optional: Vec::new(),
        }
    }
}

/// Why a cty type description (JSON) could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TypeJsonError {
    #[error("failed to parse type JSON: {0}")]
    Syntax(#[source] serde_json::Error),
    #[error("failed to decode type JSON: {0}")]
    Invalid(String),
    #[error("failed to decode type JSON: nested deeper than {MAX_TYPE_DEPTH} levels")]
    TooDeep,
}

/// Types nested deeper than this are refused when read from JSON (Terraform schemas stay far below).
pub const MAX_TYPE_DEPTH: usize = 64;

impl Type {
    /// The cty JSON form: `"string"`, `["list","string"]`, `["object",{"a":"bool"}]`,
    /// `["object",{"a":"bool"},["a"]]` (sorted optional attribute names), `["tuple",[...]]`.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        let kind = |k: &str, inner: J| J::Array(vec![J::String(k.to_owned()), inner]);
        match self {
            Type::Bool => J::String("bool".into()),
            Type::Number => J::String("number".into()),
            Type::String => J::String("string".into()),
            Type::Dynamic => J::String("dynamic".into()),
            Type::List(e) => kind("list", e.to_json()),
            Type::Set(e) => kind("set", e.to_json()),
            Type::Map(e) => kind("map", e.to_json()),
            Type::Tuple(elems) => {
                kind("tuple", J::Array(elems.iter().map(Type::to_json).collect()))
            }
            Type::Object {
                attributes,
                optional,
            } => {
                let attrs = attributes
                    .iter()
                    .map(|(k, t)| (k.clone(), t.to_json()))
                    .collect();
                let mut out = vec![J::String("object".into()), J::Object(attrs)];
                if !optional.is_empty() {
                    let mut names: Vec<&String> = optional.iter().collect();
                    names.sort();
                    names.dedup();
                    out.push(J::Array(
                        names.into_iter().map(|n| J::String(n.clone())).collect(),
                    ));
                }
                J::Array(out)
            }
        }
    }

    /// [`Type::to_json`] as bytes (what tfplugin6 `Schema.Attribute.type` carries).
    pub fn to_json_bytes(&self) -> Vec<u8> {
        // Serializing a serde_json::Value into a Vec cannot fail.
        serde_json::to_vec(&self.to_json()).unwrap_or_default()
    }

    /// Reads the cty JSON form (see [`Type::to_json`]).
    ///
    /// # Errors
    /// [`TypeJsonError::Invalid`] for anything that is not a cty type description,
    /// [`TypeJsonError::TooDeep`] past [`MAX_TYPE_DEPTH`] levels.
    pub fn from_json(json: &serde_json::Value) -> Result<Type, TypeJsonError> {
        type_from_json(json, 0)
    }

    /// Reads the cty JSON form from bytes, e.g. tfplugin6 `Schema.Attribute.type`.
    ///
    /// # Errors
    /// [`TypeJsonError::Syntax`] when the bytes are not JSON, otherwise as [`Type::from_json`].
    pub fn from_json_bytes(bytes: &[u8]) -> Result<Type, TypeJsonError> {
        let json: serde_json::Value =
            serde_json::from_slice(bytes).map_err(TypeJsonError::Syntax)?;
        Type::from_json(&json)
    }

    /// True for list, set and map (the types that take length refinements).
    pub fn is_collection(&self) -> bool {
        matches!(self, Type::List(_) | Type::Set(_) | Type::Map(_))
    }
}

fn type_from_json(json: &serde_json::Value, depth: usize) -> Result<Type, TypeJsonError> {
    use serde_json::Value as J;
    if depth > MAX_TYPE_DEPTH {
        return Err(TypeJsonError::TooDeep);
    }
    let invalid = |what: &str| TypeJsonError::Invalid(what.to_owned());
    match json {
        J::String(name) => match name.as_str() {
            "bool" => Ok(Type::Bool),
            "number" => Ok(Type::Number),
            "string" => Ok(Type::String),
            "dynamic" => Ok(Type::Dynamic),
            other => Err(TypeJsonError::Invalid(format!(
                "invalid primitive type name {other:?}"
            ))),
        },
        J::Array(items) => {
            let Some(J::String(kind)) = items.first() else {
                return Err(invalid("invalid complex type kind name"));
            };
            let args = &items[1..];
            let element = || match args {
                [e] => type_from_json(e, depth + 1),
                _ => Err(TypeJsonError::Invalid(format!(
                    "{kind} type takes exactly one element type"
                ))),
            };
            match kind.as_str() {
                "list" => Ok(Type::list(element()?)),
                "set" => Ok(Type::set(element()?)),
                "map" => Ok(Type::map(element()?)),
                "tuple" => match args {
                    [J::Array(elems)] => Ok(Type::Tuple(
                        elems
                            .iter()
                            .map(|e| type_from_json(e, depth + 1))
                            .collect::<Result<_, _>>()?,
                    )),
                    _ => Err(invalid("tuple type takes an array of element types")),
                },
                "object" => object_from_json(args, depth),
                other => Err(TypeJsonError::Invalid(format!(
                    "invalid complex type kind name {other:?}"
                ))),
            }
        }
        _ => Err(invalid("invalid type description")),
    }
}

fn object_from_json(args: &[serde_json::Value], depth: usize) -> Result<Type, TypeJsonError> {
    use serde_json::Value as J;
    let (attrs, optional) = match args {
        [J::Object(attrs)] => (attrs, &[][..]),
        [J::Object(attrs), J::Array(optional)] => (attrs, &optional[..]),
        _ => {
            return Err(TypeJsonError::Invalid(
                "object type takes an attribute map and optional names".into(),
            ));
        }
    };
    let mut attributes = BTreeMap::new();
    for (name, ty) in attrs {
        attributes.insert(name.clone(), type_from_json(ty, depth + 1)?);
    }
    let mut names = Vec::with_capacity(optional.len());
    for name in optional {
        match name {
            J::String(n) if attributes.contains_key(n) => names.push(n.clone()),
            J::String(n) => {
                return Err(TypeJsonError::Invalid(format!(
                    "optional attribute {n:?} is not an attribute"
                )));
            }
            _ => {
                return Err(TypeJsonError::Invalid(
                    "optional attribute names must be strings".into(),
                ));
            }
        }
    }
    names.sort();
    names.dedup();
    Ok(Type::Object {
        attributes,
        optional: names,
    })
}

impl Type {
    /// A short human name for messages: `string`, `list of number`, `object`, `tuple`, `dynamic`.
    pub fn friendly_name(&self) -> String {
        match self {
            Type::Bool => "bool".into(),
            Type::Number => "number".into(),
            Type::String => "string".into(),
            Type::Dynamic => "dynamic".into(),
            Type::List(e) => format!("list of {}", e.friendly_name()),
            Type::Set(e) => format!("set of {}", e.friendly_name()),
            Type::Map(e) => format!("map of {}", e.friendly_name()),
            Type::Object { .. } => "object".into(),
            Type::Tuple(_) => "tuple".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::testgen;
    use proptest::prelude::*;

    fn parse(text: &str) -> Result<Type, TypeJsonError> {
        Type::from_json_bytes(text.as_bytes())
    }

    #[test]
    fn reads_the_types_terraform_sends() {
        assert_eq!(parse(r#""string""#).unwrap(), Type::String);
        assert_eq!(parse(r#""dynamic""#).unwrap(), Type::Dynamic);
        assert_eq!(
            parse(r#"["map","string"]"#).unwrap(),
            Type::map(Type::String)
        );
        assert_eq!(
            parse(r#"["set",["list","bool"]]"#).unwrap(),
            Type::set(Type::list(Type::Bool))
        );
        assert_eq!(
            parse(r#"["tuple",["string","number"]]"#).unwrap(),
            Type::Tuple(vec![Type::String, Type::Number])
        );
        assert_eq!(
            parse(r#"["object",{"name":"string","count":"number"}]"#).unwrap(),
            Type::object([("name", Type::String), ("count", Type::Number)])
        );
        let with_optional = parse(r#"["object",{"a":"bool","b":"string"},["b"]]"#).unwrap();
        assert_eq!(
            with_optional,
            Type::Object {
                attributes: [
                    ("a".to_string(), Type::Bool),
                    ("b".to_string(), Type::String)
                ]
                .into(),
                optional: vec!["b".to_string()],
            }
        );
    }

    #[test]
    fn writes_cty_json() {
        let ty = Type::Object {
            attributes: [
                ("z".to_string(), Type::list(Type::String)),
                (
                    "a".to_string(),
                    Type::Tuple(vec![Type::Bool, Type::Dynamic]),
                ),
            ]
            .into(),
            optional: vec!["z".to_string(), "a".to_string()],
        };
        assert_eq!(
            String::from_utf8(ty.to_json_bytes()).unwrap(),
            r#"["object",{"a":["tuple",["bool","dynamic"]],"z":["list","string"]},["a","z"]]"#
        );
        assert_eq!(
            Type::map(Type::Number).to_json_bytes(),
            br#"["map","number"]"#
        );
    }

    #[test]
    fn refuses_what_is_not_a_type() {
        for bad in [
            r#""str""#,
            "5",
            "null",
            r#"[]"#,
            r#"["list"]"#,
            r#"["list","string","string"]"#,
            r#"["object",{"a":"x"}]"#,
            r#"["object",{"a":"bool"},["b"]]"#,
            r#"["object",{"a":"bool"},[1]]"#,
            r#"["tuple","string"]"#,
            r#"["pair","string"]"#,
        ] {
            assert!(
                matches!(parse(bad), Err(TypeJsonError::Invalid(_))),
                "{bad}"
            );
        }
        assert!(matches!(parse("[\"list\""), Err(TypeJsonError::Syntax(_))));
        let deep = r#"["list","#.repeat(100) + r#""string""# + &"]".repeat(100);
        assert!(matches!(parse(&deep), Err(TypeJsonError::TooDeep)));
    }

    proptest! {
        #[test]
        fn json_round_trip(ty in testgen::any_type()) {
            prop_assert_eq!(Type::from_json_bytes(&ty.to_json_bytes()).unwrap(), ty);
        }
    }
}
