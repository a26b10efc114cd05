//! [`ChartVersion`]: a Helm chart's version as Helm compares it (SemVer 2: `major.minor.patch`, an
//! optional pre-release, an ignored build suffix, a leading `v` allowed). The one parser every
//! version rule reads through: whether two spellings are one version, a chart's minor, the
//! Cilium upgrade path.

use std::cmp::Ordering;
use std::fmt;

/// `1.19.7`, `v1.20.0-rc.1`: three numbers and an optional pre-release.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChartVersion {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    /// The pre-release (`rc.1`), empty for a release; a build suffix (`+abc`) is dropped, as
    /// SemVer and Helm ignore it in comparisons.
    pub pre: String,
}

impl ChartVersion {
    pub const fn new(major: u64, minor: u64, patch: u64) -> ChartVersion {
        ChartVersion {
            major,
            minor,
            patch,
            pre: String::new(),
        }
    }

    /// `None` for anything that is not three numbers with an optional suffix (`1.18`, `1.x`).
    pub fn parse(version: &str) -> Option<ChartVersion> {
        let v = version.trim();
        let v = v.strip_prefix('v').unwrap_or(v);
        let v = v.split_once('+').map_or(v, |(core, _build)| core);
        let (core, pre) = v.split_once('-').unwrap_or((v, ""));
        let mut numbers = core.split('.').map(|n| {
            (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .then(|| n.parse::<u64>().ok())
                .flatten()
        });
        let (major, minor, patch) = (numbers.next()??, numbers.next()??, numbers.next()??);
        if numbers.next().is_some() {
            return None;
        }
        let pre_ok = pre
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        if !pre_ok || (v.contains('-') && pre.is_empty()) {
            return None;
        }
        Some(ChartVersion {
            major,
            minor,
            patch,
            pre: pre.to_owned(),
        })
    }

    /// `major.minor`, as Cilium's `upgradeCompatibility` and its upgrade notes name a release line.
    pub fn minor_line(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }

    pub fn is_prerelease(&self) -> bool {
        !self.pre.is_empty()
    }

    /// Minors from `self` up to `to` (positive) or down (negative), within one major; `None`
    /// across majors.
    pub fn minors_to(&self, to: &ChartVersion) -> Option<i64> {
        (self.major == to.major).then(|| to.minor as i64 - self.minor as i64)
    }
}

/// SemVer precedence: numbers first, then a pre-release sorts before its release, and pre-release
/// identifiers compare numerically when both are numbers.
impl Ord for ChartVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => compare_pre(&self.pre, &other.pre),
            })
    }
}

impl PartialOrd for ChartVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

fn compare_pre(a: &str, b: &str) -> Ordering {
    let mut a = a.split('.');
    let mut b = b.split('.');
    loop {
        match (a.next(), b.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let o = match (x.parse::<u64>(), y.parse::<u64>()) {
                    (Ok(x), Ok(y)) => x.cmp(&y),
                    (Ok(_), Err(_)) => Ordering::Less,
                    (Err(_), Ok(_)) => Ordering::Greater,
                    (Err(_), Err(_)) => x.cmp(y),
                };
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

impl fmt::Display for ChartVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre)?;
        }
        Ok(())
    }
}

/// Whether two spellings name the same chart version (`v1.18.4` is `1.18.4` to Helm); text that
/// is no version is compared as written.
pub fn same_version(a: &str, b: &str) -> bool {
    match (ChartVersion::parse(a), ChartVersion::parse(b)) {
        (Some(a), Some(b)) => a == b,
        _ => a.trim_start_matches('v') == b.trim_start_matches('v'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_as_helm_reads_them() {
        type Parsed = Option<(u64, u64, u64, &'static str)>;
        let table: &[(&str, Parsed)] = &[
            ("1.19.7", Some((1, 19, 7, ""))),
            ("v1.20.2", Some((1, 20, 2, ""))),
            ("1.20.0-rc.1", Some((1, 20, 0, "rc.1"))),
            ("1.20.0+build.5", Some((1, 20, 0, ""))),
            (" 1.18.4 ", Some((1, 18, 4, ""))),
            ("1.18", None),
            ("1.18.x", None),
            ("1.18.4.1", None),
            ("1.18.4-", None),
            ("", None),
            ("latest", None),
        ];
        for (text, want) in table {
            let got = ChartVersion::parse(text).map(|v| (v.major, v.minor, v.patch, v.pre.clone()));
            let want = want.map(|(a, b, c, p)| (a, b, c, p.to_owned()));
            assert_eq!(got, want, "{text:?}");
        }
    }

    #[test]
    fn precedence_puts_a_prerelease_before_its_release() {
        let v = |s| ChartVersion::parse(s).expect(s);
        let ordered = [
            "1.19.7",
            "1.20.0-pre.1",
            "1.20.0-rc.1",
            "1.20.0-rc.2",
            "1.20.0-rc.10",
            "1.20.0",
            "1.20.2",
        ];
        for pair in ordered.windows(2) {
            assert!(v(pair[0]) < v(pair[1]), "{} < {}", pair[0], pair[1]);
        }
        assert_eq!(v("v1.20.2").to_string(), "1.20.2");
        assert_eq!(v("1.20.0-rc.1").minor_line(), "1.20");
    }

    #[test]
    fn two_spellings_of_one_version_are_the_same() {
        assert!(same_version("v1.18.4", "1.18.4"));
        assert!(same_version("1.18.4+meta", "1.18.4"));
        assert!(!same_version("1.18.4", "1.18.5"));
        assert!(same_version("odd", "vodd"));
    }
}
