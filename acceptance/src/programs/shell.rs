//! A minimal POSIX shell (busybox `ash` in the alpine/busybox images): `sh [-e] [-o pipefail]
//! -c SCRIPT` or `sh FILE`, with `;`, newlines, `&&`, `||`, pipelines `a | b | c`, quotes,
//! `$VAR`/`${VAR}`/`$?` expansion ([`super::shell_syntax`]), `set -e`/`set -o pipefail`
//! (`-eo pipefail`, `+e`, `+o pipefail`), `exit`, the builtins of [`super::shell_builtins`]
//! (`echo`, `cat`, `sed`, `grep`, ...); other commands run when the image has them (`helm`,
//! `kubectl`, ...), else `sh: X: not found` (exit 127).
//!
//! Pipelines: each stage's stdout is the next stage's stdin and the last stage's stdout the
//! shell's; stderr is never piped. Stages run one after another (a real shell runs them
//! concurrently; nothing here streams, so only the order of log lines from different stages
//! can differ). Each stage of a multi-stage pipeline runs as in a subshell: `export`, `set` and
//! `exit` there do not affect the script. The status is the last stage's, or with `pipefail`
//! the last non-zero one. Not simulated: redirections, `!`, subshells, functions, `if`/loops.

use std::collections::BTreeMap;

use super::shell_builtins::builtin;
use super::shell_syntax::{Token, expand, tokenize};
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

/// The shell options that change how a script runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `-e`: a failing command (not on the left of `&&`/`||`) ends the script.
    pub errexit: bool,
    /// `-o pipefail`: a pipeline fails when any stage does.
    pub pipefail: bool,
}

impl Options {
    /// Applies option words (`-e`, `-eo pipefail`, `+o pipefail`, ...) as `set` and `sh` read
    /// them; returns the words after the options. Options this shell does not simulate (`-x`,
    /// `-u`, ...) are accepted and ignored; `-c` is reported through `wants_script`.
    fn apply<'a>(
        &mut self,
        words: &'a [String],
        wants_script: &mut bool,
    ) -> Result<&'a [String], String> {
        let mut i = 0;
        while let Some(w) = words.get(i) {
            let enable = match w.chars().next() {
                Some('-') if w.len() > 1 && w != "--" => true,
                Some('+') if w.len() > 1 => false,
                _ => break,
            };
            i += 1;
            for c in w.chars().skip(1) {
                match c {
                    'e' => self.errexit = enable,
                    'c' => *wants_script = true,
                    'o' => {
                        // `set -o` alone lists the options: nothing to change.
                        let Some(name) = words.get(i) else { break };
                        i += 1;
                        match name.as_str() {
                            "pipefail" => self.pipefail = enable,
                            "errexit" => self.errexit = enable,
                            "nounset" | "xtrace" | "noglob" | "noexec" | "verbose" => {}
                            other => return Err(format!("illegal option -o {other}")),
                        }
                    }
                    _ => {}
                }
            }
        }
        if words.get(i).map(String::as_str) == Some("--") {
            i += 1;
        }
        Ok(&words[i..])
    }
}

async fn run_shell(ctx: &ProgramContext, args: &[String]) -> Exit {
    let mut options = Options::default();
    let mut wants_script = false;
    let rest = match options.apply(args, &mut wants_script) {
        Ok(rest) => rest,
        Err(message) => {
            ctx.err(&format!("sh: {message}"));
            return Exit::code(2);
        }
    };
    let script = match (rest.first(), wants_script) {
        (None, true) => {
            ctx.err("sh: -c requires an argument");
            return Exit::code(2);
        }
        (None, false) => return Exit::ok(),
        (Some(text), true) => text.clone(),
        (Some(file), false) => match ctx.read_file(file) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(_) => {
                ctx.err(&format!(
                    "sh: can't open '{file}': No such file or directory"
                ));
                return Exit::code(2);
            }
        },
    };
    run_script(ctx, &script, options).await
}

/// What a command line asks of the script.
enum Flow {
    Continue(Exit),
    /// `exit` (or an error of a special builtin such as `set`): the script ends with this status.
    End(Exit),
}

