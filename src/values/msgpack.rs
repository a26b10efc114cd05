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

use super::path::{AttributePath, PathStep};
use super::types::{Type, TypeJsonError};
use super::value::{Number, Refinements, Value};

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
    let mut dec = Decoder { r: Reader { buf: bytes, pos: 0 }, path: AttributePath::root(), depth: 0 };
    let value = dec.value(ty)?;
    if dec.r.remaining() != 0 {
        return Err(dec.err(format!("{} trailing bytes after the value", dec.r.remaining())));
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
    let mut enc = Encoder { buf: ByteBuf::new(), path: AttributePath::root(), depth: 0 };
    enc.value(value, ty)?;
    Ok(enc.buf.into_vec())
}

// ---------------------------------------------------------------------------------------------
// Reading tokens

#[derive(Debug, Clone, Copy)]
enum Token<'a> {
    Nil,
    Bool(bool),
    Int(i128),
    F32(f32),
    F64(f64),
    Str(&'a [u8]),
    Bin(&'a [u8]),
    Array(u32),
    Map(u32),
    Ext(i8, &'a [u8]),
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if n > self.remaining() {
            return Err("unexpected end of input");
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], &'static str> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn len(&mut self, width: usize) -> Result<usize, &'static str> {
        Ok(match width {
            1 => usize::from(self.array::<1>()?[0]),
            2 => usize::from(u16::from_be_bytes(self.array()?)),
            _ => u32::from_be_bytes(self.array()?) as usize,
        })
    }

    fn count(&mut self, width: usize) -> Result<u32, &'static str> {
        // Lengths are at most 32 bits wide, so this never truncates.
        Ok(self.len(width)? as u32)
    }

    fn ext(&mut self, len: usize) -> Result<Token<'a>, &'static str> {
        let code = i8::from_be_bytes(self.array()?);
        Ok(Token::Ext(code, self.take(len)?))
    }

    fn token(&mut self) -> Result<Token<'a>, &'static str> {
        let marker = self.array::<1>()?[0];
        Ok(match marker {
            0x00..=0x7f => Token::Int(i128::from(marker)),
            0x80..=0x8f => Token::Map(u32::from(marker & 0x0f)),
            0x90..=0x9f => Token::Array(u32::from(marker & 0x0f)),
            0xa0..=0xbf => Token::Str(self.take(usize::from(marker & 0x1f))?),
            0xc0 => Token::Nil,
            0xc1 => return Err("reserved marker 0xc1"),
            0xc2 => Token::Bool(false),
            0xc3 => Token::Bool(true),
            0xc4..=0xc6 => {
                let n = self.len(1 << (marker - 0xc4))?;
                Token::Bin(self.take(n)?)
            }
            0xc7..=0xc9 => {
                let n = self.len(1 << (marker - 0xc7))?;
                self.ext(n)?
            }
            0xca => Token::F32(f32::from_be_bytes(self.array()?)),
            0xcb => Token::F64(f64::from_be_bytes(self.array()?)),
            0xcc => Token::Int(i128::from(self.array::<1>()?[0])),
            0xcd => Token::Int(i128::from(u16::from_be_bytes(self.array()?))),
            0xce => Token::Int(i128::from(u32::from_be_bytes(self.array()?))),
            0xcf => Token::Int(i128::from(u64::from_be_bytes(self.array()?))),
            0xd0 => Token::Int(i128::from(i8::from_be_bytes(self.array()?))),
            0xd1 => Token::Int(i128::from(i16::from_be_bytes(self.array()?))),
            0xd2 => Token::Int(i128::from(i32::from_be_bytes(self.array()?))),
            0xd3 => Token::Int(i128::from(i64::from_be_bytes(self.array()?))),
            0xd4..=0xd8 => self.ext(1 << (marker - 0xd4))?,
            0xd9..=0xdb => {
                let n = self.len(1 << (marker - 0xd9))?;
                Token::Str(self.take(n)?)
            }
            0xdc => Token::Array(self.count(2)?),
            0xdd => Token::Array(self.count(4)?),
            0xde => Token::Map(self.count(2)?),
            0xdf => Token::Map(self.count(4)?),
            0xe0..=0xff => Token::Int(i128::from(marker as i8)),
        })
    }

    /// Skips one complete value without recursion or allocation.
    fn skip(&mut self) -> Result<(), &'static str> {
        let mut pending: u64 = 1;
        while pending > 0 {
            pending -= 1;
            match self.token()? {
                Token::Array(n) => pending += u64::from(n),
                Token::Map(n) => pending += 2 * u64::from(n),
                _ => {}
            }
            if pending > self.remaining() as u64 {
                return Err("unexpected end of input");
            }
        }
        Ok(())
    }
}

