//! The commands the sim shell runs itself (busybox applets in the real images): `echo [-n]`,
//! `true`/`:`, `false`, `sleep`, `cat [FILE|-]...` (stdin without arguments), `env`,
//! `export`, and the line filters `sed`/`grep` ([`super::text_filters`]). Output goes to the
//! program's stdout, diagnostics to stderr, so they work inside pipelines.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Exit, ProgramContext, basename, text_filters};

/// Runs `words` when its command is a builtin; `None` when it is not one.
pub(super) async fn builtin(
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
                ctx.write_out(text.as_bytes());
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
        "cat" => cat(ctx, args),
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
        "sed" => text_filters::sed(ctx, args),
        "grep" => text_filters::grep(ctx, args),
        _ => return None,
    };
    Some(exit)
}

/// Like busybox `cat`: a missing file is reported and the others still printed, exit 1.
fn cat(ctx: &ProgramContext, files: &[String]) -> Exit {
    if files.is_empty() {
        ctx.write_out(ctx.stdin());
        return Exit::ok();
    }
    let mut code = 0;
    for f in files {
        if f == "-" {
            ctx.write_out(ctx.stdin());
            continue;
        }
        match ctx.read_file(f) {
            Ok(bytes) => ctx.write_out(&bytes),
            Err(_) => {
                ctx.err(&format!("cat: can't open '{f}': No such file or directory"));
                code = 1;
            }
        }
    }
    Exit::code(code)
}
