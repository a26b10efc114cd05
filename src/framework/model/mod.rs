//! Typed models: a resource decodes its config, plan or state into plain Rust structs in one call
//! and encodes its state back, so no resource walks [`Value`] by hand.
//!
//! Decoding goes through serde: `#[derive(Deserialize)]` structs whose field names are the schema's
//! attribute names. Null becomes `None`, an empty collection, or (for a nested object) an object
//! whose attributes are all null. Unknown values are
//! represented explicitly by [`Maybe`]; a plain field that meets an unknown is an error in
//! [`Unknowns::Reject`] mode and `None`/default in [`Unknowns::AsNull`] mode, which is what
//! validation wants ("skip checks on unknowns"). Every error carries the attribute path.
//!
//! Encoding takes the schema's [`Type`], so lists, sets, maps and objects come out as Terraform
//! expects them (every object attribute present, numbers as numbers).

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeOwned, IntoDeserializer, Visitor};
use serde::{Deserialize, Serialize};

use super::Diagnostic;
use crate::values::{AttributePath, Number, Type, Value};

/// How a plain (non-[`Maybe`]) field treats an unknown value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unknowns {
    /// An unknown where a known value is needed is an error (apply, read).
    Reject,
    /// An unknown decodes as null (validate and plan, which must skip what is not known yet).
    AsNull,
}

/// A value that may be unknown at plan time.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Maybe<T> {
    #[default]
    Null,
    Unknown,
    Known(T),
}

impl<T> Maybe<T> {
    pub fn known(&self) -> Option<&T> {
        match self {
            Maybe::Known(v) => Some(v),
            _ => None,
        }
    }
    pub fn is_unknown(&self) -> bool {
        matches!(self, Maybe::Unknown)
    }
}

/// Encodes as the value, or null: state never holds unknowns, and plans mark them explicitly.
impl<T: Serialize> Serialize for Maybe<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Maybe::Known(v) => serializer.serialize_some(v),
            _ => serializer.serialize_none(),
        }
    }
}

const MAYBE_MARKER: &str = "$talosboot::Maybe";

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Maybe<T> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MaybeVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for MaybeVisitor<T> {
            type Value = Maybe<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a value that may be unknown")
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Maybe::Null)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Maybe::Unknown)
            }
            fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                T::deserialize(d).map(Maybe::Known)
            }
        }
        deserializer
            .deserialize_newtype_struct(MAYBE_MARKER, MaybeVisitor(std::marker::PhantomData))
    }
}

/// A decoding failure at an attribute path.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelError {
    pub path: AttributePath,
    pub message: String,
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_root() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path.describe(), self.message)
        }
    }
}

impl std::error::Error for ModelError {}

impl de::Error for ModelError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        ModelError {
            path: AttributePath::root(),
            message: msg.to_string(),
        }
    }
}

impl ModelError {
    /// The diagnostic a resource returns for a value it could not decode: a provider bug unless the
    /// value came from configuration, which validation already checked.
    pub fn diagnostic(&self, what: &str) -> Diagnostic {
        // The path in the text too: a CLI may show a list element's path as the list's.
        let at = match self.path.is_root() {
            true => String::new(),
            false => format!(" at `{}`", self.path.describe()),
        };
        let d = Diagnostic::error(
            format!("Invalid {what}"),
            format!(
                "The provider could not decode the {what}{at}: {}.",
                self.message
            ),
        );
        if self.path.is_root() {
            d
        } else {
            d.at(self.path.clone())
        }
    }
}

/// Decodes `value` into `T`; errors name the attribute path.
pub fn decode<T: DeserializeOwned>(value: &Value, unknowns: Unknowns) -> Result<T, ModelError> {
    T::deserialize(ValueDeserializer {
        value,
        path: AttributePath::root(),
        unknowns,
    })
}

struct ValueDeserializer<'a> {
    value: &'a Value,
    path: AttributePath,
    unknowns: Unknowns,
}

