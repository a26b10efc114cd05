//! One managed resource through create, update (in place and by replacement) and destroy, on
//! both CLIs: `talosboot_test_object` (`TALOSBOOT_ENABLE_TEST_RESOURCES=1`) has no remote side,
//! so this pins the protocol, not a cluster.

use crate::harness::{REQUIRED_PROVIDERS, Workspace};

fn config(name: &str, value: &str) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
provider "talosboot" {{}}

resource "talosboot_test_object" "this" {{
  name  = "{name}"
  value = "{value}"
}}

output "revision" {{ value = talosboot_test_object.this.revision }}
output "id"       {{ value = talosboot_test_object.this.id }}
"#
    )
}

fn state_attributes(ws: &Workspace) -> serde_json::Value {
    let state: serde_json::Value = serde_json::from_str(&ws.state_text()).expect("state JSON");
    let resource = state["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["type"] == "talosboot_test_object"))
        .cloned()
        .unwrap_or_default();
    resource["instances"][0]["attributes"].clone()
}

on_both_clis!(create_update_replace_destroy, floor);
fn create_update_replace_destroy() {
    let ws = Workspace::new(&config("first", "a")).with_test_resources();
    ws.init();
    let create = ws.apply();
    assert!(
        create.stdout.contains("1 added, 0 changed, 0 destroyed"),
        "{}",
        create.text()
    );
    let outputs = ws.outputs();
    assert_eq!(outputs["revision"]["value"], 1);
    assert_eq!(outputs["id"]["value"], "first");
    assert_eq!(state_attributes(&ws)["value"], "a");
    let state: serde_json::Value = serde_json::from_str(&ws.state_text()).expect("state JSON");
    assert_eq!(
        state["resources"][0]["provider"],
        format!("provider[\"{}\"]", ws.cli().provider_address())
    );
    assert!(!ws.plan_has_changes(), "a fresh apply plans empty");

    ws.write("main.tf", &config("first", "b"));
    let update = ws.apply();
    assert!(
        update.stdout.contains("0 added, 1 changed, 0 destroyed"),
        "{}",
        update.text()
    );
    assert_eq!(ws.outputs()["revision"]["value"], 2);

    ws.write("main.tf", &config("second", "b"));
    let replace = ws.apply();
    assert!(
        replace.stdout.contains("must be replaced")
            && replace.stdout.contains("1 added, 0 changed, 1 destroyed"),
        "{}",
        replace.text()
    );
    assert_eq!(ws.outputs()["id"]["value"], "second");

    let destroy = ws.ok(&["destroy", "-auto-approve", "-no-color", "-input=false"]);
    assert!(destroy.stdout.contains("1 destroyed"), "{}", destroy.text());
    assert_eq!(state_attributes(&ws), serde_json::Value::Null);
}
