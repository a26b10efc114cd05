//! Exact decimal handling for cty numbers: parsing decimal text (msgpack strings, JSON number
//! literals) without going through `f64`, and one canonical text form for [`Number::Big`].

use super::value::Number;

/// The parts of a decimal literal: `-` sign, digits without leading zeros, and a power of ten.
/// The value is `(-1)^negative * digits * 10^exponent`; `digits` is empty for zero.
struct Decimal<'a> {
    negative: bool,
    int: &'a str,
    frac: &'a str,
    exp: i64,
}

/// Exponents beyond this are clamped; they only matter for the text, which keeps them verbatim.
const EXP_LIMIT: i64 = 1 << 40;

fn split_decimal(text: &str) -> Option<Decimal<'_>> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (mantissa, exp_text) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None => (rest, None),
    };
    let (int, frac) = match mantissa.find('.') {
        Some(at) => (&mantissa[..at], &mantissa[at + 1..]),
        None => (mantissa, ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() && frac.is_empty() || !digits(int) || !digits(frac) {
        return None;
    }
    if mantissa.contains('.') && (int.is_empty() || frac.is_empty()) {
        // ".5" and "5." are not numbers in JSON; keep one grammar for both codecs.
        return None;
    }
    let exp = match exp_text {
        None => 0,
        Some(e) => {
            let (neg, body) = match e.as_bytes().first()? {
                b'-' => (true, &e[1..]),
                b'+' => (false, &e[1..]),
                _ => (false, e),
            };
            if body.is_empty() || !digits(body) {
                return None;
            }
            let mut value: i64 = 0;
            for b in body.bytes() {
                value = (value * 10 + i64::from(b - b'0')).min(EXP_LIMIT);
            }
            if neg { -value } else { value }
        }
    };
    Some(Decimal {
        negative,
        int: int.trim_start_matches('0'),
        frac: frac.trim_end_matches('0'),
        exp,
    })
}

impl Decimal<'_> {
    fn is_zero(&self) -> bool {
        self.int.is_empty() && self.frac.bytes().all(|b| b == b'0')
    }

    /// The value as an `i64`, when it is an integer that fits.
    fn to_i64(&self) -> Option<i64> {
        if self.is_zero() {
            return Some(0);
        }
        // digits * 10^shift, where digits = int ++ frac.
        let shift = self.exp - self.frac.len() as i64;
        let digits = format!("{}{}", self.int, self.frac);
        let digits = digits.trim_start_matches('0');
        let (digits, shift) = {
            let trimmed = digits.trim_end_matches('0');
            (trimmed, shift + (digits.len() - trimmed.len()) as i64)
        };
        if shift < 0 || digits.len() as i64 + shift > 19 {
            return None;
        }
        let mut magnitude: i128 = 0;
        for b in digits.bytes() {
            magnitude = magnitude * 10 + i128::from(b - b'0');
        }
        for _ in 0..shift {
            magnitude *= 10;
        }
        let value = if self.negative { -magnitude } else { magnitude };
        i64::try_from(value).ok()
    }

    /// Canonical text: no `+`, no leading zeros, no trailing fraction zeros, `e` exponent only
    /// when non-zero. Always a valid JSON number.
    fn canonical(&self, original_exp: &str) -> String {
        let mut out = String::with_capacity(self.int.len() + self.frac.len() + 8);
        if self.negative && !self.is_zero() {
            out.push('-');
        }
        out.push_str(if self.int.is_empty() { "0" } else { self.int });
        if !self.frac.is_empty() {
            out.push('.');
            out.push_str(self.frac);
        }
        if self.exp != 0 && !self.is_zero() {
            out.push('e');
            out.push_str(original_exp);
        }
        out
    }
}

/// The exponent text without `+` and leading zeros (kept verbatim rather than clamped).
fn exponent_text(text: &str) -> String {
    let Some(at) = text.find(['e', 'E']) else {
        return String::new();
    };
    let e = &text[at + 1..];
    let (neg, body) = match e.as_bytes().first() {
        Some(b'-') => (true, &e[1..]),
        Some(b'+') => (false, &e[1..]),
        _ => (false, e),
    };
    let body = body.trim_start_matches('0');
    if neg {
        format!("-{body}")
    } else {
        body.to_owned()
    }
}

