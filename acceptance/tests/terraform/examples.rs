//! Every HCL file under `examples/` and every HCL block in `docs/` is checked with the real CLIs,
//! OpenTofu 1.12.6 and Terraform 1.16.4 (every test here runs on both), against the built provider
//! in a filesystem mirror, so the docs built from them cannot rot (`tests/hcl_snippets.rs` parses
//! the same text with an HCL parser, diagnostics included):
//! - all example files: `tofu fmt -check`, and each directory belongs to one of the checks below;
//! - the registry snippets (`examples/provider`, `examples/resources/*`, `examples/data-sources/*`,
//!   `examples/functions/*`): one per type or function the provider serves (a resource has
//!   `resource.tf` and `import.sh`), each `validate`d in a workspace that declares what the
//!   snippet takes from elsewhere;
//! - the full roots (every other directory under `examples/`): copied whole, as a user would copy
//!   them, then `init` and `validate`; the ones in [`PLANNED_ROOTS`] are also planned against the
//!   embedded cluster; `talos-cilium-flux` is also applied against the real Flux Operator and
//!   controllers with Git over SSH on loopback ([`real_flux`]);
//! - no example puts a secret into state or a plan file ([`secrets`]);
//! - every ```hcl / ```terraform block of `docs/`: `tofu fmt -check`, and `tofu validate` of a root
//!   made of the block and placeholders for what it refers to ([`doc_block_root`]).
//!
//! Providers an example declares besides talosboot: the mirror has talosboot and hashicorp/null;
//! siderolabs/talos and hashicorp/helm cannot be installed here (no registry access, and neither
//! is served by the Go module proxy), so [`STUBS`] installs in their place a schema-only stand-in
//! (`tests/stub-provider`, built with `go`) serving their schema as transcribed from their
//! published docs and source at the version named. Validation against it checks attribute names,
//! types, required attributes and references of those blocks against the transcription (not
//! against the real provider); it refuses to configure, plan or apply, so a planned root leaves
//! out the files that use it. A root that declares any other provider fails the test.
//! Snippets refer to resources of other providers through variables of the same name
//! ([`STAND_INS`]). A root that uses a resource type the provider does not register yet is skipped
//! with a message, unless the type's source folder exists (then the test fails).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::harness::{REQUIRED_PROVIDERS, TestCluster, TfOutput, Workspace, repo_root};

mod real_flux;
mod secrets;

/// References to resources of other providers, and the variable that stands in for each (an
/// ephemeral variable for an ephemeral resource: [`stand_in_declaration`]). A longer reference
/// goes before one it contains.
const STAND_INS: &[(&str, &str)] = &[
    (
        "ephemeral.talos_cluster_kubeconfig.this",
        "ephemeral_talos_cluster_kubeconfig",
    ),
    ("talos_cluster_kubeconfig.this", "talos_cluster_kubeconfig"),
];

/// The declaration of the variable `var` standing in for `reference`: ephemeral when the
/// reference is an ephemeral resource's, as its value is (it may then only flow where
/// ephemeral values may, e.g. a provider block).
fn stand_in_declaration(reference: &str, var: &str) -> String {
    let ephemeral = if reference.starts_with("ephemeral.") {
        "  ephemeral = true\n"
    } else {
        ""
    };
    format!("variable \"{var}\" {{\n  type = any\n{ephemeral}}}\n")
}

/// Third-party providers that cannot be installed here, stood in for by the schema-only stub:
/// source, version the schema was transcribed from, schema file under `tests/stub-provider/schemas`.
const STUBS: &[(&str, &str, &str)] = &[
    ("siderolabs/talos", "0.11.0", "siderolabs-talos-0.11.0.json"),
    ("hashicorp/helm", "3.1.2", "hashicorp-helm-3.1.2.json"),
];

/// Providers the harness mirror holds for real.
const INSTALLED: &[&str] = &["talosboot/talosboot", "hashicorp/null"];

/// Directories under `examples/` that are registry snippets, not roots.
const SNIPPET_KINDS: &[&str] = &[
    "provider",
    "resources",
    "data-sources",
    "list-resources",
    "functions",
];

/// Full roots that are also planned against the embedded cluster: directory, and files left out
/// of the plan because they use a stubbed provider (which cannot plan).
const PLANNED_ROOTS: &[(&str, &[&str])] = &[
    ("quickstart", &[]),
    ("talos-cilium-flux", &["talos.tf"]),
    ("argocd-after-cilium", &["argocd.tf"]),
];

fn examples() -> PathBuf {
    repo_root().join("examples")
}