/// Runs a script; returns the exit status of the last command.
pub async fn run_script(ctx: &ProgramContext, script: &str, mut options: Options) -> Exit {
    let mut env: BTreeMap<String, String> = ctx.env.clone();
    let mut last = Exit::ok();
    let mut pipeline: Vec<Vec<String>> = vec![Vec::new()];
    let mut skip = false;
    for tok in tokenize(script).into_iter().chain([Token::Seq]) {
        let op = match tok {
            Token::Word(w) => {
                if let Some(stage) = pipeline.last_mut() {
                    stage.push(w);
                }
                continue;
            }
            Token::Pipe => {
                pipeline.push(Vec::new());
                continue;
            }
            op => op,
        };
        let stages = std::mem::replace(&mut pipeline, vec![Vec::new()]);
        let empty = stages.iter().all(Vec::is_empty);
        if !empty && !skip {
            match run_pipeline(ctx, &stages, &mut env, &mut options, last.code).await {
                Flow::End(exit) => return exit,
                Flow::Continue(exit) => last = exit,
            }
            if options.errexit && last.code != 0 && op != Token::And && op != Token::Or {
                return last;
            }
        }
        skip = match op {
            Token::And => last.code != 0,
            Token::Or => last.code == 0,
            _ => false,
        };
    }
    last
}

async fn run_pipeline(
    ctx: &ProgramContext,
    stages: &[Vec<String>],
    env: &mut BTreeMap<String, String>,
    options: &mut Options,
    status: i32,
) -> Flow {
    if stages.iter().any(Vec::is_empty) {
        ctx.err("sh: syntax error: unexpected \"|\"");
        return Flow::End(Exit::code(2));
    }
    let expanded: Vec<Vec<String>> = stages
        .iter()
        .map(|words| words.iter().map(|w| expand(w, env, status)).collect())
        .collect();
    if let [words] = expanded.as_slice() {
        return run_in_shell(ctx, words, env, options, status).await;
    }
    let mut input: Option<Vec<u8>> = None;
    let mut exits = Vec::with_capacity(expanded.len());
    for (i, words) in expanded.iter().enumerate() {
        let reads = match input.take() {
            Some(bytes) => ctx.with_stdin(bytes),
            None => ctx.clone(),
        };
        let (stage_ctx, capture) = if i + 1 < expanded.len() {
            let (c, capture) = reads.with_stdout_captured();
            (c, Some(capture))
        } else {
            (reads, None)
        };
        // A subshell: its `export`, `set` and `exit` stay inside the stage.
        let mut stage_env = env.clone();
        let mut stage_options = *options;
        let flow = run_in_shell(
            &stage_ctx,
            words,
            &mut stage_env,
            &mut stage_options,
            status,
        );
        exits.push(match flow.await {
            Flow::Continue(exit) | Flow::End(exit) => exit,
        });
        input = capture.map(|c| c.take());
    }
    let last = exits.last().cloned().unwrap_or_else(Exit::ok);
    let failed = exits.into_iter().rev().find(|e| e.code != 0);
    Flow::Continue(match failed {
        Some(exit) if options.pipefail => exit,
        _ => last,
    })
}

