//! Generated code for the go-plugin services (`proto/grpc_*.proto`, package `plugin`).
//!
//! Only the runtime serves these. The client halves are public (but hidden from the
//! docs) so that integration tests can act as Terraform's go-plugin client.

#[rustfmt::skip]
#[allow(clippy::all, clippy::pedantic, missing_docs, unreachable_pub)]
mod generated {
    tonic::include_proto!("plugin");
}

pub use generated::*;
