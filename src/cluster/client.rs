//! The lazily connected cluster client and the errors that say what broke.
//!
//! ConfigureProvider only stores the configuration; the first operation that needs the cluster builds
//! the `kube::Client`. Errors name the endpoint and the real cause ("connection refused",
//! "certificate signed by unknown authority", ...), never just "context deadline exceeded".

use std::sync::Arc;
use std::time::Duration;

use kube::config::{
    AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext,
};
use tokio::sync::OnceCell;

use super::config::{ConfigSource, ProviderConfig};

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(
        "the provider is not configured: set `kubeconfig_raw`, `config_path`, or `host` with credentials in the provider block (or KUBE_CONFIG_PATH)"
    )]
    NotConfigured,
    #[error(
        "the provider configuration is not known yet (it depends on a resource that has not been created). Apply that resource first, or use -target"
    )]
    ConfigUnknown,
    #[error("failed to load the cluster configuration: {0}")]
    InvalidConfig(String),
    #[error("cannot reach the Kubernetes API at {endpoint}: {cause}")]
    Unreachable { endpoint: String, cause: String },
    #[error("the Kubernetes API at {endpoint} refused the request: {message}")]
    Rejected {
        endpoint: String,
        code: u16,
        message: String,
    },
    #[error("{what} cannot be read: {cause}")]
    InvalidRecord { what: String, cause: String },
}

impl ClusterError {
    /// What the user can do about it, for the diagnostic's detail.
    pub fn hint(&self) -> &'static str {
        match self {
            ClusterError::NotConfigured | ClusterError::InvalidConfig(_) => {
                "Check the provider \"talosboot\" block."
            }
            ClusterError::ConfigUnknown => {
                "The kubeconfig comes from a resource that is created in this same apply."
            }
            ClusterError::Unreachable { .. } => {
                "Check that the cluster is up and that this machine can reach the endpoint (Talos: the control-plane address or load balancer, port 6443)."
            }
            ClusterError::Rejected { code: 401, .. } => {
                "The credentials were rejected: the client certificate or token is wrong or expired (regenerate the kubeconfig)."
            }
            ClusterError::Rejected { code: 403, .. } => {
                "The credentials lack permission for this operation."
            }
            ClusterError::InvalidRecord { .. } => {
                "The record was not written by Helm 3/4, or was edited by hand. Inspect it with kubectl; `helm history` shows what Helm makes of it."
            }
            ClusterError::Rejected { .. } => "",
        }
    }

    /// Classifies a `kube::Error` by walking its causes.
    pub fn from_kube(err: kube::Error, endpoint: &str) -> ClusterError {
        if let kube::Error::Api(status) = &err {
            return ClusterError::Rejected {
                endpoint: endpoint.to_owned(),
                code: status.code,
                message: status.message.clone(),
            };
        }
        ClusterError::Unreachable {
            endpoint: endpoint.to_owned(),
            cause: describe_cause(&err),
        }
    }
}

/// The most telling cause in an error chain, worded like the Go tools users already know.
pub fn describe_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut innermost = err.to_string();
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            match io.kind() {
                ConnectionRefused => return "connection refused".into(),
                TimedOut => return "connection timed out".into(),
                ConnectionReset => return "connection reset by peer".into(),
                ConnectionAborted | UnexpectedEof => {
                    return "connection closed by the server".into();
                }
                _ => {}
            }
            if let Some(inner) = io.get_ref() {
                if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
                    return describe_tls(tls);
                }
            }
        }
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return describe_tls(tls);
        }
        let text = e.to_string();
        if let Some(described) = describe_tls_text(&text) {
            return described;
        }
        if text.contains("dns error") || text.contains("failed to lookup address") {
            return format!("no such host ({text})");
        }
        if text.contains("tls handshake eof") {
            return "TLS handshake failed: the server closed the connection (is this an HTTPS Kubernetes endpoint, and is a client certificate expected?)".into();
        }
        innermost = text;
        current = e.source();
    }
    innermost
}

