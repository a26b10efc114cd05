//! cty's JSON encoding (go-cty `cty/json`), used for `UpgradeResourceState` raw state and tests.
//!
//! - Unknown values cannot be written as JSON ([`to_json`] fails on them).
//! - Object attributes missing from the input decode as null; unknown attributes are refused.
//! - A value of a `dynamic` attribute is `{"value": ..., "type": <type JSON>}` (plain `null` for a
//!   null of unknown type).
//! - Numbers are read from their literal text, never through `f64`, so `18446744073709551616` and
//!   `0.1` stay exact. As in cty, a string is accepted for a number or bool, and a number or bool
//!   for a string.
//!
//! The parser is a small hand-written one (serde_json without `arbitrary_precision` rounds big
//! numbers), with nesting bounded and no allocation beyond the input's size.

use std::collections::BTreeMap;

mod parse;
#[cfg(test)]
mod tests;

use parse::{Json, Parser};

use super::msgpack::MAX_DEPTH;
use super::path::{AttributePath, PathStep, Position};
use super::types::{Type, TypeJsonError, tuple_length_mismatch};
use super::value::{Number, Value};

/// JSON nesting accepted by the parser: every dynamic wrapper adds one level over [`MAX_DEPTH`].
const MAX_JSON_DEPTH: usize = 2 * MAX_DEPTH + 2;

/// A JSON value could not be decoded or encoded. `path` is where it happened.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    #[error("failed to parse JSON at byte {offset}: {reason}")]
    Syntax { offset: usize, reason: String },
    #[error("failed to decode JSON value at {}: {reason}", .path.describe())]
    Decode { path: AttributePath, reason: String },
    #[error("failed to decode JSON value at {}: invalid dynamic type: {source}", .path.describe())]
    DynamicType {
        path: AttributePath,
        #[source]
        source: TypeJsonError,
    },
    #[error("failed to encode JSON value at {}: {reason}", .path.describe())]
    Encode { path: AttributePath, reason: String },
}

impl JsonError {
    /// The attribute path the error refers to (the root for syntax errors).
    pub fn path(&self) -> &AttributePath {
        static ROOT: AttributePath = AttributePath { steps: Vec::new() };
        match self {
            JsonError::Syntax { .. } => &ROOT,
            JsonError::Decode { path, .. }
            | JsonError::DynamicType { path, .. }
            | JsonError::Encode { path, .. } => path,
        }
    }
}

/// Options for [`from_json_with`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JsonDecodeOptions {
    /// Drop object attributes the type does not have instead of failing. Stored state may still
    /// hold attributes a newer schema removed; terraform-plugin-framework reads raw state this way
    /// in `UpgradeResourceState` when the stored version is the current one.
    pub ignore_undefined_attributes: bool,
}

/// Decodes cty JSON `bytes` as a value of type `ty`.
///
/// # Errors
/// [`JsonError::Syntax`] for malformed JSON (or nesting deeper than the codec allows),
/// [`JsonError::Decode`] when the JSON does not hold a value of `ty`,
/// [`JsonError::DynamicType`] when a dynamic value's `"type"` is not a cty type.
pub fn from_json(bytes: &[u8], ty: &Type) -> Result<Value, JsonError> {
    from_json_with(bytes, ty, JsonDecodeOptions::default())
}

/// [`from_json`] with options, e.g. to ignore attributes a newer schema removed.
///
/// # Errors
/// As [`from_json`].
pub fn from_json_with(
    bytes: &[u8],
    ty: &Type,
    options: JsonDecodeOptions,
) -> Result<Value, JsonError> {
    let text = std::str::from_utf8(bytes).map_err(|e| JsonError::Syntax {
        offset: e.valid_up_to(),
        reason: "invalid UTF-8".into(),
    })?;
    let mut parser = Parser::new(text);
    parser.ws();
    let tree = parser.value()?;
    parser.ws();
    if parser.pos != text.len() {
        return Err(parser.err("trailing characters after the value"));
    }
    let mut dec = Decoder {
        at: Position::default(),
        options,
    };
    dec.value(tree, ty)
}

/// Encodes `value` as cty JSON for type `ty`.
///
/// # Errors
/// [`JsonError::Encode`] when the value (or a part of it) is unknown, does not conform to `ty`,
/// or holds a number JSON cannot carry (NaN, infinity, non-decimal `Big` text).
pub fn to_json(value: &Value, ty: &Type) -> Result<Vec<u8>, JsonError> {
    let mut enc = Encoder {
        out: Vec::new(),
        at: Position::default(),
    };
    enc.value(value, ty)?;
    Ok(enc.out)
}

// ---------------------------------------------------------------------------------------------
// Decoding values

struct Decoder {
    at: Position,
    options: JsonDecodeOptions,
}

