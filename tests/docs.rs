//! The registry docs in `docs/` are rendered from the schema descriptions (and the functions'
//! signatures); this test fails when they drift, when `docs/` has a page for a type or function
//! the provider no longer has, and when a page's frontmatter `description` is not a whole sentence.
//!
//! Regenerate with `TALOSBOOT_UPDATE_DOCS=1 cargo test --test docs`: that run rewrites the stale
//! pages and still fails, naming them (so a CI that sets the variable cannot pass on stale docs);
//! the next run, with or without the variable, passes.

use std::path::Path;

use talosboot::docs::{function_page, provider_page, type_page};

const GUIDE: &str = "The talosboot provider takes a fresh Talos cluster from \"API up, no CNI\" to Cilium and Flux running and owned by GitOps, from a plain `tofu apply`. It connects lazily: `plan` works before the cluster is reachable, with provider settings that are still unknown.";

fn check(path: &Path, expected: &str, stale: &mut Vec<String>) {
    let actual = std::fs::read_to_string(path).unwrap_or_default();
    if actual == expected {
        return;
    }
    stale.push(path.display().to_string());
    if std::env::var("TALOSBOOT_UPDATE_DOCS").as_deref() == Ok("1") {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, expected).expect("write docs");
    }
}

/// Pages in `dir` that no type of the provider renders.
fn orphans(dir: &Path, rendered: &[String]) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .filter(|p| !rendered.contains(&p.display().to_string()))
        .map(|p| p.display().to_string())
        .collect()
}

#[test]
fn registry_docs_match_the_schema() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read =
        |p: &str| std::fs::read_to_string(root.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
    let dispatcher = talosboot::provider::dispatcher(Default::default(), false);
    let mut stale = Vec::new();
    let mut rendered = Vec::new();
    check(
        &root.join("docs/index.md"),
        &provider_page(
            dispatcher.provider_schema(),
            &read("examples/provider/provider.tf"),
            GUIDE,
        ),
        &mut stale,
    );
    for (name, schema) in dispatcher.data_source_schemas() {
        let short = name.trim_start_matches("talosboot_");
        let example = read(&format!("examples/data-sources/{name}/data-source.tf"));
        rendered.push(
            root.join(format!("docs/data-sources/{short}.md"))
                .display()
                .to_string(),
        );
        check(
            &root.join(format!("docs/data-sources/{short}.md")),
            &type_page("Data Source", name, schema, &example, None, None),
            &mut stale,
        );
    }
    for (name, schema) in dispatcher.resource_schemas() {
        let short = name.trim_start_matches("talosboot_");
        let example = read(&format!("examples/resources/{name}/resource.tf"));
        let import =
            std::fs::read_to_string(root.join(format!("examples/resources/{name}/import.sh"))).ok();
        let by_identity = std::fs::read_to_string(
            root.join(format!("examples/resources/{name}/import-by-identity.tf")),
        )
        .ok();
        rendered.push(
            root.join(format!("docs/resources/{short}.md"))
                .display()
                .to_string(),
        );
        check(
            &root.join(format!("docs/resources/{short}.md")),
            &type_page(
                "Resource",
                name,
                schema,
                &example,
                import.as_deref(),
                by_identity.as_deref(),
            ),
            &mut stale,
        );
    }
    for (name, schema) in dispatcher.list_resource_schemas() {
        let short = name.trim_start_matches("talosboot_");
        let example = read(&format!(
            "examples/list-resources/{name}/list-resource.tfquery.hcl"
        ));
        let page = root.join(format!("docs/list-resources/{short}.md"));
        rendered.push(page.display().to_string());
        check(
            &page,
            &type_page("List Resource", name, schema, &example, None, None),
            &mut stale,
        );
    }
    for (name, signature) in dispatcher.functions() {
        let example = read(&format!("examples/functions/{name}/function.tf"));
        let page = root.join(format!("docs/functions/{name}.md"));
        rendered.push(page.display().to_string());
        check(
            &page,
            &function_page(name, &signature, &example),
            &mut stale,
        );
    }
    let orphaned: Vec<String> = [
        "docs/resources",
        "docs/data-sources",
        "docs/list-resources",
        "docs/functions",
    ]
    .iter()
    .flat_map(|d| orphans(&root.join(d), &rendered))
    .collect();
    assert!(
        orphaned.is_empty(),
        "docs for types the provider does not have: {orphaned:?}; remove them"
    );
    if std::env::var("TALOSBOOT_UPDATE_DOCS").as_deref() == Ok("1") {
        assert!(
            stale.is_empty(),
            "rewrote stale docs {stale:?}: review and commit them, then run the tests again"
        );
    }
    assert!(
        stale.is_empty(),
        "docs out of date with the schema: {stale:?}; run `TALOSBOOT_UPDATE_DOCS=1 cargo test --test docs`"
    );
}