fn number_from(token: Token<'_>) -> Option<Number> {
    match token {
        Token::Int(i) => Some(match i64::try_from(i) {
            Ok(i) => Number::Int(i),
            Err(_) => Number::Big(i.to_string()),
        }),
        Token::F32(f) => Some(Number::Float(f64::from(f))),
        Token::F64(f) => Some(Number::Float(f)),
        Token::Str(b) | Token::Bin(b) => Number::parse_decimal(std::str::from_utf8(b).ok()?),
        _ => None,
    }
}

fn string_from(token: Token<'_>) -> Option<Result<String, std::str::Utf8Error>> {
    match token {
        Token::Str(b) | Token::Bin(b) => Some(std::str::from_utf8(b).map(str::to_owned)),
        _ => None,
    }
}

fn token_name(token: &Token<'_>) -> &'static str {
    match token {
        Token::Nil => "nil",
        Token::Bool(_) => "bool",
        Token::Int(_) => "integer",
        Token::F32(_) | Token::F64(_) => "float",
        Token::Str(_) => "string",
        Token::Bin(_) => "binary",
        Token::Array(_) => "array",
        Token::Map(_) => "map",
        Token::Ext(..) => "extension",
    }
}

// ---------------------------------------------------------------------------------------------
// Refined unknowns

/// What an extension payload says about an unknown value.
enum Refined {
    /// cty's "definitely null" refinement: the value is a known null.
    Null,
    Unknown(Refinements),
}

fn unknown_from_ext(code: i8, payload: &[u8], ty: &Type) -> Value {
    if code != EXT_REFINED_UNKNOWN || payload.len() <= 1 || payload.len() > MAX_REFINEMENT_LEN {
        return Value::Unknown(None);
    }
    if *ty == Type::Dynamic {
        // cty never refines an unknown of unknown type, and ignores such refinements.
        return Value::Unknown(None);
    }
    match read_refinements(payload, ty) {
        Ok(Refined::Null) => Value::Null,
        Ok(Refined::Unknown(r)) if !r.is_empty() => Value::Unknown(Some(Box::new(r))),
        _ => Value::Unknown(None),
    }
}

fn read_refinements(payload: &[u8], ty: &Type) -> Result<Refined, &'static str> {
    let mut r = Reader { buf: payload, pos: 0 };
    let Token::Map(entries) = r.token()? else {
        return Err("refinements are not a map");
    };
    let mut out = Refinements::default();
    for _ in 0..entries {
        let Token::Int(key) = r.token()? else {
            return Err("refinement key is not an integer");
        };
        match key {
            1 => match r.token()? {
                Token::Bool(true) => return Ok(Refined::Null),
                Token::Bool(false) => out.not_null = true,
                _ => return Err("nullness refinement is not a bool"),
            },
            2 => {
                let prefix = string_from(r.token()?)
                    .ok_or("string prefix is not a string")?
                    .map_err(|_| "string prefix is not UTF-8")?;
                if *ty == Type::String && !prefix.is_empty() {
                    out.string_prefix = Some(prefix);
                }
            }
            3 | 4 => {
                let Token::Array(2) = r.token()? else {
                    return Err("number bound is not a [number, bool] array");
                };
                let bound = number_from(r.token()?).ok_or("number bound is not a number")?;
                let Token::Bool(inclusive) = r.token()? else {
                    return Err("number bound inclusiveness is not a bool");
                };
                if *ty == Type::Number {
                    let slot = if key == 3 { &mut out.number_lower } else { &mut out.number_upper };
                    *slot = Some((bound, inclusive));
                }
            }
            5 | 6 => {
                let Token::Int(n) = r.token()? else {
                    return Err("length bound is not an integer");
                };
                let n = u64::try_from(n).map_err(|_| "length bound is negative")?;
                if ty.is_collection() {
                    let slot = if key == 5 { &mut out.length_lower } else { &mut out.length_upper };
                    *slot = Some(n);
                }
            }
            // Refinements this codec does not know yet are skipped, as cty does.
            _ => r.skip()?,
        }
    }
    Ok(Refined::Unknown(out))
}