/// Files under `dir` (recursively) whose name ends with `suffix`, sorted.
fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != ".terraform") {
                    stack.push(path);
                }
            } else if path.to_string_lossy().ends_with(suffix) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn rel(path: &Path) -> String {
    path.strip_prefix(repo_root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The snippet directories: `provider`, `resources/<type>`, `data-sources/<type>`,
/// `functions/<name>`.
fn snippet_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![examples().join("provider")];
    for kind in ["resources", "data-sources", "functions"] {
        let mut found: Vec<PathBuf> = std::fs::read_dir(examples().join(kind))
            .map(|r| {
                r.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        found.sort();
        dirs.extend(found);
    }
    dirs
}

/// The full roots: every directory directly under `examples/` that is not a snippet kind.
fn root_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(examples())
        .expect("examples/")
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !SNIPPET_KINDS.contains(&n.as_str()))
        .collect();
    names.sort();
    names
}

/// The provider's schema as the CLI sees it (`providers schema -json`).
fn provider_schema() -> serde_json::Value {
    let ws = Workspace::new(&format!(
        "{REQUIRED_PROVIDERS}\nprovider \"talosboot\" {{}}\n"
    ));
    ws.init();
    let json = ws.ok(&["providers", "schema", "-json"]).json();
    json["provider_schemas"][ws.cli().provider_address()].clone()
}

fn type_names(schema: &serde_json::Value, key: &str) -> Vec<String> {
    schema[key]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// The schema-only stand-in provider, built once per test process from `tests/stub-provider`
/// (Go's build cache makes later builds quick).
fn stub_binary() -> &'static PathBuf {
    static STUB: OnceLock<PathBuf> = OnceLock::new();
    STUB.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("stub-provider/stub");
        let status = std::process::Command::new("go")
            .args(["build", "-o"])
            .arg(&out)
            .arg(".")
            .current_dir(repo_root().join("tests/stub-provider"))
            .status()
            .expect("run `go build` for tests/stub-provider (Go is needed, as for OpenTofu)");
        assert!(status.success(), "building tests/stub-provider failed");
        out
    })
}

/// The provider sources (`namespace/type`) that `text` declares in `required_providers`.
fn declared_sources(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("source") else {
            continue;
        };
        let Some(value) = rest.trim_start().strip_prefix('=') else {
            continue;
        };
        let value = value.trim().trim_matches('"');
        let source = value.split('"').next().unwrap_or(value).to_lowercase();
        if source.matches('/').count() == 1 && !source.starts_with('.') && !found.contains(&source)
        {
            found.push(source);
        }
    }
    found
}

/// Puts the stand-in for every stubbed provider `text` declares into the workspace's mirror (under
/// the registry host of the workspace's CLI) and rewrites the CLI configuration to include them; fails
/// on a declared provider that is neither installed nor stubbed.
fn install_declared_providers(ws: &Workspace, text: &str) {
    let mut include: Vec<String> = INSTALLED
        .iter()
        .flat_map(|p| {
            [
                format!("\"registry.opentofu.org/{p}\""),
                format!("\"registry.terraform.io/{p}\""),
            ]
        })
        .collect();
    for source in declared_sources(text) {
        if INSTALLED.contains(&source.as_str()) {
            continue;
        }
        let Some((_, version, schema)) = STUBS.iter().find(|(s, _, _)| *s == source) else {
            panic!(
                "the example declares provider {source}, which cannot be installed here and has no \
                 stand-in in STUBS (tests/stub-provider)"
            );
        };
        let kind = source.split('/').nth(1).unwrap_or_default();
        let dir = ws.path().join(format!(
            "mirror/{}/{source}/{version}/linux_amd64",
            ws.cli().registry_host()
        ));
        std::fs::create_dir_all(&dir).expect("mirror dir");
        let wrapper = dir.join(format!("terraform-provider-{kind}_v{version}"));
        let schema = repo_root().join("tests/stub-provider/schemas").join(schema);
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nSTUB_PROVIDER_SCHEMA='{}' exec '{}' \"$@\"\n",
                schema.display(),
                stub_binary().display()
            ),
        )
        .expect("write stub wrapper");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        include.push(format!("\"{}/{source}\"", ws.cli().registry_host()));
    }
    ws.write(
        "cli.tfrc",
        &format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path    = \"{}\"\n    include = [{}]\n  }}\n}}\n",
            ws.path().join("mirror").display(),
            include.join(", ")
        ),
    );
}

on_both_clis!(every_example_is_formatted_and_checked);
fn every_example_is_formatted_and_checked() {
    let ws = Workspace::new("");
    let dir = examples();
    let out = ws.run(&[
        "fmt",
        "-check",
        "-recursive",
        "-diff",
        "-no-color",
        &dir.display().to_string(),
    ]);
    assert!(
        out.success,
        "`{cli} fmt` would change these examples (run `{cli} fmt -recursive examples`):\n{}",
        out.text(),
        cli = ws.cli().name()
    );
    // Every directory with HCL in it is a snippet or a root (and every root is validated whole),
    // so a new example cannot be missed.
    let mut checked: Vec<PathBuf> = snippet_dirs();
    checked.extend(root_names().iter().map(|d| dir.join(d)));
    let tf = files(&dir, ".tf");
    assert!(tf.len() >= 8, "too few examples found: {tf:?}");
    for file in tf {
        assert!(
            checked.iter().any(|d| file.starts_with(d)),
            "{} is in no checked example directory: put it in a root or a snippet directory",
            rel(&file)
        );
    }
    let roots = root_names();
    assert!(roots.len() >= 3, "{roots:?}");
    for (planned, _) in PLANNED_ROOTS {
        assert!(
            roots.iter().any(|r| r == planned),
            "PLANNED_ROOTS names examples/{planned}, which is not a root"
        );
    }
}

