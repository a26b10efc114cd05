//! `import` blocks (OpenTofu 1.6+ / Terraform 1.5+), with and without `-generate-config-out`,
//! and `removed { lifecycle { destroy = false } }` (OpenTofu 1.7+ / Terraform 1.7+), with
//! `talosboot_test_object`. (`talosboot_cilium` gets the same tests, and `moved` from
//! `helm_release`, when that resource exists.)

use crate::harness::{Cli, REQUIRED_PROVIDERS, Workspace};

on_both_clis!(import_block_adopts_an_object_and_the_next_plan_is_empty);
fn import_block_adopts_an_object_and_the_next_plan_is_empty() {
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
provider "talosboot" {{}}

import {{
  to = talosboot_test_object.adopted
  id = "adopted"
}}

resource "talosboot_test_object" "adopted" {{
  name = "adopted"
}}
"#
    ))
    .with_test_resources();
    ws.init();
    let plan = ws.ok(&["plan", "-no-color", "-input=false"]);
    assert!(
        plan.stdout
            .contains("1 to import, 0 to add, 0 to change, 0 to destroy"),
        "{}",
        plan.text()
    );
    let apply = ws.apply();
    assert!(
        apply
            .stdout
            .contains("1 imported, 0 added, 0 changed, 0 destroyed"),
        "{}",
        apply.text()
    );
    assert!(ws.state_text().contains("\"adopted\""));
    assert!(!ws.plan_has_changes(), "the import block is now a no-op");
}

on_both_clis!(generated_config_for_an_import_plans_no_change);
fn generated_config_for_an_import_plans_no_change() {
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
provider "talosboot" {{}}

import {{
  to = talosboot_test_object.generated
  id = "generated"
}}
"#
    ))
    .with_test_resources();
    ws.init();
    let plan = ws.ok(&[
        "plan",
        "-no-color",
        "-input=false",
        "-generate-config-out=generated.tf",
    ]);
    let generated = ws.read("generated.tf");
    let flat = generated.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(r#"resource "talosboot_test_object" "generated""#)
            && flat.contains(r#"name = "generated""#),
        "{generated}\n{}",
        plan.text()
    );
    // Both CLIs generate a write-only attribute as null; the comment differs by design: OpenTofu
    // says "sensitive write-only", Terraform 1.16 "sensitive".
    let comment = match ws.cli() {
        Cli::OpenTofu => "# sensitive write-only value",
        _ => "# sensitive value",
    };
    assert!(
        flat.contains(&format!("secret = null {comment} = null")),
        "write-only attributes are generated as null:\n{generated}"
    );
    assert!(
        !generated.contains("secret_sha256") && !generated.contains("revision"),
        "computed attributes are not configuration:\n{generated}"
    );
    let plan = ws.ok(&["plan", "-no-color", "-input=false"]);
    assert!(
        plan.stdout
            .contains("1 to import, 0 to add, 0 to change, 0 to destroy"),
        "{}",
        plan.text()
    );
    ws.apply();
    assert!(!ws.plan_has_changes());
}

on_both_clis!(removed_block_forgets_without_destroying);
fn removed_block_forgets_without_destroying() {
    // `fail-destroy` makes a destroy fail: the removal must not call it.
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
provider "talosboot" {{}}

resource "talosboot_test_object" "kept" {{
  name  = "kept"
  value = "fail-destroy"
}}
"#
    ))
    .with_test_resources();
    ws.init();
    ws.apply();

    ws.write(
        "main.tf",
        &format!("{REQUIRED_PROVIDERS}\nprovider \"talosboot\" {{}}\n"),
    );
    let plan = ws.ok(&["plan", "-no-color", "-input=false"]);
    assert!(plan.stdout.contains("1 to destroy"), "{}", plan.text());

    ws.write(
        "main.tf",
        &format!(
            r#"{REQUIRED_PROVIDERS}
provider "talosboot" {{}}

removed {{
  from = talosboot_test_object.kept
  lifecycle {{
    destroy = false
  }}
}}
"#
        ),
    );
    let apply = ws.apply();
    assert!(
        apply.stdout.contains("0 destroyed") && !apply.text().contains("Destroy failed"),
        "{}",
        apply.text()
    );
    let state: serde_json::Value = serde_json::from_str(&ws.state_text()).expect("state JSON");
    assert_eq!(
        state["resources"].as_array().map(Vec::len),
        Some(0),
        "{state}"
    );
}
