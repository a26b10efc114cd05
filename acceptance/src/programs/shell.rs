//! A minimal POSIX shell (busybox/alpine images): `sh -c SCRIPT` with `;`, newlines, `&&`,
//! `||`, quotes, `$VAR`/`${VAR}` expansion, `set -e`, and the commands `echo`, `exit`, `sleep`,
//! `true`, `false`, `cat FILE`, `env`, `export`; other commands run when the image has them
//! (`helm`, `kubectl`, ...), else `sh: X: not found` (exit 127).

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Exit, Program, ProgramContext, ProgramFuture, basename};

/// See the module docs.
pub struct Shell;

impl Program for Shell {
    fn run(&self, ctx: ProgramContext) -> ProgramFuture {
        Box::pin(async move {
            let argv = ctx.argv.clone();
            match basename(argv.first().map(String::as_str).unwrap_or("sh")) {
                "sh" | "ash" | "bash" => run_shell(&ctx, &argv[1..]).await,
                _ => {
                    let mut env = ctx.env.clone();
                    builtin(&ctx, &argv, &mut env)
                        .await
                        .unwrap_or(Exit::code(127))
                }
            }
        })
    }
}

async fn run_shell(ctx: &ProgramContext, args: &[String]) -> Exit {
    let mut errexit = false;
    let mut script = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a.starts_with('-') && a.len() > 1 {
            errexit |= a.contains('e');
            if a.contains('c') {
                script = it.next().cloned();
                break;
            }
        } else {
            match ctx.read_file(a) {
                Ok(bytes) => script = Some(String::from_utf8_lossy(&bytes).into_owned()),
                Err(_) => {
                    ctx.out(&format!("sh: can't open '{a}': No such file or directory"));
                    return Exit::code(2);
                }
            }
            break;
        }
    }
    let Some(script) = script else {
        return Exit::ok();
    };
    run_script(ctx, &script, errexit).await
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Seq,
    And,
    Or,
}

/// Runs a script; returns the exit status of the last command.
pub async fn run_script(ctx: &ProgramContext, script: &str, mut errexit: bool) -> Exit {
    let mut env: BTreeMap<String, String> = ctx.env.clone();
    let tokens = tokenize(script);
    let mut last = Exit::ok();
    let mut words: Vec<String> = Vec::new();
    let mut skip = false;
    for tok in tokens.into_iter().chain([Token::Seq]) {
        match tok {
            Token::Word(w) => words.push(expand(&w, &env, last.code)),
            op => {
                if !words.is_empty() && !skip {
                    if words.first().map(String::as_str) == Some("set") {
                        errexit |= words.iter().any(|w| w.starts_with('-') && w.contains('e'));
                    } else if words.first().map(String::as_str) == Some("exit") {
                        return Exit::code(
                            words
                                .get(1)
                                .and_then(|c| c.parse().ok())
                                .unwrap_or(last.code),
                        );
                    } else {
                        last = run_command(ctx, &words, &mut env).await;
                        if errexit && last.code != 0 && op != Token::And && op != Token::Or {
                            return last;
                        }
                    }
                }
                words.clear();
                skip = match op {
                    Token::And => last.code != 0,
                    Token::Or => last.code == 0,
                    _ => false,
                };
            }
        }
    }
    last
}

async fn run_command(
    ctx: &ProgramContext,
    words: &[String],
    env: &mut BTreeMap<String, String>,
) -> Exit {
    if let Some(exit) = builtin(ctx, words, env).await {
        return exit;
    }
    let cmd = basename(&words[0]).to_string();
    match ctx.registry.resolve(&ctx.image, &cmd) {
        Some(p) => {
            let mut child = ctx.with_argv(words.to_vec());
            child.env = env.clone();
            p.run(child).await
        }
        None => {
            ctx.out(&format!("sh: {cmd}: not found"));
            Exit::code(127)
        }
    }
}