on_both_clis!(registry_examples_exist_for_every_type);
fn registry_examples_exist_for_every_type() {
    let schema = provider_schema();
    let resources = type_names(&schema, "resource_schemas");
    let data_sources = type_names(&schema, "data_source_schemas");
    assert!(
        resources.iter().any(|r| r == "talosboot_cilium"),
        "{resources:?}"
    );
    for r in &resources {
        let dir = examples().join("resources").join(r);
        let example = read(&dir.join("resource.tf"));
        assert!(
            example.contains(&format!("resource \"{r}\"")),
            "{}/resource.tf has no `resource \"{r}\"` block",
            rel(&dir)
        );
        let import = read(&dir.join("import.sh"));
        assert!(
            import.contains(&format!("import {r}.")),
            "{}/import.sh shows no `import {r}.<name> <id>` command:\n{import}",
            rel(&dir)
        );
    }
    for d in &data_sources {
        let dir = examples().join("data-sources").join(d);
        let example = read(&dir.join("data-source.tf"));
        assert!(
            example.contains(&format!("data \"{d}\"")),
            "{}/data-source.tf has no `data \"{d}\"` block",
            rel(&dir)
        );
    }
    // No example for a type the provider does not have (it would render nowhere, or lie).
    for (kind, served) in [("resources", &resources), ("data-sources", &data_sources)] {
        for dir in snippet_dirs()
            .iter()
            .filter(|d| d.parent() == Some(&examples().join(kind)))
        {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            assert!(
                served.contains(&name),
                "{} documents a {kind} type the provider does not serve: {served:?}",
                rel(dir)
            );
        }
    }
    // List resources (`terraform query`, Terraform 1.14+): one `.tfquery.hcl` per type the
    // provider serves, and none for a type it does not (OpenTofu's schema has no list types).
    let dispatcher = talosboot::provider::dispatcher(Default::default(), false);
    let lists: Vec<String> = dispatcher
        .list_resource_schemas()
        .map(|(name, _)| name.to_owned())
        .collect();
    assert!(
        lists.iter().any(|l| l == "talosboot_helm_release"),
        "{lists:?}"
    );
    for l in &lists {
        let file = examples()
            .join("list-resources")
            .join(l)
            .join("list-resource.tfquery.hcl");
        let example = read(&file);
        assert!(
            example.contains(&format!("list \"{l}\"")),
            "{} has no `list \"{l}\"` block",
            rel(&file)
        );
    }
    for entry in std::fs::read_dir(examples().join("list-resources")).expect("list-resources") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        assert!(
            lists.contains(&name),
            "examples/list-resources/{name} documents a list type the provider does not serve: {lists:?}"
        );
    }
    // Functions: one `function.tf` per function (its registry page's example), calling it.
    let functions: Vec<String> = dispatcher
        .functions()
        .map(|(name, _)| name.to_owned())
        .collect();
    assert!(
        functions.iter().any(|f| f == "cilium_talos_values"),
        "{functions:?}"
    );
    for f in &functions {
        let file = examples().join("functions").join(f).join("function.tf");
        let example = read(&file);
        assert!(
            example.contains(&format!("provider::talosboot::{f}(")),
            "{} does not call provider::talosboot::{f}",
            rel(&file)
        );
    }
    for entry in std::fs::read_dir(examples().join("functions")).expect("functions") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        assert!(
            functions.contains(&name),
            "examples/functions/{name} documents a function the provider does not have: {functions:?}"
        );
    }
    let provider = read(&examples().join("provider/provider.tf"));
    assert!(provider.contains("provider \"talosboot\""), "{provider}");
}