impl Decoder {
    fn err(&self, reason: impl Into<String>) -> JsonError {
        JsonError::Decode {
            path: self.at.path.clone(),
            reason: reason.into(),
        }
    }

    fn enter(&mut self) -> Result<(), JsonError> {
        self.at.enter().map_err(|reason| self.err(reason))
    }

    fn nested(&mut self, step: PathStep, json: Json<'_>, ty: &Type) -> Result<Value, JsonError> {
        self.at.path.push(step);
        let out = self.value(json, ty);
        self.at.path.pop();
        out
    }

    fn value(&mut self, json: Json<'_>, ty: &Type) -> Result<Value, JsonError> {
        if let Json::Null = json {
            return Ok(Value::Null);
        }
        let mismatch = |d: &Self, json: &Json<'_>| {
            d.err(format!(
                "{} is required, found {}",
                ty.friendly_name(),
                json.name()
            ))
        };
        match (ty, json) {
            (Type::Dynamic, json) => self.dynamic(json),
            (Type::Bool, Json::Bool(b)) => Ok(Value::Bool(b)),
            (Type::Bool, Json::String(s)) => match s.as_str() {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                // Never the string itself: it may be a secret.
                _ => Err(self.err(format!(
                    "bool is required, found a string of {} bytes that is not \"true\" or \"false\"",
                    s.len()
                ))),
            },
            (Type::Number, Json::Number(text)) => Number::parse_decimal(text)
                .map(Value::Number)
                .ok_or_else(|| self.err("invalid number")),
            (Type::Number, Json::String(s)) => Number::parse_decimal(s.trim())
                .map(Value::Number)
                .ok_or_else(|| {
                    self.err(format!(
                        "number is required, found a string of {} bytes that is not a number",
                        s.len()
                    ))
                }),
            (Type::String, Json::String(s)) => Ok(Value::String(s)),
            (Type::String, Json::Number(text)) => Ok(Value::String(text.to_owned())),
            (Type::String, Json::Bool(b)) => Ok(Value::String(b.to_string())),
            (Type::List(ety) | Type::Set(ety), Json::Array(items)) => {
                self.enter()?;
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.into_iter().enumerate() {
                    out.push(self.nested(PathStep::ElementKeyInt(i as i64), item, ety)?);
                }
                self.at.leave();
                Ok(if matches!(ty, Type::Set(_)) {
                    Value::Set(out)
                } else {
                    Value::List(out)
                })
            }
            (Type::Tuple(etys), Json::Array(items)) => {
                if let Some(reason) = tuple_length_mismatch(etys, items.len()) {
                    return Err(self.err(reason));
                }
                self.enter()?;
                let mut out = Vec::with_capacity(items.len());
                for (i, (item, ety)) in items.into_iter().zip(etys).enumerate() {
                    out.push(self.nested(PathStep::ElementKeyInt(i as i64), item, ety)?);
                }
                self.at.leave();
                Ok(Value::Tuple(out))
            }
            (Type::Map(ety), Json::Object(items)) => {
                self.enter()?;
                let mut out = BTreeMap::new();
                for (key, item) in items {
                    let v = self.nested(PathStep::ElementKeyString(key.clone()), item, ety)?;
                    out.insert(key, v);
                }
                self.at.leave();
                Ok(Value::Map(out))
            }
            (Type::Object { attributes, .. }, Json::Object(items)) => {
                self.enter()?;
                let mut out = BTreeMap::new();
                for (key, item) in items {
                    let Some(aty) = attributes.get(&key) else {
                        if self.options.ignore_undefined_attributes {
                            continue;
                        }
                        return Err(self.err(format!("unsupported attribute {key:?}")));
                    };
                    let v = self.nested(PathStep::Attribute(key.clone()), item, aty)?;
                    out.insert(key, v);
                }
                for name in attributes.keys() {
                    if !out.contains_key(name) {
                        out.insert(name.clone(), Value::Null);
                    }
                }
                self.at.leave();
                Ok(Value::Object(out))
            }
            (_, json) => Err(mismatch(self, &json)),
        }
    }

    fn dynamic(&mut self, json: Json<'_>) -> Result<Value, JsonError> {
        let Json::Object(items) = json else {
            return Err(self.err(format!(
                "a dynamic value must be an object with \"value\" and \"type\", found {}",
                json.name()
            )));
        };
        let (mut value, mut ty) = (None, None);
        for (key, item) in items {
            match key.as_str() {
                "value" => value = Some(item),
                "type" => ty = Some(item),
                other => {
                    return Err(
                        self.err(format!("invalid key {other:?} in dynamically-typed value"))
                    );
                }
            }
        }
        let ty = ty.ok_or_else(|| self.err("missing type in dynamically-typed value"))?;
        let value = value.ok_or_else(|| self.err("missing value in dynamically-typed value"))?;
        let ty = Type::from_json(&ty.to_serde()).map_err(|source| JsonError::DynamicType {
            path: self.at.path.clone(),
            source,
        })?;
        self.enter()?;
        let inner = self.value(value, &ty)?;
        self.at.leave();
        Ok(match ty {
            Type::Dynamic => inner,
            ty => Value::Dynamic(ty, Box::new(inner)),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding values

struct Encoder {
    out: Vec<u8>,
    at: Position,
}

impl Encoder {
    fn err(&self, reason: impl Into<String>) -> JsonError {
        JsonError::Encode {
            path: self.at.path.clone(),
            reason: reason.into(),
        }
    }

    fn nested(&mut self, value: &Value, ty: &Type) -> Result<(), JsonError> {
        self.at.enter().map_err(|reason| self.err(reason))?;
        self.value(value, ty)?;
        self.at.leave();
        Ok(())
    }

    fn string(&mut self, s: &str) {
        // Writing a &str into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut self.out, s);
    }

    fn value(&mut self, value: &Value, ty: &Type) -> Result<(), JsonError> {
        if *ty == Type::Dynamic {
            return self.dynamic(value);
        }
        match (value, ty) {
            (Value::Dynamic(_, inner), _) => self.nested(inner, ty),
            (Value::Null, _) => {
                self.out.extend_from_slice(b"null");
                Ok(())
            }
            (Value::Unknown(_), _) => {
                Err(self.err("value is not known, and JSON cannot carry unknown values"))
            }
            (Value::Bool(b), Type::Bool) => {
                self.out
                    .extend_from_slice(if *b { b"true" } else { b"false" });
                Ok(())
            }
            (Value::Number(n), Type::Number) => {
                let text = n
                    .to_decimal_string()
                    .ok_or_else(|| self.err("a number that cannot be written as JSON"))?;
                self.out.extend_from_slice(text.as_bytes());
                Ok(())
            }
            (Value::String(s), Type::String) => {
                self.string(s);
                Ok(())
            }
            (
                Value::List(items) | Value::Set(items) | Value::Tuple(items),
                Type::List(ety) | Type::Set(ety),
            ) => self.array(items, |_| ety),
            (Value::List(items) | Value::Tuple(items), Type::Tuple(etys)) => {
                if let Some(reason) = tuple_length_mismatch(etys, items.len()) {
                    return Err(self.err(reason));
                }
                self.array(items, |i| &etys[i])
            }
            (Value::Map(items) | Value::Object(items), Type::Map(ety)) => {
                self.object(items.iter().map(|(k, v)| (k, v, &**ety)), false)
            }
            (Value::Map(items) | Value::Object(items), Type::Object { attributes, .. }) => {
                if let Some(extra) = items.keys().find(|k| !attributes.contains_key(*k)) {
                    return Err(self.err(format!("unsupported attribute {extra:?}")));
                }
                let attrs = attributes
                    .iter()
                    .map(|(k, t)| (k, items.get(k).unwrap_or(&Value::Null), t));
                self.object(attrs, true)
            }
            _ => Err(self.err(format!(
                "{} is required, found {}",
                ty.friendly_name(),
                value.kind_name()
            ))),
        }
    }

    fn array<'t>(
        &mut self,
        items: &[Value],
        ety: impl Fn(usize) -> &'t Type,
    ) -> Result<(), JsonError> {
        self.out.push(b'[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            self.at.path.push(PathStep::ElementKeyInt(i as i64));
            self.nested(item, ety(i))?;
            self.at.path.pop();
        }
        self.out.push(b']');
        Ok(())
    }

    fn object<'v>(
        &mut self,
        entries: impl Iterator<Item = (&'v String, &'v Value, &'v Type)>,
        is_object: bool,
    ) -> Result<(), JsonError> {
        self.out.push(b'{');
        for (i, (key, item, ty)) in entries.enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            self.string(key);
            self.out.push(b':');
            self.at.path.push(PathStep::key(key, is_object));
            self.nested(item, ty)?;
            self.at.path.pop();
        }
        self.out.push(b'}');
        Ok(())
    }

    fn dynamic(&mut self, value: &Value) -> Result<(), JsonError> {
        let (ty, inner) = match value {
            Value::Null => {
                self.out.extend_from_slice(b"null");
                return Ok(());
            }
            Value::Unknown(_) => {
                return Err(self.err("value is not known, and JSON cannot carry unknown values"));
            }
            Value::Dynamic(Type::Dynamic, inner) => return self.nested(inner, &Type::Dynamic),
            Value::Dynamic(ty, inner) => (ty.clone(), &**inner),
            other => (other.implied_type(), other),
        };
        self.out.extend_from_slice(b"{\"value\":");
        self.nested(inner, &ty)?;
        self.out.extend_from_slice(b",\"type\":");
        self.out.extend_from_slice(&ty.to_json_bytes());
        self.out.push(b'}');
        Ok(())
    }
}
