//! `sed` and `grep` as the busybox shell images have them, in the subset scripts here use
//! them: line filters over stdin or files, with regular expressions from the `regex` crate.
//!
//! - `sed [-n] [-E|-r] [-e] SCRIPT [FILE...]`: SCRIPT is one command, `p` or `d`, optionally
//!   after a `/RE/` address (`/^(---|kind:)/p` with `-n` prints the matching lines). Exit 0
//!   whether or not a line matched, as busybox sed. Any other command is
//!   `sed: unsupported command X` (exit 1); `s///`, ranges, line numbers, several commands,
//!   `-i`, hold space and the like are not simulated.
//! - `grep [-E|-F] [-v] [-q] [-c] [-e PAT]... [PAT] [FILE...]`: exit 0 when a line was
//!   selected, 1 when none, 2 on an error (missing file, bad pattern).
//!
//! Without `-E` a pattern is a POSIX basic RE: `\(`, `\)`, `\|`, `\{`, `\}`, `\+`, `\?` are the
//! operators and the bare characters literal (the GNU/busybox reading). Bracket expressions
//! are POSIX ones (`[[:alpha:]]`, a leading `]` literal, no `\` escapes inside). Where POSIX and
//! the `regex` crate differ beyond that (back-references, leftmost-longest alternation) the
//! crate's semantics apply; for a line filter only whether a line matches matters.

use regex::Regex;

use super::{Exit, ProgramContext};

/// `sed ARGS...` (without `sed`).
pub(super) fn sed(ctx: &ProgramContext, args: &[String]) -> Exit {
    let (quiet, extended, script, files) = match sed_arguments(args) {
        Ok(parsed) => parsed,
        Err(message) => {
            ctx.err(&format!("sed: {message}"));
            return Exit::code(1);
        }
    };
    let command = match SedCommand::parse(&script, extended) {
        Ok(c) => c,
        Err(message) => {
            ctx.err(&format!("sed: {message}"));
            return Exit::code(1);
        }
    };
    let (inputs, missing) = read_inputs(ctx, "sed", &files);
    for (_, text) in &inputs {
        ctx.write_out(&command.run(text, quiet));
    }
    Exit::code(if missing { 1 } else { 0 })
}

fn sed_arguments(args: &[String]) -> Result<(bool, bool, String, Vec<String>), String> {
    let (mut quiet, mut extended, mut script) = (false, false, None::<String>);
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--" => {
                rest.extend(it.by_ref().cloned());
                break;
            }
            "--quiet" | "--silent" => quiet = true,
            "--regexp-extended" => extended = true,
            s if s.starts_with('-') && s.len() > 1 => {
                for (i, c) in s.char_indices().skip(1) {
                    match c {
                        'n' => quiet = true,
                        'E' | 'r' => extended = true,
                        'e' => {
                            let inline = &s[i + 1..];
                            let text = if inline.is_empty() {
                                it.next()
                                    .cloned()
                                    .ok_or("option requires an argument -- 'e'")?
                            } else {
                                inline.to_string()
                            };
                            script = Some(match script {
                                Some(earlier) => format!("{earlier}\n{text}"),
                                None => text,
                            });
                            break;
                        }
                        other => return Err(format!("invalid option -- '{other}'")),
                    }
                }
            }
            _ => rest.push(a.clone()),
        }
    }
    let script = match script {
        Some(s) => s,
        None if rest.is_empty() => return Err("no script specified".into()),
        None => rest.remove(0),
    };
    Ok((quiet, extended, script, rest))
}

/// One sed command with its optional `/RE/` address.
#[derive(Debug)]
struct SedCommand {
    address: Option<Regex>,
    delete: bool,
}