/// rustls errors do not always survive as a typed source through hyper and kube (some layers keep
/// only the message), so the well-known ones are also recognised by their text.
fn describe_tls_text(text: &str) -> Option<String> {
    let known = [
        ("UnknownIssuer", rustls::CertificateError::UnknownIssuer),
        ("NotValidForName", rustls::CertificateError::NotValidForName),
        ("Expired", rustls::CertificateError::Expired),
    ];
    if !text.contains("invalid peer certificate") {
        return None;
    }
    known
        .into_iter()
        .find(|(name, _)| text.contains(name))
        .map(|(_, error)| describe_tls(&rustls::Error::InvalidCertificate(error)))
}

fn describe_tls(err: &rustls::Error) -> String {
    use rustls::CertificateError::*;
    match err {
        rustls::Error::InvalidCertificate(UnknownIssuer) => {
            "x509: certificate signed by unknown authority (check `cluster_ca_certificate` / the kubeconfig's certificate-authority-data)".into()
        }
        rustls::Error::InvalidCertificate(NotValidForName)
        | rustls::Error::InvalidCertificate(NotValidForNameContext { .. }) => {
            "x509: certificate is not valid for this host name (use an address in the API server certificate's SANs)".into()
        }
        rustls::Error::InvalidCertificate(Expired)
        | rustls::Error::InvalidCertificate(ExpiredContext { .. }) => {
            "x509: certificate has expired".into()
        }
        rustls::Error::AlertReceived(alert) => {
            format!("TLS alert from the server: {alert:?} (the client certificate was probably rejected)")
        }
        other => format!("TLS error: {other}"),
    }
}

/// Describes a kubeconfig problem without the parser's own text: serde-saphyr quotes the input
/// around the error, and a kubeconfig holds tokens and keys.
pub fn kubeconfig_error(what: &str, err: &kube::config::KubeconfigError) -> String {
    use kube::config::KubeconfigError as E;
    match err {
        E::Parse(inner) => match inner.location() {
            Some(at) => format!(
                "{what} is not a valid kubeconfig YAML document (line {}, column {})",
                at.line(),
                at.column()
            ),
            None => format!("{what} is not a valid kubeconfig YAML document"),
        },
        E::ReadConfig(io, path) => format!(
            "cannot read the kubeconfig {}: {}",
            path.display(),
            io.kind()
        ),
        E::LoadCertificateAuthority(_) => {
            format!("{what}: the certificate authority data cannot be loaded (not base64 PEM?)")
        }
        E::LoadClientCertificate(_) => {
            format!("{what}: the client certificate data cannot be loaded (not base64 PEM?)")
        }
        E::LoadClientKey(_) => {
            format!("{what}: the client key data cannot be loaded (not base64 PEM?)")
        }
        E::ParseCertificates(_) => format!("{what}: the certificates are not valid PEM"),
        // The remaining variants name contexts, clusters or URLs, never credentials.
        other => format!("{what}: {other}"),
    }
}

struct Inner {
    config: ProviderConfig,
    client: OnceCell<(kube::Client, String)>,
}

/// A cheap, cloneable handle to the cluster; builds the client on first use and reuses it.
#[derive(Clone)]
pub struct ClusterHandle {
    inner: Arc<Inner>,
}

impl ClusterHandle {
    pub fn new(config: ProviderConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                client: OnceCell::new(),
            }),
        }
    }

    /// Before ConfigureProvider (e.g. in validation RPCs), nothing may connect.
    pub fn unconfigured() -> Self {
        Self::new(ProviderConfig::Missing)
    }

    pub fn config(&self) -> &ProviderConfig {
        &self.inner.config
    }

    /// The client and the endpoint URL it talks to (for messages). Does not contact the cluster.
    pub async fn client(&self) -> Result<(kube::Client, String), ClusterError> {
        self.inner
            .client
            .get_or_try_init(|| build_client(&self.inner.config))
            .await
            .cloned()
    }
}

