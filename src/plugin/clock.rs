//! UTC calendar arithmetic without a date crate: log timestamps and certificate
//! validity dates are all the runtime needs.

use std::time::{SystemTime, UNIX_EPOCH};

/// A UTC instant broken into calendar fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Utc {
    pub year: i64,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub micros: u32,
}

impl Utc {
    /// The given instant (instants before 1970 are clamped to the epoch).
    pub(crate) fn at(t: SystemTime) -> Self {
        let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = i64::try_from(since.as_secs()).unwrap_or(i64::MAX);
        let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
        let rem = secs.rem_euclid(86_400);
        // The casts are lossless: rem < 86_400.
        Self {
            year,
            month,
            day,
            hour: (rem / 3600) as u8,
            minute: (rem % 3600 / 60) as u8,
            second: (rem % 60) as u8,
            micros: since.subsec_micros(),
        }
    }

    /// The current instant.
    pub(crate) fn now() -> Self {
        Self::at(SystemTime::now())
    }

    /// RFC 3339 with exactly six fractional digits and `Z`, the layout go-plugin
    /// parses hclog's `@timestamp` with (`2006-01-02T15:04:05.000000Z07:00`).
    pub(crate) fn rfc3339_micros(&self) -> String {
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second, self.micros
        )
    }
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn known_instants() {
        let at = |secs: u64, micros: u64| {
            Utc::at(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros))
                .rfc3339_micros()
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(at(951_782_400, 7), "2000-02-29T00:00:00.000007Z");
        assert_eq!(at(1_798_761_599, 999_999), "2026-12-31T23:59:59.999999Z");
        assert_eq!(at(4_107_542_400, 0), "2100-03-01T00:00:00.000000Z");
    }
}
