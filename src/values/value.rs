//! The value model. Collections keep their elements; the element type comes from the schema's [`Type`]
//! when encoding, so a value never needs to repeat it.

use std::collections::BTreeMap;
use std::fmt;

use super::Type;

/// A cty number. Terraform numbers are arbitrary precision; most fit an `i64` or an `f64`, the rest
/// travel as their decimal text so that nothing is rounded on the way through the provider.
#[derive(Debug, Clone, PartialEq)]
pub enum Number {
    Int(i64),
    Float(f64),
    /// A number that fits neither exactly, kept as its canonical decimal text (e.g. `"18446744073709551616"`,
    /// `"0.1"`, `"1e400"`): see [`Number::parse_decimal`]. Compared as text by `PartialEq`.
    Big(String),
}

/// What Terraform already knows about an unknown value (cty "refinements", msgpack extension 12).
/// Providers mostly pass these through; keeping them lets plans stay as precise as Terraform made them.
/// `Debug` does not print the string prefix (it can be the start of a secret).
#[derive(Clone, PartialEq, Default)]
pub struct Refinements {
    /// The value is known not to be null.
    pub not_null: bool,
    /// For strings: a known prefix.
    pub string_prefix: Option<String>,
    /// For numbers: (bound, inclusive).
    pub number_lower: Option<(Number, bool)>,
    pub number_upper: Option<(Number, bool)>,
    /// For collections: known length bounds.
    pub length_lower: Option<u64>,
    pub length_upper: Option<u64>,
}

/// A cty value.
///
/// Equality is cty's: sets compare as sets (the same elements in any order, each as often), so
/// replacement and change decisions do not depend on the order Terraform happened to send.
#[derive(Clone, Default)]
pub enum Value {
    #[default]
    Null,
    /// Not known until apply. `None` = a plain unknown (msgpack extension 0).
    Unknown(Option<Box<Refinements>>),
    Bool(bool),
    Number(Number),
    String(String),
    List(Vec<Value>),
    Set(Vec<Value>),
    Map(BTreeMap<String, Value>),
    Object(BTreeMap<String, Value>),
    Tuple(Vec<Value>),
    /// A value of a dynamically typed attribute, with the concrete type it was encoded with.
    Dynamic(Type, Box<Value>),
}

fn debug_elements(f: &mut fmt::Formatter<'_>, kind: &str, items: &[Value]) -> fmt::Result {
    f.write_str(kind)?;
    f.debug_list().entries(items).finish()
}

fn debug_entries(
    f: &mut fmt::Formatter<'_>,
    kind: &str,
    entries: &BTreeMap<String, Value>,
) -> fmt::Result {
    f.write_str(kind)?;
    f.debug_map().entries(entries).finish()
}

/// Prints the structure (kinds, attribute names and map keys, numbers, bools) but never a string's
/// content, so `debug!(?config)` cannot leak a kubeconfig or a deploy key. Strings show as
/// `String(<N bytes>)`.
impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("Null"),
            Value::Unknown(None) => f.write_str("Unknown"),
            Value::Unknown(Some(r)) => f.debug_tuple("Unknown").field(r).finish(),
            Value::Bool(b) => f.debug_tuple("Bool").field(b).finish(),
            Value::Number(n) => f.debug_tuple("Number").field(n).finish(),
            Value::String(s) => write!(f, "String(<{} bytes>)", s.len()),
            Value::List(items) => debug_elements(f, "List", items),
            Value::Set(items) => debug_elements(f, "Set", items),
            Value::Tuple(items) => debug_elements(f, "Tuple", items),
            Value::Map(items) => debug_entries(f, "Map", items),
            Value::Object(attrs) => debug_entries(f, "Object", attrs),
            Value::Dynamic(ty, inner) => f.debug_tuple("Dynamic").field(ty).field(inner).finish(),
        }
    }
}

