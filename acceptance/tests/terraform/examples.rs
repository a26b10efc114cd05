//! Every HCL file under `examples/` is checked with the real OpenTofu CLI, so the docs built from
//! them cannot rot:
//! - all of them: `tofu fmt -check`, and each directory belongs to one of the checks below (the
//!   HCL blocks of `docs/guides` are format-checked too);
//! - the registry snippets (`examples/provider`, `examples/resources/*`, `examples/data-sources/*`):
//!   one per type the provider serves (a resource has `resource.tf` and `import.sh`), each
//!   `tofu validate`d in a workspace that declares what the snippet takes from elsewhere;
//! - the full roots (`quickstart`, `talos-cilium-flux`, `argocd-after-cilium`): `init`, `validate`
//!   and `plan` against the simulated cluster, as a user would run them.
//!
//! Snippets refer to resources of providers that cannot be installed here (no registry access):
//! those references are stood in for by variables of the same name ([`STAND_INS`]), so everything
//! talosboot checks (attribute names, types, the provider's own validation) is still checked.
//! For the same reason the Argo CD root's `argocd.tf` (hashicorp/helm) is only format-checked.
//! A root that uses a resource type the provider does not register yet is skipped with a
//! message, unless the type's source folder exists (then the test fails: registered it must be).

use std::path::{Path, PathBuf};

use crate::harness::{REQUIRED_PROVIDERS, TestCluster, TfOutput, Workspace, repo_root};

/// References to resources of other providers, and the variable that stands in for each.
const STAND_INS: &[(&str, &str)] = &[
    ("talos_cluster_kubeconfig.this", "talos_cluster_kubeconfig"),
    (
        "data.bitwarden_secret.flux_deploy_key",
        "bitwarden_secret_flux_deploy_key",
    ),
];

/// Full roots: directory, files that are only format-checked (providers not installable here).
const ROOTS: &[(&str, &[&str])] = &[
    ("quickstart", &[]),
    ("talos-cilium-flux", &[]),
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

/// The snippet directories: `provider`, `resources/<type>`, `data-sources/<type>`.
fn snippet_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![examples().join("provider")];
    for kind in ["resources", "data-sources"] {
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

/// The provider's schema as the CLI sees it (`providers schema -json`).
fn provider_schema() -> serde_json::Value {
    let ws = Workspace::new(&format!(
        "{REQUIRED_PROVIDERS}\nprovider \"talosboot\" {{}}\n"
    ));
    ws.init();
    let json = ws.ok(&["providers", "schema", "-json"]).json();
    json["provider_schemas"]["registry.opentofu.org/talosboot/talosboot"].clone()
}

fn type_names(schema: &serde_json::Value, key: &str) -> Vec<String> {
    schema[key]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
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
        "`tofu fmt` would change these examples (run `tofu fmt -recursive examples`):\n{}",
        out.text()
    );
    // Every directory with HCL in it is one of the checked ones, so a new example cannot be missed.
    let mut checked: Vec<PathBuf> = snippet_dirs();
    checked.extend(ROOTS.iter().map(|(d, _)| dir.join(d)));
    let tf = files(&dir, ".tf");
    assert!(tf.len() >= 8, "too few examples found: {tf:?}");
    for file in tf {
        assert!(
            checked.iter().any(|d| file.starts_with(d)),
            "{} is in no checked example directory: add it to ROOTS or move it",
            rel(&file)
        );
    }
}

#[test]
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
    let provider = read(&examples().join("provider/provider.tf"));
    assert!(provider.contains("provider \"talosboot\""), "{provider}");
}