/// Words of this project's own work (its users' runbooks it started from) that mean nothing to a
/// user: the docs and examples speak of users' roots.
const INTERNAL_WORDS: &[&str] = &["seed"];

fn text_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != ".terraform") {
                text_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| {
            ["md", "tf", "yaml", "sh", "hcl"].contains(&e.to_string_lossy().as_ref())
        }) {
            out.push(path);
        }
    }
}

#[test]
fn user_docs_and_examples_have_no_project_internal_words() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["docs", "examples"] {
        text_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 20, "{files:?}");
    let mut found = Vec::new();
    // The contributors' notes (not a registry page) name the chaos run's random seed.
    let contributors = root.join("docs/development.md");
    assert!(files.contains(&contributors), "{files:?}");
    for file in files.iter().filter(|f| **f != contributors) {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            let lower = line.to_lowercase();
            for word in INTERNAL_WORDS {
                if lower.contains(word) {
                    found.push(format!("{}:{}: {line}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "project-internal words in user docs or examples:\n{}",
        found.join("\n")
    );
}

/// The frontmatter `description` of a page (the `description: |-` block's lines, joined).
fn frontmatter_description(page: &str) -> Option<String> {
    let front = page.strip_prefix("---\n")?.split_once("\n---\n")?.0;
    let mut lines = front.lines().skip_while(|l| !l.starts_with("description:"));
    let first = lines.next()?;
    let inline = first.trim_start_matches("description:").trim();
    if !inline.is_empty() && inline != "|-" {
        return Some(inline.trim_matches('"').to_owned());
    }
    let text: Vec<&str> = lines
        .take_while(|l| l.starts_with("  "))
        .map(str::trim)
        .collect();
    Some(text.join(" "))
}

/// What is wrong with a description as a registry list shows it: not a whole sentence (a capital
/// first, a full stop last), or a code span left open.
fn description_problems(description: &str) -> Vec<&'static str> {
    let mut problems = Vec::new();
    if !description.chars().next().is_some_and(char::is_uppercase) {
        problems.push("does not start with a capital letter");
    }
    if !description.ends_with('.') {
        problems.push("does not end with a full stop");
    }
    if description.matches('`').count() % 2 != 0 {
        problems.push("has an unclosed backtick");
    }
    if description.ends_with(" .") || description.ends_with("(.") {
        problems.push("is cut before its end");
    }
    let opened = description.matches('(').count();
    if opened != description.matches(')').count() {
        problems.push("has unbalanced parentheses");
    }
    problems
}

#[test]
fn description_checks_catch_a_cut_sentence() {
    // The flux_bootstrap page of 0.1.0: split at the first ". " inside a code span.
    let cut = "Bootstraps the Flux Operator and a FluxInstance the way the `flux-operator-bootstrap` module does (same arguments: replace `module \"...\" { source = ";
    assert!(!description_problems(cut).is_empty());
    assert!(description_problems("Reads the current record of a Helm release.").is_empty());
    assert_eq!(
        talosboot::docs::first_sentence("Runs `a. b` here. Then more."),
        "Runs `a. b` here."
    );
    assert_eq!(
        talosboot::docs::first_sentence("One paragraph only\n\nThe next."),
        "One paragraph only."
    );
}

#[test]
fn every_generated_page_has_a_whole_sentence_as_description() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = Vec::new();
    for dir in [
        "docs",
        "docs/resources",
        "docs/data-sources",
        "docs/list-resources",
        "docs/functions",
        "docs/guides",
    ] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        pages.extend(
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "md")),
        );
    }
    assert!(pages.len() >= 8, "{pages:?}");
    let mut bad = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("read page");
        let Some(description) = frontmatter_description(&text) else {
            bad.push(format!("{}: no frontmatter description", page.display()));
            continue;
        };
        for problem in description_problems(&description) {
            bad.push(format!(
                "{}: description {problem}: {description:?}",
                page.display()
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