impl SedCommand {
    fn parse(script: &str, extended: bool) -> Result<SedCommand, String> {
        let script = script.trim();
        let (address, rest) = match script.strip_prefix('/') {
            Some(body) => {
                let end = closing_slash(body).ok_or("unmatched '/'")?;
                let pattern = body[..end].replace("\\/", "/");
                (Some(compile(&pattern, extended)?), body[end + 1..].trim())
            }
            None => (None, script),
        };
        match rest {
            "p" => Ok(SedCommand {
                address,
                delete: false,
            }),
            "d" => Ok(SedCommand {
                address,
                delete: true,
            }),
            "" => Err("missing command".into()),
            other => Err(format!(
                "unsupported command {}",
                other.chars().next().unwrap_or(' ')
            )),
        }
    }

    /// The output for `input`: each line once unless `quiet`, plus again when `p` selects it;
    /// a last line without a newline stays without one.
    fn run(&self, input: &str, quiet: bool) -> Vec<u8> {
        let mut out = String::new();
        for line in input.split_inclusive('\n') {
            let text = line.strip_suffix('\n').unwrap_or(line);
            let selected = self.address.as_ref().is_none_or(|re| re.is_match(text));
            match (selected, self.delete) {
                (true, true) => continue,
                (true, false) => out.push_str(&with_newline(line)),
                _ => {}
            }
            if !quiet {
                out.push_str(line);
            }
        }
        out.into_bytes()
    }
}

fn with_newline(line: &str) -> String {
    if line.ends_with('\n') {
        line.to_string()
    } else {
        format!("{line}\n")
    }
}

/// The index in `body` of the `/` that ends an address (not escaped, not in a bracket).
fn closing_slash(body: &str) -> Option<usize> {
    let mut chars = body.char_indices();
    let mut in_bracket = false;
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '[' => in_bracket = true,
            ']' => in_bracket = false,
            '/' if !in_bracket => return Some(i),
            _ => {}
        }
    }
    None
}

/// `grep ARGS...` (without `grep`).
pub(super) fn grep(ctx: &ProgramContext, args: &[String]) -> Exit {
    let options = match GrepOptions::parse(args) {
        Ok(o) => o,
        Err(message) => {
            ctx.err(&format!("grep: {message}"));
            return Exit::code(2);
        }
    };
    let (inputs, missing) = read_inputs(ctx, "grep", &options.files);
    let named = options.files.len() > 1;
    let mut selected_any = false;
    for (file, text) in &inputs {
        let mut count = 0;
        for line in text.lines() {
            if options.pattern.is_match(line) == options.invert {
                continue;
            }
            count += 1;
            selected_any = true;
            if options.quiet {
                return Exit::ok();
            }
            if !options.count {
                let prefix = if named {
                    format!("{file}:")
                } else {
                    String::new()
                };
                ctx.out(&format!("{prefix}{line}"));
            }
        }
        if options.count {
            let prefix = if named {
                format!("{file}:")
            } else {
                String::new()
            };
            ctx.out(&format!("{prefix}{count}"));
        }
    }
    Exit::code(match (missing, selected_any) {
        (true, _) => 2,
        (false, true) => 0,
        (false, false) => 1,
    })
}

struct GrepOptions {
    pattern: Regex,
    invert: bool,
    quiet: bool,
    count: bool,
    files: Vec<String>,
}

