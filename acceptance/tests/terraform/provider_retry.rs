//! The provider block's `api_retry_timeout`: a refresh against an API that does not answer says
//! (at `WARN`) what it is waiting for and for how long, and reports the error when that budget is
//! spent, instead of a silent 30 s; a `cluster` with its own `api_retry_timeout` retries for that
//! one, not the provider block's.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{Cli, REQUIRED_PROVIDERS, Workspace};

/// A `talosboot_cilium` state (as a refresh reads it), made from a one-resource root's state,
/// for the provider address of `cli`.
fn cilium_state(seed_state: &str, cli: Cli) -> String {
    let mut s: serde_json::Value = serde_json::from_str(seed_state).expect("state json");
    let resource = &mut s["resources"][0];
    resource["type"] = json!("talosboot_cilium");
    resource["name"] = json!("this");
    resource["provider"] = json!(format!("provider[\"{}\"]", cli.provider_address()));
    let instance = &mut resource["instances"][0];
    instance["schema_version"] = json!(0);
    instance["attributes"] = json!({
        "id": "kube-system/cilium", "name": "cilium", "namespace": "kube-system",
        "version": "1.18.4", "status": "deployed", "revision": 1,
    });
    s.to_string()
}

on_both_clis!(a_refresh_against_an_api_that_does_not_answer_says_so_and_stops_at_the_retry_timeout);
fn a_refresh_against_an_api_that_does_not_answer_says_so_and_stops_at_the_retry_timeout() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let ws = Workspace::new(&format!(
        "{REQUIRED_PROVIDERS}\nresource \"null_resource\" \"seed\" {{}}\n"
    ))
    .env("TF_LOG", "WARN");
    ws.init();
    ws.apply();
    ws.write(
        "terraform.tfstate",
        &cilium_state(&ws.state_text(), ws.cli()),
    );
    ws.write(
        "main.tf",
        &format!(
            r#"{REQUIRED_PROVIDERS}
provider "talosboot" {{
  host              = "https://127.0.0.1:{port}"
  token             = "abc"
  api_retry_timeout = "3s"
}}

resource "talosboot_cilium" "this" {{
  version = "1.18.4"
}}
"#
        ),
    );
    let started = Instant::now();
    let plan = ws.run(&["plan", "-no-color", "-input=false"]);
    let elapsed = started.elapsed();
    assert!(!plan.success, "{}", plan.text());
    assert!(
        plan.flat().contains("connection refused"),
        "the cause: {}",
        plan.text()
    );
    assert!(
        plan.stderr.contains("retrying for up to 3s") && plan.stderr.contains("api_retry_timeout"),
        "the wait is logged with its budget:\n{}",
        plan.stderr
    );
    assert!(
        elapsed < Duration::from_secs(20),
        "stops at the retry timeout, not the default 30 s: {elapsed:?}"
    );
}

on_both_clis!(a_clusters_own_retry_timeout_bounds_its_calls_not_the_providers);
/// An apply through a resource's `cluster` with its own `api_retry_timeout` retries for that
/// budget, not for the provider block's (here 60 s): one provider process, one budget per
/// connection.
fn a_clusters_own_retry_timeout_bounds_its_calls_not_the_providers() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
provider "talosboot" {{
  host              = "https://127.0.0.1:{port}"
  token             = "abc"
  api_retry_timeout = "60s"
}}

resource "talosboot_cilium" "elsewhere" {{
  version = "1.18.4"
  cluster = {{
    host              = "https://127.0.0.1:{port}"
    token             = "abc"
    api_retry_timeout = "2s"
  }}
}}
"#
    ))
    .env("TF_LOG", "WARN");
    ws.init();
    let started = Instant::now();
    let apply = ws.run(&["apply", "-auto-approve", "-no-color", "-input=false"]);
    let elapsed = started.elapsed();
    assert!(!apply.success, "{}", apply.text());
    assert!(
        apply.flat().contains("connection refused"),
        "the cause: {}",
        apply.text()
    );
    assert!(
        apply.stderr.contains("retrying for up to 2s")
            && !apply.stderr.contains("retrying for up to 60s"),
        "the wait is logged with the cluster's budget:\n{}",
        apply.stderr
    );
    assert!(
        elapsed < Duration::from_secs(40),
        "stops at the cluster's retry timeout, not the provider's 60 s: {elapsed:?}"
    );
}
