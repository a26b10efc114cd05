//! The go-plugin side services every plugin serves next to its own:
//! `plugin.GRPCController` (shutdown), `plugin.GRPCStdio` (stdio forwarding, unused),
//! `plugin.GRPCBroker` (extra connections, unused) and gRPC health (`plugin`).
//!
//! The two streaming services hold their streams open until the client closes them
//! or the runtime shuts down, so a graceful shutdown never waits on them.

use std::pin::Pin;

use futures::{Stream, StreamExt as _};
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;
use tonic::{Request, Response, Status, Streaming};
use tonic_health::ServingStatus;

use super::proto::{
    ConnInfo, Empty, StdioData, grpc_broker_server, grpc_controller_server, grpc_stdio_server,
};

/// Health service name go-plugin's client checks.
pub(crate) const HEALTH_SERVICE: &str = "plugin";

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// Adds the controller, stdio, broker and health services to `routes`.
pub(crate) async fn add_to(routes: Routes, shutdown: &CancellationToken) -> Routes {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status(HEALTH_SERVICE, ServingStatus::Serving)
        .await;
    routes
        .add_service(health)
        .add_service(grpc_controller_server::GrpcControllerServer::new(
            Controller {
                shutdown: shutdown.clone(),
            },
        ))
        .add_service(grpc_stdio_server::GrpcStdioServer::new(Stdio {
            shutdown: shutdown.clone(),
        }))
        .add_service(grpc_broker_server::GrpcBrokerServer::new(Broker {
            shutdown: shutdown.clone(),
        }))
}

/// Cancels the shutdown token when Terraform is done with the plugin.
#[derive(Debug, Clone)]
pub(crate) struct Controller {
    shutdown: CancellationToken,
}

#[tonic::async_trait]
impl grpc_controller_server::GrpcController for Controller {
    async fn shutdown(&self, _request: Request<Empty>) -> Result<Response<Empty>, Status> {
        tracing::info!("shutdown requested by the client");
        self.shutdown.cancel();
        Ok(Response::new(Empty {}))
    }
}

/// Never forwards anything: our stdout is the handshake and our stderr goes to the
/// client's log directly. The stream ends when the runtime shuts down.
#[derive(Debug, Clone)]
pub(crate) struct Stdio {
    shutdown: CancellationToken,
}

#[tonic::async_trait]
impl grpc_stdio_server::GrpcStdio for Stdio {
    type StreamStdioStream = BoxStream<StdioData>;

    async fn stream_stdio(
        &self,
        _request: Request<()>,
    ) -> Result<Response<Self::StreamStdioStream>, Status> {
        tracing::debug!("stdio stream opened (nothing is forwarded)");
        let done = self.shutdown.clone().cancelled_owned();
        let stream = futures::stream::once(done).filter_map(|()| async { None });
        Ok(Response::new(Box::pin(stream)))
    }
}

/// Accepts the broker stream and drains it; talosboot brokers no connections.
#[derive(Debug, Clone)]
pub(crate) struct Broker {
    shutdown: CancellationToken,
}

#[tonic::async_trait]
impl grpc_broker_server::GrpcBroker for Broker {
    type StartStreamStream = BoxStream<ConnInfo>;

    async fn start_stream(
        &self,
        request: Request<Streaming<ConnInfo>>,
    ) -> Result<Response<Self::StartStreamStream>, Status> {
        tracing::debug!("broker stream opened (no connections are brokered)");
        let mut inbound = request.into_inner();
        let shutdown = self.shutdown.clone();
        // Driven by polling the response stream: ends when the client closes its
        // side or the runtime shuts down.
        let drain = async move {
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = async {
                    while let Ok(Some(info)) = inbound.message().await {
                        tracing::debug!(service_id = info.service_id, "ignoring broker message");
                    }
                } => {}
            }
        };
        let stream = futures::stream::once(drain).filter_map(|()| async { None });
        Ok(Response::new(Box::pin(stream)))
    }
}