impl GrepOptions {
    fn parse(args: &[String]) -> Result<GrepOptions, String> {
        let (mut extended, mut fixed, mut invert, mut quiet, mut count) =
            (false, false, false, false, false);
        let mut patterns: Vec<String> = Vec::new();
        let mut rest = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if a == "--" {
                rest.extend(it.by_ref().cloned());
                break;
            }
            if !(a.starts_with('-') && a.len() > 1) {
                rest.push(a.clone());
                continue;
            }
            for (i, c) in a.char_indices().skip(1) {
                match c {
                    'E' => extended = true,
                    'F' => fixed = true,
                    'v' => invert = true,
                    'q' => quiet = true,
                    'c' => count = true,
                    'e' => {
                        let inline = &a[i + 1..];
                        patterns.push(if inline.is_empty() {
                            it.next()
                                .cloned()
                                .ok_or("option requires an argument -- 'e'")?
                        } else {
                            inline.to_string()
                        });
                        break;
                    }
                    other => return Err(format!("invalid option -- '{other}'")),
                }
            }
        }
        if patterns.is_empty() {
            if rest.is_empty() {
                return Err("no pattern given".into());
            }
            patterns.push(rest.remove(0));
        }
        let alternatives: Vec<String> = patterns
            .iter()
            .map(|p| {
                if fixed {
                    regex::escape(p)
                } else {
                    translate(p, extended)
                }
            })
            .map(|p| format!("(?:{p})"))
            .collect();
        let pattern = Regex::new(&alternatives.join("|"))
            .map_err(|e| format!("bad regex '{}': {e}", patterns.join("|")))?;
        Ok(GrepOptions {
            pattern,
            invert,
            quiet,
            count,
            files: rest,
        })
    }
}

/// The names and texts of `files` (stdin, named `(standard input)`, when there are none or
/// for `-`), and whether one was missing (reported as busybox does:
/// `TOOL: FILE: No such file or directory`).
fn read_inputs(
    ctx: &ProgramContext,
    tool: &str,
    files: &[String],
) -> (Vec<(String, String)>, bool) {
    let stdin = || String::from_utf8_lossy(ctx.stdin()).into_owned();
    if files.is_empty() {
        return (vec![("(standard input)".into(), stdin())], false);
    }
    let mut missing = false;
    let mut out = Vec::new();
    for f in files {
        if f == "-" {
            out.push(("(standard input)".into(), stdin()));
            continue;
        }
        match ctx.read_file(f) {
            Ok(b) => out.push((f.clone(), String::from_utf8_lossy(&b).into_owned())),
            Err(_) => {
                ctx.err(&format!("{tool}: {f}: No such file or directory"));
                missing = true;
            }
        }
    }
    (out, missing)
}

fn compile(pattern: &str, extended: bool) -> Result<Regex, String> {
    Regex::new(&translate(pattern, extended)).map_err(|e| format!("bad regex '{pattern}': {e}"))
}

/// A POSIX RE (`extended`: ERE, else BRE) in the `regex` crate's syntax.
fn translate(pattern: &str, extended: bool) -> String {
    let mut out = String::new();
    let mut chars = pattern.chars().peekable();
    let mut at_start = true;
    while let Some(c) = chars.next() {
        match c {
            '[' => bracket(&mut chars, &mut out),
            '\\' => match chars.next() {
                Some(n @ ('(' | ')' | '|' | '{' | '}' | '+' | '?')) if !extended => out.push(n),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push_str("\\\\"),
            },
            '(' | ')' | '|' | '{' | '}' | '+' | '?' if !extended => {
                out.push('\\');
                out.push(c);
            }
            // A leading `*` is literal in a BRE.
            '*' if at_start && !extended => out.push_str("\\*"),
            c => out.push(c),
        }
        at_start = c == '^' && out.len() == 1;
    }
    out
}

