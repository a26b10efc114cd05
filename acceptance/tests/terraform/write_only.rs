//! Write-only attributes (protocol 6.8, OpenTofu 1.11+ / Terraform 1.11+), end to end with
//! `talosboot_test_object.secret`: the value reaches the provider at apply and appears in no state
//! file, saved plan or trace log; a client without write-only support is refused with a message
//! naming the versions that have it.

use std::process::Command;

use crate::harness::{Cli, REQUIRED_PROVIDERS, Workspace};

/// SHA-256 of `text` in hex, as the test object stores it (coreutils; the acceptance crate has
/// no hash dependency of its own).
fn sha256_hex(text: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", "printf %s \"$1\" | sha256sum", "sh", text])
        .output()
        .expect("run sha256sum");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// Every file inside a saved plan (a zip), concatenated: python3 is already required by the
/// install script, and the acceptance crate has no zip dependency.
pub(crate) fn plan_file_contents(ws: &Workspace, name: &str) -> String {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nsys.stdout.buffer.write(b''.join(z.read(n) for n in z.namelist()))",
        ])
        .arg(ws.path().join(name))
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

on_both_clis!(write_only_value_reaches_apply_and_nothing_else);
fn write_only_value_reaches_apply_and_nothing_else() {
    let secret = format!("wo-{:x}-must-not-leak", std::process::id());
    // The usual way to feed a write-only attribute: an ephemeral variable, which is itself never
    // stored in a plan or state.
    let mut ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
provider "talosboot" {{}}

variable "secret" {{
  type      = string
  sensitive = true
  ephemeral = true
}}

resource "talosboot_test_object" "this" {{
  name   = "wo"
  value  = "visible"
  secret = var.secret
}}

output "secret_sha256" {{ value = talosboot_test_object.this.secret_sha256 }}
"#
    ))
    .with_test_resources()
    .env("TF_VAR_secret", &secret);
    ws.init();
    ws.set_env("TF_LOG", "trace");
    let plan = ws.ok(&["plan", "-no-color", "-input=false", "-out=tfplan"]);
    let apply = ws.ok(&["apply", "-no-color", "-input=false", "tfplan"]);
    ws.set_env("TF_LOG", "off");

    // The provider hashes `secret` from the configuration it receives at apply; a mismatch with
    // the planned hash would fail the apply ("inconsistent result"), so this proves it arrived.
    assert_eq!(
        ws.outputs()["secret_sha256"]["value"],
        sha256_hex(&secret),
        "{}",
        apply.text()
    );
    let state = ws.state_text();
    let state_json: serde_json::Value = serde_json::from_str(&state).expect("state JSON");
    assert_eq!(
        state_json["resources"][0]["instances"][0]["attributes"]["secret"],
        serde_json::Value::Null
    );
    assert!(
        !state.contains(&secret),
        "the secret reached the state file"
    );
    let shown = ws.ok(&["show", "-json", "tfplan"]).stdout;
    assert!(shown.contains("\"secret_sha256\""), "{shown}");
    assert!(
        !shown.contains(&secret),
        "the secret reached the saved plan"
    );
    assert!(
        !plan_file_contents(&ws, "tfplan").contains(&secret),
        "the secret reached the plan file"
    );
    assert!(
        plan.stderr.contains("[TRACE]") && apply.stderr.contains("[TRACE]"),
        "TF_LOG=trace should log"
    );
    for (what, out) in [("plan", &plan), ("apply", &apply)] {
        assert!(
            !out.text().contains(&secret),
            "the secret reached the {what} output or trace log"
        );
    }

    // The next plan with the same value is empty (the value is not stored, only its hash).
    assert!(!ws.plan_has_changes());
}

/// Terraform 1.0.3, the protocol floor, predates write-only attributes: the value is refused,
/// never stored.
#[test]
fn write_only_value_is_refused_on_terraform_1_0_3() {
    let ws = Workspace::with_cli(
        Cli::Terraform1_0_3,
        &format!(
            r#"{REQUIRED_PROVIDERS}
provider "talosboot" {{}}

resource "talosboot_test_object" "this" {{
  name   = "wo"
  secret = "would-be-stored-in-state"
}}
"#
        ),
    )
    .with_test_resources();
    ws.init();
    let plan = ws.run(&["plan", "-no-color", "-input=false"]);
    assert!(!plan.success, "{}", plan.text());
    let text = plan.flat();
    assert!(
        text.contains("Write-only attribute needs OpenTofu/Terraform 1.11+"),
        "{text}"
    );
    assert!(
        text.contains("needs OpenTofu 1.11+ or Terraform 1.11+"),
        "{text}"
    );
    assert!(
        text.contains(r#"secret = "would-be-stored-in-state""#),
        "{text}"
    );
    assert!(ws.state_text().is_empty(), "nothing may be stored");
}
