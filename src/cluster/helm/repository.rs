//! The versions a classic chart repository lists (`<url>/index.yaml`, Helm's repository format),
//! read by the provider at plan for advice only (Cilium's newest patch of a minor): never a reason
//! for a plan to fail. OCI registries and anything unreadable answer [`RepositoryError`], which
//! callers turn into silence. With `TALOSBOOT_OFFLINE` set (to anything but `0`), on runners that
//! must not reach a chart repository, the provider does not try ([`OFFLINE_ENV`]).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;

use super::chart_version::ChartVersion;

/// The largest index read (helm.cilium.io's is a few MB).
const MAX_INDEX_BYTES: usize = 32 << 20;

/// The environment variable that keeps the provider from reading chart repositories.
pub const OFFLINE_ENV: &str = "TALOSBOOT_OFFLINE";

#[derive(Debug, thiserror::Error)]
pub enum RepositoryError {
    #[error("{OFFLINE_ENV} is set")]
    Offline,
    #[error("an OCI registry lists no index")]
    Oci,
    #[error("not an http(s) repository URL")]
    NotHttp,
    #[error("failed to read the repository index: {0}")]
    Read(String),
    #[error("the repository index answered HTTP {0}")]
    Status(u16),
    #[error("the repository index is not Helm's index format: {0}")]
    Format(String),
    #[error("the repository index did not answer within {0:?}")]
    Timeout(Duration),
}

#[derive(Deserialize)]
struct Index {
    #[serde(default)]
    entries: std::collections::BTreeMap<String, Vec<Entry>>,
}

#[derive(Deserialize)]
struct Entry {
    version: String,
}

/// The versions of `chart` an index lists (entries that are no version are skipped).
///
/// # Errors
/// The text is not an index.
pub fn versions_in_index(text: &str, chart: &str) -> Result<Vec<ChartVersion>, RepositoryError> {
    let index: Index =
        serde_saphyr::from_str(text).map_err(|e| RepositoryError::Format(e.to_string()))?;
    Ok(index
        .entries
        .get(chart)
        .into_iter()
        .flatten()
        .filter_map(|e| ChartVersion::parse(&e.version))
        .collect())
}

/// `GET <repository>/index.yaml`, within `budget`, and the versions of `chart` it lists.
///
/// # Errors
/// [`RepositoryError`]: an OCI or non-http(s) repository, no answer, or no index.
pub async fn chart_versions(
    repository: &str,
    chart: &str,
    budget: Duration,
) -> Result<Vec<ChartVersion>, RepositoryError> {
    if std::env::var_os(OFFLINE_ENV).is_some_and(|v| !v.is_empty() && v != "0") {
        return Err(RepositoryError::Offline);
    }
    if repository.starts_with("oci://") {
        return Err(RepositoryError::Oci);
    }
    if !(repository.starts_with("https://") || repository.starts_with("http://")) {
        return Err(RepositoryError::NotHttp);
    }
    let url = format!("{}/index.yaml", repository.trim_end_matches('/'));
    let uri: http::Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| RepositoryError::Read(e.to_string()))?;
    let read = async {
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_webpki_roots()
            .https_or_http()
            .enable_http1()
            .build();
        let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build(https);
        let resp = client
            .get(uri)
            .await
            .map_err(|e| RepositoryError::Read(e.to_string()))?;
        if !resp.status().is_success() {
            return Err(RepositoryError::Status(resp.status().as_u16()));
        }
        let body = Limited::new(resp.into_body(), MAX_INDEX_BYTES)
            .collect()
            .await
            .map_err(|e| RepositoryError::Read(e.to_string()))?
            .to_bytes();
        let text =
            std::str::from_utf8(&body).map_err(|e| RepositoryError::Format(e.to_string()))?;
        versions_in_index(text, chart)
    };
    tokio::time::timeout(budget, read)
        .await
        .map_err(|_| RepositoryError::Timeout(budget))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_lists_the_versions_of_each_chart() {
        let index = "apiVersion: v1\nentries:\n  cilium:\n    - version: 1.19.7\n      appVersion: 1.19.7\n      urls: [https://helm.cilium.io/cilium-1.19.7.tgz]\n    - version: 1.20.0-rc.1\n    - version: not-a-version\n  tetragon:\n    - version: 1.5.0\ngenerated: \"2026-12-01T00:00:00Z\"\n";
        let versions: Vec<String> = versions_in_index(index, "cilium")
            .expect("an index")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(versions, ["1.19.7", "1.20.0-rc.1"]);
        assert!(
            versions_in_index(index, "other")
                .expect("an index")
                .is_empty()
        );
        assert!(matches!(
            versions_in_index("- a\n- b\n", "cilium"),
            Err(RepositoryError::Format(_))
        ));
    }

    #[tokio::test]
    async fn the_versions_are_read_from_the_repositorys_index() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.expect("accept");
            let mut request = vec![0u8; 1024];
            let n = conn.read(&mut request).await.expect("read");
            let line = String::from_utf8_lossy(&request[..n])
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned();
            let body = "entries:\n  cilium:\n    - version: 1.19.6\n    - version: 1.19.7\n";
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            conn.write_all(reply.as_bytes()).await.expect("write");
            line
        });
        let versions = chart_versions(
            &format!("http://127.0.0.1:{port}/charts/"),
            "cilium",
            Duration::from_secs(5),
        )
        .await
        .expect("read");
        assert_eq!(
            versions.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["1.19.6", "1.19.7"]
        );
        assert_eq!(
            server.await.expect("served"),
            "GET /charts/index.yaml HTTP/1.1"
        );
    }

    #[tokio::test]
    async fn a_repository_that_cannot_be_read_is_an_error_not_a_wait() {
        let oci = chart_versions("oci://ghcr.io/x", "cilium", Duration::from_secs(1)).await;
        assert!(matches!(oci, Err(RepositoryError::Oci)));
        // A loopback port nobody listens on: refused at once.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        let refused = chart_versions(
            &format!("http://127.0.0.1:{port}"),
            "cilium",
            Duration::from_secs(5),
        )
        .await;
        assert!(
            matches!(refused, Err(RepositoryError::Read(_))),
            "{refused:?}"
        );
    }
}