/// Copies a POSIX bracket expression (after its `[`) into `out` as a `regex` class: a leading
/// `]` is literal, `[:class:]` kept, `\`, `[`, `&`, `~` escaped (they mean more to the crate).
fn bracket(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, out: &mut String) {
    out.push('[');
    if chars.peek() == Some(&'^') {
        chars.next();
        out.push('^');
    }
    if chars.peek() == Some(&']') {
        chars.next();
        out.push_str("\\]");
    }
    while let Some(c) = chars.next() {
        match c {
            ']' => {
                out.push(']');
                return;
            }
            '[' if chars.peek() == Some(&':') => {
                out.push_str("[:");
                chars.next();
                for n in chars.by_ref() {
                    out.push(n);
                    if n == ']' {
                        break;
                    }
                }
            }
            '\\' | '[' | '&' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RENDERED: &str = "---\n# Source: cilium/templates/configmap.yaml\napiVersion: v1\ndata:\n  cluster-name: s3cr3t\nkind: ConfigMap\n---\n# Source: cilium/templates/daemonset.yaml\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: cilium\n";

    fn sed_out(script: &str, extended: bool, quiet: bool, input: &str) -> Result<String, String> {
        let c = SedCommand::parse(script, extended)?;
        Ok(String::from_utf8(c.run(input, quiet)).unwrap())
    }

    #[test]
    fn sed_prints_only_the_documents_kinds_and_api_versions() {
        let out = sed_out("/^(---|apiVersion:|kind:)/p", true, true, RENDERED).unwrap();
        assert_eq!(
            out,
            "---\napiVersion: v1\nkind: ConfigMap\n---\napiVersion: apps/v1\nkind: DaemonSet\n"
        );
        assert!(!out.contains("s3cr3t") && !out.contains("# Source:"));
        // Nothing matching is no error, and prints nothing.
        assert_eq!(sed_out("/^zzz/p", true, true, RENDERED).unwrap(), "");
    }

    #[test]
    fn sed_basic_patterns_and_autoprint() {
        // BRE: `\|` is alternation, a bare `|` literal.
        let input = "a|b\nkind: X\nother\n";
        assert_eq!(
            sed_out("/^kind:\\|^a/p", false, true, input).unwrap(),
            "a|b\nkind: X\n"
        );
        assert_eq!(sed_out("/a|b/p", false, true, input).unwrap(), "a|b\n");
        assert_eq!(sed_out("/a|b/p", true, true, input).unwrap(), "a|b\n");
        // Without -n every line is printed, selected ones twice; `d` drops them.
        assert_eq!(sed_out("/^k/p", false, false, "k\nx").unwrap(), "k\nk\nx");
        assert_eq!(sed_out("/^k/d", false, false, "k\nx\n").unwrap(), "x\n");
    }

    #[test]
    fn sed_rejects_what_it_does_not_simulate() {
        assert_eq!(
            sed_out("s/a/b/", true, false, "").unwrap_err(),
            "unsupported command s"
        );
        assert_eq!(
            sed_out("/a/q", true, false, "").unwrap_err(),
            "unsupported command q"
        );
        assert_eq!(sed_out("/a", true, false, "").unwrap_err(), "unmatched '/'");
        let args = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        let (quiet, extended, script, files) = sed_arguments(&args("-nE /x/p f")).unwrap();
        assert!(quiet && extended);
        assert_eq!((script.as_str(), files), ("/x/p", vec!["f".to_string()]));
        assert!(sed_arguments(&args("-En /x/p")).is_ok_and(|p| p.0 && p.1));
        assert_eq!(
            sed_arguments(&args("-z /x/p")).unwrap_err(),
            "invalid option -- 'z'"
        );
    }

    #[test]
    fn posix_brackets_translate() {
        assert!(compile("^[[:alpha:]]+$", true).unwrap().is_match("abc"));
        assert!(compile("[]x]", true).unwrap().is_match("]"));
        assert!(compile("[a\\]", true).unwrap().is_match("\\"));
        assert!(compile("*a", false).unwrap().is_match("*a"));
    }

    #[test]
    fn grep_options_select_lines() {
        let args = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        let o = GrepOptions::parse(&args("-vE -e ^a -e b$")).unwrap();
        assert!(o.invert && o.pattern.is_match("ab") && !o.pattern.is_match("c"));
        let o = GrepOptions::parse(&args("-F a.b")).unwrap();
        assert!(o.pattern.is_match("a.b") && !o.pattern.is_match("axb"));
        assert_eq!(
            GrepOptions::parse(&args("-x a")).err().unwrap(),
            "invalid option -- 'x'"
        );
    }
}