/// A snippet made into a root: stand-ins for other providers' resources, the provider
/// requirements, a `talosboot_cilium.this` when it only refers to one, and the files it reads.
fn snippet_root(dir: &Path) -> Workspace {
    let mut text = String::new();
    // An import block by identity is Terraform's (1.12+): OpenTofu 1.12 refuses `identity`.
    let cli = crate::harness::cli();
    for file in files(dir, ".tf")
        .into_iter()
        .filter(|f| cli != crate::harness::Cli::OpenTofu || !f.ends_with("import-by-identity.tf"))
    {
        text.push_str(&read(&file));
        text.push('\n');
    }
    let mut context = String::new();
    for (reference, var) in STAND_INS {
        if text.contains(reference) {
            text = text.replace(reference, &format!("var.{var}"));
            context.push_str(&stand_in_declaration(reference, var));
        }
    }
    // A function example feeds hashicorp/helm's helm_release, whose stand-in is the stub.
    let uses_helm = text.contains("resource \"helm_release\"");
    if uses_helm && !text.contains("required_providers") {
        context.push_str(&REQUIRED_PROVIDERS.replacen(
            "  required_providers {\n",
            "  required_providers {\n    helm = {\n      source  = \"hashicorp/helm\"\n      version = \"3.1.2\"\n    }\n",
            1,
        ));
    } else if !text.contains("required_providers") {
        context.push_str(REQUIRED_PROVIDERS);
    }
    if text.contains("talosboot_cilium.this") && !text.contains("resource \"talosboot_cilium\"") {
        context.push_str("resource \"talosboot_cilium\" \"this\" {\n  version = \"1.20.2\"\n}\n");
    }
    let ws = Workspace::new(&text);
    ws.write("context.tf", &context);
    if uses_helm {
        install_declared_providers(&ws, &context);
    }
    // `file("${path.module}/...")`: a FluxInstance for an instance file, an empty document otherwise.
    let instance = read(&examples().join("talos-cilium-flux/flux/flux-instance.yaml"));
    for part in text.split("file(\"${path.module}/").skip(1) {
        let Some(path) = part.split('"').next() else {
            continue;
        };
        let target = ws.path().join(path);
        std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
        let content = if path.ends_with("flux-instance.yaml") {
            instance.as_str()
        } else {
            "{}\n"
        };
        std::fs::write(&target, content).expect("write referenced file");
    }
    ws
}

on_both_clis!(registry_examples_validate);
fn registry_examples_validate() {
    for dir in snippet_dirs() {
        let ws = snippet_root(&dir);
        ws.init();
        let out = ws.run(&["validate", "-no-color"]);
        assert!(
            out.success,
            "{} does not validate:\n{}\n--- as checked:\n{}\n{}",
            rel(&dir),
            out.text(),
            ws.read("main.tf"),
            ws.read("context.tf")
        );
    }
}

/// `talosboot_*` resource types a root declares.
fn declared_types(text: &str) -> Vec<String> {
    text.split("resource \"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .filter(|t| t.starts_with("talosboot_"))
        .map(str::to_owned)
        .collect()
}

/// Copies a full root into a fresh workspace (all files but `skip`), with the providers it
/// declares installed, or `None` when it needs a resource type the provider does not register yet
/// and whose code does not exist either. When files are skipped, references into them from
/// [`STAND_INS`] become variables of the same name (declared in `stand_ins.tf`).
fn root_workspace(name: &str, skip: &[&str]) -> Option<Workspace> {
    let dir = examples().join(name);
    let ws = Workspace::new("");
    let mut text = String::new();
    let mut stand_ins = String::new();
    for file in files(&dir, "") {
        let relative = file.strip_prefix(&dir).expect("inside the root");
        if skip.iter().any(|s| relative == Path::new(s)) {
            continue;
        }
        let target = ws.path().join(relative);
        std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
        std::fs::copy(&file, &target).expect("copy example file");
        if relative.extension().is_some_and(|e| e == "tf") {
            let mut content = read(&file);
            if !skip.is_empty() {
                for (reference, var) in STAND_INS {
                    let replaced = replace_in_code(&content, reference, &format!("var.{var}"));
                    if replaced != content {
                        content = replaced;
                        let declaration = stand_in_declaration(reference, var);
                        if !stand_ins.contains(&declaration) {
                            stand_ins.push_str(&declaration);
                        }
                    }
                }
                std::fs::write(&target, &content).expect("write example file");
            }
            text.push_str(&content);
        }
    }
    if !stand_ins.is_empty() {
        ws.write("stand_ins.tf", &stand_ins);
    }
    install_declared_providers(&ws, &text);
    let registered = type_names(&provider_schema(), "resource_schemas");
    for t in declared_types(&text) {
        if registered.contains(&t) {
            continue;
        }
        let source = repo_root()
            .join("src/resources")
            .join(t.trim_start_matches("talosboot_"));
        assert!(
            !source.exists(),
            "{} exists but the provider does not register {t}",
            rel(&source)
        );
        eprintln!("skipped examples/{name}: the provider does not serve {t} yet");
        return None;
    }
    Some(ws)
}

/// `text` with `from` replaced by `to` in code only: not inside a quoted string or a comment
/// (a description may name the reference).
fn replace_in_code(text: &str, from: &str, to: &str) -> String {
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        let mut code = String::new();
        let mut in_string = false;
        let mut rest = line;
        while let Some(c) = rest.chars().next() {
            if !in_string && (rest.starts_with('#') || rest.starts_with("//")) {
                break;
            }
            if !in_string && rest.starts_with(from) {
                code.push_str(to);
                rest = &rest[from.len()..];
                continue;
            }
            if c == '"' && !code.ends_with('\\') {
                in_string = !in_string;
            }
            code.push(c);
            rest = &rest[c.len_utf8()..];
        }
        code.push_str(rest);
        out.push_str(&code);
    }
    out
}

