//! A tiny plain-HTTP Kubernetes API stand-in for the cluster layer's unit tests: each request gets
//! the reply a handler picks, optionally after a quiet period once the headers are sent (how a watch
//! with no events looks on the wire). One request per connection (`Connection: close`).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::{ClusterHandle, ConfigSource, ProviderConfig};

pub(crate) struct Reply {
    pub status: u16,
    pub body: String,
    /// How long the server stays silent between the response headers and the body.
    pub quiet: Duration,
}

impl Reply {
    pub fn json(status: u16, body: serde_json::Value) -> Self {
        Self {
            status,
            body: body.to_string(),
            quiet: Duration::ZERO,
        }
    }

    pub fn not_found(name: &str) -> Self {
        Self::json(
            404,
            serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("secrets \"{name}\" not found"), "reason": "NotFound", "code": 404
            }),
        )
    }
}

/// Serves until the test's runtime ends; returns the base URL (`http://127.0.0.1:PORT`).
pub(crate) async fn serve(handler: impl Fn(&str, &str) -> Reply + Send + Sync + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let handler = Arc::new(handler);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let handler = handler.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let mut request_line = head.lines().next().unwrap_or_default().split(' ');
                let method = request_line.next().unwrap_or_default().to_owned();
                let target = request_line.next().unwrap_or_default().to_owned();
                let reply = handler(&method, &target);
                let headers = format!(
                    "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
                    reply.status
                );
                if socket.write_all(headers.as_bytes()).await.is_err() {
                    return;
                }
                let _ = socket.flush().await;
                tokio::time::sleep(reply.quiet).await;
                let chunk = format!("{:x}\r\n{}\r\n0\r\n\r\n", reply.body.len(), reply.body);
                let _ = socket.write_all(chunk.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    url
}

/// A handle configured for `url` with no credentials.
pub(crate) fn handle(url: &str, read_timeout: Duration) -> ClusterHandle {
    ClusterHandle::with_read_timeout(
        ProviderConfig::Known(ConfigSource::Direct {
            host: url.to_owned(),
            ca_pem: None,
            client_cert_pem: None,
            client_key_pem: None,
            token: None,
        }),
        read_timeout,
    )
}
