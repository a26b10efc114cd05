//! Which Flux Operator can install which Flux: the operator installs only the Flux versions
//! embedded in its image (its `config/data/flux/vX.Y.Z/`), matching the FluxInstance's
//! `spec.distribution.version` (a semver range such as `2.9.x`) against them; with no match the
//! FluxInstance stays `Ready=False` (`BuildFailed`, "no match found for semver"). The operator's
//! chart has the operator's version number, so the chart version decides.
//!
//! [`NEWEST_FLUX`] is the newest Flux embedded by each operator release (read per tag in
//! controlplaneio-fluxcd/flux-operator, `config/data/flux/`, v0.28.0 to v0.58.1 and the v0.59.0 module;
//! every release
//! embeds Flux from 2.2.3 on). [`check`] is the pure judgement the plan makes.

use std::cmp::Ordering;
use std::fmt;

/// A version as three numbers (pre-release and build suffixes ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u64, pub u64, pub u64);

impl Version {
    /// `0.53.0`, `v2.9.4`, `2.9` (missing parts are 0); `None` without a number.
    pub fn parse(text: &str) -> Option<Version> {
        let text = text.trim();
        let text = text.strip_prefix('v').unwrap_or(text);
        let core = text.split(['-', '+']).next()?;
        let mut parts = core.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next().map_or(Some(0), |p| p.parse().ok())?;
        let patch = parts.next().map_or(Some(0), |p| p.parse().ok())?;
        Some(Version(major, minor, patch))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// Operator (= chart) release -> the newest Flux it embeds, oldest first. A chart between two
/// entries embeds what the older entry does (no release in between).
pub const NEWEST_FLUX: &[(Version, Version)] = &[
    (Version(0, 28, 0), Version(2, 6, 4)),
    (Version(0, 30, 0), Version(2, 7, 0)),
    (Version(0, 31, 0), Version(2, 7, 1)),
    (Version(0, 32, 0), Version(2, 7, 2)),
    (Version(0, 33, 0), Version(2, 7, 3)),
    (Version(0, 34, 0), Version(2, 7, 4)),
    (Version(0, 35, 0), Version(2, 7, 5)),
    (Version(0, 42, 0), Version(2, 8, 0)),
    (Version(0, 43, 0), Version(2, 8, 1)),
    (Version(0, 44, 0), Version(2, 8, 2)),
    (Version(0, 45, 0), Version(2, 8, 3)),
    (Version(0, 46, 0), Version(2, 8, 5)),
    (Version(0, 48, 0), Version(2, 8, 6)),
    (Version(0, 49, 0), Version(2, 8, 7)),
    (Version(0, 50, 0), Version(2, 8, 8)),
    (Version(0, 53, 0), Version(2, 9, 0)),
    (Version(0, 54, 0), Version(2, 9, 1)),
    (Version(0, 55, 0), Version(2, 9, 2)),
    (Version(0, 56, 0), Version(2, 9, 3)),
    (Version(0, 58, 0), Version(2, 9, 4)),
    (Version(0, 59, 0), Version(2, 9, 5)),
];

/// The last operator release [`NEWEST_FLUX`] knows the contents of (v0.59.0, the one the
/// examples install); newer charts are not judged.
pub const LAST_KNOWN_OPERATOR: Version = Version(0, 59, 0);

/// The lowest Flux version a `distribution.version` range admits, and whether the bound is
/// strict (`>2.8.0`); `None` when the range has no lower bound (`2.x`, `*`, `<2.9`) or cannot
/// be read (the operator reports that itself).
pub fn lower_bound(range: &str) -> Option<(Version, bool)> {
    // An `a || b` range admits the lowest of its alternatives.
    let mut lowest: Option<(Version, bool)> = None;
    for alternative in range.split("||") {
        let bound = alternative_bound(alternative)?;
        lowest = Some(match (lowest, bound) {
            (Some(l), b) if (l.0, l.1) <= (b.0, b.1) => l,
            (_, b) => b,
        });
    }
    lowest.filter(|(v, strict)| *v > Version(0, 0, 0) || *strict)
}

/// The lower bound of one `&&`-joined alternative (`>=2.8.0 <3.0.0`, `~2.9`, `2.9.x`).
fn alternative_bound(alternative: &str) -> Option<(Version, bool)> {
    let mut bound = (Version(0, 0, 0), false);
    let tokens = alternative
        .split([' ', ','])
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>();
    // `1.2 - 1.4`: a hyphen range, bounded below by its first part.
    let tokens = match tokens.as_slice() {
        [low, "-", _] => vec![*low],
        _ => tokens,
    };
    for token in tokens {
        if token.starts_with('<') || token.starts_with("!=") {
            continue;
        }
        let strict = token.starts_with('>') && !token.starts_with(">=");
        let number = token.trim_start_matches(['>', '=', '~', '^', 'v', ' ']);
        let wildcard = |p: &str| matches!(p, "x" | "X" | "*");
        if number.is_empty() || wildcard(number) {
            continue;
        }
        let digits: Vec<&str> = number.split(['-', '+']).next()?.split('.').collect();
        let parts: Vec<u64> = digits
            .iter()
            .take_while(|p| !wildcard(p))
            .map(|p| p.parse().ok())
            .collect::<Option<_>>()?;
        let v = Version(
            parts.first().copied().unwrap_or(0),
            parts.get(1).copied().unwrap_or(0),
            parts.get(2).copied().unwrap_or(0),
        );
        if (v, strict) > bound {
            bound = (v, strict);
        }
    }
    Some(bound)
}

/// The newest Flux a chart version embeds (`None`: older than the table, or newer than
/// [`LAST_KNOWN_OPERATOR`]).
pub fn newest_flux(chart: Version) -> Option<Version> {
    if chart > LAST_KNOWN_OPERATOR {
        return None;
    }
    NEWEST_FLUX
        .iter()
        .rev()
        .find(|(operator, _)| *operator <= chart)
        .map(|(_, flux)| *flux)
}

/// A chart too old for the FluxInstance: what it embeds, and the oldest chart that would do
/// (`None`: no chart the table knows; one newer than [`LAST_KNOWN_OPERATOR`] may).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooOld {
    pub newest_flux: Version,
    pub minimum_chart: Option<Version>,
}

/// Judges an operator chart version against a `distribution.version` range: `Some` when the
/// chart cannot install any Flux the range admits. Unreadable input, or a chart the table does
/// not know, is not judged.
pub fn check(distribution: &str, chart_version: &str) -> Option<TooOld> {
    let chart = Version::parse(chart_version)?;
    let newest = newest_flux(chart)?;
    let (needed, strict) = lower_bound(distribution)?;
    let fits = |flux: Version| match flux.cmp(&needed) {
        Ordering::Greater => true,
        Ordering::Equal => !strict,
        Ordering::Less => false,
    };
    if fits(newest) {
        return None;
    }
    Some(TooOld {
        newest_flux: newest,
        minimum_chart: NEWEST_FLUX
            .iter()
            .find(|(_, flux)| fits(*flux))
            .map(|(operator, _)| *operator),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_bounded_below_as_the_operator_reads_them() {
        let v = |s: &str| Version::parse(s).unwrap();
        let table = [
            ("2.9.x", Some((v("2.9.0"), false))),
            ("2.9.*", Some((v("2.9.0"), false))),
            ("2.9", Some((v("2.9.0"), false))),
            ("~2.9", Some((v("2.9.0"), false))),
            ("^2.8.3", Some((v("2.8.3"), false))),
            ("v2.9.4", Some((v("2.9.4"), false))),
            ("=2.9.4", Some((v("2.9.4"), false))),
            (">=2.8.0 <3.0.0", Some((v("2.8.0"), false))),
            (">=2.8.0, <3.0.0", Some((v("2.8.0"), false))),
            (">2.9.4", Some((v("2.9.4"), true))),
            ("2.7.x || 2.9.x", Some((v("2.7.0"), false))),
            ("2.8.0 - 2.9.0", Some((v("2.8.0"), false))),
            ("2.x", Some((v("2.0.0"), false))),
            ("*", None),
            ("<2.9", None),
            ("two", None),
        ];
        for (range, want) in table {
            assert_eq!(lower_bound(range), want, "{range}");
        }
    }

    #[test]
    fn a_chart_is_too_old_when_it_embeds_no_flux_the_range_admits() {
        let v = |s: &str| Version::parse(s).unwrap();
        let too_old = |newest: &str, minimum: Option<&str>| {
            Some(TooOld {
                newest_flux: v(newest),
                minimum_chart: minimum.map(v),
            })
        };
        let table = [
            // The examples' old pin cannot install Flux 2.8 or 2.9.
            ("2.9.x", "0.33.0", too_old("2.7.3", Some("0.53.0"))),
            ("2.8.x", "0.33.0", too_old("2.7.3", Some("0.42.0"))),
            ("2.9.x", "0.52.0", too_old("2.8.8", Some("0.53.0"))),
            ("2.9.x", "0.53.0", None),
            ("2.9.3", "0.55.0", too_old("2.9.2", Some("0.56.0"))),
            (">2.9.4", "0.58.1", too_old("2.9.4", Some("0.59.0"))),
            // The examples' pin: Flux 2.9 up to 2.9.5.
            ("2.9.x", "0.59.0", None),
            ("2.9.5", "0.59.0", None),
            (">2.9.5", "0.59.0", too_old("2.9.5", None)),
            ("2.7.x", "0.28.0", too_old("2.6.4", Some("0.30.0"))),
            ("2.7.x", "0.33.0", None),
            ("2.x", "0.28.0", None),
            // A chart between two releases embeds the older one's Flux.
            ("2.8.x", "0.41.1", too_old("2.7.5", Some("0.42.0"))),
            // Charts the table does not know, and unreadable input, are not judged.
            ("2.9.x", "0.60.0", None),
            ("2.9.x", "0.20.0", None),
            ("2.9.x", "latest", None),
            ("whatever", "0.33.0", None),
        ];
        for (range, chart, want) in table {
            assert_eq!(check(range, chart), want, "{range} on chart {chart}");
        }
    }

    #[test]
    fn the_table_is_ordered_and_flux_only_grows() {
        for pair in NEWEST_FLUX.windows(2) {
            assert!(pair[0].0 < pair[1].0 && pair[0].1 < pair[1].1, "{pair:?}");
        }
        assert!(NEWEST_FLUX.last().unwrap().0 <= LAST_KNOWN_OPERATOR);
    }
}