on_both_clis!(every_root_inits_and_validates_as_copied);
/// Every root, copied whole as a user would copy it, passes `init` and `validate` with only
/// talosboot and the providers it declares (stand-ins for those that cannot be installed here).
fn every_root_inits_and_validates_as_copied() {
    let roots = root_names();
    assert!(roots.len() >= 3, "{roots:?}");
    for name in roots {
        let Some(ws) = root_workspace(&name, &[]) else {
            continue;
        };
        // Copied whole: every file of the root is in the workspace, unchanged.
        let dir = examples().join(&name);
        for file in files(&dir, "") {
            let relative = file.strip_prefix(&dir).expect("inside the root");
            assert_eq!(
                std::fs::read(ws.path().join(relative)).ok(),
                std::fs::read(&file).ok(),
                "{} was not copied as it is",
                rel(&file)
            );
        }
        let init = ws.run(&["init", "-no-color", "-input=false"]);
        assert!(
            init.success,
            "examples/{name} does not pass `{} init` as it is:\n{}",
            ws.cli().name(),
            init.text()
        );
        let out = ws.run(&["validate", "-no-color"]);
        assert!(
            out.success,
            "examples/{name} does not pass `{} validate` as it is:\n{}",
            ws.cli().name(),
            out.text()
        );
    }
}

/// The files [`PLANNED_ROOTS`] leaves out of the plan of `name`.
fn planned_skip(name: &str) -> &'static [&'static str] {
    PLANNED_ROOTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, skip)| *skip)
        .unwrap_or_else(|| panic!("{name} is not in PLANNED_ROOTS"))
}

fn plan(ws: &Workspace) -> TfOutput {
    let out = ws.run(&[
        "plan",
        "-no-color",
        "-input=false",
        "-detailed-exitcode",
        "-out=plan.tfplan",
    ]);
    assert_eq!(
        out.code,
        Some(2),
        "the plan should succeed with changes:\n{}",
        out.text()
    );
    out
}

on_both_clis!(async quickstart_root_plans);
async fn quickstart_root_plans() {
    let Some(ws) = root_workspace("quickstart", planned_skip("quickstart")) else {
        return;
    };
    let cluster = TestCluster::shared().await;
    // The deploy key has no default (a user gives theirs): a root planned without it fails.
    let ws = ws.env(
        "TF_VAR_kubeconfig_path",
        &cluster.kubeconfig_path.display().to_string(),
    );
    ws.init();
    ws.ok(&["validate", "-no-color"]);
    let missing = ws.run(&["plan", "-no-color", "-input=false"]);
    assert!(
        !missing.success && missing.flat().contains("deploy_key"),
        "a plan without the deploy key is refused, naming it:\n{}",
        missing.text()
    );
    let ws = ws.env("TF_VAR_deploy_key", &secrets::marker("deploy_key"));
    let out = plan(&ws);
    assert!(
        out.stdout.contains("talosboot_cilium.this will be created"),
        "{}",
        out.text()
    );
}

on_both_clis!(async talos_cilium_flux_root_plans_without_secrets_in_the_plan);
async fn talos_cilium_flux_root_plans_without_secrets_in_the_plan() {
    // talos.tf (siderolabs/talos) cannot be planned here: the kubeconfig it would produce is given
    // in place of `ephemeral.talos_cluster_kubeconfig.this`, by an ephemeral variable.
    let Some(ws) = root_workspace("talos-cilium-flux", planned_skip("talos-cilium-flux")) else {
        return;
    };
    let cluster = TestCluster::shared().await;
    let kubeconfig = read(&cluster.kubeconfig_path);
    ws.write(
        "stand_ins.auto.tfvars.json",
        &serde_json::json!({ "ephemeral_talos_cluster_kubeconfig": { "kubeconfig_raw": kubeconfig } })
            .to_string(),
    );
    let github_key = "-----BEGIN OPENSSH PRIVATE KEY-----\nexample-github-key-must-not-leak\n-----END OPENSSH PRIVATE KEY-----\n";
    let gitea_key = "example-gitea-key-must-not-leak";
    let ws = ws
        .env("TF_VAR_environment", "prod")
        .env("TF_VAR_github_deploy_key", github_key)
        .env("TF_VAR_gitea_rollback_key", gitea_key);
    ws.init();
    ws.ok(&["validate", "-no-color"]);
    let out = plan(&ws);
    let text = out.text();
    for created in [
        "talosboot_cilium.this will be created",
        "talosboot_flux_bootstrap.flux will be created",
    ] {
        assert!(out.stdout.contains(created), "{text}");
    }
    assert!(
        text.contains("kubernetes/clusters/prod"),
        "the environment picks the path:\n{text}"
    );
    let shown = ws.ok(&["show", "-json", "plan.tfplan"]).stdout;
    for secret in ["example-github-key-must-not-leak", gitea_key] {
        assert!(!text.contains(secret), "a deploy key is in the plan output");
        assert!(!shown.contains(secret), "a deploy key is in the plan file");
    }
    let found = secrets::places_holding(
        &ws,
        &[github_key.to_owned(), gitea_key.to_owned()],
        Some("plan.tfplan"),
        &[&text],
    );
    assert!(found.is_empty(), "{}", found.join("\n"));
    // staging and prod only: a typo in the environment must not bootstrap from a path that does not exist.
    let bad = ws.run(&["plan", "-no-color", "-input=false", "-var=environment=qa"]);
    assert!(!bad.success, "an unknown environment is refused");
    assert!(
        bad.flat().contains("environment is `staging` or `prod`"),
        "{}",
        bad.text()
    );
}

