//! Unknown values: any msgpack extension is an unknown; extension 12 carries cty refinements
//! (1 = nullness, 2 = string prefix, 3/4 = number bounds, 5/6 = collection length bounds).

use rmp::encode::{self, ByteBuf, ValueWriteError};

use super::read::{Reader, Token, number_from, string_from};
use super::{
    EXT_REFINED_UNKNOWN, Encoder, MAX_REFINEMENT_LEN, MsgpackError, PLAIN_UNKNOWN, infallible,
};
use crate::values::types::Type;
use crate::values::value::{Refinements, Value};

/// What an extension payload says about an unknown value.
enum Refined {
    /// cty's "definitely null" refinement: the value is a known null.
    Null,
    Unknown(Refinements),
}

pub(super) fn unknown_from_ext(code: i8, payload: &[u8], ty: &Type) -> Value {
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
    let mut r = Reader::new(payload);
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
                    let slot = if key == 3 {
                        &mut out.number_lower
                    } else {
                        &mut out.number_upper
                    };
                    *slot = Some((bound, inclusive));
                }
            }
            5 | 6 => {
                let Token::Int(n) = r.token()? else {
                    return Err("length bound is not an integer");
                };
                let n = u64::try_from(n).map_err(|_| "length bound is negative")?;
                if ty.is_collection() {
                    let slot = if key == 5 {
                        &mut out.length_lower
                    } else {
                        &mut out.length_upper
                    };
                    *slot = Some(n);
                }
            }
            // Refinements this codec does not know yet are skipped, as cty does.
            _ => r.skip()?,
        }
    }
    Ok(Refined::Unknown(out))
}

/// Longest string prefix written: cty refuses refinement payloads over 1 KiB, and a shorter
/// prefix is still a true refinement.
const MAX_PREFIX_LEN: usize = 256;

/// Longest encoded number bound written, for the same reason.
const MAX_BOUND_LEN: usize = 256;

fn bounded_prefix(prefix: &str) -> &str {
    if prefix.len() <= MAX_PREFIX_LEN {
        return prefix;
    }
    let mut end = MAX_PREFIX_LEN;
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    &prefix[..end]
}

impl Encoder {
    /// A plain unknown (`d4 00 00`), or extension 12 with the refinements that apply to `ty`.
    pub(super) fn unknown(
        &self,
        refinements: Option<&Refinements>,
        ty: &Type,
    ) -> Result<Vec<u8>, MsgpackError> {
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
            infallible(
                encode::write_bool(&mut body, false).map_err(ValueWriteError::InvalidMarkerWrite),
            );
        }
        match ty {
            Type::String => {
                let prefix = r.string_prefix.as_deref().filter(|p| !p.is_empty());
                if let Some(prefix) = prefix.map(bounded_prefix) {
                    key(&mut body, 2);
                    infallible(encode::write_str(&mut body, prefix));
                }
            }
            Type::Number => {
                for (k, bound) in [(3, &r.number_lower), (4, &r.number_upper)] {
                    if let Some((n, inclusive)) = bound {
                        let n = self.number(n)?;
                        if n.len() > MAX_BOUND_LEN {
                            // Dropping a bound only weakens the refinement; it stays true.
                            continue;
                        }
                        key(&mut body, k);
                        infallible(encode::write_array_len(&mut body, 2));
                        body.as_mut_vec().extend_from_slice(&n);
                        infallible(
                            encode::write_bool(&mut body, *inclusive)
                                .map_err(ValueWriteError::InvalidMarkerWrite),
                        );
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
        infallible(encode::write_ext_meta(
            &mut out,
            total as u32,
            EXT_REFINED_UNKNOWN,
        ));
        out.as_mut_vec().extend_from_slice(map.as_slice());
        out.as_mut_vec().extend_from_slice(body.as_slice());
        Ok(out.into_vec())
    }
}