impl<'a> ValueDeserializer<'a> {
    fn child(&self, value: &'a Value, path: AttributePath) -> Self {
        ValueDeserializer {
            value,
            path,
            unknowns: self.unknowns,
        }
    }
    fn error(&self, message: impl Into<String>) -> ModelError {
        ModelError {
            path: self.path.clone(),
            message: message.into(),
        }
    }
    fn unwrapped(&self) -> &'a Value {
        match self.value {
            Value::Dynamic(_, inner) => inner,
            v => v,
        }
    }
    fn is_nullish(&self) -> bool {
        match self.unwrapped() {
            Value::Null => true,
            Value::Unknown(_) => self.unknowns == Unknowns::AsNull,
            _ => false,
        }
    }
    fn attach(&self, mut e: ModelError) -> ModelError {
        if e.path.is_root() {
            e.path = self.path.clone();
        }
        e
    }
}

impl<'de> de::Deserializer<'de> for ValueDeserializer<'_> {
    type Error = ModelError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ModelError> {
        let value = self.unwrapped();
        let result = match value {
            Value::Null => visitor.visit_none(),
            Value::Unknown(_) => match self.unknowns {
                Unknowns::AsNull => visitor.visit_none(),
                Unknowns::Reject => Err(self.error("value is not known yet")),
            },
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(Number::Int(i)) => visitor.visit_i64(*i),
            Value::Number(Number::Float(f)) => visitor.visit_f64(*f),
            Value::Number(Number::Big(s)) => match s.parse::<f64>() {
                Ok(f) => visitor.visit_f64(f),
                Err(_) => Err(self.error(format!("number {s} is out of range"))),
            },
            Value::String(s) => visitor.visit_str(s),
            Value::List(items) | Value::Set(items) | Value::Tuple(items) => {
                visitor.visit_seq(SeqAccess {
                    items: items.iter().enumerate(),
                    parent: &self,
                })
            }
            Value::Map(entries) | Value::Object(entries) => visitor.visit_map(MapAccess {
                entries: entries.iter(),
                pending: None,
                parent: &self,
            }),
            Value::Dynamic(..) => unreachable!("unwrapped above"),
        };
        result.map_err(|e| self.attach(e))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ModelError> {
        match self.unwrapped() {
            Value::Null => visitor.visit_none(),
            Value::Unknown(_) if self.unknowns == Unknowns::AsNull => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ModelError> {
        if name == MAYBE_MARKER {
            return match self.unwrapped() {
                Value::Null => visitor.visit_none(),
                Value::Unknown(_) => visitor.visit_unit(),
                _ if !self.value.is_wholly_known() && self.unknowns == Unknowns::Reject => {
                    // Partly known: the resource cannot use it yet, so it is unknown as a whole.
                    visitor.visit_unit()
                }
                _ => visitor.visit_some(self),
            };
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ModelError> {
        match self.unwrapped() {
            Value::String(s) => visitor
                .visit_enum(s.as_str().into_deserializer())
                .map_err(|e: ModelError| self.attach(e)),
            _ => Err(self.error("expected a string")),
        }
    }

    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ModelError> {
        self.deserialize_integer(visitor)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ModelError> {
        self.deserialize_integer(visitor)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ModelError> {
        self.deserialize_integer(visitor)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ModelError> {
        self.deserialize_integer(visitor)
    }
    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ModelError> {
        self.deserialize_integer(visitor)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ModelError> {
        if self.is_nullish() {
            // Terraform sends unset collections as null: they decode as empty.
            return visitor.visit_seq(de::value::SeqDeserializer::new(std::iter::empty::<()>()));
        }
        de::Deserializer::deserialize_any(self, visitor)
    }
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ModelError> {
        if self.is_nullish() {
            return visitor.visit_map(de::value::MapDeserializer::new(
                std::iter::empty::<((), ())>(),
            ));
        }
        de::Deserializer::deserialize_any(self, visitor)
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ModelError> {
        self.deserialize_map(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i128 u8 u128 f32 f64 char str string bytes byte_buf unit unit_struct
        tuple tuple_struct identifier ignored_any
    }
}

impl ValueDeserializer<'_> {
    /// Whole numbers written as floats (`3.0`) still decode into integer fields.
    fn deserialize_integer<'de, V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ModelError> {
        match self.unwrapped() {
            Value::Number(_) => match self.unwrapped().as_i64() {
                Some(i) => visitor.visit_i64(i).map_err(|e| self.attach(e)),
                None => Err(self.error("expected a whole number")),
            },
            _ => de::Deserializer::deserialize_any(self, visitor),
        }
    }
}

struct SeqAccess<'a, 'p, I> {
    items: I,
    parent: &'p ValueDeserializer<'a>,
}

impl<'de, 'a, I> de::SeqAccess<'de> for SeqAccess<'a, '_, I>
where
    I: Iterator<Item = (usize, &'a Value)>,
{
    type Error = ModelError;
    fn next_element_seed<T: de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, ModelError> {
        // Lenient decoding drops elements not known yet: a check cannot judge them.
        let lenient = self.parent.unknowns == Unknowns::AsNull;
        let Some((i, item)) = self.items.find(|(_, v)| !(lenient && v.is_unknown())) else {
            return Ok(None);
        };
        let path = self.parent.path.clone().then_index(i as i64);
        seed.deserialize(self.parent.child(item, path)).map(Some)
    }
}

struct MapAccess<'a, 'p, I> {
    entries: I,
    pending: Option<(&'a String, &'a Value)>,
    parent: &'p ValueDeserializer<'a>,
}

impl<'de, 'a, I> de::MapAccess<'de> for MapAccess<'a, '_, I>
where
    I: Iterator<Item = (&'a String, &'a Value)>,
{
    type Error = ModelError;
    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, ModelError> {
        // Lenient decoding drops map entries whose value is not known yet (an object's unknown
        // attribute stays, for `Maybe`); an object's null attribute is an absent field (so
        // `#[serde(default)]` applies, and write-only values, null in plans and state, decode).
        let lenient = self.parent.unknowns == Unknowns::AsNull;
        let object = matches!(self.parent.unwrapped(), Value::Object(_));
        let skip = |v: &Value| (lenient && !object && v.is_unknown()) || (object && v.is_null());
        let Some((k, v)) = self.entries.find(|(_, v)| !skip(v)) else {
            return Ok(None);
        };
        self.pending = Some((k, v));
        seed.deserialize(k.as_str().into_deserializer()).map(Some)
    }
    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, ModelError> {
        let (k, v) = self
            .pending
            .take()
            .ok_or_else(|| de::Error::custom("value without key"))?;
        let path = match self.parent.unwrapped() {
            Value::Map(_) => self.parent.path.clone().then_key(k.clone()),
            _ => self.parent.path.clone().then_attr(k.clone()),
        };
        seed.deserialize(self.parent.child(v, path))
    }
}

/// Encodes `model` as a value of type `ty` (the schema's object type): attributes the model lacks
/// are null, JSON arrays become lists, sets or tuples and JSON objects maps or objects as `ty` says.
pub fn encode<T: Serialize>(model: &T, ty: &Type) -> Result<Value, ModelError> {
    let json = serde_json::to_value(model).map_err(de::Error::custom)?;
    from_json_typed(&json, ty, AttributePath::root())
}

fn from_json_typed(
    json: &serde_json::Value,
    ty: &Type,
    path: AttributePath,
) -> Result<Value, ModelError> {
    use serde_json::Value as J;
    let mismatch = |what: &str| ModelError {
        path: path.clone(),
        message: format!("expected {what}"),
    };
    if json.is_null() {
        return Ok(Value::Null);
    }
    Ok(match ty {
        Type::Dynamic => {
            let inner = from_json_untyped(json);
            Value::Dynamic(inner.implied_type(), Box::new(inner))
        }
        Type::String => match json {
            J::String(s) => Value::String(s.clone()),
            J::Bool(b) => Value::String(b.to_string()),
            J::Number(n) => Value::String(n.to_string()),
            _ => return Err(mismatch("a string")),
        },
        Type::Bool => Value::Bool(json.as_bool().ok_or_else(|| mismatch("a bool"))?),
        Type::Number => match json {
            J::Number(n) => number(n),
            _ => return Err(mismatch("a number")),
        },
        Type::List(elem) | Type::Set(elem) => {
            let items = json.as_array().ok_or_else(|| mismatch("a list"))?;
            let values = items
                .iter()
                .enumerate()
                .map(|(i, item)| from_json_typed(item, elem, path.clone().then_index(i as i64)))
                .collect::<Result<Vec<_>, _>>()?;
            if matches!(ty, Type::Set(_)) {
                Value::Set(values)
            } else {
                Value::List(values)
            }
        }
        Type::Tuple(elems) => {
            let items = json.as_array().ok_or_else(|| mismatch("a tuple"))?;
            let values = items
                .iter()
                .zip(elems)
                .enumerate()
                .map(|(i, (item, t))| from_json_typed(item, t, path.clone().then_index(i as i64)))
                .collect::<Result<Vec<_>, _>>()?;
            Value::Tuple(values)
        }
        Type::Map(elem) => {
            let entries = json.as_object().ok_or_else(|| mismatch("a map"))?;
            let values = entries
                .iter()
                .map(|(k, v)| {
                    Ok((
                        k.clone(),
                        from_json_typed(v, elem, path.clone().then_key(k))?,
                    ))
                })
                .collect::<Result<BTreeMap<_, _>, ModelError>>()?;
            Value::Map(values)
        }
        Type::Object { attributes, .. } => {
            let entries = json.as_object().ok_or_else(|| mismatch("an object"))?;
            let values = attributes
                .iter()
                .map(|(k, t)| {
                    let v = entries.get(k).unwrap_or(&J::Null);
                    Ok((k.clone(), from_json_typed(v, t, path.clone().then_attr(k))?))
                })
                .collect::<Result<BTreeMap<_, _>, ModelError>>()?;
            Value::Object(values)
        }
    })
}

fn number(n: &serde_json::Number) -> Value {
    match (n.as_i64(), n.as_f64()) {
        (Some(i), _) => Value::int(i),
        (None, Some(f)) => Value::Number(Number::Float(f)),
        _ => Value::Number(Number::Big(n.to_string())),
    }
}

/// JSON of unknown shape (a dynamic attribute): arrays are tuples, objects are objects.
fn from_json_untyped(json: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    match json {
        J::Null => Value::Null,
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => number(n),
        J::String(s) => Value::String(s.clone()),
        J::Array(items) => Value::Tuple(items.iter().map(from_json_untyped).collect()),
        J::Object(entries) => Value::Object(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), from_json_untyped(v)))
                .collect(),
        ),
    }
}

/// A value as plain JSON (unknowns become null): for hashing and for values that go to the cluster.
pub fn to_plain_json(value: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        Value::Null | Value::Unknown(_) => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Number(Number::Int(i)) => J::from(*i),
        Value::Number(Number::Float(f)) => {
            serde_json::Number::from_f64(*f).map_or(J::Null, J::Number)
        }
        Value::Number(Number::Big(s)) => s
            .parse::<serde_json::Number>()
            .map(J::Number)
            .unwrap_or_else(|_| J::String(s.clone())),
        Value::String(s) => J::String(s.clone()),
        Value::List(items) | Value::Set(items) | Value::Tuple(items) => {
            J::Array(items.iter().map(to_plain_json).collect())
        }
        Value::Map(entries) | Value::Object(entries) => J::Object(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), to_plain_json(v)))
                .collect(),
        ),
        Value::Dynamic(_, inner) => to_plain_json(inner),
    }
}

#[cfg(test)]
mod tests;
