//! Small helpers without dependencies: timestamps, hex, percent-decoding, query strings.

use std::time::{SystemTime, UNIX_EPOCH};

/// RFC 3339 UTC timestamp with second precision, like Kubernetes' `metav1.Time`.
pub fn now_rfc3339() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format_rfc3339(secs)
}

pub fn format_rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// RFC 3339 UTC with nanoseconds, trailing zeros trimmed (Go's `time.RFC3339Nano`, the kubelet's
/// log timestamps): `2024-05-01T10:00:00.12345Z`, `2024-05-01T10:00:00Z`.
pub fn format_rfc3339_nano(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let base = format_rfc3339(d.as_secs());
    let nanos = d.subsec_nanos();
    if nanos == 0 {
        return base;
    }
    let frac = format!("{nanos:09}");
    format!(
        "{}.{}Z",
        base.trim_end_matches('Z'),
        frac.trim_end_matches('0')
    )
}

/// Parses `YYYY-MM-DDTHH:MM:SSZ` (fractions and offsets other than `Z` are not supported).
pub fn parse_rfc3339(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (hh, mm, ss) = (n(11..13)?, n(14..16)?, n(17..19)?);
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    // A fraction is ignored (second precision); `Z` or a `±HH:MM` offset is applied.
    let rest = s[19..].trim_start_matches(|c: char| c == '.' || c.is_ascii_digit());
    let offset = match rest.as_bytes().first() {
        Some(b'+') | Some(b'-') if rest.len() == 6 && rest.as_bytes()[3] == b':' => {
            let h: i64 = rest.get(1..3)?.parse().ok()?;
            let m: i64 = rest.get(4..6)?.parse().ok()?;
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            sign * (h * 3600 + m * 60)
        }
        _ => 0,
    };
    u64::try_from(days * 86_400 + hh * 3600 + mm * 60 + ss - offset).ok()
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Decodes `application/x-www-form-urlencoded` text (`+` is a space, `%XX` a byte).
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let h = std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match h {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a query string into decoded pairs.
pub fn parse_query(q: Option<&str>) -> Vec<(String, String)> {
    q.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(p), String::new()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_timestamps() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn formats_nano_timestamps_like_go() {
        let t = UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 120_000_000);
        assert_eq!(format_rfc3339_nano(t), "2023-11-14T22:13:20.12Z");
        let t = UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 0);
        assert_eq!(format_rfc3339_nano(t), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn parses_timestamps() {
        assert_eq!(parse_rfc3339("2023-11-14T22:13:20Z"), Some(1_700_000_000));
        assert_eq!(
            parse_rfc3339(&format_rfc3339(86_400 * 400 + 59)),
            Some(86_400 * 400 + 59)
        );
        assert_eq!(parse_rfc3339("nope"), None);
        assert_eq!(
            parse_rfc3339("2023-11-14T22:13:20.999Z"),
            Some(1_700_000_000)
        );
        assert_eq!(
            parse_rfc3339("2023-11-15T00:13:20+02:00"),
            Some(1_700_000_000)
        );
    }

    #[test]
    fn decodes_queries() {
        let q = parse_query(Some("labelSelector=app%3Din+(a%2Cb)&watch"));
        assert_eq!(q[0], ("labelSelector".into(), "app=in (a,b)".into()));
        assert_eq!(q[1], ("watch".into(), String::new()));
        assert_eq!(percent_decode("%"), "%");
        assert_eq!(percent_decode("a%2"), "a%2");
    }
}
