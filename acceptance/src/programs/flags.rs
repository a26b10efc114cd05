//! Command-line flags as cobra/pflag parse them (helm, cilium-cli and kubectl are cobra
//! programs): `--flag value`, `--flag=value`, `-f value`, `-fvalue`, `-f=value`, combined short
//! booleans (`-ia`), `--` ending the flags, flags interspersed with arguments. A flag the
//! command does not know is an error with pflag's wording (`unknown flag: --foo`,
//! `unknown shorthand flag: 'x' in -x`, `flag needs an argument: --namespace`), which the
//! program prints in its own way and exits 1.

use std::fmt;

/// What a flag takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `--wait`, `--wait=false`.
    Bool,
    /// `--namespace NS`, `--namespace=NS`.
    Value,
    /// A value only with `=` (pflag's `NoOptDefVal`): `--dry-run`, `--dry-run=server`.
    Optional(&'static str),
}

/// A known flag.
#[derive(Clone, Copy, Debug)]
pub struct Flag {
    pub long: &'static str,
    pub short: Option<char>,
    pub kind: Kind,
}

pub const fn boolean(long: &'static str) -> Flag {
    Flag {
        long,
        short: None,
        kind: Kind::Bool,
    }
}

pub const fn value(long: &'static str) -> Flag {
    Flag {
        long,
        short: None,
        kind: Kind::Value,
    }
}

pub const fn optional(long: &'static str, default: &'static str) -> Flag {
    Flag {
        long,
        short: None,
        kind: Kind::Optional(default),
    }
}

impl Flag {
    pub const fn short(mut self, c: char) -> Flag {
        self.short = Some(c);
        self
    }
}

/// A parse error, worded like pflag.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FlagError {
    #[error("unknown flag: --{0}")]
    Unknown(String),
    #[error("unknown shorthand flag: '{0}' in -{1}")]
    UnknownShort(char, String),
    #[error("flag needs an argument: --{0}")]
    NeedsArgument(String),
    #[error("flag needs an argument: '{0}' in -{1}")]
    NeedsArgumentShort(char, String),
    #[error(
        "invalid argument \"{1}\" for \"--{0}\" flag: strconv.ParseBool: parsing \"{1}\": invalid syntax"
    )]
    InvalidBool(String, String),
}

/// Parsed command line: arguments, and flags by long name in order (`"true"`/`"false"` for
/// booleans).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    pub positional: Vec<String>,
    pub flags: Vec<(&'static str, String)>,
}

impl Parsed {
    /// The last value of `long`.
    pub fn get(&self, long: &str) -> Option<&str> {
        self.flags
            .iter()
            .rev()
            .find(|(k, _)| *k == long)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `long`, in order (repeatable flags such as `--set`, `-f`).
    pub fn all(&self, long: &str) -> Vec<String> {
        self.flags
            .iter()
            .filter(|(k, _)| *k == long)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Whether boolean `long` is set (last occurrence wins).
    pub fn on(&self, long: &str) -> bool {
        self.get(long) == Some("true")
    }
}

impl fmt::Display for Parsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {:?}", self.positional, self.flags)
    }
}

fn parse_bool(long: &str, v: &str) -> Result<String, FlagError> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok("true".into()),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok("false".into()),
        _ => Err(FlagError::InvalidBool(long.into(), v.into())),
    }
}

/// Parses `argv` (without the program name) against `known`.
pub fn parse(known: &[Flag], argv: &[String]) -> Result<Parsed, FlagError> {
    let mut out = Parsed::default();
    let mut it = argv.iter();
    while let Some(arg) = it.next() {
        if arg == "--" {
            out.positional.extend(it.by_ref().cloned());
            break;
        }
        if let Some(body) = arg.strip_prefix("--") {
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (body, None),
            };
            let flag = known
                .iter()
                .find(|f| f.long == name)
                .ok_or_else(|| FlagError::Unknown(name.into()))?;
            let v = match (flag.kind, inline) {
                (Kind::Bool, None) => "true".to_string(),
                (Kind::Bool, Some(v)) => parse_bool(name, v)?,
                (Kind::Optional(d), None) => d.to_string(),
                (_, Some(v)) => v.to_string(),
                (Kind::Value, None) => it
                    .next()
                    .cloned()
                    .ok_or_else(|| FlagError::NeedsArgument(name.into()))?,
            };
            out.flags.push((flag.long, v));
            continue;
        }
        match arg.strip_prefix('-') {
            Some(shorts) if !shorts.is_empty() => short_flags(known, shorts, &mut it, &mut out)?,
            _ => out.positional.push(arg.clone()),
        }
    }
    Ok(out)
}

