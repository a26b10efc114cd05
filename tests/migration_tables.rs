//! The argument-by-argument tables of the migration guides are checked against the provider's
//! schema, so they cannot rot:
//! - `docs/guides/helm-release-arguments.md`: one row per argument and output of hashicorp/helm's
//!   `helm_release` v3.1.2 ([`HELM_RELEASE_V3`]), with a cell for `talosboot_cilium` and one for
//!   `talosboot_helm_release`; one row per attribute of its provider block ([`HELM_PROVIDER_V3`])
//!   with a cell for the talosboot provider block;
//! - `docs/guides/migrating-flux-operator-bootstrap.md`: one row per input of the
//!   flux-operator-bootstrap module v0.8.0 ([`FLUX_MODULE_INPUTS`]), with a cell for
//!   `talosboot_flux_bootstrap`.
//!
//! Each cell starts with a word: `supported `x`` (x is the row's name and an attribute of the
//! schema), `renamed `x`` (x is an attribute, under another name), `different `x`` (x is an
//! attribute), `new `x`` (x is an attribute, the row has no counterpart: `—`), `refused` (the row's
//! name is not an attribute, so validate rejects it) or `n/a`. Every attribute of the schema
//! (top level for the release resources; every nested path for the provider block and the flux
//! bootstrap) must be named by some cell of its column.

use std::collections::BTreeSet;
use std::path::Path;

use talosboot::framework::{Attribute, AttributeType, Block, Schema};

/// hashicorp/helm v3.1.2 `helm_release`: every attribute of `helm/resource_helm_release.go`.
const HELM_RELEASE_V3: &[&str] = &[
    "atomic",
    "chart",
    "cleanup_on_fail",
    "create_namespace",
    "dependency_update",
    "description",
    "devel",
    "disable_crd_hooks",
    "disable_openapi_validation",
    "disable_webhooks",
    "force_update",
    "id",
    "keyring",
    "lint",
    "manifest",
    "max_history",
    "metadata",
    "name",
    "namespace",
    "pass_credentials",
    "recreate_pods",
    "render_subchart_notes",
    "replace",
    "repository",
    "repository_ca_file",
    "repository_cert_file",
    "repository_key_file",
    "repository_password",
    "repository_username",
    "reset_values",
    "reuse_values",
    "resources",
    "skip_crds",
    "status",
    "take_ownership",
    "timeout",
    "values",
    "verify",
    "version",
    "wait",
    "wait_for_jobs",
    "set",
    "set_wo",
    "set_wo_revision",
    "set_list",
    "set_sensitive",
    "upgrade_install",
    "postrender",
];

/// hashicorp/helm v3.1.2 provider block: every attribute of `helm/provider.go`, the
/// `kubernetes` nested attribute's by path (`exec` as one row).
const HELM_PROVIDER_V3: &[&str] = &[
    "debug",
    "plugins_path",
    "registry_config_path",
    "repository_config_path",
    "repository_cache",
    "helm_driver",
    "burst_limit",
    "registries",
    "experiments",
    "qps",
    "kubernetes.host",
    "kubernetes.username",
    "kubernetes.password",
    "kubernetes.insecure",
    "kubernetes.tls_server_name",
    "kubernetes.client_certificate",
    "kubernetes.client_key",
    "kubernetes.cluster_ca_certificate",
    "kubernetes.config_paths",
    "kubernetes.config_path",
    "kubernetes.config_context",
    "kubernetes.config_context_auth_info",
    "kubernetes.config_context_cluster",
    "kubernetes.token",
    "kubernetes.proxy_url",
    "kubernetes.exec",
];

/// The flux-operator-bootstrap module v0.8.0: every input, by path.
const FLUX_MODULE_INPUTS: &[&str] = &[
    "gitops_resources",
    "gitops_resources.instance_yaml",
    "gitops_resources.prerequisites",
    "gitops_resources.prerequisites.yamls",
    "gitops_resources.prerequisites.charts",
    "gitops_resources.prerequisites.charts.name",
    "gitops_resources.prerequisites.charts.repository",
    "gitops_resources.prerequisites.charts.namespace",
    "gitops_resources.prerequisites.charts.version",
    "gitops_resources.prerequisites.charts.create_namespace",
    "gitops_resources.prerequisites.charts.values_yaml",
    "gitops_resources.prerequisites.charts.flux_adoption_check",
    "gitops_resources.prerequisites.charts.flux_adoption_check.resource",
    "gitops_resources.prerequisites.charts.flux_adoption_check.api_group",
    "gitops_resources.prerequisites.charts.flux_adoption_check.name",
    "gitops_resources.prerequisites.charts.flux_adoption_check.namespace",
    "gitops_resources.operator_chart",
    "gitops_resources.operator_chart.repository",
    "gitops_resources.operator_chart.version",
    "gitops_resources.operator_chart.values_yaml",
    "managed_resources",
    "managed_resources.secrets_yaml",
    "managed_resources.runtime_info",
    "managed_resources.runtime_info.data",
    "managed_resources.runtime_info.labels",
    "managed_resources.runtime_info.annotations",
    "bootstrap_namespace",
    "common_metadata",
    "common_metadata.labels",
    "common_metadata.annotations",
    "job",
    "job.image",
    "job.image.repository",
    "job.image.pull_policy",
    "job.affinity",
    "job.tolerations",
    "job.host_network",
    "job.env",
    "revision",
    "timeout",
    "debug_on_failure",
    // Testing-only inputs of the module (its `variables.tf` says so).
    "debug_fault_injection_message",
    "debug_flux_operator_image_tag",
];

