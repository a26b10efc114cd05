//! The chart repositories: an HTTPS server publishing the test charts of `acceptance/charts/`
//! the way the real repositories publish theirs, for the real Helm running in the pods.
//!
//! `acceptance/charts/repositories.yaml` says which chart is published where, at which
//! versions (and appVersions). [`ChartServer::start`] packages every chart at every version
//! with the real `helm package --version V --app-version A` (into `work_dir`), then serves,
//! on `127.0.0.1:<random port>` with TLS (the given leaf certificate; ALPN `h2` and
//! `http/1.1`), routing by the request's host (HTTP/2 authority, else `Host`, else SNI):
//! - classic chart repositories (`https://helm.cilium.io`, `https://argoproj.github.io/argo-helm`):
//!   `GET|HEAD <path>/index.yaml` (entries newest first, absolute package URLs on the same
//!   host, `digest` = the package's SHA-256) and the packages `<path>/<chart>-<version>.tgz`;
//!   anything else is a plain `404 page not found`;
//! - OCI registries (`oci://ghcr.io/...`, `oci://example.com/charts`), the pull side of the
//!   distribution API as Helm 3.18's client (oras-go v2) uses it: `GET /v2/` (200 `{}`),
//!   `GET|HEAD /v2/<name>/tags/list` (`n`/`last` paging with a `Link` header),
//!   `GET|HEAD /v2/<name>/manifests/<tag|sha256:...>` (an OCI image manifest as `helm push`
//!   writes it: config `application/vnd.cncf.helm.config.v1+json` = the packaged `Chart.yaml`
//!   as Helm's metadata JSON, one layer `application/vnd.cncf.helm.chart.content.v1.tar+gzip`
//!   = the package), `GET|HEAD /v2/<name>/blobs/<digest>`; with `Content-Type`,
//!   `Content-Length`, `Docker-Content-Digest` and `Docker-Distribution-API-Version:
//!   registry/2.0`. Errors are OCI error JSON (`NAME_UNKNOWN`, `MANIFEST_UNKNOWN`,
//!   `BLOB_UNKNOWN`, `UNSUPPORTED` for pushes). No authentication: anonymous pulls get 200
//!   directly (ghcr.io would first answer 401 with a token realm).
//!
//! Certificates: the harness mints the CA and a leaf covering [`served_hostnames`] (known
//! before the server starts, from the repositories file); [`test_certificates`] does it for
//! tests. The pods map those names to 127.0.0.1 and relay 127.0.0.1:443 to [`ChartServer::addr`].
//!
//! API: [`ChartServerConfig`] (`charts_dir`, `helm`, `work_dir`, `cert_pem`, `key_pem`);
//! [`ChartServer::start`], [`ChartServer::addr`], [`ChartServer::hostnames`],
//! [`ChartServer::requests`] (`"GET helm.cilium.io/index.yaml"`), [`ChartServer::published`]
//! (every [`PublishedChart`]: repository URL, name, version, appVersion, package path, SHA-256),
//! [`ChartServer::package`] (a package's path, for a `helm template` on the host); dropping the
//! server stops it. Helpers: [`served_hostnames`], [`default_charts_dir`], [`default_helm`]
//! (`$TALOSBOOT_HELM`, else `<repo>/.tools/helm/helm`), [`test_certificates`],
//! [`package_metadata`].
//!
//! Seen from the real Helm 3.18.4 (tests: through a CONNECT proxy): it negotiates HTTP/2 when
//! offered; a classic repository costs `GET <repo>/index.yaml` then `GET <package URL>` (one
//! connection each; `helm repo add` fetches the index once and later pulls only the package);
//! an OCI pull of a version is `GET /v2/<name>/manifests/<version>` (no `/v2/` ping, no HEAD),
//! then the config and layer blobs; an unpinned or constrained OCI version first lists
//! `/v2/<name>/tags/list` (Helm picks the newest semver). Misses read
//! `chart "cilium" version "9.9.9" not found in https://helm.cilium.io repository` and
//! `failed to perform "FetchReference" on source: ghcr.io/...:9.9.9: not found`.
//!
//! What each test chart renders is described in `acceptance/charts/README.md`.

mod catalog;
mod serve;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

pub use catalog::{
    ChartMetadata, HELM_CHART_LAYER, HELM_CONFIG, OCI_MANIFEST, PublishedChart, RepositoryKind,
    package_metadata, served_hostnames, to_yaml,
};