on_both_clis!(async argocd_after_cilium_root_plans);
async fn argocd_after_cilium_root_plans() {
    let Some(ws) = root_workspace("argocd-after-cilium", planned_skip("argocd-after-cilium"))
    else {
        return;
    };
    let cluster = TestCluster::shared().await;
    let ws = ws.env(
        "TF_VAR_kubeconfig_path",
        &cluster.kubeconfig_path.display().to_string(),
    );
    ws.init();
    ws.ok(&["validate", "-no-color"]);
    let out = plan(&ws);
    let text = out.text();
    assert!(
        out.stdout.contains("talosboot_cilium.this will be created"),
        "{text}"
    );
    assert!(text.contains("adopt_existing"), "{text}");
    assert!(
        out.stdout
            .contains("data.talosboot_helm_release.cilium will be read during apply"),
        "{text}"
    );
    // argocd.tf is left out of the plan only because hashicorp/helm cannot be installed here (it is
    // validated with the whole root): it must still refer to the resource this root declares.
    let argocd = read(&examples().join("argocd-after-cilium/argocd.tf"));
    assert!(
        argocd.contains("depends_on = [talosboot_cilium.this]"),
        "{argocd}"
    );
}

/// The ```hcl and ```terraform blocks of a Markdown page, each dedented by its fence's indentation.
fn hcl_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &mut current {
            None if trimmed == "```hcl" || trimmed == "```terraform" => {
                current = Some((indent, String::new()))
            }
            Some((_, block)) if trimmed == "```" => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            Some((fence, block)) => {
                block.push_str(line.get(*fence..).unwrap_or(trimmed));
                block.push('\n');
            }
            None => {}
        }
    }
    blocks
}

/// Every Markdown page of `docs/` (index, resources, data sources, guides).
fn doc_pages() -> Vec<PathBuf> {
    files(&repo_root().join("docs"), ".md")
}

on_both_clis!(guides_have_registry_front_matter_and_formatted_hcl);
fn guides_have_registry_front_matter_and_formatted_hcl() {
    let guides = files(&repo_root().join("docs/guides"), ".md");
    assert!(guides.len() >= 7, "{guides:?}");
    for guide in &guides {
        let text = read(guide);
        let front = text
            .strip_prefix("---\n")
            .and_then(|t| t.split_once("\n---\n"))
            .map(|(f, _)| f)
            .unwrap_or_else(|| panic!("{} has no front matter", rel(guide)));
        for key in [
            "page_title: \"",
            "subcategory: \"Guides\"",
            "description: |-\n  ",
        ] {
            assert!(front.contains(key), "{}: no `{key}`", rel(guide));
        }
    }
    let ws = Workspace::new("");
    let dir = ws.path().join("docs");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut count = 0;
    for page in doc_pages() {
        let stem = rel(&page).replace(['/', '.'], "_");
        for (i, block) in hcl_blocks(&read(&page)).iter().enumerate() {
            std::fs::write(dir.join(format!("{stem}-{i}.tf")), block).expect("write block");
            count += 1;
        }
    }
    assert!(count >= 15, "too few HCL blocks in docs/: {count}");
    let out = ws.run(&[
        "fmt",
        "-check",
        "-diff",
        "-no-color",
        &dir.display().to_string(),
    ]);
    assert!(
        out.success,
        "HCL in docs/ is not valid or not formatted as `{} fmt` writes it:\n{}",
        ws.cli().name(),
        out.text()
    );
}

/// Placeholder declarations for resources a docs block refers to without declaring them: type,
/// and the body of a minimal valid block of that type.
const PLACEHOLDER_RESOURCES: &[(&str, &str)] = &[
    ("talosboot_cilium", "  version = \"1.20.2\"\n"),
    (
        "talosboot_helm_release",
        "  name  = \"placeholder\"\n  chart = \"placeholder\"\n",
    ),
    (
        "helm_release",
        "  name  = \"placeholder\"\n  chart = \"placeholder\"\n",
    ),
    (
        "talos_cluster_kubeconfig",
        "  node = \"10.0.0.10\"\n  client_configuration = {\n    ca_certificate     = \"\"\n    client_certificate = \"\"\n    client_key         = \"\"\n  }\n",
    ),
    ("null_resource", ""),
];

