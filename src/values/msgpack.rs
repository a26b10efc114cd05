//! cty's msgpack encoding (go-cty `cty/msgpack`), the form tfplugin6 `DynamicValue.msgpack` uses.
//!
//! - null is msgpack nil; a plain unknown is extension 0 (`d4 00 00`); a refined unknown is
//!   extension 12 whose payload is a map with small integer keys (see [`Refinements`]). Any
//!   extension decodes as unknown, and a refinement payload that cannot be read is dropped rather
//!   than failing the whole value.
//! - Numbers are ints, floats, or (when neither is exact) their decimal text as a string.
//! - Objects are maps with every attribute of the type present (nil when null); sets are arrays.
//! - A value of a `dynamic` attribute is `[type JSON as bin, value]`, except a null or unknown of
//!   unknown type, which is written directly.
//!
//! Decoding is defensive: no panics on any input, no allocation beyond what the input can fill,
//! nesting bounded by [`MAX_DEPTH`].

use std::collections::BTreeMap;
use std::convert::Infallible;

use rmp::encode::{self, ByteBuf, ValueWriteError};

mod read;
#[cfg(test)]
mod tests;
mod unknown;

use read::{Reader, Token, number_from, string_from, token_name};
use unknown::unknown_from_ext;

use super::path::{AttributePath, PathStep, Position};
use super::types::{Type, TypeJsonError, tuple_length_mismatch};
use super::value::{Number, Value};

/// Deepest nesting (collections, objects, tuples and dynamic wrappers) the codecs accept.
pub const MAX_DEPTH: usize = 64;

/// Refinement payloads larger than this are ignored (cty refuses them too).
const MAX_REFINEMENT_LEN: usize = 1024;

const EXT_REFINED_UNKNOWN: i8 = 12;

/// cty's plain unknown: fixext1, extension type 0, payload 0.
const PLAIN_UNKNOWN: [u8; 3] = [0xd4, 0, 0];

/// A msgpack value could not be decoded or encoded. `path` is where it happened.
#[derive(Debug, thiserror::Error)]
pub enum MsgpackError {
    #[error("failed to decode msgpack value at {}: {reason}", .path.describe())]
    Decode { path: AttributePath, reason: String },
    #[error("failed to decode msgpack value at {}: invalid dynamic type: {source}", .path.describe())]
    DynamicType {
        path: AttributePath,
        #[source]
        source: TypeJsonError,
    },
    #[error("failed to encode msgpack value at {}: {reason}", .path.describe())]
    Encode { path: AttributePath, reason: String },
}

impl MsgpackError {
    /// The attribute path the error refers to.
    pub fn path(&self) -> &AttributePath {
        match self {
            MsgpackError::Decode { path, .. }
            | MsgpackError::DynamicType { path, .. }
            | MsgpackError::Encode { path, .. } => path,
        }
    }
}

/// Decodes cty msgpack `bytes` as a value of type `ty`.
///
/// Values of `dynamic` attributes come back as [`Value::Dynamic`] carrying their concrete type
/// (or as `Null` / `Unknown` when those have no type). Object attributes missing from the input
/// are `Null`.
///
/// # Errors
/// [`MsgpackError::Decode`] when the bytes do not hold a value of `ty` (wrong kind, unknown object
/// attribute, truncated input, trailing bytes, nesting beyond [`MAX_DEPTH`]),
/// [`MsgpackError::DynamicType`] when a dynamic value's type description is invalid.
pub fn from_msgpack(bytes: &[u8], ty: &Type) -> Result<Value, MsgpackError> {
    let mut dec = Decoder {
        r: Reader::new(bytes),
        at: Position::default(),
    };
    let value = dec.value(ty)?;
    if dec.r.remaining() != 0 {
        return Err(dec.err(format!(
            "{} trailing bytes after the value",
            dec.r.remaining()
        )));
    }
    Ok(value)
}

/// Encodes `value` as cty msgpack for type `ty`.
///
/// Sequences (`List`/`Set`/`Tuple`) and mappings (`Map`/`Object`) are accepted for one another
/// where cty would convert them; a [`Value::Dynamic`] under a concrete type is unwrapped; a plain
/// value under `Type::Dynamic` is written with its [`Value::implied_type`].
///
/// # Errors
/// [`MsgpackError::Encode`] when the value does not conform to `ty`, an object has an attribute
/// the type lacks, a number is NaN or not decimal text, or nesting exceeds [`MAX_DEPTH`].
pub fn to_msgpack(value: &Value, ty: &Type) -> Result<Vec<u8>, MsgpackError> {
    let mut enc = Encoder {
        buf: ByteBuf::new(),
        at: Position::default(),
    };
    enc.value(value, ty)?;
    Ok(enc.buf.into_vec())
}

