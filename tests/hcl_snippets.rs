//! Every piece of HCL a user may copy parses as HCL, checked with a real parser (`hcl-edit`, the
//! parser of the `hcl-rs` crates), not by eye:
//! - every ```hcl / ```terraform block of `docs/**/*.md` and `README.md`;
//! - every `examples/**/*.tf` and `*.tfquery.hcl`;
//! - every inline code span of those pages that is shaped like a block (`import { ... }`,
//!   `removed { ... }`, `lifecycle { ... }`): a one-line HCL block holds at most one argument and
//!   no nested block, so `import { to = a  id = "b" }` is not HCL, however natural it reads;
//! - every such snippet in a string of `src/` (diagnostics a user copies from the terminal, and
//!   schema descriptions that become the registry pages), with `format!`'s `{{`/`}}` unescaped and
//!   its `{…}` arguments replaced by a placeholder.
//!
//! Parsing checks the syntax only; `acceptance/tests/terraform/examples.rs` validates the blocks
//! and the examples against the provider's schema with `tofu validate` and `terraform validate`.

use std::path::{Path, PathBuf};

/// The first word of a code span that makes it an HCL block worth parsing.
const BLOCK_KEYWORDS: &[&str] = &[
    "import",
    "removed",
    "moved",
    "resource",
    "data",
    "ephemeral",
    "provider",
    "terraform",
    "lifecycle",
    "check",
    "variable",
    "module",
    "output",
    "locals",
    "list",
    "provider_installation",
    "dev_overrides",
    "filesystem_mirror",
    "required_providers",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Files under `dir` (recursively) whose name ends with one of `suffixes`, sorted.
fn files(dir: &Path, suffixes: &[&str]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path
                    .file_name()
                    .is_some_and(|n| n != ".terraform" && n != "target")
                {
                    stack.push(path);
                }
            } else if suffixes.iter().any(|s| path.to_string_lossy().ends_with(s)) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

fn rel(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The ```hcl and ```terraform blocks of a Markdown page: (first line number, dedented text).
fn fenced_blocks(markdown: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, usize, String)> = None;
    for (n, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &mut current {
            None if trimmed == "```hcl" || trimmed == "```terraform" => {
                current = Some((n + 2, indent, String::new()))
            }
            Some((start, _, block)) if trimmed == "```" => {
                blocks.push((*start, std::mem::take(block)));
                current = None;
            }
            Some((_, fence, block)) => {
                block.push_str(line.get(*fence..).unwrap_or(trimmed));
                block.push('\n');
            }
            None => {}
        }
    }
    blocks
}

/// Single-backtick code spans of one line (outside fenced blocks, which the caller skips).
fn code_spans(line: &str) -> Vec<&str> {
    let mut spans = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        let after = &rest[start + 1..];
        if after.starts_with('`') {
            // A ``double`` span or a fence: skip its backticks.
            rest = after.trim_start_matches('`');
            continue;
        }
        let Some(end) = after.find('`') else {
            break;
        };
        spans.push(&after[..end]);
        rest = &after[end + 1..];
    }
    spans
}

/// Whether `span` is shaped like an HCL block: a keyword, labels, then `{ ... }`.
fn is_block_snippet(span: &str) -> bool {
    let span = span.trim();
    let Some(brace) = span.find('{') else {
        return false;
    };
    if !span.ends_with('}') {
        return false;
    }
    let mut words = span[..brace].split_whitespace();
    let Some(keyword) = words.next() else {
        return false;
    };
    BLOCK_KEYWORDS.contains(&keyword)
        && words.all(|w| {
            (w.starts_with('"') && w.ends_with('"') && w.len() >= 2)
                || w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// The text a Rust string literal's fragment stands for: escapes undone and, in a format string
/// (`{{` present), braces unescaped and every `{…}` argument replaced by `placeholder`.
fn unescape_rust(fragment: &str) -> String {
    let mut text = String::new();
    let mut chars = fragment.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => text.push('\n'),
                Some('t') => text.push('\t'),
                Some(other) => text.push(other),
                None => {}
            }
        } else {
            text.push(c);
        }
    }
    if !text.contains("{{") && !text.contains("}}") {
        return text;
    }
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                for inner in chars.by_ref() {
                    if inner == '}' {
                        break;
                    }
                }
                out.push_str("placeholder");
            }
            _ => out.push(c),
        }
    }
    out
}

