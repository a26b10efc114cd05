//! The protocol layer: generated tfplugin6 code, edge conversions, and the thin service that
//! decodes, delegates to the framework dispatcher and encodes.

mod convert;
mod functions;
mod handlers;
pub mod proto;
mod server;

use std::sync::Arc;

pub use server::ProviderService;
use tokio_util::task::TaskTracker;

use crate::framework::Dispatcher;

/// The tfplugin6 `Provider` gRPC service over `dispatcher`, accepting and sending messages of up to
/// `max_message_size` bytes (Terraform allows 256 MiB); its applies run as tasks of `applies`.
pub fn server(
    dispatcher: Arc<Dispatcher>,
    applies: TaskTracker,
    max_message_size: usize,
) -> proto::provider_server::ProviderServer<ProviderService> {
    proto::provider_server::ProviderServer::new(
        ProviderService::new(dispatcher).with_applies(applies),
    )
    .max_decoding_message_size(max_message_size)
    .max_encoding_message_size(max_message_size)
}
