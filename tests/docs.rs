//! The registry docs in `docs/` are rendered from the schema descriptions; this test fails when they
//! drift. Regenerate with `TALOSBOOT_UPDATE_DOCS=1 cargo test --test docs`.

use std::path::Path;

use talosboot::docs::{provider_page, type_page};

const GUIDE: &str = "The talosboot provider takes a fresh Talos cluster from \"API up, no CNI\" to Cilium and Flux running and owned by GitOps, from a plain `tofu apply`. It connects lazily: `plan` works before the cluster is reachable, with provider settings that are still unknown.";

fn check(path: &Path, expected: &str, stale: &mut Vec<String>) {
    if std::env::var("TALOSBOOT_UPDATE_DOCS").as_deref() == Ok("1") {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, expected).expect("write docs");
        return;
    }
    let actual = std::fs::read_to_string(path).unwrap_or_default();
    if actual != expected {
        stale.push(path.display().to_string());
    }
}

#[test]
fn registry_docs_match_the_schema() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read =
        |p: &str| std::fs::read_to_string(root.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
    let dispatcher = talosboot::provider::dispatcher(Default::default(), false);
    let mut stale = Vec::new();
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
        check(
            &root.join(format!("docs/data-sources/{short}.md")),
            &type_page("Data Source", name, schema, &example, None),
            &mut stale,
        );
    }
    for (name, schema) in dispatcher.resource_schemas() {
        let short = name.trim_start_matches("talosboot_");
        let example = read(&format!("examples/resources/{name}/resource.tf"));
        let import =
            std::fs::read_to_string(root.join(format!("examples/resources/{name}/import.sh"))).ok();
        check(
            &root.join(format!("docs/resources/{short}.md")),
            &type_page("Resource", name, schema, &example, import.as_deref()),
            &mut stale,
        );
    }
    assert!(
        stale.is_empty(),
        "docs out of date with the schema: {stale:?}; run `TALOSBOOT_UPDATE_DOCS=1 cargo test --test docs`"
    );
}
