//! `terraform-provider-talosboot`: serves the provider to Terraform/OpenTofu.

use std::process::ExitCode;

fn main() -> ExitCode {
    // TODO(lead): switch to talosboot::protocol::routes
    talosboot::plugin::run(|_ctx| tonic::service::Routes::default())
}
