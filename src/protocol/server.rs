//! The tfplugin6 `Provider` service: every RPC hands its decoded request to its handler in
//! `handlers.rs` and wraps the answer. A gRPC `Status` is returned only for a broken protocol
//! invariant; user problems are diagnostics.

use std::sync::Arc;

use tokio_util::task::TaskTracker;
use tonic::{Request, Response, Status};

use super::handlers::{self, EndedEarly};
use super::proto as pb;
use crate::framework::Dispatcher;

pub struct ProviderService {
    dispatcher: Arc<Dispatcher>,
    applies: TaskTracker,
}

impl ProviderService {
    pub fn new(dispatcher: Arc<Dispatcher>) -> Self {
        Self {
            dispatcher,
            applies: TaskTracker::new(),
        }
    }

    /// Applies run as tasks of `applies`, which the plugin waits for at shutdown: see
    /// `apply_resource_change`.
    pub fn with_applies(self, applies: TaskTracker) -> Self {
        Self { applies, ..self }
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
/// alone; the methods under `by_hand` are written out (the streams, and the apply, which runs as a
/// task of its own).
macro_rules! provider_service {
    (answers: $($rpc:ident),* ; may_end_early: $($early:ident),* ; by_hand: { $($by_hand:tt)* }) => {
        from_diagnostics!($($early,)* apply_resource_change);

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
            $($by_hand)*
        }
    };
}

/// A server stream of the given messages, in order.
type Stream<T> = std::pin::Pin<Box<dyn futures::Stream<Item = Result<T, Status>> + Send>>;

fn stream_of<T: Send + 'static>(items: Vec<T>) -> Response<Stream<T>> {
    Response::new(Box::pin(futures::stream::iter(items.into_iter().map(Ok))))
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
        configure_state_store,
        lock_state,
        unlock_state,
        get_states,
        delete_state,
        plan_action,
        validate_action_config,
        stop_provider;
    may_end_early:
        validate_provider_config,
        validate_resource_config,
        validate_data_resource_config,
        upgrade_resource_state,
        configure_provider,
        read_resource,
        plan_resource_change,
        import_resource_state,
        move_resource_state,
        read_data_source,
        generate_resource_config,
        validate_list_resource_config;
    by_hand: {
        // An apply changes a cluster, so it runs to its end even when the CLI is gone. A CLI
        // killed mid-apply leaves the plugin shutting down (it sees its parent gone and cancels
        // the apply), and the apply's failure path then reads and marks what it left (a created
        // release, which the next create resumes instead of refusing as somebody else's). Run
        // inside the server's own task, that path was dropped with the runtime half a second
        // after the server stopped, which a slow API outlasts; as a tracked task the plugin
        // waits for it.
        async fn apply_resource_change(
            &self,
            request: Request<pb::apply_resource_change::Request>,
        ) -> Result<Response<pb::apply_resource_change::Response>, Status> {
            let dispatcher = Arc::clone(&self.dispatcher);
            let request = request.into_inner();
            let applied = self
                .applies
                .spawn(async move { handlers::apply_resource_change(&dispatcher, request).await })
                .await
                .map_err(|e| Status::internal(format!("the apply ended abnormally: {e}")))?;
            Ok(Response::new(applied.unwrap_or_else(FromDiagnostics::from_diagnostics)))
        }

        // The one RPC whose messages are not named after it.
        async fn validate_state_store_config(
            &self,
            request: Request<pb::validate_state_store::Request>,
        ) -> Result<Response<pb::validate_state_store::Response>, Status> {
            let answer =
                handlers::validate_state_store_config(&self.dispatcher, request.into_inner()).await;
            Ok(Response::new(answer))
        }

        type ListResourceStream = Stream<pb::list_resource::Event>;
        async fn list_resource(
            &self,
            request: Request<pb::list_resource::Request>,
        ) -> Result<Response<Self::ListResourceStream>, Status> {
            let events = handlers::list_resource(&self.dispatcher, request.into_inner()).await;
            Ok(stream_of(events))
        }

        type ReadStateBytesStream = Stream<pb::read_state_bytes::Response>;
        async fn read_state_bytes(
            &self,
            request: Request<pb::read_state_bytes::Request>,
        ) -> Result<Response<Self::ReadStateBytesStream>, Status> {
            Ok(stream_of(vec![handlers::read_state_bytes(request.get_ref())]))
        }

        async fn write_state_bytes(
            &self,
            request: Request<tonic::Streaming<pb::write_state_bytes::RequestChunk>>,
        ) -> Result<Response<pb::write_state_bytes::Response>, Status> {
            let mut chunks = request.into_inner();
            let first = chunks.message().await?;
            let type_name = first
                .and_then(|c| c.meta)
                .map(|m| m.type_name)
                .unwrap_or_default();
            Ok(Response::new(handlers::write_state_bytes(&type_name)))
        }

        type InvokeActionStream = Stream<pb::invoke_action::Event>;
        async fn invoke_action(
            &self,
            request: Request<pb::invoke_action::Request>,
        ) -> Result<Response<Self::InvokeActionStream>, Status> {
            Ok(stream_of(vec![handlers::invoke_action(request.get_ref())]))
        }
    }
}
