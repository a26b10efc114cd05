//! A small strict JSON parser (RFC 8259) that keeps number literals as text and bounds nesting.

use super::{JsonError, MAX_JSON_DEPTH};

/// A parsed JSON value; numbers keep their literal text.
pub(super) enum Json<'a> {
    Null,
    Bool(bool),
    Number(&'a str),
    String(String),
    Array(Vec<Json<'a>>),
    Object(Vec<(String, Json<'a>)>),
}

impl Json<'_> {
    pub(super) fn name(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "bool",
            Json::Number(_) => "number",
            Json::String(_) => "string",
            Json::Array(_) => "array",
            Json::Object(_) => "object",
        }
    }

    /// For type descriptions, which serde_json reads (numbers never occur in a valid one).
    pub(super) fn to_serde(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Json::Null | Json::Number(_) => J::Null,
            Json::Bool(b) => J::Bool(*b),
            Json::String(s) => J::String(s.clone()),
            Json::Array(items) => J::Array(items.iter().map(Json::to_serde).collect()),
            Json::Object(items) => J::Object(
                items
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_serde()))
                    .collect(),
            ),
        }
    }
}

pub(super) struct Parser<'a> {
    src: &'a str,
    pub(super) pos: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    pub(super) fn new(src: &'a str) -> Self {
        Parser {
            src,
            pos: 0,
            depth: 0,
        }
    }

    pub(super) fn err(&self, reason: impl Into<String>) -> JsonError {
        JsonError::Syntax {
            offset: self.pos,
            reason: reason.into(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.pos).copied()
    }

    pub(super) fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn literal(&mut self, word: &str, value: Json<'a>) -> Result<Json<'a>, JsonError> {
        if self.src[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.err("invalid literal"))
        }
    }

    pub(super) fn value(&mut self) -> Result<Json<'a>, JsonError> {
        match self.peek() {
            None => Err(self.err("unexpected end of input")),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'"') => Ok(Json::String(self.string()?)),
            Some(b'[') => self.array(),
            Some(b'{') => self.object(),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err("unexpected character")),
        }
    }

    fn enter(&mut self) -> Result<(), JsonError> {
        if self.depth >= MAX_JSON_DEPTH {
            return Err(self.err(format!("nested deeper than {MAX_JSON_DEPTH} levels")));
        }
        self.depth += 1;
        self.pos += 1;
        self.ws();
        Ok(())
    }

    fn array(&mut self) -> Result<Json<'a>, JsonError> {
        self.items(b']', Self::value).map(Json::Array)
    }

    fn object(&mut self) -> Result<Json<'a>, JsonError> {
        self.items(b'}', Self::member).map(Json::Object)
    }

    /// The items of an array or object, from its opening bracket through `close`, each read by
    /// `item` and separated by commas.
    fn items<T>(
        &mut self,
        close: u8,
        mut item: impl FnMut(&mut Self) -> Result<T, JsonError>,
    ) -> Result<Vec<T>, JsonError> {
        self.enter()?;
        let mut items = Vec::new();
        if self.peek() != Some(close) {
            loop {
                items.push(item(self)?);
                self.ws();
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        self.ws();
                    }
                    Some(c) if c == close => break,
                    _ => return Err(self.err(format!("expected ',' or '{}'", close as char))),
                }
            }
        }
        self.pos += 1;
        self.depth -= 1;
        Ok(items)
    }

    /// `"key": value` of an object.
    fn member(&mut self) -> Result<(String, Json<'a>), JsonError> {
        if self.peek() != Some(b'"') {
            return Err(self.err("expected a string key"));
        }
        let key = self.string()?;
        self.ws();
        if self.peek() != Some(b':') {
            return Err(self.err("expected ':'"));
        }
        self.pos += 1;
        self.ws();
        Ok((key, self.value()?))
    }

    fn number(&mut self) -> Result<Json<'a>, JsonError> {
        let start = self.pos;
        let bytes = self.src.as_bytes();
        let digits = |p: &mut usize| {
            let from = *p;
            while bytes.get(*p).is_some_and(u8::is_ascii_digit) {
                *p += 1;
            }
            *p - from
        };
        let mut p = self.pos;
        if bytes.get(p) == Some(&b'-') {
            p += 1;
        }
        let int_start = p;
        let n = digits(&mut p);
        if n == 0 || (n > 1 && bytes[int_start] == b'0') {
            self.pos = p;
            return Err(self.err("invalid number"));
        }
        if bytes.get(p) == Some(&b'.') {
            p += 1;
            if digits(&mut p) == 0 {
                self.pos = p;
                return Err(self.err("invalid number"));
            }
        }
        if matches!(bytes.get(p), Some(b'e' | b'E')) {
            p += 1;
            if matches!(bytes.get(p), Some(b'+' | b'-')) {
                p += 1;
            }
            if digits(&mut p) == 0 {
                self.pos = p;
                return Err(self.err("invalid number"));
            }
        }
        self.pos = p;
        Ok(Json::Number(&self.src[start..p]))
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let text = self
            .src
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.err("truncated \\u escape"))?;
        let code = u32::from_str_radix(text, 16).map_err(|_| self.err("invalid \\u escape"))?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(self.err("invalid \\u escape"));
        }
        self.pos += 4;
        Ok(code)
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.pos += 1; // opening quote
        let mut out = String::new();
        loop {
            let rest = &self.src[self.pos..];
            let plain = rest
                .find(|c: char| c == '"' || c == '\\' || c < ' ')
                .unwrap_or(rest.len());
            out.push_str(&rest[..plain]);
            self.pos += plain;
            match self.peek() {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let escape = self.peek().ok_or_else(|| self.err("unterminated string"))?;
                    self.pos += 1;
                    match escape {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape()?),
                        _ => return Err(self.err("invalid escape")),
                    }
                }
                Some(_) => return Err(self.err("control character in string")),
            }
        }
    }

    /// `\uXXXX`, joining surrogate pairs; a lone surrogate becomes U+FFFD (as Go's decoder does).
    fn unicode_escape(&mut self) -> Result<char, JsonError> {
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first) && self.src[self.pos..].starts_with("\\u") {
            let save = self.pos;
            self.pos += 2;
            let second = self.hex4()?;
            if (0xDC00..0xE000).contains(&second) {
                let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                return Ok(char::from_u32(code).unwrap_or('\u{FFFD}'));
            }
            self.pos = save;
        }
        Ok(char::from_u32(first).unwrap_or('\u{FFFD}'))
    }
}
