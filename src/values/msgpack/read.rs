//! Reading msgpack tokens from a byte slice: every length is checked against the input left,
//! nothing is allocated, nothing panics.

use crate::values::value::Number;

#[derive(Debug, Clone, Copy)]
pub(super) enum Token<'a> {
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

pub(super) struct Reader<'a> {
    buf: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub(super) fn remaining(&self) -> usize {
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

    pub(super) fn token(&mut self) -> Result<Token<'a>, &'static str> {
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
    pub(super) fn skip(&mut self) -> Result<(), &'static str> {
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

pub(super) fn number_from(token: Token<'_>) -> Option<Number> {
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

pub(super) fn string_from(token: Token<'_>) -> Option<Result<String, std::str::Utf8Error>> {
    match token {
        Token::Str(b) | Token::Bin(b) => Some(std::str::from_utf8(b).map(str::to_owned)),
        _ => None,
    }
}

pub(super) fn token_name(token: &Token<'_>) -> &'static str {
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