fn short_flags<'a>(
    known: &[Flag],
    shorts: &str,
    it: &mut impl Iterator<Item = &'a String>,
    out: &mut Parsed,
) -> Result<(), FlagError> {
    for (i, c) in shorts.char_indices() {
        let flag = known
            .iter()
            .find(|f| f.short == Some(c))
            .ok_or_else(|| FlagError::UnknownShort(c, shorts.into()))?;
        let rest = &shorts[i + c.len_utf8()..];
        let rest = rest.strip_prefix('=').unwrap_or(rest);
        match flag.kind {
            Kind::Bool if shorts[i + c.len_utf8()..].starts_with('=') => {
                out.flags.push((flag.long, parse_bool(flag.long, rest)?));
                return Ok(());
            }
            Kind::Bool => out.flags.push((flag.long, "true".into())),
            Kind::Optional(d) if rest.is_empty() => out.flags.push((flag.long, d.into())),
            _ if !rest.is_empty() => {
                out.flags.push((flag.long, rest.into()));
                return Ok(());
            }
            _ => {
                let v = it
                    .next()
                    .cloned()
                    .ok_or_else(|| FlagError::NeedsArgumentShort(c, shorts.into()))?;
                out.flags.push((flag.long, v));
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The first argument that is not a flag of `known` (skipping flag values): the subcommand
/// cobra dispatches on, and its index in `argv`.
pub fn command(known: &[Flag], argv: &[String]) -> Option<(usize, String)> {
    let mut i = 0;
    while i < argv.len() {
        let a = &argv[i];
        if a == "--" {
            return argv.get(i + 1).map(|c| (i + 1, c.clone()));
        }
        let takes_value = if let Some(long) = a.strip_prefix("--") {
            !long.contains('=')
                && known
                    .iter()
                    .any(|f| f.long == long && f.kind == Kind::Value)
        } else if let Some(s) = a.strip_prefix('-').filter(|s| !s.is_empty()) {
            s.chars().count() == 1
                && known
                    .iter()
                    .any(|f| f.short == s.chars().next() && f.kind == Kind::Value)
        } else {
            return Some((i, a.clone()));
        };
        i += if takes_value { 2 } else { 1 };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: &[Flag] = &[
        value("namespace").short('n'),
        value("values").short('f'),
        boolean("install").short('i'),
        boolean("wait"),
        optional("dry-run", "client"),
    ];

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_like_pflag() {
        let p = parse(
            KNOWN,
            &argv("upgrade -i r c -n ns -fa.yaml -f=b.yaml --values c.yaml --wait=false --dry-run -- --x"),
        )
        .unwrap();
        assert_eq!(p.positional, ["upgrade", "r", "c", "--x"]);
        assert_eq!(p.get("namespace"), Some("ns"));
        assert_eq!(p.all("values"), ["a.yaml", "b.yaml", "c.yaml"]);
        assert!(p.on("install"));
        assert!(!p.on("wait"));
        assert_eq!(p.get("dry-run"), Some("client"));
    }

    #[test]
    fn unknown_flags_are_errors_with_pflag_wording() {
        let e = |s: &str| parse(KNOWN, &argv(s)).unwrap_err().to_string();
        assert_eq!(e("upgrade --foo"), "unknown flag: --foo");
        assert_eq!(e("upgrade --foo=1"), "unknown flag: --foo");
        assert_eq!(e("upgrade -x"), "unknown shorthand flag: 'x' in -x");
        assert_eq!(e("upgrade -ix"), "unknown shorthand flag: 'x' in -ix");
        assert_eq!(e("upgrade -n"), "flag needs an argument: 'n' in -n");
        assert_eq!(
            e("upgrade --namespace"),
            "flag needs an argument: --namespace"
        );
        assert_eq!(
            e("upgrade --wait=maybe"),
            "invalid argument \"maybe\" for \"--wait\" flag: strconv.ParseBool: parsing \"maybe\": invalid syntax"
        );
    }

    #[test]
    fn finds_the_subcommand_after_global_flags() {
        assert_eq!(
            command(KNOWN, &argv("-n ns --wait upgrade x")),
            Some((3, "upgrade".into()))
        );
        assert_eq!(
            command(KNOWN, &argv("--namespace=ns list")),
            Some((1, "list".into()))
        );
        assert_eq!(command(KNOWN, &argv("--wait")), None);
    }
}
