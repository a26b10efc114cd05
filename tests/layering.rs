//! The layer map in `src/lib.rs` stays true: every `crate::<module>` path in a layer's files names
//! one of the layers it may use. (`super::` stays inside a layer by construction.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Each layer and the layers it may use, as in the header of `src/lib.rs`.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "provider",
        &[
            "protocol",
            "plugin",
            "resources",
            "functions",
            "framework",
            "cluster",
            "values",
        ],
    ),
    ("docs", &["framework", "values"]),
    ("resources", &["framework", "cluster", "values"]),
    ("functions", &["framework", "cluster", "values"]),
    ("protocol", &["framework", "values"]),
    ("framework", &["values"]),
    ("cluster", &[]),
    ("plugin", &[]),
    ("values", &[]),
];

fn rust_files(layer: &str) -> Vec<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let file = src.join(format!("{layer}.rs"));
    if file.is_file() {
        out.push(file);
    }
    let mut dirs = vec![src.join(layer)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out
}

/// The first-level modules a source text names through `crate::` (also in `crate::{a, b::c}`).
fn crate_modules(text: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && !c.is_whitespace() => {
                        out.insert(ident(&group[i..]));
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(rest));
        }
    }
    out.retain(|m| !m.is_empty() && m != "self");
    out
}

#[test]
fn the_scanner_sees_grouped_and_plain_paths() {
    let found =
        crate_modules("use crate::values::Value;\nuse crate::{cluster::X, framework::{A, B}};");
    let expected: BTreeSet<String> = ["values", "cluster", "framework"].map(String::from).into();
    assert_eq!(found, expected);
}

#[test]
fn each_layer_uses_only_the_layers_below_it() {
    let mut violations = Vec::new();
    for (layer, allowed) in LAYERS {
        let files = rust_files(layer);
        assert!(!files.is_empty(), "no sources for layer {layer}");
        for file in files {
            let text = std::fs::read_to_string(&file).expect("read source");
            for module in crate_modules(&text) {
                if module != *layer && !allowed.contains(&module.as_str()) {
                    violations.push(format!("{} uses crate::{module}", file.display()));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "layering violations:\n{}",
        violations.join("\n")
    );
}

/// Sub-layers inside a layer: files whose decisions must stay free of cluster I/O, each with the
/// paths below it that it must not name.
const PURE_FILES: &[(&str, &[&str])] = &[
    // The install decision: the release status only, nothing that talks to the cluster.
    (
        "resources/release/decide.rs",
        &[
            "crate::cluster::bootstrap",
            "crate::cluster::helm_install",
            "crate::cluster::readiness",
            "crate::cluster::client",
            "crate::framework",
        ],
    ),
    // The shared plan: no cluster I/O (the values hash and the record's digest only).
    (
        "resources/release/plan.rs",
        &[
            "crate::cluster::bootstrap",
            "crate::cluster::helm_install",
            "crate::cluster::readiness",
            "crate::cluster::client",
        ],
    ),
    // Helm's values arithmetic: plain data, nothing of the crate.
    ("cluster/helm_values.rs", &["crate::"]),
];

#[test]
fn pure_decisions_name_nothing_that_does_io() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut violations = Vec::new();
    for (file, forbidden) in PURE_FILES {
        let text = std::fs::read_to_string(src.join(file)).expect("read source");
        for path in *forbidden {
            if text.contains(path) {
                violations.push(format!("{file} names {path}"));
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}
