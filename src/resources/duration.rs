//! Go durations as Terraform users write them for timeouts: `10m`, `90s`, `1h30m`, `1.5h`,
//! `500ms` (units `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`, combinable; no bare numbers but `0`), and
//! the `timeout` every resource takes: those, or seconds as `helm_release` takes them (`300`).

use std::time::Duration;

/// Parses a Go duration; the error says what is accepted.
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration: use Go syntax such as `10m`, `90s` or `1h30m`");
    let text = s.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() || text.starts_with('-') {
        return Err(bad());
    }
    let mut total = 0f64;
    let mut rest = text.trim_start_matches('+');
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let number: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return Err(bad()),
        };
        total += number * seconds;
        rest = &rest[unit_len..];
    }
    Ok(Duration::from_secs_f64(total))
}

/// A `timeout` as every resource takes it: seconds (`300`, or `timeout = 300` in HCL, as
/// `helm_release`) or a Go duration (`10m`, `1h30m`).
///
/// # Errors
/// Neither form; the message says what is accepted.
pub fn parse_timeout(t: &str) -> Result<Duration, String> {
    match t.trim().parse::<u64>() {
        Ok(secs) => Ok(Duration::from_secs(secs)),
        Err(_) => parse_go_duration(t).map_err(|_| {
            format!("{t:?} is not a duration: use seconds (`300`) or a Go duration such as `10m` or `1h30m`")
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_take_seconds_like_helm_release_or_go_durations() {
        assert_eq!(parse_timeout("300"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_timeout(" 600 "), Ok(Duration::from_secs(600)));
        assert_eq!(parse_timeout("1h30m"), Ok(Duration::from_secs(5400)));
        let err = parse_timeout("five minutes").expect_err("not a timeout");
        assert!(err.contains("seconds (`300`)"), "{err}");
    }

    #[test]
    fn go_durations_parse_including_combined_units() {
        assert_eq!(parse_go_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_go_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("500ms"), Ok(Duration::from_millis(500)));
        for bad in ["10", "10 minutes", "", "-5m", "m", "5d"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }
}