/// How to start a [`ChartServer`].
#[derive(Clone, Debug)]
pub struct ChartServerConfig {
    /// The charts and `repositories.yaml` ([`default_charts_dir`]: `acceptance/charts`).
    pub charts_dir: PathBuf,
    /// The real Helm binary ([`default_helm`]).
    pub helm: PathBuf,
    /// Where packages (and Helm's own cache/config) go; the caller owns and removes it.
    pub work_dir: PathBuf,
    /// The TLS leaf (optionally followed by its chain), PEM, valid for every name of
    /// [`served_hostnames`].
    pub cert_pem: String,
    /// Its private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key_pem: String,
}

/// The running chart server; dropping it stops serving.
pub struct ChartServer {
    addr: SocketAddr,
    state: Arc<serve::State>,
    task: tokio::task::JoinHandle<()>,
}

impl ChartServer {
    /// Packages everything (see the module docs) and starts serving HTTPS on `127.0.0.1:0`.
    pub async fn start(config: ChartServerConfig) -> anyhow::Result<ChartServer> {
        let tls = tls_acceptor(&config.cert_pem, &config.key_pem)?;
        std::fs::create_dir_all(&config.work_dir)
            .with_context(|| format!("creating {}", config.work_dir.display()))?;
        let catalog = catalog::build(&config.charts_dir, &config.helm, &config.work_dir).await?;
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(serve::State {
            catalog,
            log: Mutex::new(Vec::new()),
            shutdown: CancellationToken::new(),
        });
        let task = tokio::spawn(serve::serve(listener, tls, state.clone()));
        Ok(ChartServer { addr, state, task })
    }

    /// Where it listens (`127.0.0.1:<port>`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every hostname it serves, sorted (`argoproj.github.io`, `example.com`, `ghcr.io`,
    /// `helm.cilium.io`): to map to 127.0.0.1 in the pods' `/etc/hosts`.
    pub fn hostnames(&self) -> Vec<String> {
        self.state.catalog.hostnames()
    }

    /// The requests served so far, in order: `"GET helm.cilium.io/index.yaml"`,
    /// `"HEAD ghcr.io/v2/controlplaneio-fluxcd/charts/flux-operator/manifests/0.33.0"` (path
    /// with query).
    pub fn requests(&self) -> Vec<String> {
        self.state.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Every chart version published (repository URL, name, version, appVersion, package).
    pub fn published(&self) -> &[PublishedChart] {
        &self.state.catalog.published
    }

    /// The package of `chart` at `version` (the first repository publishing it), e.g. for a
    /// `helm template` on the host (Talos' inline-manifest method).
    pub fn package(&self, chart: &str, version: &str) -> Option<&Path> {
        self.published()
            .iter()
            .find(|p| p.name == chart && p.version == version)
            .map(|p| p.package.as_path())
    }
}

impl Drop for ChartServer {
    fn drop(&mut self) {
        self.state.shutdown.cancel();
        self.task.abort();
    }
}

fn tls_acceptor(cert_pem: &str, key_pem: &str) -> anyhow::Result<TlsAcceptor> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .context("parsing the chart server certificate")?;
    if certs.is_empty() {
        anyhow::bail!("the chart server certificate PEM holds no certificate");
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .context("parsing the chart server key")?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// `acceptance/charts`.
pub fn default_charts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("charts")
}

/// The real Helm: `$TALOSBOOT_HELM`, else `<repo>/.tools/helm/helm` (installed by
/// `scripts/install-tools.sh`).
pub fn default_helm() -> PathBuf {
    match std::env::var_os("TALOSBOOT_HELM") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tools/helm/helm"),
    }
}

/// A CA and a leaf for `hostnames` (and `localhost`/`127.0.0.1`), PEM.
#[derive(Clone, Debug)]
pub struct TestCertificates {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// Mints a fresh CA and a server leaf it signs, valid for `hostnames`.
pub fn test_certificates(hostnames: &[String]) -> anyhow::Result<TestCertificates> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name
        .push(DnType::CommonName, "talos-sim chart repositories CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);
    let mut names: Vec<String> = hostnames.to_vec();
    names.extend(["localhost".to_string(), "127.0.0.1".to_string()]);
    let leaf_key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(names)?;
    leaf.distinguished_name
        .push(DnType::CommonName, "talos-sim chart repositories");
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer)?;
    Ok(TestCertificates {
        ca_pem: ca_cert.pem(),
        cert_pem: leaf_cert.pem(),
        key_pem: leaf_key.serialize_pem(),
    })
}