/// A snippet made into a root: stand-ins for other providers' resources, the provider
/// requirements, a `talosboot_cilium.this` when it only refers to one, and the files it reads.
fn snippet_root(dir: &Path) -> Workspace {
    let mut text = String::new();
    for file in files(dir, ".tf") {
        text.push_str(&read(&file));
        text.push('\n');
    }
    let mut context = String::new();
    for (reference, var) in STAND_INS {
        if text.contains(reference) {
            text = text.replace(reference, &format!("var.{var}"));
            context.push_str(&format!("variable \"{var}\" {{\n  type = any\n}}\n"));
        }
    }
    if !text.contains("required_providers") {
        context.push_str(REQUIRED_PROVIDERS);
    }
    if text.contains("talosboot_cilium.this") && !text.contains("resource \"talosboot_cilium\"") {
        context.push_str("resource \"talosboot_cilium\" \"this\" {\n  version = \"1.18.4\"\n}\n");
    }
    let ws = Workspace::new(&text);
    ws.write("context.tf", &context);
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

#[test]
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

/// Copies a full root into a fresh workspace (all files but `skip`), or `None` when it needs a
/// resource type the provider does not register yet and whose code does not exist either.
fn root_workspace(name: &str, skip: &[&str]) -> Option<Workspace> {
    let dir = examples().join(name);
    let ws = Workspace::new("");
    let mut text = String::new();
    for file in files(&dir, "") {
        let relative = file.strip_prefix(&dir).expect("inside the root");
        if skip.iter().any(|s| relative == Path::new(s)) {
            continue;
        }
        let target = ws.path().join(relative);
        std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
        std::fs::copy(&file, &target).expect("copy example file");
        if relative.extension().is_some_and(|e| e == "tf") {
            text.push_str(&read(&file));
        }
    }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quickstart_root_plans() {
    let Some(ws) = root_workspace("quickstart", &[]) else {
        return;
    };
    let cluster = TestCluster::start().await;
    let ws = ws.env(
        "TF_VAR_kubeconfig_path",
        &cluster.kubeconfig_path.display().to_string(),
    );
    ws.init();
    ws.ok(&["validate", "-no-color"]);
    let out = plan(&ws);
    assert!(
        out.stdout.contains("talosboot_cilium.this will be created"),
        "{}",
        out.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn talos_cilium_flux_root_plans_without_secrets_in_the_plan() {
    let Some(ws) = root_workspace("talos-cilium-flux", &[]) else {
        return;
    };
    let cluster = TestCluster::start().await;
    let kubeconfig = read(&cluster.kubeconfig_path);
    let github_key = "-----BEGIN OPENSSH PRIVATE KEY-----\nexample-github-key-must-not-leak\n-----END OPENSSH PRIVATE KEY-----\n";
    let gitea_key = "example-gitea-key-must-not-leak";
    let ws = ws
        .env("TF_VAR_kubeconfig", &kubeconfig)
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
    // staging and prod only: a typo in the environment must not bootstrap from a path that does not exist.
    let bad = ws.run(&["plan", "-no-color", "-input=false", "-var=environment=qa"]);
    assert!(!bad.success, "an unknown environment is refused");
    assert!(
        bad.flat().contains("environment is `staging` or `prod`"),
        "{}",
        bad.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn argocd_after_cilium_root_plans() {
    let Some(ws) = root_workspace("argocd-after-cilium", &["argocd.tf"]) else {
        return;
    };
    let cluster = TestCluster::start().await;
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
    // argocd.tf is left out only because hashicorp/helm cannot be installed here: it must still
    // refer to the resource this root declares.
    let argocd = read(&examples().join("argocd-after-cilium/argocd.tf"));
    assert!(
        argocd.contains("depends_on = [talosboot_cilium.this]"),
        "{argocd}"
    );
}

/// The ```hcl blocks of a Markdown page, each dedented by its fence's indentation.
fn hcl_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &mut current {
            None if trimmed == "```hcl" => current = Some((indent, String::new())),
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

#[test]
fn guides_have_registry_front_matter_and_formatted_hcl() {
    let guides = files(&repo_root().join("docs/guides"), ".md");
    assert!(guides.len() >= 7, "{guides:?}");
    let ws = Workspace::new("");
    let dir = ws.path().join("guides");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut count = 0;
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
        let stem = guide
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        for (i, block) in hcl_blocks(&text).iter().enumerate() {
            std::fs::write(dir.join(format!("{stem}-{i}.tf")), block).expect("write block");
            count += 1;
        }
    }
    assert!(count >= 10, "too few HCL blocks in the guides: {count}");
    let out = ws.run(&[
        "fmt",
        "-check",
        "-diff",
        "-no-color",
        &dir.display().to_string(),
    ]);
    assert!(
        out.success,
        "HCL in docs/guides is not valid or not formatted as `tofu fmt` writes it:\n{}",
        out.text()
    );
}