/// Every attribute path of a schema block (`a`, `a.b`, ...), nested attributes and blocks included.
fn paths(block: &Block) -> BTreeSet<String> {
    fn attrs(prefix: &str, list: &[Attribute], out: &mut BTreeSet<String>) {
        for a in list {
            let path = format!("{prefix}{}", a.name);
            if let AttributeType::Nested { attributes, .. } = &a.ty {
                attrs(&format!("{path}."), attributes, out);
            }
            out.insert(path);
        }
    }
    fn walk(prefix: &str, block: &Block, out: &mut BTreeSet<String>) {
        attrs(prefix, &block.attributes, out);
        for b in &block.blocks {
            let path = format!("{prefix}{}", b.type_name);
            walk(&format!("{path}."), &b.block, out);
            out.insert(path);
        }
    }
    let mut out = BTreeSet::new();
    walk("", block, &mut out);
    out
}

fn top_level(block: &Block) -> BTreeSet<String> {
    paths(block)
        .into_iter()
        .filter(|p| !p.contains('.'))
        .collect()
}

/// The rows of the Markdown table whose header row starts with `| {first}`, as cells.
fn table(markdown: &str, first: &str) -> Vec<Vec<String>> {
    let mut lines = markdown.lines();
    let header = format!("| {first} |");
    assert!(
        lines.any(|l| l.starts_with(&header)),
        "no table with the header `{header}`"
    );
    assert!(
        lines.next().is_some_and(|l| l.starts_with("|---")),
        "table `{first}`: no separator row"
    );
    lines
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

/// The row's name: `name` of `` `name` `` or `` `name` (output) ``, or `—`.
fn row_name(cell: &str) -> String {
    cell.trim_end_matches("(output)")
        .trim()
        .trim_matches('`')
        .to_owned()
}

/// Checks one talosboot column: every cell against `schema`, and that every path of `required`
/// is named by some cell. `flat` maps a row name to the name talosboot would use for it (the
/// provider block's `kubernetes.host` is `host`). Returns the problems found.
fn check_column(
    what: &str,
    rows: &[Vec<String>],
    column: usize,
    schema: &BTreeSet<String>,
    required: &BTreeSet<String>,
    flat: fn(&str) -> String,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut named = BTreeSet::new();
    for row in rows {
        let name = row_name(&row[0]);
        let Some(cell) = row.get(column) else {
            problems.push(format!("{what}: row `{name}` has no cell for this column"));
            continue;
        };
        let (word, rest) = cell.split_once(' ').unwrap_or((cell.as_str(), ""));
        let attribute = rest
            .trim()
            .strip_prefix('`')
            .and_then(|r| r.split_once('`'))
            .map(|(a, _)| a.to_owned());
        match (word, attribute) {
            ("supported" | "renamed" | "different" | "new", Some(a)) => {
                if !schema.contains(&a) {
                    problems.push(format!(
                        "{what}: row `{name}` names `{a}`, which is not an attribute"
                    ));
                }
                match word {
                    "supported" if a != name => problems.push(format!(
                        "{what}: row `{name}` says supported `{a}`: a different name is `renamed` or `different`"
                    )),
                    "renamed" if a == name => problems.push(format!(
                        "{what}: row `{name}` says renamed to the same name"
                    )),
                    "new" if name != "—" => problems.push(format!(
                        "{what}: row `{name}` has a counterpart, so `{a}` is not `new`"
                    )),
                    _ => {}
                }
                if word != "new" && name == "—" {
                    problems.push(format!(
                        "{what}: `{a}` has no counterpart: it is `new`, not `{word}`"
                    ));
                }
                named.insert(a);
            }
            ("refused", None) => {
                if schema.contains(&flat(&name)) {
                    problems.push(format!(
                        "{what}: row `{name}` says refused, but `{}` is an attribute",
                        flat(&name)
                    ));
                }
            }
            ("n/a", None) => {}
            _ => problems.push(format!(
                "{what}: row `{name}`: the cell must start with supported/renamed/different/new `attribute`, refused or n/a: {cell:?}"
            )),
        }
    }
    for missing in required.difference(&named) {
        problems.push(format!(
            "{what}: the schema attribute `{missing}` is named by no row: add it to the table"
        ));
    }
    problems
}

/// Checks that the rows are exactly `expected` (plus `—` rows), once each.
fn check_rows(what: &str, rows: &[Vec<String>], expected: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    let names: Vec<String> = rows
        .iter()
        .map(|r| row_name(&r[0]))
        .filter(|n| n != "—")
        .collect();
    for e in expected {
        match names.iter().filter(|n| n == e).count() {
            1 => {}
            0 => problems.push(format!("{what}: no row for `{e}`")),
            n => problems.push(format!("{what}: {n} rows for `{e}`")),
        }
    }
    for n in &names {
        if !expected.contains(&n.as_str()) {
            problems.push(format!(
                "{what}: row `{n}` is not in the list this test knows: a typo, or update the list"
            ));
        }
    }
    problems
}

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn resource(name: &str) -> Schema {
    let dispatcher = talosboot::provider::dispatcher(Default::default(), false);
    dispatcher
        .resource_schemas()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| s.clone())
        .unwrap_or_else(|| panic!("the provider has no {name}"))
}

