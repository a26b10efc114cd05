//! `terraform-provider-talosboot`: serves the provider to Terraform/OpenTofu.

use std::process::ExitCode;

fn main() -> ExitCode {
    talosboot::plugin::run(talosboot::provider::routes)
}