impl Number {
    /// Parses decimal text (`-12`, `0.1`, `1e400`, `18446744073709551616`) exactly: an integer that
    /// fits an `i64` becomes [`Number::Int`], anything else [`Number::Big`] in canonical form.
    /// Returns `None` when the text is not a decimal number (`inf`, `.5`, `0x10`, ...).
    pub fn parse_decimal(text: &str) -> Option<Number> {
        let dec = split_decimal(text)?;
        if let Some(i) = dec.to_i64() {
            return Some(Number::Int(i));
        }
        Some(Number::Big(dec.canonical(&exponent_text(text))))
    }

    /// The number as decimal text that [`Number::parse_decimal`] reads back, or `None` for a
    /// non-finite float or a `Big` that is not decimal text.
    pub fn to_decimal_string(&self) -> Option<String> {
        match self {
            Number::Int(i) => Some(i.to_string()),
            // Rust's `Display` for f64 is the shortest text that reads back to the same f64, and
            // never uses exponent notation.
            Number::Float(f) if f.is_finite() => Some(f.to_string()),
            Number::Float(_) => None,
            Number::Big(text) => {
                let dec = split_decimal(text)?;
                Some(dec.canonical(&exponent_text(text)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_that_fit_become_int() {
        assert_eq!(Number::parse_decimal("0"), Some(Number::Int(0)));
        assert_eq!(Number::parse_decimal("-0"), Some(Number::Int(0)));
        assert_eq!(Number::parse_decimal("+42"), Some(Number::Int(42)));
        assert_eq!(Number::parse_decimal("007"), Some(Number::Int(7)));
        assert_eq!(Number::parse_decimal("1.50e1"), Some(Number::Int(15)));
        assert_eq!(Number::parse_decimal("12000e-3"), Some(Number::Int(12)));
        assert_eq!(
            Number::parse_decimal("9223372036854775807"),
            Some(Number::Int(i64::MAX))
        );
        assert_eq!(
            Number::parse_decimal("-9223372036854775808"),
            Some(Number::Int(i64::MIN))
        );
    }

    #[test]
    fn everything_else_stays_exact() {
        let big = |s: &str| Some(Number::Big(s.to_owned()));
        assert_eq!(
            Number::parse_decimal("9223372036854775808"),
            big("9223372036854775808")
        );
        assert_eq!(
            Number::parse_decimal("18446744073709551616"),
            big("18446744073709551616")
        );
        assert_eq!(Number::parse_decimal("0.1"), big("0.1"));
        assert_eq!(Number::parse_decimal("-0.10"), big("-0.1"));
        assert_eq!(Number::parse_decimal("1e400"), big("1e400"));
        assert_eq!(Number::parse_decimal("1E+0400"), big("1e400"));
        assert_eq!(Number::parse_decimal("25e-1"), big("25e-1"));
        assert_eq!(
            Number::parse_decimal("1e99999999999999999999"),
            big("1e99999999999999999999")
        );
    }

    #[test]
    fn rejects_non_decimal_text() {
        for text in [
            "", "-", ".5", "5.", "1e", "1e+", "inf", "NaN", "0x10", "1_000", " 1", "1 ",
        ] {
            assert_eq!(Number::parse_decimal(text), None, "{text:?}");
        }
    }

    #[test]
    fn canonical_text_is_stable() {
        for text in [
            "0.1",
            "-2.5e-300",
            "1e400",
            "123456789012345678901234567890",
        ] {
            let n = Number::parse_decimal(text).unwrap();
            let again = Number::parse_decimal(&n.to_decimal_string().unwrap()).unwrap();
            assert_eq!(n, again);
        }
        assert_eq!(
            Number::Float(0.5).to_decimal_string().as_deref(),
            Some("0.5")
        );
        assert_eq!(Number::Float(f64::INFINITY).to_decimal_string(), None);
    }
}
