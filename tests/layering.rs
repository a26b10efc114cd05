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
    modules_after(text, "crate::")
}

/// The first path segments named right after each `prefix` in `text`.
fn modules_after(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in text.match_indices(prefix) {
        out.extend(first_segments(&text[at + prefix.len()..]));
    }
    out
}

/// The first segments of the path `rest` starts with: `a::b` gives `a`, `{a, b::c}` gives `a` and
/// `b`; `self` and globs give nothing.
fn first_segments(rest: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
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

/// The subsystems of `src/cluster/` and those each may use, as in the header of
/// `src/cluster/mod.rs`. The items `cluster/mod.rs` re-exports (`crate::cluster::Kube`, ...) are the
/// client's.
const CLUSTER_SUBSYSTEMS: &[(&str, &[&str])] = &[
    ("client", &[]),
    ("endpoint", &[]),
    ("diagnosis", &["client", "kube_proxy", "talos"]),
    ("kube_proxy", &["client", "diagnosis", "talos"]),
    ("pods", &["client"]),
    // The engine runs a program in a pod and knows nothing of what the program is.
    (
        "engine",
        &["client", "endpoint", "diagnosis", "kube_proxy", "pods"],
    ),
    (
        "readiness",
        &["client", "diagnosis", "kube_proxy", "pods", "ownership"],
    ),
    ("helm", &["client", "endpoint", "engine"]),
    // Every chart install: observe, decide, install or upgrade, wait.
    (
        "converge",
        &["client", "engine", "helm", "readiness", "ownership"],
    ),
    ("talos", &[]),
    // Which tool manages an object: labels and annotations only.
    ("ownership", &[]),
    // Cilium's tables and rules, and its day-2 steps: the pre-flight chart installed and waited
    // for, the agents' rollout read.
    ("cilium", &["client", "engine", "helm", "readiness"]),
    ("flux", &["client", "helm", "ownership"]),
    ("talos_inventory", &["client", "helm"]),
];

/// The module path of a source file under `src/` (`cluster/engine/job.rs` is
/// `[cluster, engine, job]`, `cluster/engine/mod.rs` is `[cluster, engine]`).
fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The subsystems of `src/cluster/` a file in module `module` names, through `crate::cluster::`
/// or through `super::` chains that climb into `cluster`.
fn cluster_subsystems(module: &[String], text: &str) -> BTreeSet<String> {
    let known: Vec<&str> = CLUSTER_SUBSYSTEMS.iter().map(|(name, _)| *name).collect();
    let subsystem = |first: &str| -> String {
        if known.contains(&first) {
            first.to_owned()
        } else {
            "client".to_owned()
        }
    };
    let mut out: BTreeSet<String> = modules_after(text, "crate::cluster::")
        .iter()
        .map(|first| subsystem(first))
        .collect();
    // `super::` climbs one module per step; a chain that lands on `cluster` names a subsystem.
    for (start, _) in text.match_indices("super::") {
        let before = &text[..start];
        if before.ends_with("super::")
            || before.ends_with(|c: char| c.is_alphanumeric() || c == '_')
        {
            continue; // the middle of a chain, or `a::super::` (not Rust we write)
        }
        let mut rest = &text[start..];
        let mut up = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            rest = r;
            up += 1;
        }
        if module.len().checked_sub(up) == Some(1) && module[0] == "cluster" {
            out.extend(first_segments(rest).iter().map(|first| subsystem(first)));
        }
    }
    out
}

#[test]
fn the_subsystem_scanner_resolves_super_chains() {
    let engine_job: Vec<String> = ["cluster", "engine", "job"].map(String::from).into();
    let found = cluster_subsystems(
        &engine_job,
        "use super::objects::X;\nuse super::super::helm::install;\nuse crate::cluster::{Kube, readiness::Y};",
    );
    let expected: BTreeSet<String> = ["helm", "client", "readiness"].map(String::from).into();
    assert_eq!(found, expected);
    let kube_proxy: Vec<String> = ["cluster", "kube_proxy"].map(String::from).into();
    let found = cluster_subsystems(
        &kube_proxy,
        "use super::{ClusterError, diagnosis::Signature};",
    );
    let expected: BTreeSet<String> = ["client", "diagnosis"].map(String::from).into();
    assert_eq!(found, expected);
}

#[test]
fn each_cluster_subsystem_uses_only_those_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut violations = Vec::new();
    let mut seen = BTreeSet::new();
    for file in rust_files("cluster") {
        let relative = file.strip_prefix(&src).expect("under src");
        let module = module_path(relative);
        let Some(own) = module.get(1) else {
            continue; // cluster/mod.rs: the map itself and the client's re-exports
        };
        let Some((_, allowed)) = CLUSTER_SUBSYSTEMS.iter().find(|(name, _)| name == own) else {
            violations.push(format!(
                "{} is in no subsystem of the map",
                relative.display()
            ));
            continue;
        };
        seen.insert(own.clone());
        let text = std::fs::read_to_string(&file).expect("read source");
        for used in cluster_subsystems(&module, &text) {
            if used != *own && !allowed.contains(&used.as_str()) {
                violations.push(format!("{} uses cluster::{used}", relative.display()));
            }
        }
    }
    for (name, _) in CLUSTER_SUBSYSTEMS {
        assert!(
            seen.contains(*name),
            "no sources for cluster subsystem {name}"
        );
    }
    assert!(
        violations.is_empty(),
        "cluster subsystem violations:\n{}",
        violations.join("\n")
    );
}

/// Sub-layers inside a layer: files whose decisions must stay free of cluster I/O, each with the
/// paths below it that it must not name.
const PURE_FILES: &[(&str, &[&str])] = &[
    // The install decision: the release status only, nothing that talks to the cluster.
    (
        "cluster/converge/decide.rs",
        &[
            "crate::cluster::engine",
            "crate::cluster::helm::install",
            "crate::cluster::readiness",
            "crate::cluster::client",
            "crate::cluster::Kube",
            "crate::cluster::ClusterHandle",
            "crate::framework",
        ],
    ),
    // The shared plan: no cluster I/O (the values hash and the record's digest only).
    (
        "resources/release/plan.rs",
        &[
            "crate::cluster::engine",
            "crate::cluster::helm::install",
            "crate::cluster::readiness",
            "crate::cluster::client",
            "crate::cluster::Kube",
            "crate::cluster::ClusterHandle",
        ],
    ),
    // Helm's values arithmetic: plain data, nothing of the crate.
    ("cluster/helm/values.rs", &["crate::"]),
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