/// `(prefix, name)` of every `prefix.name` in `text` whose prefix is `var`, `local`, `data.TYPE`
/// or a resource type of [`PLACEHOLDER_RESOURCES`], outside `from = ...` lines (a `moved` or
/// `removed` source must not exist).
fn references(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for line in text.lines() {
        let code = line.split('#').next().unwrap_or_default();
        if code.trim_start().starts_with("from") {
            continue;
        }
        let bytes = code.as_bytes();
        let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        let mut i = 0;
        while i < bytes.len() {
            if !ident(bytes[i]) || (i > 0 && (ident(bytes[i - 1]) || bytes[i - 1] == b'.')) {
                i += 1;
                continue;
            }
            let words: Vec<&str> = code[i..]
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
                .next()
                .unwrap_or_default()
                .split('.')
                .collect();
            let (prefix, name) = match words.as_slice() {
                ["data", t, n, ..] => (format!("data.{t}"), n.to_string()),
                [p, n, ..] => (p.to_string(), n.to_string()),
                _ => (String::new(), String::new()),
            };
            let known = prefix == "var"
                || prefix == "local"
                || prefix.starts_with("data.")
                || PLACEHOLDER_RESOURCES.iter().any(|(t, _)| *t == prefix);
            if known && !name.is_empty() && !found.contains(&(prefix.clone(), name.clone())) {
                found.push((prefix, name));
            }
            i += words.iter().map(|w| w.len() + 1).sum::<usize>();
        }
    }
    found
}

/// What a docs block is checked as.
enum DocBlock {
    /// A root made of the block and placeholders, to `init` and `validate`.
    Root(Workspace),
    /// A CLI configuration file (`provider_installation`), not configuration of a root: no schema
    /// applies, `tofu fmt` is all that checks it.
    CliConfiguration,
    /// A call of the flux-operator-bootstrap module from its registry (the "before" of a
    /// migration): the module cannot be downloaded here, `tofu fmt` is all that checks it.
    RegistryModule,
    /// A `list` block of a `.tfquery.hcl` file (Terraform 1.14+), which `validate` does not read
    /// in a root: `fmt` checks it, and the query test runs the registry's list examples.
    Query,
    /// An `import` block by identity on OpenTofu, which has no resource identity (Terraform
    /// validates it).
    TerraformOnly,
    /// A provider with `for_each` on Terraform, which reserves the argument (OpenTofu validates
    /// it).
    OpenTofuOnly,
}