async fn builtin(
    ctx: &ProgramContext,
    words: &[String],
    env: &mut BTreeMap<String, String>,
) -> Option<Exit> {
    let args = &words[1..];
    let exit = match basename(&words[0]) {
        "echo" => {
            let (newline, args) = match args.first().map(String::as_str) {
                Some("-n") => (false, &args[1..]),
                _ => (true, args),
            };
            let text = args.join(" ");
            if newline {
                ctx.out(&text);
            } else {
                let bytes = text.into_bytes();
                ctx.store.logs().append(
                    ctx.namespace(),
                    ctx.pod_name(),
                    ctx.container_name(),
                    &bytes,
                );
            }
            Exit::ok()
        }
        "true" | ":" => Exit::ok(),
        "false" => Exit::code(1),
        "sleep" => {
            let secs: f64 = args
                .first()
                .and_then(|s| s.trim_end_matches('s').parse().ok())
                .unwrap_or(0.0);
            ctx.sleep(Duration::from_secs_f64(secs.max(0.0))).await;
            Exit::ok()
        }
        "cat" => {
            for f in args {
                match ctx.read_file(f) {
                    Ok(b) => ctx.store.logs().append(
                        ctx.namespace(),
                        ctx.pod_name(),
                        ctx.container_name(),
                        &b,
                    ),
                    Err(_) => {
                        ctx.out(&format!("cat: can't open '{f}': No such file or directory"));
                        return Some(Exit::code(1));
                    }
                }
            }
            Exit::ok()
        }
        "env" => {
            for (k, v) in env.iter() {
                ctx.out(&format!("{k}={v}"));
            }
            Exit::ok()
        }
        "export" => {
            for a in args {
                if let Some((k, v)) = a.split_once('=') {
                    env.insert(k.into(), v.into());
                }
            }
            Exit::ok()
        }
        _ => return None,
    };
    Some(exit)
}

fn tokenize(script: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = script.chars().peekable();
    let mut quote: Option<char> = None;
    let flush = |cur: &mut String, in_word: &mut bool, out: &mut Vec<Token>| {
        if *in_word {
            out.push(Token::Word(std::mem::take(cur)));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('\''), c) => cur.push(if c == '$' { '\u{2}' } else { c }),
            (Some(_), '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                    in_word = true;
                }
            }
            (None, '#') if !in_word => {
                while chars.peek().is_some_and(|c| *c != '\n') {
                    chars.next();
                }
            }
            (None, ' ' | '\t') => flush(&mut cur, &mut in_word, &mut out),
            (None, ';' | '\n') => {
                flush(&mut cur, &mut in_word, &mut out);
                out.push(Token::Seq);
            }
            (None, '&') if chars.peek() == Some(&'&') => {
                chars.next();
                flush(&mut cur, &mut in_word, &mut out);
                out.push(Token::And);
            }
            (None, '|') if chars.peek() == Some(&'|') => {
                chars.next();
                flush(&mut cur, &mut in_word, &mut out);
                out.push(Token::Or);
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    flush(&mut cur, &mut in_word, &mut out);
    out
}

/// Expands `$VAR`, `${VAR}` and `$?` (a single-quoted `$` is marked `\u{2}` by the tokenizer
/// and stays literal).
fn expand(word: &str, env: &BTreeMap<String, String>, status: i32) -> String {
    let mut out = String::new();
    let mut chars = word.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(if c == '\u{2}' { '$' } else { c });
            continue;
        }
        let name: String = match chars.peek() {
            Some('{') => {
                chars.next();
                chars.by_ref().take_while(|c| *c != '}').collect()
            }
            Some('?') => {
                chars.next();
                out.push_str(&status.to_string());
                continue;
            }
            _ => {
                let mut n = String::new();
                while let Some(c) = chars
                    .peek()
                    .filter(|c| c.is_ascii_alphanumeric() || **c == '_')
                {
                    n.push(*c);
                    chars.next();
                }
                n
            }
        };
        if name.is_empty() {
            out.push('$');
        } else {
            out.push_str(env.get(&name).map(String::as_str).unwrap_or(""));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizes_like_sh() {
        let t = tokenize("echo 'a b' \"$X\"; exit 3 && x # c");
        assert_eq!(t[0], Token::Word("echo".into()));
        assert_eq!(t[1], Token::Word("a b".into()));
        assert_eq!(t[2], Token::Word("$X".into()));
        assert_eq!(t[3], Token::Seq);
        assert_eq!(t.len(), 8);
        let env = BTreeMap::from([("X".to_string(), "1".to_string())]);
        assert_eq!(expand("$X-${X}-$?-\u{2}X", &env, 2), "1-1-2-$X");
    }
}
