//! The protocol layer: generated tfplugin6 code, edge conversions, and the thin service that
//! decodes, delegates to the framework dispatcher and encodes.

mod convert;
mod functions;
pub mod proto;
mod server;

use std::sync::Arc;

pub use server::ProviderService;

use crate::plugin::{MAX_MESSAGE_SIZE, ServeContext};

/// The provider's gRPC routes, as the plugin runtime serves them.
pub fn routes(ctx: &ServeContext) -> tonic::service::Routes {
    let test_resources = std::env::var(crate::provider::TEST_RESOURCES_ENV).as_deref() == Ok("1");
    let dispatcher = Arc::new(crate::provider::dispatcher(
        ctx.shutdown.clone(),
        test_resources,
    ));
    let service = proto::provider_server::ProviderServer::new(ProviderService::new(dispatcher))
        .max_decoding_message_size(MAX_MESSAGE_SIZE)
        .max_encoding_message_size(MAX_MESSAGE_SIZE);
    tonic::service::Routes::new(service)
}
