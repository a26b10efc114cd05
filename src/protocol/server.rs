//! The tfplugin6 `Provider` service: every RPC hands its decoded request to its handler in
//! `handlers.rs` and wraps the answer. A gRPC `Status` is returned only for a broken protocol
//! invariant; user problems are diagnostics.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::handlers::{self, EndedEarly};
use super::proto as pb;
use crate::framework::Dispatcher;

pub struct ProviderService {
    dispatcher: Arc<Dispatcher>,
}

impl ProviderService {
    pub fn new(dispatcher: Arc<Dispatcher>) -> Self {
        Self { dispatcher }
    }
}

/// A response made of only the diagnostics that ended its RPC early.
trait FromDiagnostics {
    fn from_diagnostics(diagnostics: EndedEarly) -> Self;
}

macro_rules! from_diagnostics {
    ($($rpc:ident),* $(,)?) => {$(
        impl FromDiagnostics for pb::$rpc::Response {
            #[allow(clippy::needless_update)] // some responses carry only diagnostics
            fn from_diagnostics(diagnostics: EndedEarly) -> Self {
                Self { diagnostics, ..Default::default() }
            }
        }
    )*};
}

/// The `Provider` trait, one method per RPC, each named as its `pb` module and its handler: the
/// handlers under `answers` always answer, those under `may_end_early` may end with diagnostics
/// alone.
macro_rules! provider_service {
    (answers: $($rpc:ident),* ; may_end_early: $($early:ident),* $(,)?) => {
        from_diagnostics!($($early),*);

        #[tonic::async_trait]
        impl pb::provider_server::Provider for ProviderService {
            $(
                async fn $rpc(
                    &self,
                    request: Request<pb::$rpc::Request>,
                ) -> Result<Response<pb::$rpc::Response>, Status> {
                    let answer = handlers::$rpc(&self.dispatcher, request.into_inner()).await;
                    Ok(Response::new(answer))
                }
            )*
            $(
                async fn $early(
                    &self,
                    request: Request<pb::$early::Request>,
                ) -> Result<Response<pb::$early::Response>, Status> {
                    let answer = handlers::$early(&self.dispatcher, request.into_inner()).await;
                    Ok(Response::new(answer.unwrap_or_else(FromDiagnostics::from_diagnostics)))
                }
            )*
        }
    };
}

provider_service! {
    answers:
        get_metadata,
        get_provider_schema,
        get_resource_identity_schemas,
        upgrade_resource_identity,
        validate_ephemeral_resource_config,
        open_ephemeral_resource,
        renew_ephemeral_resource,
        close_ephemeral_resource,
        get_functions,
        call_function,
        stop_provider;
    may_end_early:
        validate_provider_config,
        validate_resource_config,
        validate_data_resource_config,
        upgrade_resource_state,
        configure_provider,
        read_resource,
        plan_resource_change,
        apply_resource_change,
        import_resource_state,
        move_resource_state,
        read_data_source,
}