/// Runs one simple command: `set`, `exit`, a builtin or a program of the image.
async fn run_in_shell(
    ctx: &ProgramContext,
    words: &[String],
    env: &mut BTreeMap<String, String>,
    options: &mut Options,
    status: i32,
) -> Flow {
    match words[0].as_str() {
        "set" => {
            let mut ignored = false;
            match options.apply(&words[1..], &mut ignored) {
                Ok(_) => Flow::Continue(Exit::ok()),
                Err(message) => {
                    // An error of a special builtin ends a non-interactive shell.
                    ctx.err(&format!("sh: set: {message}"));
                    Flow::End(Exit::code(2))
                }
            }
        }
        "exit" => Flow::End(Exit::code(
            words.get(1).and_then(|c| c.parse().ok()).unwrap_or(status),
        )),
        _ => Flow::Continue(run_command(ctx, words, env).await),
    }
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
            ctx.err(&format!("sh: {cmd}: not found"));
            Exit::code(127)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `sh -c script` in an alpine/helm container: (exit code, pod log).
    async fn sh(script: &str) -> (i32, String) {
        let ctx = ProgramContext::for_test("alpine/helm", &["sh", "-c", script]);
        let exit = Shell.run(ctx.clone()).await;
        (exit.code, ctx.log_text())
    }

    #[tokio::test]
    async fn a_pipe_feeds_stdout_to_the_next_stage_and_only_the_last_reaches_the_log() {
        let (code, log) =
            sh("echo kind: X | sed -n -E '/^(---|kind:)/p'; echo secret | sed -n '/^kind:/p'")
                .await;
        assert_eq!((code, log.as_str()), (0, "kind: X\n"));
        let (_, log) = sh("echo -n a | cat | cat; echo; echo b | grep -c b").await;
        assert_eq!(log, "a\n1\n");
    }

    #[tokio::test]
    async fn the_status_is_the_last_stage_s_unless_pipefail() {
        assert_eq!(sh("false | true; echo $?").await.1, "0\n");
        assert_eq!(sh("true | false; echo $?").await.1, "1\n");
        assert_eq!(sh("set -o pipefail; false | true; echo $?").await.1, "1\n");
        // The rightmost failure wins.
        assert_eq!(
            sh("set -o pipefail; exit 3 | exit 4 | true; echo $?")
                .await
                .1,
            "4\n"
        );
        assert_eq!(
            sh("set +o pipefail; set -o pipefail; set +o pipefail; false | true; echo $?")
                .await
                .1,
            "0\n"
        );
        // With -e a failing pipeline ends the script; on the left of || it does not.
        for script in [
            "set -eo pipefail; false | true; echo after",
            "set -e -o pipefail; false | true; echo after",
            "set -o pipefail -e; false | true; echo after",
        ] {
            assert_eq!(sh(script).await, (1, String::new()), "{script}");
        }
        assert_eq!(
            sh("set -eo pipefail; false | true || echo handled; echo after")
                .await
                .1,
            "handled\nafter\n"
        );
        assert_eq!(sh("set -e; false | true; echo after").await.1, "after\n");
    }

    #[tokio::test]
    async fn sh_options_take_pipefail_before_the_script() {
        for argv in [
            &["sh", "-o", "pipefail", "-c", "false | true"][..],
            &["sh", "-eo", "pipefail", "-c", "false | true"][..],
        ] {
            let ctx = ProgramContext::for_test("alpine", argv);
            assert_eq!(Shell.run(ctx).await.code, 1, "{argv:?}");
        }
        let ctx = ProgramContext::for_test("alpine", &["sh", "-o", "nope", "-c", "true"]);
        assert_eq!(Shell.run(ctx.clone()).await.code, 2);
        assert_eq!(ctx.log_text(), "sh: illegal option -o nope\n");
    }

    #[tokio::test]
    async fn stderr_bypasses_the_pipe() {
        let (code, log) = sh("set -o pipefail; cat /missing | sed -n '/x/p'").await;
        assert_eq!(code, 1);
        assert_eq!(
            log,
            "cat: can't open '/missing': No such file or directory\n"
        );
        let (code, log) = sh("set -o pipefail; nope | sed -n '/x/p'").await;
        assert_eq!((code, log.as_str()), (127, "sh: nope: not found\n"));
        // helm's own error, as in a render Job whose values file is missing.
        let (code, log) =
            sh("set -o pipefail; helm template c c -f /nope.yaml | sed -n -E '/^(---|kind:)/p'")
                .await;
        assert_eq!(code, 1);
        assert_eq!(log, "Error: open /nope.yaml: no such file or directory\n");
    }

    #[tokio::test]
    async fn or_and_and_combine_with_pipelines() {
        assert_eq!(sh("false || echo ok").await.1, "ok\n");
        assert_eq!(
            sh("echo a | grep -q a && echo yes; echo a | grep -q b || echo no")
                .await
                .1,
            "yes\nno\n"
        );
        // Stages run as subshells.
        assert_eq!(sh("export X=1 | true; echo \"[$X]\"").await.1, "[]\n");
        assert_eq!(sh("exit 5 | true; echo still").await.1, "still\n");
        let (code, log) = sh("echo a |").await;
        assert_eq!(
            (code, log.as_str()),
            (2, "sh: syntax error: unexpected \"|\"\n")
        );
    }
}