// ---------------------------------------------------------------------------------------------
// Decoding values

struct Decoder<'a> {
    r: Reader<'a>,
    path: AttributePath,
    depth: usize,
}

impl<'a> Decoder<'a> {
    fn err(&self, reason: impl Into<String>) -> MsgpackError {
        MsgpackError::Decode { path: self.path.clone(), reason: reason.into() }
    }

    fn token(&mut self) -> Result<Token<'a>, MsgpackError> {
        let pos = self.r.pos;
        match self.r.token() {
            Ok(t) => Ok(t),
            Err(reason) => Err(self.err(format!("{reason} (at byte {pos})"))),
        }
    }

    fn enter(&mut self) -> Result<(), MsgpackError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.err(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        self.depth += 1;
        Ok(())
    }

    fn value(&mut self, ty: &Type) -> Result<Value, MsgpackError> {
        let token = self.token()?;
        if let Token::Ext(code, payload) = token {
            return Ok(unknown_from_ext(code, payload, ty));
        }
        if let Token::Nil = token {
            return Ok(Value::Null);
        }
        let mismatch = |d: &Self| d.err(format!("{} is required, found {}", ty.friendly_name(), token_name(&token)));
        match ty {
            Type::Dynamic => self.dynamic(token),
            Type::Bool => match token {
                Token::Bool(b) => Ok(Value::Bool(b)),
                _ => Err(mismatch(self)),
            },
            Type::Number => number_from(token).map(Value::Number).ok_or_else(|| mismatch(self)),
            Type::String => match string_from(token) {
                Some(Ok(s)) => Ok(Value::String(s)),
                Some(Err(_)) => Err(self.err("string is not valid UTF-8")),
                None => Err(mismatch(self)),
            },
            Type::List(ety) | Type::Set(ety) => {
                let Token::Array(n) = token else { return Err(mismatch(self)) };
                let items = self.sequence(n, |_| ety)?;
                Ok(if matches!(ty, Type::Set(_)) { Value::Set(items) } else { Value::List(items) })
            }
            Type::Tuple(etys) => {
                let Token::Array(n) = token else { return Err(mismatch(self)) };
                if n as usize != etys.len() {
                    return Err(self.err(format!("a tuple of length {} is required, found {n}", etys.len())));
                }
                Ok(Value::Tuple(self.sequence(n, |i| &etys[i])?))
            }
            Type::Map(ety) => {
                let Token::Map(n) = token else { return Err(mismatch(self)) };
                Ok(Value::Map(self.mapping(n, false, |_| Some(&**ety))?))
            }
            Type::Object { attributes, .. } => {
                let Token::Map(n) = token else { return Err(mismatch(self)) };
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

    fn sequence<'t>(&mut self, n: u32, ety: impl Fn(usize) -> &'t Type) -> Result<Vec<Value>, MsgpackError> {
        self.enter()?;
        // Every element takes at least one byte, so the input bounds the allocation.
        let mut items = Vec::with_capacity((n as usize).min(self.r.remaining()));
        for i in 0..n as usize {
            self.path.push(PathStep::ElementKeyInt(i as i64));
            let item = self.value(ety(i));
            self.path.pop();
            items.push(item?);
        }
        self.depth -= 1;
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
                other => return Err(self.err(format!("map keys must be strings, found {}", token_name(&other)))),
            };
            let step = if is_object { PathStep::Attribute(key.clone()) } else { PathStep::ElementKeyString(key.clone()) };
            self.path.push(step);
            let Some(ty) = ety(&key) else {
                let err = self.err("unsupported attribute");
                self.path.pop();
                return Err(err);
            };
            let item = self.value(ty);
            self.path.pop();
            out.insert(key, item?);
        }
        self.depth -= 1;
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
            other => return Err(self.err(format!("dynamic type must be JSON bytes, found {}", token_name(&other)))),
        };
        let ty = Type::from_json_bytes(type_json)
            .map_err(|source| MsgpackError::DynamicType { path: self.path.clone(), source })?;
        let inner = self.value(&ty)?;
        self.depth -= 1;
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
    path: AttributePath,
    depth: usize,
}

