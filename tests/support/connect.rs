//! tonic channels to a running provider: over mTLS (as Terraform connects) or
//! plaintext (debug / reattach mode).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tonic::transport::{Channel, Endpoint, Uri};

fn endpoint(addr: SocketAddr) -> anyhow::Result<Endpoint> {
    Ok(Endpoint::from_shared(format!("http://{addr}"))?
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(60)))
}

/// Connects over TLS with `config`, verifying the server as `localhost` (the name
/// go-plugin's client uses). Fails if the TLS or HTTP/2 handshake fails.
pub async fn connect_tls(addr: SocketAddr, config: Arc<ClientConfig>) -> anyhow::Result<Channel> {
    let connector = TlsConnector::from(config);
    let service = tower::service_fn(move |_: Uri| {
        let connector = connector.clone();
        async move {
            let tcp = TcpStream::connect(addr).await?;
            tcp.set_nodelay(true)?;
            let tls = connector
                .connect(ServerName::try_from("localhost").expect("static name"), tcp)
                .await?;
            Ok::<_, std::io::Error>(TokioIo::new(tls))
        }
    });
    endpoint(addr)?
        .connect_with_connector(service)
        .await
        .with_context(|| format!("connect over TLS to {addr}"))
}

/// Connects without TLS.
pub async fn connect_plaintext(addr: SocketAddr) -> anyhow::Result<Channel> {
    endpoint(addr)?
        .connect()
        .await
        .with_context(|| format!("connect (plaintext) to {addr}"))
}