impl fmt::Debug for Refinements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Refinements")
            .field("not_null", &self.not_null)
            .field(
                "string_prefix",
                &self
                    .string_prefix
                    .as_ref()
                    .map(|p| format!("<{} bytes>", p.len())),
            )
            .field("number_lower", &self.number_lower)
            .field("number_upper", &self.number_upper)
            .field("length_lower", &self.length_lower)
            .field("length_upper", &self.length_upper)
            .finish()
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        use Value::*;
        match (self, other) {
            (Null, Null) => true,
            (Unknown(a), Unknown(b)) => a == b,
            (Bool(a), Bool(b)) => a == b,
            (Number(a), Number(b)) => a == b,
            (String(a), String(b)) => a == b,
            (List(a), List(b)) | (Tuple(a), Tuple(b)) => a == b,
            (Set(a), Set(b)) => same_elements(a, b),
            (Map(a), Map(b)) | (Object(a), Object(b)) => a == b,
            (Dynamic(ta, a), Dynamic(tb, b)) => ta == tb && a == b,
            _ => false,
        }
    }
}

/// Multiset equality: every element of `a` matched with a distinct equal element of `b`.
fn same_elements(a: &[Value], b: &[Value]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a == b {
        return true;
    }
    let mut unmatched: Vec<&Value> = b.iter().collect();
    a.iter()
        .all(|x| match unmatched.iter().position(|y| x == *y) {
            Some(i) => {
                unmatched.swap_remove(i);
                true
            }
            None => false,
        })
}

impl Value {
    pub fn unknown() -> Value {
        Value::Unknown(None)
    }
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
    pub fn is_unknown(&self) -> bool {
        matches!(self, Value::Unknown(_))
    }
    /// True when this value and everything inside it is known.
    pub fn is_wholly_known(&self) -> bool {
        match self {
            Value::Unknown(_) => false,
            Value::List(items) | Value::Set(items) | Value::Tuple(items) => {
                items.iter().all(Value::is_wholly_known)
            }
            Value::Map(items) | Value::Object(items) => items.values().all(Value::is_wholly_known),
            Value::Dynamic(_, inner) => inner.is_wholly_known(),
            _ => true,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            Value::Dynamic(_, inner) => inner.as_str(),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Number(Number::Int(i)) => Some(*i),
            Value::Number(Number::Float(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => {
                Some(*f as i64)
            }
            _ => None,
        }
    }
    /// Attribute of an object value (`None` if not an object or absent).
    pub fn attr(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Object(attrs) => attrs.get(name),
            _ => None,
        }
    }
    pub fn attrs_mut(&mut self) -> Option<&mut BTreeMap<String, Value>> {
        match self {
            Value::Object(attrs) => Some(attrs),
            _ => None,
        }
    }
    /// An object value of `(attribute, value)` pairs.
    pub fn object<K: Into<String>>(pairs: impl IntoIterator<Item = (K, Value)>) -> Value {
        Value::Object(pairs.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
    pub fn string(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }
    pub fn int(i: i64) -> Value {
        Value::Number(Number::Int(i))
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_owned())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::int(i)
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map(Into::into).unwrap_or(Value::Null)
    }
}

impl Refinements {
    /// True when nothing is refined (such an unknown is encoded as a plain unknown).
    pub fn is_empty(&self) -> bool {
        *self == Refinements::default()
    }
}

impl Value {
    /// The type this value would have on its own, used to encode a value for a dynamically typed
    /// attribute: `Null`/`Unknown` → `Dynamic`, `List` → list of the elements' common type
    /// (`Dynamic` when empty or mixed), `Object` → object of the attributes' types, and
    /// `Dynamic(ty, _)` → `ty`.
    pub fn implied_type(&self) -> Type {
        match self {
            Value::Null | Value::Unknown(_) => Type::Dynamic,
            Value::Bool(_) => Type::Bool,
            Value::Number(_) => Type::Number,
            Value::String(_) => Type::String,
            Value::List(items) => Type::list(common_type(items.iter())),
            Value::Set(items) => Type::set(common_type(items.iter())),
            Value::Map(items) => Type::map(common_type(items.values())),
            Value::Tuple(items) => Type::Tuple(items.iter().map(Value::implied_type).collect()),
            Value::Object(attrs) => {
                Type::object(attrs.iter().map(|(k, v)| (k.clone(), v.implied_type())))
            }
            Value::Dynamic(Type::Dynamic, inner) => inner.implied_type(),
            Value::Dynamic(ty, _) => ty.clone(),
        }
    }
}

/// The element type shared by all values (`Dynamic` stands in for null/unknown/empty parts).
fn common_type<'a>(mut items: impl Iterator<Item = &'a Value>) -> Type {
    let Some(first) = items.next() else {
        return Type::Dynamic;
    };
    let mut acc = first.implied_type();
    for item in items {
        match unify(&acc, &item.implied_type()) {
            Some(t) => acc = t,
            None => return Type::Dynamic,
        }
    }
    acc
}

fn unify(a: &Type, b: &Type) -> Option<Type> {
    match (a, b) {
        _ if a == b => Some(a.clone()),
        (Type::Dynamic, t) | (t, Type::Dynamic) => Some(t.clone()),
        (Type::List(x), Type::List(y)) => Some(Type::list(unify(x, y)?)),
        (Type::Set(x), Type::Set(y)) => Some(Type::set(unify(x, y)?)),
        (Type::Map(x), Type::Map(y)) => Some(Type::map(unify(x, y)?)),
        (Type::Tuple(xs), Type::Tuple(ys)) if xs.len() == ys.len() => Some(Type::Tuple(
            xs.iter()
                .zip(ys)
                .map(|(x, y)| unify(x, y))
                .collect::<Option<_>>()?,
        )),
        (Type::Object { attributes: xs, .. }, Type::Object { attributes: ys, .. })
            if xs.len() == ys.len() && xs.keys().eq(ys.keys()) =>
        {
            let attrs = xs
                .iter()
                .zip(ys.values())
                .map(|((k, x), y)| Some((k.clone(), unify(x, y)?)));
            Some(Type::object(attrs.collect::<Option<Vec<_>>>()?))
        }
        _ => None,
    }
}

impl Value {
    /// A short name of the value's kind for messages.
    pub(crate) fn kind_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Unknown(_) => "unknown",
            Value::Bool(_) => "bool",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::Map(_) => "map",
            Value::Object(_) => "object",
            Value::Tuple(_) => "tuple",
            Value::Dynamic(..) => "dynamic",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_structure_but_no_string_content() {
        let value = Value::Object(BTreeMap::from([
            (
                "kubeconfig".to_owned(),
                Value::from("MARKER-kubeconfig-secret"),
            ),
            ("replicas".to_owned(), Value::int(3)),
            (
                "pending".to_owned(),
                Value::Unknown(Some(Box::new(Refinements {
                    string_prefix: Some("MARKER-prefix".into()),
                    ..Default::default()
                }))),
            ),
        ]));
        let printed = format!("{value:?} {value:#?}");
        assert!(!printed.contains("MARKER"), "{printed}");
        assert!(printed.contains("kubeconfig") && printed.contains("String(<24 bytes>)"));
        assert!(printed.contains("Int(3)"), "{printed}");
    }

