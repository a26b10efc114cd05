//! Generates the gRPC code for the Terraform plugin protocol (`tfplugin6`) and the
//! go-plugin services (`plugin`) from `proto/`, with `protox` (pure Rust, no system
//! `protoc`) and `tonic-prost-build`. Server and client code are both generated: the
//! binary serves, the tests act as Terraform.
//!
//! It also places the functions that run from process start to the handshake together in the
//! binary (`src/plugin/startup.ld`, see [`startup_layout`]).

use std::error::Error;

const PROTOS: &[&str] = &[
    "proto/tfplugin6.proto",
    "proto/grpc_controller.proto",
    "proto/grpc_stdio.proto",
    "proto/grpc_broker.proto",
];

fn main() -> Result<(), Box<dyn Error>> {
    startup_layout();
    println!("cargo:rerun-if-changed=proto");
    let descriptors = protox::compile(PROTOS, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .emit_rerun_if_changed(false)
        .compile_fds(descriptors)?;
    Ok(())
}

/// Release builds for x86_64 Linux link with `src/plugin/startup.ld`, which gathers the ~800
/// functions that run before the handshake (about 400 KiB of code) into one output section.
/// Without it they are spread over the 16 MiB of `.text`, and since the kernel maps a whole
/// page-cache folio (64 KiB or more) per page fault, startup mapped about 5 MiB of code
/// (benches/README.md). The script only orders sections (`INSERT BEFORE .text` keeps the
/// linker's default layout); a function it no longer names is simply placed as before. Skipped
/// when a linker is configured for the target (cargo-zigbuild's, for the releases), whose
/// support for linker scripts is not tested here.
fn startup_layout() {
    const SCRIPT: &str = "src/plugin/startup.ld";
    println!("cargo:rerun-if-changed={SCRIPT}");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let target = var("TARGET");
    let linker_var = format!(
        "CARGO_TARGET_{}_LINKER",
        target.to_uppercase().replace(['-', '.'], "_")
    );
    println!("cargo:rerun-if-env-changed={linker_var}");
    if target != "x86_64-unknown-linux-gnu"
        || var("PROFILE") != "release"
        || std::env::var_os(linker_var).is_some()
    {
        return;
    }
    let script = std::path::Path::new(&var("CARGO_MANIFEST_DIR")).join(SCRIPT);
    println!(
        "cargo:rustc-link-arg-bin=terraform-provider-talosboot=-Wl,-T,{}",
        script.display()
    );
}