/// Writing into a `ByteBuf` cannot fail.
fn infallible<T>(result: Result<T, ValueWriteError<Infallible>>) -> T {
    match result {
        Ok(v) => v,
        Err(ValueWriteError::InvalidMarkerWrite(never) | ValueWriteError::InvalidDataWrite(never)) => match never {},
    }
}

fn len_u32(len: usize) -> Option<u32> {
    u32::try_from(len).ok()
}

impl Encoder {
    fn err(&self, reason: impl Into<String>) -> MsgpackError {
        MsgpackError::Encode { path: self.path.clone(), reason: reason.into() }
    }

    fn enter(&mut self) -> Result<(), MsgpackError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.err(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        self.depth += 1;
        Ok(())
    }

    fn nested(&mut self, value: &Value, ty: &Type) -> Result<(), MsgpackError> {
        self.enter()?;
        self.value(value, ty)?;
        self.depth -= 1;
        Ok(())
    }

    fn value(&mut self, value: &Value, ty: &Type) -> Result<(), MsgpackError> {
        if *ty == Type::Dynamic {
            return self.dynamic(value);
        }
        let mismatch = |e: &Self| e.err(format!("{} is required, found {}", ty.friendly_name(), value.kind_name()));
        match (value, ty) {
            (Value::Dynamic(_, inner), _) => self.nested(inner, ty),
            (Value::Null, _) => {
                infallible(encode::write_nil(&mut self.buf).map_err(ValueWriteError::InvalidMarkerWrite));
                Ok(())
            }
            (Value::Unknown(refinements), _) => {
                let bytes = self.unknown(refinements.as_deref(), ty)?;
                self.buf.as_mut_vec().extend_from_slice(&bytes);
                Ok(())
            }
            (Value::Bool(b), Type::Bool) => {
                infallible(encode::write_bool(&mut self.buf, *b).map_err(ValueWriteError::InvalidMarkerWrite));
                Ok(())
            }
            (Value::Number(n), Type::Number) => {
                let bytes = self.number(n)?;
                self.buf.as_mut_vec().extend_from_slice(&bytes);
                Ok(())
            }
            (Value::String(s), Type::String) => self.str(s),
            (Value::List(items) | Value::Set(items) | Value::Tuple(items), Type::List(ety) | Type::Set(ety)) => {
                self.sequence(items, |_| ety)
            }
            (Value::List(items) | Value::Tuple(items), Type::Tuple(etys)) => {
                if items.len() != etys.len() {
                    return Err(self.err(format!(
                        "a tuple of length {} is required, found {} elements",
                        etys.len(),
                        items.len()
                    )));
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

    fn sequence<'t>(&mut self, items: &[Value], ety: impl Fn(usize) -> &'t Type) -> Result<(), MsgpackError> {
        self.array_len(items.len())?;
        for (i, item) in items.iter().enumerate() {
            self.path.push(PathStep::ElementKeyInt(i as i64));
            self.nested(item, ety(i))?;
            self.path.pop();
        }
        Ok(())
    }

    fn map(&mut self, items: &BTreeMap<String, Value>, ety: &Type) -> Result<(), MsgpackError> {
        self.map_len(items.len())?;
        // BTreeMap iterates in byte order of the keys, which is cty's order too.
        for (key, item) in items {
            self.path.push(PathStep::ElementKeyString(key.clone()));
            self.str(key)?;
            self.nested(item, ety)?;
            self.path.pop();
        }
        Ok(())
    }

    fn object(&mut self, items: &BTreeMap<String, Value>, attributes: &BTreeMap<String, Type>) -> Result<(), MsgpackError> {
        if let Some(extra) = items.keys().find(|k| !attributes.contains_key(*k)) {
            self.path.push(PathStep::Attribute(extra.clone()));
            let err = self.err("unsupported attribute");
            self.path.pop();
            return Err(err);
        }
        self.map_len(attributes.len())?;
        for (name, aty) in attributes {
            self.path.push(PathStep::Attribute(name.clone()));
            self.str(name)?;
            self.nested(items.get(name).unwrap_or(&Value::Null), aty)?;
            self.path.pop();
        }
        Ok(())
    }

    fn dynamic(&mut self, value: &Value) -> Result<(), MsgpackError> {
        let (ty, inner) = match value {
            // A null or unknown of unknown type is written as-is, and never refined.
            Value::Null => {
                infallible(encode::write_nil(&mut self.buf).map_err(ValueWriteError::InvalidMarkerWrite));
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
        self.depth -= 1;
        Ok(())
    }

    /// A plain unknown (`d4 00 00`), or extension 12 with the refinements that apply to `ty`.
    fn unknown(&self, refinements: Option<&Refinements>, ty: &Type) -> Result<Vec<u8>, MsgpackError> {
        let Some(r) = refinements.filter(|_| *ty != Type::Dynamic) else {
            return Ok(PLAIN_UNKNOWN.to_vec());
        };
        let mut body = ByteBuf::new();
        let mut entries = 0u32;
        let mut key = |body: &mut ByteBuf, k: u64| {
            entries += 1;
            infallible(encode::write_uint(body, k));
        };
        if r.not_null {
            key(&mut body, 1);
            infallible(encode::write_bool(&mut body, false).map_err(ValueWriteError::InvalidMarkerWrite));
        }
        match ty {
            Type::String => {
                if let Some(prefix) = r.string_prefix.as_deref().filter(|p| !p.is_empty()) {
                    key(&mut body, 2);
                    infallible(encode::write_str(&mut body, prefix));
                }
            }
            Type::Number => {
                for (k, bound) in [(3, &r.number_lower), (4, &r.number_upper)] {
                    if let Some((n, inclusive)) = bound {
                        let n = self.number(n)?;
                        key(&mut body, k);
                        infallible(encode::write_array_len(&mut body, 2));
                        body.as_mut_vec().extend_from_slice(&n);
                        infallible(encode::write_bool(&mut body, *inclusive).map_err(ValueWriteError::InvalidMarkerWrite));
                    }
                }
            }
            t if t.is_collection() => {
                for (k, bound) in [(5, r.length_lower), (6, r.length_upper)] {
                    if let Some(n) = bound {
                        key(&mut body, k);
                        infallible(encode::write_uint(&mut body, n));
                    }
                }
            }
            _ => {}
        }
        if entries == 0 {
            return Ok(PLAIN_UNKNOWN.to_vec());
        }
        let mut map = ByteBuf::new();
        infallible(encode::write_map_len(&mut map, entries));
        let mut out = ByteBuf::new();
        let total = map.as_slice().len() + body.as_slice().len();
        infallible(encode::write_ext_meta(&mut out, total as u32, EXT_REFINED_UNKNOWN));
        out.as_mut_vec().extend_from_slice(map.as_slice());
        out.as_mut_vec().extend_from_slice(body.as_slice());
        Ok(out.into_vec())
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
            Number::Float(f) if f.fract() == 0.0 && *f >= -9.223_372_036_854_775_808e18 && *f < 9.223_372_036_854_775_808e18 => {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::testgen;
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn obj(attrs: &[(&str, Value)]) -> Value {
        Value::Object(attrs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    fn name_count() -> Type {
        Type::object([("name", Type::String), ("count", Type::Number)])
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
        assert_eq!(from_msgpack(&bytes, &Type::String).unwrap(), Value::unknown());
        assert_eq!(to_msgpack(&Value::unknown(), &Type::String).unwrap(), bytes);
        // Inside an object, as Terraform plans a computed attribute.
        let planned = hex("82 a5 636f756e74 d4 00 00 a4 6e616d65 a1 78");
        let value = from_msgpack(&planned, &name_count()).unwrap();
        assert_eq!(value, obj(&[("name", "x".into()), ("count", Value::unknown())]));
        assert_eq!(to_msgpack(&value, &name_count()).unwrap(), planned);
    }

    #[test]
    fn any_extension_decodes_as_unknown() {
        for bytes in ["d4 05 ff", "d6 05 01020304", "c7 00 00", "c7 02 07 0102", "d5 0c 0000", "c7 03 0c c0c0c0"] {
            assert_eq!(from_msgpack(&hex(bytes), &Type::String).unwrap(), Value::unknown(), "{bytes}");
        }
    }

    #[test]
    fn refined_unknowns_match_cty_bytes() {
        let not_null = Refinements { not_null: true, ..Default::default() };
        let cases = [
            // {1: false}: definitely not null (what Terraform sends for most computed strings).
            (Type::String, "c7 03 0c 81 01 c2", refined(not_null.clone())),
            // {1: false, 2: "ab"}: string prefix.
            (
                Type::String,
                "c7 07 0c 82 01 c2 02 a2 6162",
                refined(Refinements { string_prefix: Some("ab".into()), ..not_null.clone() }),
            ),
            // {3: [0, true]}: number lower bound, inclusive.
            (
                Type::Number,
                "c7 05 0c 81 03 92 00 c3",
                refined(Refinements { number_lower: Some((Number::Int(0), true)), ..Default::default() }),
            ),
            // {1: false, 4: ["0.1", false]}: exact decimal upper bound.
            (
                Type::Number,
                "c7 0a 0c 82 01 c2 04 92 a3 302e31 c2",
                refined(Refinements { number_upper: Some((Number::Big("0.1".into()), false)), ..not_null.clone() }),
            ),
            // {1: false, 5: 1, 6: 3}: collection length bounds.
            (
                Type::list(Type::String),
                "c7 07 0c 83 01 c2 05 01 06 03",
                refined(Refinements { length_lower: Some(1), length_upper: Some(3), ..not_null.clone() }),
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
        assert_eq!(value, refined(Refinements { not_null: true, ..Default::default() }));
        // Malformed payloads give a plain unknown, never an error.
        for bytes in ["c7 03 0c 81 01 a1", "c7 02 0c 81 01", "c7 03 0c 91 01 c2", "c7 03 0c 81 a1 c2", "c7 03 0c 81 05 ff"] {
            assert_eq!(from_msgpack(&hex(bytes), &Type::list(Type::Bool)).unwrap(), Value::unknown(), "{bytes}");
        }
        // "Definitely null" collapses to a known null, as in cty.
        assert_eq!(from_msgpack(&hex("c7 03 0c 81 01 c3"), &Type::String).unwrap(), Value::Null);
        // Refinements that do not apply to the type are dropped on both sides.
        let prefix = refined(Refinements { string_prefix: Some("a".into()), ..Default::default() });
        assert_eq!(from_msgpack(&hex("c7 04 0c 81 02 a1 61"), &Type::Number).unwrap(), Value::unknown());
        assert_eq!(to_msgpack(&prefix, &Type::Number).unwrap(), hex("d4 00 00"));
        // Unknowns of dynamic type are never refined.
        assert_eq!(from_msgpack(&hex("c7 03 0c 81 01 c2"), &Type::Dynamic).unwrap(), Value::unknown());
        let not_null = refined(Refinements { not_null: true, ..Default::default() });
        assert_eq!(to_msgpack(&not_null, &Type::Dynamic).unwrap(), hex("d4 00 00"));
        // Empty refinements are a plain unknown.
        assert_eq!(to_msgpack(&refined(Refinements::default()), &Type::String).unwrap(), hex("d4 00 00"));
    }

    #[test]
    fn numbers_keep_precision() {
        let cases = [
            ("05", Number::Int(5)),
            ("e0", Number::Int(-32)),
            ("d0 df", Number::Int(-33)),
            ("cf 7fffffffffffffff", Number::Int(i64::MAX)),
            ("d3 8000000000000000", Number::Int(i64::MIN)),
            ("cf ffffffffffffffff", Number::Big("18446744073709551615".into())),
            ("cb 3fb999999999999a", Number::Float(0.1)),
            ("ca 3fc00000", Number::Float(1.5)),
            // cty sends numbers float64 cannot hold exactly as decimal strings.
            ("b4 3138343436373434303733373039353531363136", Number::Big("18446744073709551616".into())),
            ("a3 302e31", Number::Big("0.1".into())),
            ("a5 3165343030", Number::Big("1e400".into())),
            ("a2 3432", Number::Int(42)),
            ("c4 02 3432", Number::Int(42)),
        ];
        for (bytes, n) in cases {
            assert_eq!(from_msgpack(&hex(bytes), &Type::Number).unwrap(), Value::Number(n), "{bytes}");
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
            (Number::Big("18446744073709551616".into()), "b4 3138343436373434303733373039353531363136"),
            (Number::Big("0.10".into()), "a3 302e31"),
            (Number::Big("7".into()), "07"),
        ];
        for (n, bytes) in encoded {
            assert_eq!(to_msgpack(&Value::Number(n.clone()), &Type::Number).unwrap(), hex(bytes), "{n:?}");
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
        assert_eq!(to_msgpack(&Value::from("x"), &Type::Dynamic).unwrap(), bytes);
        // The type may also come as a msgpack string.
        assert_eq!(from_msgpack(&hex("92 a8 22737472696e6722 a1 78"), &Type::Dynamic).unwrap(), value);
        // Null and unknown of unknown type are written directly; a typed null is wrapped.
        assert_eq!(to_msgpack(&Value::Null, &Type::Dynamic).unwrap(), hex("c0"));
        assert_eq!(from_msgpack(&hex("c0"), &Type::Dynamic).unwrap(), Value::Null);
        assert_eq!(to_msgpack(&Value::unknown(), &Type::Dynamic).unwrap(), hex("d4 00 00"));
        let typed_null = Value::Dynamic(Type::String, Box::new(Value::Null));
        assert_eq!(to_msgpack(&typed_null, &Type::Dynamic).unwrap(), hex("92 c4 08 22737472696e6722 c0"));
        // A dynamic value whose type is "dynamic" is the inner dynamic value.
        let nested = hex("92 c4 09 2264796e616d696322 92 c4 08 22737472696e6722 a1 78");
        assert_eq!(from_msgpack(&nested, &Type::Dynamic).unwrap(), value);
        // A list under a dynamic type.
        let list = Value::List(vec!["a".into(), Value::Null]);
        let encoded = to_msgpack(&list, &Type::Dynamic).unwrap();
        assert_eq!(encoded, hex("92 c4 11 5b226c697374222c22737472696e67225d 92 a1 61 c0"));
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
            ("items", Type::list(Type::object([("id", Type::String), ("extra", Type::Dynamic)]))),
        ]);
        let value = obj(&[
            ("tags", Value::Map([("b".to_string(), "2".into()), ("a".to_string(), "1".into())].into())),
            ("ports", Value::Set(vec![Value::int(443), Value::int(80)])),
            ("pair", Value::Tuple(vec!["k".into(), true.into()])),
            (
                "items",
                Value::List(vec![
                    obj(&[("id", "one".into()), ("extra", Value::Null)]),
                    obj(&[("id", Value::unknown()), ("extra", Value::Dynamic(Type::Number, Box::new(Value::int(1))))]),
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
        assert_eq!(err.to_string(), "failed to decode msgpack value at bogus: unsupported attribute");
        assert_eq!(err.path(), &AttributePath::attr("bogus"));
        let extra = obj(&[("bogus", Value::Null)]);
        assert!(to_msgpack(&extra, &name_count()).unwrap_err().to_string().contains("at bogus"));
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
        let value = obj(&[("env", Value::Map([("K".to_string(), Value::List(vec![true.into()]))].into()))]);
        let err = to_msgpack(&value, &ty).unwrap_err();
        assert_eq!(err.to_string(), "failed to encode msgpack value at env[\"K\"][0]: string is required, found bool");
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

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn round_trip_is_identity((ty, value) in testgen::typed_value()) {
            let bytes = to_msgpack(&value, &ty).unwrap();
            prop_assert_eq!(from_msgpack(&bytes, &ty).unwrap(), value);
        }

        /// The property the `decode_msgpack` fuzz target checks, for machines without nightly.
        #[test]
        fn arbitrary_bytes_never_panic(ty in testgen::any_type(), bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = from_msgpack(&bytes, &ty);
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
            let _ = from_msgpack(&bytes, &ty);
            let _ = from_msgpack(&bytes, &other);
            let _ = from_msgpack(&bytes, &Type::Dynamic);
        }
    }
}