fn same(name: &str) -> String {
    name.to_owned()
}

fn last_segment(name: &str) -> String {
    name.rsplit('.').next().unwrap_or(name).to_owned()
}

fn report(problems: Vec<String>) {
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn helm_release_table_is_complete_and_true_to_the_schema() {
    let guide = read("docs/guides/helm-release-arguments.md");
    let rows = table(&guide, "`helm_release` (v3.1.2)");
    let mut problems = check_rows("helm_release table", &rows, HELM_RELEASE_V3);
    for (column, name) in [(1, "talosboot_cilium"), (2, "talosboot_helm_release")] {
        let schema = resource(name);
        let all = paths(&schema.block.clone());
        problems.extend(check_column(
            &format!("helm_release table, {name}"),
            &rows,
            column,
            &all,
            &top_level(&schema.block),
            same,
        ));
    }
    report(problems);
}

#[test]
fn helm_provider_table_is_complete_and_true_to_the_schema() {
    let guide = read("docs/guides/helm-release-arguments.md");
    let rows = table(&guide, "`helm` provider (v3.1.2)");
    let mut problems = check_rows("provider table", &rows, HELM_PROVIDER_V3);
    let dispatcher = talosboot::provider::dispatcher(Default::default(), false);
    let schema = paths(&dispatcher.provider_schema().block);
    problems.extend(check_column(
        "provider table, talosboot",
        &rows,
        1,
        &schema,
        &schema,
        last_segment,
    ));
    report(problems);
}

#[test]
fn flux_module_table_is_complete_and_true_to_the_schema() {
    let guide = read("docs/guides/migrating-flux-operator-bootstrap.md");
    let rows = table(&guide, "module input (v0.8.0)");
    let mut problems = check_rows("module table", &rows, FLUX_MODULE_INPUTS);
    let schema = paths(&resource("talosboot_flux_bootstrap").block);
    problems.extend(check_column(
        "module table, talosboot_flux_bootstrap",
        &rows,
        1,
        &schema,
        &schema,
        same,
    ));
    report(problems);
}

/// The stand-in that validates the examples (`tests/stub-provider`) serves the same hashicorp/helm
/// v3.1.2 attributes this test lists: the two transcriptions cannot drift apart.
#[test]
fn the_helm_stand_in_serves_the_listed_attributes() {
    let schema: serde_json::Value = serde_json::from_str(&read(
        "tests/stub-provider/schemas/hashicorp-helm-3.1.2.json",
    ))
    .expect("schema JSON");
    let keys = |v: &serde_json::Value| -> BTreeSet<String> {
        v.as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    };
    let release = keys(&schema["resource_schemas"]["helm_release"]["block"]["attributes"]);
    let listed: BTreeSet<String> = HELM_RELEASE_V3.iter().map(|s| s.to_string()).collect();
    assert_eq!(release, listed, "helm_release attributes of the stand-in");
    let provider = &schema["provider"]["block"]["attributes"];
    let mut served: BTreeSet<String> = keys(provider)
        .into_iter()
        .filter(|k| k != "kubernetes")
        .collect();
    served.extend(
        keys(&provider["kubernetes"]["nested_type"]["attributes"])
            .into_iter()
            .map(|k| format!("kubernetes.{k}")),
    );
    let listed: BTreeSet<String> = HELM_PROVIDER_V3.iter().map(|s| s.to_string()).collect();
    assert_eq!(served, listed, "provider-block attributes of the stand-in");
}
