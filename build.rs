//! Generates the gRPC code for the Terraform plugin protocol (`tfplugin6`) and the
//! go-plugin services (`plugin`) from `proto/`, with `protox` (pure Rust, no system
//! `protoc`) and `tonic-prost-build`. Server and client code are both generated: the
//! binary serves, the tests act as Terraform.

use std::error::Error;

const PROTOS: &[&str] = &[
    "proto/tfplugin6.proto",
    "proto/grpc_controller.proto",
    "proto/grpc_stdio.proto",
    "proto/grpc_broker.proto",
];

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo:rerun-if-changed=proto");
    let descriptors = protox::compile(PROTOS, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .emit_rerun_if_changed(false)
        .compile_fds(descriptors)?;
    Ok(())
}