// ---------------------------------------------------------------------------------------------
// Decoding values

struct Decoder<'a> {
    r: Reader<'a>,
    at: Position,
}

impl<'a> Decoder<'a> {
    fn err(&self, reason: impl Into<String>) -> MsgpackError {
        MsgpackError::Decode {
            path: self.at.path.clone(),
            reason: reason.into(),
        }
    }

    fn token(&mut self) -> Result<Token<'a>, MsgpackError> {
        let pos = self.r.pos;
        match self.r.token() {
            Ok(t) => Ok(t),
            Err(reason) => Err(self.err(format!("{reason} (at byte {pos})"))),
        }
    }

    fn enter(&mut self) -> Result<(), MsgpackError> {
        self.at.enter().map_err(|reason| self.err(reason))
    }

    fn value(&mut self, ty: &Type) -> Result<Value, MsgpackError> {
        let token = self.token()?;
        if let Token::Ext(code, payload) = token {
            return Ok(unknown_from_ext(code, payload, ty));
        }
        if let Token::Nil = token {
            return Ok(Value::Null);
        }
        let mismatch = |d: &Self| {
            d.err(format!(
                "{} is required, found {}",
                ty.friendly_name(),
                token_name(&token)
            ))
        };
        match ty {
            Type::Dynamic => self.dynamic(token),
            Type::Bool => match token {
                Token::Bool(b) => Ok(Value::Bool(b)),
                _ => Err(mismatch(self)),
            },
            Type::Number => number_from(token)
                .map(Value::Number)
                .ok_or_else(|| mismatch(self)),
            Type::String => match string_from(token) {
                Some(Ok(s)) => Ok(Value::String(s)),
                Some(Err(_)) => Err(self.err("string is not valid UTF-8")),
                None => Err(mismatch(self)),
            },
            Type::List(ety) | Type::Set(ety) => {
                let Token::Array(n) = token else {
                    return Err(mismatch(self));
                };
                let items = self.sequence(n, |_| ety)?;
                Ok(if matches!(ty, Type::Set(_)) {
                    Value::Set(items)
                } else {
                    Value::List(items)
                })
            }
            Type::Tuple(etys) => {
                let Token::Array(n) = token else {
                    return Err(mismatch(self));
                };
                if n as usize != etys.len() {
                    return Err(self.err(format!(
                        "a tuple of length {} is required, found {n}",
                        etys.len()
                    )));
                }
                Ok(Value::Tuple(self.sequence(n, |i| &etys[i])?))
            }
            Type::Map(ety) => {
                let Token::Map(n) = token else {
                    return Err(mismatch(self));
                };
                Ok(Value::Map(self.mapping(n, false, |_| Some(&**ety))?))
            }
            Type::Object { attributes, .. } => {
                let Token::Map(n) = token else {
                    return Err(mismatch(self));
                };
                let mut attrs = self.mapping(n, true, |k| attributes.get(k))?;
                for name in attributes.keys() {
                    if !attrs.contains_key(name) {
                        attrs.insert(name.clone(), Value::Null);
                    }
                }
                Ok(Value::Object(attrs))
            }
        }
    }

    fn sequence<'t>(
        &mut self,
        n: u32,
        ety: impl Fn(usize) -> &'t Type,
    ) -> Result<Vec<Value>, MsgpackError> {
        self.enter()?;
        // Every element takes at least one byte, so the input bounds the allocation.
        let mut items = Vec::with_capacity((n as usize).min(self.r.remaining()));
        for i in 0..n as usize {
            self.at.path.push(PathStep::ElementKeyInt(i as i64));
            let item = self.value(ety(i));
            self.at.path.pop();
            items.push(item?);
        }
        self.at.leave();
        Ok(items)
    }

    fn mapping<'t>(
        &mut self,
        n: u32,
        is_object: bool,
        ety: impl Fn(&str) -> Option<&'t Type>,
    ) -> Result<BTreeMap<String, Value>, MsgpackError> {
        self.enter()?;
        let mut out = BTreeMap::new();
        for _ in 0..n {
            let key = match self.token()? {
                Token::Str(b) | Token::Bin(b) => match std::str::from_utf8(b) {
                    Ok(k) => k.to_owned(),
                    Err(_) => return Err(self.err("map key is not valid UTF-8")),
                },
                other => {
                    return Err(self.err(format!(
                        "map keys must be strings, found {}",
                        token_name(&other)
                    )));
                }
            };
            self.at.path.push(PathStep::key(&key, is_object));
            let Some(ty) = ety(&key) else {
                let err = self.err("unsupported attribute");
                self.at.path.pop();
                return Err(err);
            };
            let item = self.value(ty);
            self.at.path.pop();
            out.insert(key, item?);
        }
        self.at.leave();
        Ok(out)
    }

    fn dynamic(&mut self, token: Token<'a>) -> Result<Value, MsgpackError> {
        let Token::Array(2) = token else {
            return Err(self.err(format!(
                "a dynamic value must be a [type, value] array, found {}",
                token_name(&token)
            )));
        };
        self.enter()?;
        let type_json = match self.token()? {
            Token::Str(b) | Token::Bin(b) => b,
            other => {
                return Err(self.err(format!(
                    "dynamic type must be JSON bytes, found {}",
                    token_name(&other)
                )));
            }
        };
        let ty = Type::from_json_bytes(type_json).map_err(|source| MsgpackError::DynamicType {
            path: self.at.path.clone(),
            source,
        })?;
        let inner = self.value(&ty)?;
        self.at.leave();
        Ok(match ty {
            // A dynamic value of type "dynamic" is just the inner dynamic value.
            Type::Dynamic => inner,
            ty => Value::Dynamic(ty, Box::new(inner)),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding values

struct Encoder {
    buf: ByteBuf,
    at: Position,
}

/// Writing into a `ByteBuf` cannot fail.
fn infallible<T>(result: Result<T, ValueWriteError<Infallible>>) -> T {
    match result {
        Ok(v) => v,
        Err(
            ValueWriteError::InvalidMarkerWrite(never) | ValueWriteError::InvalidDataWrite(never),
        ) => match never {},
    }
}

fn len_u32(len: usize) -> Option<u32> {
    u32::try_from(len).ok()
}

impl Encoder {
    fn err(&self, reason: impl Into<String>) -> MsgpackError {
        MsgpackError::Encode {
            path: self.at.path.clone(),
            reason: reason.into(),
        }
    }

    fn enter(&mut self) -> Result<(), MsgpackError> {
        self.at.enter().map_err(|reason| self.err(reason))
    }

    fn nested(&mut self, value: &Value, ty: &Type) -> Result<(), MsgpackError> {
        self.enter()?;
        self.value(value, ty)?;
        self.at.leave();
        Ok(())
    }

    fn value(&mut self, value: &Value, ty: &Type) -> Result<(), MsgpackError> {
        if *ty == Type::Dynamic {
            return self.dynamic(value);
        }
        let mismatch = |e: &Self| {
            e.err(format!(
                "{} is required, found {}",
                ty.friendly_name(),
                value.kind_name()
            ))
        };
        match (value, ty) {
            (Value::Dynamic(_, inner), _) => self.nested(inner, ty),
            (Value::Null, _) => {
                infallible(
                    encode::write_nil(&mut self.buf).map_err(ValueWriteError::InvalidMarkerWrite),
                );
                Ok(())
            }
            (Value::Unknown(refinements), _) => {
                let bytes = self.unknown(refinements.as_deref(), ty)?;
                self.buf.as_mut_vec().extend_from_slice(&bytes);
                Ok(())
            }
            (Value::Bool(b), Type::Bool) => {
                infallible(
                    encode::write_bool(&mut self.buf, *b)
                        .map_err(ValueWriteError::InvalidMarkerWrite),
                );
                Ok(())
            }
            (Value::Number(n), Type::Number) => {
                let bytes = self.number(n)?;
                self.buf.as_mut_vec().extend_from_slice(&bytes);
                Ok(())
            }
            (Value::String(s), Type::String) => self.str(s),
            (
                Value::List(items) | Value::Set(items) | Value::Tuple(items),
                Type::List(ety) | Type::Set(ety),
            ) => self.sequence(items, |_| ety),
            (Value::List(items) | Value::Tuple(items), Type::Tuple(etys)) => {
                if let Some(reason) = tuple_length_mismatch(etys, items.len()) {
                    return Err(self.err(reason));
                }
                self.sequence(items, |i| &etys[i])
            }
            (Value::Map(items) | Value::Object(items), Type::Map(ety)) => self.map(items, ety),
            (Value::Map(items) | Value::Object(items), Type::Object { attributes, .. }) => {
                self.object(items, attributes)
            }
            _ => Err(mismatch(self)),
        }
    }

    fn str(&mut self, s: &str) -> Result<(), MsgpackError> {
        if len_u32(s.len()).is_none() {
            return Err(self.err("string longer than 4 GiB"));
        }
        infallible(encode::write_str(&mut self.buf, s));
        Ok(())
    }

    fn array_len(&mut self, len: usize) -> Result<(), MsgpackError> {
        let len = len_u32(len).ok_or_else(|| self.err("more than 2^32 elements"))?;
        infallible(encode::write_array_len(&mut self.buf, len));
        Ok(())
    }

    fn map_len(&mut self, len: usize) -> Result<(), MsgpackError> {
        let len = len_u32(len).ok_or_else(|| self.err("more than 2^32 elements"))?;
        infallible(encode::write_map_len(&mut self.buf, len));
        Ok(())
    }

    fn sequence<'t>(
        &mut self,
        items: &[Value],
        ety: impl Fn(usize) -> &'t Type,
    ) -> Result<(), MsgpackError> {
        self.array_len(items.len())?;
        for (i, item) in items.iter().enumerate() {
            self.at.path.push(PathStep::ElementKeyInt(i as i64));
            self.nested(item, ety(i))?;
            self.at.path.pop();
        }
        Ok(())
    }

    fn map(&mut self, items: &BTreeMap<String, Value>, ety: &Type) -> Result<(), MsgpackError> {
        self.map_len(items.len())?;
        // BTreeMap iterates in byte order of the keys, which is cty's order too.
        for (key, item) in items {
            self.at.path.push(PathStep::ElementKeyString(key.clone()));
            self.str(key)?;
            self.nested(item, ety)?;
            self.at.path.pop();
        }
        Ok(())
    }

    fn object(
        &mut self,
        items: &BTreeMap<String, Value>,
        attributes: &BTreeMap<String, Type>,
    ) -> Result<(), MsgpackError> {
        if let Some(extra) = items.keys().find(|k| !attributes.contains_key(*k)) {
            self.at.path.push(PathStep::Attribute(extra.clone()));
            let err = self.err("unsupported attribute");
            self.at.path.pop();
            return Err(err);
        }
        self.map_len(attributes.len())?;
        for (name, aty) in attributes {
            self.at.path.push(PathStep::Attribute(name.clone()));
            self.str(name)?;
            self.nested(items.get(name).unwrap_or(&Value::Null), aty)?;
            self.at.path.pop();
        }
        Ok(())
    }

    fn dynamic(&mut self, value: &Value) -> Result<(), MsgpackError> {
        let (ty, inner) = match value {
            // A null or unknown of unknown type is written as-is, and never refined.
            Value::Null => {
                infallible(
                    encode::write_nil(&mut self.buf).map_err(ValueWriteError::InvalidMarkerWrite),
                );
                return Ok(());
            }
            Value::Unknown(_) => {
                self.buf.as_mut_vec().extend_from_slice(&PLAIN_UNKNOWN);
                return Ok(());
            }
            Value::Dynamic(Type::Dynamic, inner) => return self.nested(inner, &Type::Dynamic),
            Value::Dynamic(ty, inner) => (ty.clone(), &**inner),
            other => (other.implied_type(), other),
        };
        self.enter()?;
        infallible(encode::write_array_len(&mut self.buf, 2));
        infallible(encode::write_bin(&mut self.buf, &ty.to_json_bytes()));
        self.value(inner, &ty)?;
        self.at.leave();
        Ok(())
    }

    /// Int as int; an integral float that fits `i64` as int (as cty does); other floats as
    /// float64; `Big` as its decimal text.
    fn number(&self, n: &Number) -> Result<Vec<u8>, MsgpackError> {
        let mut buf = ByteBuf::new();
        match n {
            Number::Int(i) => {
                infallible(encode::write_sint(&mut buf, *i));
            }
            Number::Float(f) if f.is_nan() => return Err(self.err("NaN is not a number")),
            // -2^63 <= f < 2^63 is exactly the range of integral floats that convert to i64.
            Number::Float(f)
                if f.fract() == 0.0 && *f >= i64::MIN as f64 && *f < -(i64::MIN as f64) =>
            {
                infallible(encode::write_sint(&mut buf, *f as i64));
            }
            Number::Float(f) => {
                infallible(encode::write_f64(&mut buf, *f));
            }
            Number::Big(text) => match Number::parse_decimal(text) {
                Some(Number::Int(i)) => {
                    infallible(encode::write_sint(&mut buf, i));
                }
                Some(Number::Big(canonical)) => {
                    infallible(encode::write_str(&mut buf, &canonical));
                }
                _ => return Err(self.err(format!("{text:?} is not a decimal number"))),
            },
        }
        Ok(buf.into_vec())
    }
}