async fn build_client(config: &ProviderConfig) -> Result<(kube::Client, String), ClusterError> {
    let source = match config {
        ProviderConfig::Unknown => return Err(ClusterError::ConfigUnknown),
        ProviderConfig::Missing => return Err(ClusterError::NotConfigured),
        ProviderConfig::Known(source) => source,
    };
    let (kubeconfig, context) = match source {
        ConfigSource::KubeconfigRaw { yaml, context } => (
            Kubeconfig::from_yaml(yaml)
                .map_err(|e| ClusterError::InvalidConfig(kubeconfig_error("kubeconfig_raw", &e)))?,
            context.clone(),
        ),
        ConfigSource::KubeconfigFile { path, context } => (
            Kubeconfig::read_from(path)
                .map_err(|e| ClusterError::InvalidConfig(kubeconfig_error(path, &e)))?,
            context.clone(),
        ),
        ConfigSource::Direct {
            host,
            ca_pem,
            client_cert_pem,
            client_key_pem,
            token,
        } => (
            direct_kubeconfig(host, ca_pem, client_cert_pem, client_key_pem, token),
            None,
        ),
    };
    let options = KubeConfigOptions {
        context,
        ..Default::default()
    };
    let mut cfg = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| ClusterError::InvalidConfig(kubeconfig_error("the kubeconfig", &e)))?;
    cfg.connect_timeout = Some(Duration::from_secs(10));
    cfg.read_timeout = Some(Duration::from_secs(60));
    let endpoint = cfg.cluster_url.to_string();
    let client = kube::Client::try_from(cfg)
        .map_err(|e| ClusterError::InvalidConfig(format!("failed to build the client: {e}")))?;
    Ok((client, endpoint.trim_end_matches('/').to_owned()))
}

fn direct_kubeconfig(
    host: &str,
    ca_pem: &Option<String>,
    cert: &Option<String>,
    key: &Option<String>,
    token: &Option<String>,
) -> Kubeconfig {
    use base64::Engine;
    let b64 = |s: &String| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let name = "talosboot".to_owned();
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: name.clone(),
            cluster: Some(Cluster {
                server: Some(host.to_owned()),
                certificate_authority_data: ca_pem.as_ref().map(b64),
                ..Default::default()
            }),
            ..Default::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: name.clone(),
            auth_info: Some(AuthInfo {
                client_certificate_data: cert.as_ref().map(b64),
                client_key_data: key.as_ref().map(|k| b64(k).into()),
                token: token.clone().map(Into::into),
                ..Default::default()
            }),
            ..Default::default()
        }],
        contexts: vec![NamedContext {
            name: name.clone(),
            context: Some(Context {
                cluster: name.clone(),
                user: Some(name.clone()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        current_context: Some(name),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_refused_is_named_through_the_chain() {
        #[derive(Debug, thiserror::Error)]
        #[error("client error (Connect)")]
        struct Wrapper(#[source] std::io::Error);
        let err = Wrapper(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(describe_cause(&err), "connection refused");
    }

    #[test]
    fn unknown_issuer_reads_like_the_go_error() {
        let io = std::io::Error::other(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer,
        ));
        assert!(describe_cause(&io).starts_with("x509: certificate signed by unknown authority"));
    }

    #[test]
    fn tls_errors_known_only_by_their_text_are_recognised() {
        #[derive(Debug, thiserror::Error)]
        #[error("client error (Connect): invalid peer certificate: UnknownIssuer")]
        struct Flattened;
        assert!(
            describe_cause(&Flattened).starts_with("x509: certificate signed by unknown authority")
        );
    }

    #[tokio::test]
    async fn unknown_configuration_fails_only_when_the_cluster_is_needed() {
        let handle = ClusterHandle::new(ProviderConfig::Unknown);
        assert!(matches!(
            handle.client().await,
            Err(ClusterError::ConfigUnknown)
        ));
    }
}