/// A root made of one docs block: the block as `main.tf`, and in `context.tf` what it refers to
/// without declaring: variables (`type = any`, so unknown at validate), locals fed from such
/// variables, data sources of other providers as variables ([`STAND_INS`]), placeholder resources
/// ([`PLACEHOLDER_RESOURCES`]), the provider requirements, and the files it reads.
fn doc_block_root(block: &str) -> DocBlock {
    if block.trim_start().starts_with("provider_installation") {
        return DocBlock::CliConfiguration;
    }
    if block.contains("module \"") && block.contains("source  = \"controlplaneio-fluxcd/") {
        return DocBlock::RegistryModule;
    }
    if block.contains("list \"talosboot_") {
        return DocBlock::Query;
    }
    if block.contains("identity = {") && crate::harness::cli() == crate::harness::Cli::OpenTofu {
        return DocBlock::TerraformOnly;
    }
    if block.contains("provider \"")
        && block.contains("  for_each ")
        && crate::harness::cli() != crate::harness::Cli::OpenTofu
    {
        return DocBlock::OpenTofuOnly;
    }
    let mut text = block.to_owned();
    let mut context = String::new();
    for (reference, var) in STAND_INS {
        if reference.starts_with("data.") && text.contains(reference) {
            text = text.replace(reference, &format!("var.{var}"));
        }
        // An ephemeral resource's value is ephemeral: so is its stand-in.
        if reference.starts_with("ephemeral.") && text.contains(reference) {
            text = text.replace(reference, &format!("var.{var}"));
            context.push_str(&stand_in_declaration(reference, var));
        }
    }
    let declared = |kind: &str, name: &str| -> bool {
        match kind {
            "var" => text.contains(&format!("variable \"{name}\"")),
            "local" => {
                text.contains("locals {")
                    && text
                        .lines()
                        .any(|l| l.trim_start().starts_with(&format!("{name} ")))
            }
            t if t.starts_with("data.") => text.contains(&format!(
                "data \"{}\" \"{name}\"",
                t.trim_start_matches("data.")
            )),
            t => text.contains(&format!("resource \"{t}\" \"{name}\"")),
        }
    };
    let mut providers = vec!["talosboot", "null"];
    for (kind, name) in references(&text) {
        if declared(&kind, &name) || context.contains(&format!("variable \"{name}\"")) {
            continue;
        }
        match kind.as_str() {
            "var" => context.push_str(&format!("variable \"{name}\" {{\n  type = any\n}}\n")),
            "local" => context.push_str(&format!(
                "variable \"placeholder_local_{name}\" {{\n  type = any\n}}\nlocals {{\n  {name} = var.placeholder_local_{name}\n}}\n"
            )),
            t if t.starts_with("data.") => panic!(
                "a docs block reads {t}.{name}, which has no stand-in: add one to STAND_INS\n{block}"
            ),
            t => {
                let body = PLACEHOLDER_RESOURCES
                    .iter()
                    .find(|(p, _)| *p == t)
                    .map(|(_, b)| *b)
                    .unwrap_or_default();
                context.push_str(&format!("resource \"{t}\" \"{name}\" {{\n{body}}}\n"));
            }
        }
    }
    let all = format!("{text}\n{context}");
    if all.contains("resource \"helm_release\"") || all.contains("helm_release.") {
        providers.push("helm");
    }
    if ["resource", "data", "ephemeral"]
        .iter()
        .any(|kind| all.contains(&format!("{kind} \"talos_")))
    {
        providers.push("talos");
    }
    // A block with its own `required_providers` gets the missing entries added to it (a module
    // has one `required_providers`).
    if text.contains("required_providers {") {
        providers.retain(|p| !text.contains(&format!("\n    {p} = {{")));
    }
    if !providers.is_empty() {
        let sources: String = providers
            .iter()
            .map(|p| match *p {
                "talosboot" => "    talosboot = {\n      source  = \"talosboot/talosboot\"\n      version = \"~> 0.2\"\n    }\n".to_owned(),
                "null" => "    null = {\n      source  = \"hashicorp/null\"\n      version = \"2.1.2\"\n    }\n".to_owned(),
                "helm" => "    helm = {\n      source = \"hashicorp/helm\"\n    }\n".to_owned(),
                _ => "    talos = {\n      source = \"siderolabs/talos\"\n    }\n".to_owned(),
            })
            .collect();
        if text.contains("required_providers {") {
            text = text.replacen(
                "required_providers {\n",
                &format!("required_providers {{\n{sources}"),
                1,
            );
        } else {
            context.push_str(&format!(
                "terraform {{\n  required_providers {{\n{sources}  }}\n}}\n"
            ));
        }
    }
    let ws = Workspace::new(&text);
    ws.write("context.tf", &context);
    install_declared_providers(&ws, &format!("{text}\n{context}"));
    let instance = read(&examples().join("talos-cilium-flux/flux/flux-instance.yaml"));
    for part in text.split("file(\"${path.module}/").skip(1) {
        let Some(path) = part.split('"').next() else {
            continue;
        };
        let target = ws.path().join(path);
        std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
        let content = if path.ends_with("flux-instance.yaml") {
            instance.as_str()
        } else {
            "{}\n"
        };
        std::fs::write(&target, content).expect("write referenced file");
    }
    DocBlock::Root(ws)
}

on_both_clis!(every_docs_hcl_block_validates);
/// Every HCL block of `docs/` is validated against the schema: `tofu init` and `tofu validate` of
/// a root made of the block and placeholders for what it refers to ([`doc_block_root`]).
fn every_docs_hcl_block_validates() {
    let mut validated = 0;
    let mut failures = Vec::new();
    let mut not_validated = Vec::new();
    for page in doc_pages() {
        for (i, block) in hcl_blocks(&read(&page)).iter().enumerate() {
            let ws = match doc_block_root(block) {
                DocBlock::CliConfiguration
                | DocBlock::RegistryModule
                | DocBlock::Query
                | DocBlock::TerraformOnly
                | DocBlock::OpenTofuOnly => {
                    not_validated.push(format!("{} block {}", rel(&page), i + 1));
                    continue;
                }
                DocBlock::Root(ws) => ws,
            };
            let init = ws.run(&["init", "-no-color", "-input=false"]);
            let out = if init.success {
                ws.run(&["validate", "-no-color"])
            } else {
                init
            };
            if out.success {
                validated += 1;
            } else {
                failures.push(format!(
                    "{} block {} does not validate:\n{}\n--- the block:\n{}\n--- placeholders:\n{}",
                    rel(&page),
                    i + 1,
                    out.text(),
                    block,
                    ws.read("context.tf")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(validated >= 15, "too few HCL blocks validated: {validated}");
    // Only CLI configurations (`provider_installation`) and the module call of the flux migration
    // guide are left to `tofu fmt` (see [`DocBlock`]).
    eprintln!("validated {validated} docs blocks; format-checked only: {not_validated:?}");
}