/// `Err` with the parser's message when `text` is not an HCL body.
fn parse(text: &str) -> Result<(), String> {
    hcl_edit::parser::parse_body(text)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Markdown pages users read: the registry docs and the README.
fn pages() -> Vec<PathBuf> {
    let mut pages = files(&root().join("docs"), &[".md"]);
    pages.push(root().join("README.md"));
    pages
}

#[test]
fn every_hcl_block_of_the_docs_parses() {
    let mut failures = Vec::new();
    let mut parsed = 0;
    for page in pages() {
        for (line, block) in fenced_blocks(&read(&page)) {
            match parse(&block) {
                Ok(()) => parsed += 1,
                Err(e) => failures.push(format!("{}:{line}: {e}\n{block}", rel(&page))),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(parsed >= 25, "too few HCL blocks found in docs/: {parsed}");
}

#[test]
fn every_example_parses() {
    let mut failures = Vec::new();
    let examples = files(&root().join("examples"), &[".tf", ".tfquery.hcl"]);
    assert!(examples.len() >= 15, "{examples:?}");
    for file in &examples {
        if let Err(e) = parse(&read(file)) {
            failures.push(format!("{}: {e}", rel(file)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_inline_hcl_block_of_the_docs_parses() {
    let mut failures = Vec::new();
    let mut parsed = 0;
    for page in pages() {
        let mut in_fence = false;
        for (n, line) in read(&page).lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_fence = !in_fence;
                continue;
            }
            if in_fence {
                continue;
            }
            for span in code_spans(line).into_iter().filter(|s| is_block_snippet(s)) {
                match parse(span) {
                    Ok(()) => parsed += 1,
                    Err(e) => failures.push(format!("{}:{}: `{span}`: {e}", rel(&page), n + 1)),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(parsed >= 3, "too few inline HCL blocks found: {parsed}");
}

/// Inline HCL in the strings of `src/`: (file, line, snippet as the user sees it).
fn source_snippets() -> Vec<(String, usize, String)> {
    let mut found = Vec::new();
    for file in files(&root().join("src"), &[".rs"]) {
        let text = read(&file);
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            // Comments are for maintainers; strings are what users see.
            if code.starts_with("//") || !code.contains('"') {
                continue;
            }
            for span in code_spans(line) {
                let snippet = unescape_rust(span);
                if is_block_snippet(&snippet) {
                    found.push((rel(&file), n + 1, snippet));
                }
            }
            for snippet in multi_line_blocks(&unescape_rust(line)) {
                found.push((rel(&file), n + 1, snippet));
            }
        }
    }
    found
}

/// Blocks a string sets on lines of their own (`\n\nimport {\n  to = ...\n}`): from a line that is
/// a keyword, labels and `{` to the line that closes it at the same indentation.
fn multi_line_blocks(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let opener = line.trim_end();
        // An opener on the last line is the end of the source line (Rust code, or a raw string
        // going on below), not a block inside the string.
        if i + 1 < lines.len() && opener.ends_with('{') && is_block_snippet(&format!("{opener}}}"))
        {
            let indent = line.len() - line.trim_start().len();
            let close = format!("{}}}", &line[..indent]);
            // The closing line may end the string literal too (`}}",` in the source).
            let closes = |l: &&str| {
                let l = l.trim_end();
                l == close
                    || l.strip_prefix(close.as_str())
                        .is_some_and(|r| r.starts_with('"'))
            };
            if let Some(end) = lines[i + 1..].iter().position(closes) {
                let mut block: Vec<&str> = lines[i..=i + 1 + end].to_vec();
                if let Some(last) = block.last_mut() {
                    *last = &last[..close.len()];
                }
                blocks.push(block.join("\n").trim_start().to_owned());
                i += end + 2;
                continue;
            }
            // Not closed on this source line: not a snippet this scan can read whole.
            blocks.push(format!("{} (not closed within its string)", line.trim()));
        }
        i += 1;
    }
    blocks
}

#[test]
fn every_hcl_snippet_in_a_diagnostic_or_description_parses() {
    let snippets = source_snippets();
    // The fix-it texts users copy: the "Release already exists" import, the `removed` blocks.
    assert!(
        snippets.iter().any(|(_, _, s)| s.starts_with("import {")),
        "no import snippet found in src/: {snippets:?}"
    );
    assert!(
        snippets
            .iter()
            .any(|(_, _, s)| s.starts_with("lifecycle {")),
        "no lifecycle snippet (the `removed` advice) found in src/: {snippets:?}"
    );
    let failures: Vec<String> = snippets
        .iter()
        .filter_map(|(file, line, snippet)| {
            parse(snippet)
                .err()
                .map(|e| format!("{file}:{line}: `{snippet}`: {e}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_checks_catch_what_users_met() {
    // The one-line forms that were in the docs and the "Release already exists" diagnostic.
    for bad in [
        "import { to = talosboot_cilium.this  id = \"kube-system/cilium\" }",
        "removed { lifecycle { destroy = false } }",
        "removed { from = talosboot_flux_bootstrap.x  lifecycle { destroy = false } }",
    ] {
        assert!(is_block_snippet(bad), "{bad}");
        assert!(parse(bad).is_err(), "{bad} parsed");
    }
    for good in [
        "lifecycle { destroy = false }",
        "removed { from = talosboot_cilium.this }",
        "import {\n  to = talosboot_cilium.this\n  id = \"kube-system/cilium\"\n}\n",
    ] {
        assert!(parse(good).is_ok(), "{good}");
    }
    assert_eq!(
        unescape_rust(r#"import {{ to = {}  id = \"{}\" }}"#),
        "import { to = placeholder  id = \"placeholder\" }"
    );
    assert_eq!(
        multi_line_blocks("Import it:\n\nimport {\n  to = a.b\n  id = \"c\"\n}\nthen apply"),
        vec!["import {\n  to = a.b\n  id = \"c\"\n}".to_owned()]
    );
    // As a source line reads: the block ends the string literal.
    assert_eq!(
        multi_line_blocks("  \"Import it:\n\nimport {\n  to = a.b\n}\",\n"),
        vec!["import {\n  to = a.b\n}".to_owned()]
    );
    assert!(!is_block_snippet("spec.sync.interval"));
    assert!(!is_block_snippet("{a,b}"));
}