    #[test]
    fn sets_are_equal_in_any_order_lists_are_not() {
        let (a, b) = (Value::from("a"), Value::from("b"));
        assert_eq!(
            Value::Set(vec![a.clone(), b.clone()]),
            Value::Set(vec![b.clone(), a.clone()])
        );
        assert_ne!(
            Value::Set(vec![a.clone(), a.clone()]),
            Value::Set(vec![a.clone(), b.clone()])
        );
        assert_ne!(
            Value::List(vec![a.clone(), b.clone()]),
            Value::List(vec![b, a])
        );
    }

    #[test]
    fn implied_types() {
        assert_eq!(Value::from("x").implied_type(), Type::String);
        assert_eq!(Value::Null.implied_type(), Type::Dynamic);
        assert_eq!(
            Value::List(vec![]).implied_type(),
            Type::list(Type::Dynamic)
        );
        // Nulls and unknowns take the type of their siblings.
        let list = Value::List(vec![Value::Null, "a".into(), Value::unknown()]);
        assert_eq!(list.implied_type(), Type::list(Type::String));
        // Objects whose attributes are null in one element and known in another unify.
        let a = Value::Object([("k".to_string(), Value::Null)].into());
        let b = Value::Object([("k".to_string(), Value::int(1))].into());
        let objects = Value::Set(vec![a, b]);
        assert_eq!(
            objects.implied_type(),
            Type::set(Type::object([("k", Type::Number)]))
        );
        // Mixed element types fall back to dynamic elements.
        let mixed = Value::List(vec!["a".into(), true.into()]);
        assert_eq!(mixed.implied_type(), Type::list(Type::Dynamic));
        let tuple = Value::Tuple(vec![
            "a".into(),
            Value::Dynamic(Type::Bool, Box::new(true.into())),
        ]);
        assert_eq!(
            tuple.implied_type(),
            Type::Tuple(vec![Type::String, Type::Bool])
        );
    }
}
