//! The lazily connected cluster client and the errors that say what broke.
//!
//! ConfigureProvider only stores the configuration ([`ClusterHandle`]); the first operation that
//! needs the cluster connects ([`ClusterHandle::connect`], the one way to), which builds a [`Kube`]:
//! one client for ordinary requests, whose reads are bounded, and one for watches and followed
//! logs, which may stay quiet for as long as the caller's deadline allows. Errors name the endpoint and the real cause ("connection refused",
//! "certificate signed by unknown authority", ...), never just "context deadline exceeded".

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::config::{
    AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext,
};
use tokio::sync::OnceCell;

pub mod cache;
mod config;
pub mod identity;
pub mod retry;
mod scrub;
#[cfg(test)]
pub(crate) mod test_server;

pub use cache::ClientCache;
pub use config::{ConfigSource, ProviderConfig};
pub use identity::{ClusterIdentity, identity};
pub use retry::RetryBudget;
use scrub::strip_user_info;
pub use scrub::{redact_user_info, scrub_api_message};

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
    #[error("the Kubernetes API at {endpoint} refused the request (HTTP {code}): {message}")]
    Rejected {
        endpoint: String,
        code: u16,
        message: String,
    },
    #[error("{what} cannot be read: {cause}")]
    InvalidRecord { what: String, cause: String },
}

impl ClusterError {
    /// Whether trying again may help: throttling, server errors, a connection that failed.
    pub fn is_transient(&self) -> bool {
        match self {
            ClusterError::Rejected { code, .. } => matches!(code, 429 | 500 | 502 | 503 | 504),
            ClusterError::Unreachable { .. } => true,
            _ => false,
        }
    }

    /// What the user can do about it, for the diagnostic's detail.
    pub fn hint(&self) -> &'static str {
        match self {
            ClusterError::NotConfigured | ClusterError::InvalidConfig(_) => {
                "Check the connection settings: the resource's `cluster` when it sets one, else the provider \"talosboot\" block."
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

    /// Classifies a `kube::Error` by walking its causes. Messages are scrubbed: values the API
    /// server echoes (`Invalid value: "..."`) and user info in URLs never reach the error.
    pub fn from_kube(err: kube::Error, endpoint: &str) -> ClusterError {
        let endpoint = redact_user_info(endpoint);
        if let kube::Error::Api(status) = &err {
            return ClusterError::Rejected {
                endpoint,
                code: status.code,
                message: scrub_api_message(&status.message),
            };
        }
        ClusterError::Unreachable {
            endpoint,
            cause: scrub_api_message(&describe_cause(&err)),
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
            match io.kind() {
                std::io::ErrorKind::NotFound => "no such file".to_owned(),
                std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
                other => other.to_string(),
            }
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
        // The remaining variants name contexts, clusters or URLs (whose user info is dropped).
        other => redact_user_info(&format!("{what}: {other}")),
    }
}

/// The bound on a single read of an ordinary request (get, list, patch, a log snapshot): a server
/// that accepted the connection and then says nothing is reported instead of hanging.
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// The bound on establishing a connection, for both clients.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A connected cluster, the one handle every subsystem works with: the two clients built from
/// one configuration (the same endpoint and credentials, different read bounds) and the endpoint
/// they talk to (for messages). Cheap to clone.
#[derive(Clone)]
pub struct Kube {
    /// Ordinary requests (get, list, patch, a log snapshot): every read is bounded by
    /// [`READ_TIMEOUT`]. Not for watches or followed logs, which may be quiet for longer.
    pub client: kube::Client,
    /// Watches and followed logs: no read timeout (a quiet watch on a Job that runs for ten
    /// minutes is healthy), so the caller bounds the stream with its own deadline.
    pub stream: kube::Client,
    /// The API server's URL, user info removed.
    pub endpoint: String,
    /// How long each call on this connection keeps retrying transient errors.
    pub retry_budget: RetryBudget,
}

/// The Pod Security admission level a namespace enforces (`privileged` lets host-network pods
/// in): the label the engine sets on the namespaces it creates and the Flux bootstrap on its own.
pub const PSA_ENFORCE: &str = "pod-security.kubernetes.io/enforce";
/// The Pod Security level a host-network pod needs (Talos enforces `baseline` elsewhere).
pub const PSA_PRIVILEGED: &str = "privileged";

impl Kube {
    /// A `kube::Error` of a request on this cluster, classified and scrubbed.
    pub fn cluster_error(&self, err: kube::Error) -> ClusterError {
        ClusterError::from_kube(err, &self.endpoint)
    }

    /// Runs `call` until it succeeds, fails for good, or this connection's retry budget is spent
    /// ([`RetryBudget::retry`]).
    pub async fn retry<T, F, Fut>(&self, what: &str, call: F) -> Result<T, kube::Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, kube::Error>>,
    {
        self.retry_budget.retry(what, call).await
    }

    /// [`Kube::retry`] for any error ([`RetryBudget::retry_if`]).
    pub async fn retry_if<T, E, F, Fut>(
        &self,
        what: &str,
        transient: impl Fn(&E) -> bool,
        call: F,
    ) -> Result<T, E>
    where
        E: std::fmt::Display,
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, E>>,
    {
        self.retry_budget.retry_if(what, transient, call).await
    }

    /// Creates `namespace` when no namespace of its name exists; an existing one is left as it is
    /// and returned (its labels, its deletion) for the caller to judge. `None`: created now (or by
    /// someone else at the same moment).
    ///
    /// # Errors
    /// The API's refusal or a connection that stays broken (transient errors are retried).
    pub async fn ensure_namespace(
        &self,
        namespace: &Namespace,
    ) -> Result<Option<Namespace>, ClusterError> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let name = namespace.metadata.name.as_deref().unwrap_or_default();
        let existing = self
            .retry("get namespace", || api.get_opt(name))
            .await
            .map_err(|e| self.cluster_error(e))?;
        if existing.is_some() {
            return Ok(existing);
        }
        let params = PostParams::default();
        match self
            .retry("create namespace", || api.create(&params, namespace))
            .await
        {
            Ok(_) => Ok(None),
            // Created meanwhile, or by the first attempt of a retried create.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
            Err(e) => Err(self.cluster_error(e)),
        }
    }
}

struct Inner {
    config: ProviderConfig,
    read_timeout: Duration,
    retry_budget: RetryBudget,
    connected: OnceCell<Kube>,
}

/// A cheap, cloneable handle to the cluster; builds the clients on first use and reuses them.
#[derive(Clone)]
pub struct ClusterHandle {
    inner: Arc<Inner>,
}

impl ClusterHandle {
    /// A handle with the default retry budget ([`retry::RETRY_BUDGET`]).
    pub fn new(config: ProviderConfig) -> Self {
        Self::with_retry_budget(config, RetryBudget::default())
    }

    /// A handle whose calls retry transient errors for `retry_budget`.
    pub fn with_retry_budget(config: ProviderConfig, retry_budget: RetryBudget) -> Self {
        Self::build(config, READ_TIMEOUT, retry_budget)
    }

    /// Like [`ClusterHandle::new`] with another bound for ordinary requests (tests use a short one).
    #[cfg(test)]
    pub(crate) fn with_read_timeout(config: ProviderConfig, read_timeout: Duration) -> Self {
        Self::build(config, read_timeout, RetryBudget::default())
    }

    fn build(config: ProviderConfig, read_timeout: Duration, retry_budget: RetryBudget) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                read_timeout,
                retry_budget,
                connected: OnceCell::new(),
            }),
        }
    }

    /// How long each call on this connection keeps retrying transient errors.
    pub fn retry_budget(&self) -> RetryBudget {
        self.inner.retry_budget
    }

    /// Before ConfigureProvider (e.g. in validation RPCs), nothing may connect.
    pub fn unconfigured() -> Self {
        Self::new(ProviderConfig::Missing)
    }

    pub fn config(&self) -> &ProviderConfig {
        &self.inner.config
    }

    /// Whether `other` is this very handle (a clone of it), sharing its clients.
    pub fn same_as(&self, other: &ClusterHandle) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The connected cluster: built on first use (without contacting the cluster), then reused.
    ///
    /// # Errors
    /// [`ClusterError::ConfigUnknown`] / [`ClusterError::NotConfigured`] before a usable provider
    /// configuration, [`ClusterError::InvalidConfig`] when the kubeconfig cannot be loaded.
    pub async fn connect(&self) -> Result<Kube, ClusterError> {
        self.inner
            .connected
            .get_or_try_init(|| {
                build_clients(
                    &self.inner.config,
                    self.inner.read_timeout,
                    self.inner.retry_budget,
                )
            })
            .await
            .cloned()
    }
}

async fn build_clients(
    config: &ProviderConfig,
    read_timeout: Duration,
    retry_budget: RetryBudget,
) -> Result<Kube, ClusterError> {
    let source = match config {
        ProviderConfig::Unknown => return Err(ClusterError::ConfigUnknown),
        ProviderConfig::Missing => return Err(ClusterError::NotConfigured),
        ProviderConfig::Known(source) => source,
    };
    let mut cfg = load_config(source).await?;
    cfg.connect_timeout = Some(CONNECT_TIMEOUT);
    cfg.read_timeout = Some(read_timeout);
    // The endpoint is named in every error: never with credentials in it.
    let endpoint = redact_user_info(&cfg.cluster_url.to_string());
    let mut streaming_cfg = cfg.clone();
    streaming_cfg.read_timeout = None;
    let build = |cfg: kube::Config| {
        kube::Client::try_from(cfg)
            .map_err(|e| ClusterError::InvalidConfig(format!("failed to build the client: {e}")))
    };
    Ok(Kube {
        client: build(cfg)?,
        stream: build(streaming_cfg)?,
        endpoint: endpoint.trim_end_matches('/').to_owned(),
        retry_budget,
    })
}

/// The client configuration of `source`, without contacting the cluster (a kubeconfig file is
/// read): what [`ClusterHandle::connect`] builds its clients from and [`identity`] names the
/// cluster by. User info in the server URL is dropped here, so it is never sent nor logged.
///
/// # Errors
/// [`ClusterError::InvalidConfig`] when the kubeconfig cannot be read or loaded.
pub(crate) async fn load_config(source: &ConfigSource) -> Result<kube::Config, ClusterError> {
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
    if let Some(wanted) = &context {
        // kube would say "failed to load current context" of a context that was asked for.
        if !kubeconfig.contexts.iter().any(|c| &c.name == wanted) {
            let names: Vec<String> = kubeconfig
                .contexts
                .iter()
                .map(|c| format!("{:?}", c.name))
                .collect();
            return Err(ClusterError::InvalidConfig(format!(
                "`config_context` {wanted:?} is not a context of the kubeconfig, which has {}",
                match names.is_empty() {
                    true => "none".to_owned(),
                    false => names.join(", "),
                }
            )));
        }
    }
    let options = KubeConfigOptions {
        context,
        ..Default::default()
    };
    let mut cfg = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| ClusterError::InvalidConfig(kubeconfig_error("the kubeconfig", &e)))?;
    let url = cfg.cluster_url.to_string();
    if strip_user_info(&url) != url {
        cfg.cluster_url = strip_user_info(&url)
            .parse()
            .map_err(|_| ClusterError::InvalidConfig("the server URL is not a valid URL".into()))?;
    }
    Ok(cfg)
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
    async fn a_context_the_kubeconfig_lacks_is_named_with_those_it_has() {
        let yaml = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\ncontexts:\n- name: admin@talos-sim\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    token: t0k3n\ncurrent-context: admin@talos-sim\n";
        let source = |context: &str| ConfigSource::KubeconfigRaw {
            yaml: yaml.into(),
            context: Some(context.into()),
        };
        let Err(ClusterError::InvalidConfig(message)) = load_config(&source("admin@nope")).await
        else {
            panic!("a missing context is an invalid configuration");
        };
        assert_eq!(
            message,
            "`config_context` \"admin@nope\" is not a context of the kubeconfig, which has \"admin@talos-sim\""
        );
        assert!(load_config(&source("admin@talos-sim")).await.is_ok());
    }

    #[tokio::test]
    async fn unknown_configuration_fails_only_when_the_cluster_is_needed() {
        let handle = ClusterHandle::new(ProviderConfig::Unknown);
        assert!(matches!(
            handle.connect().await,
            Err(ClusterError::ConfigUnknown)
        ));
    }

    /// A watch that sees no event for longer than the ordinary read bound: the ordinary client
    /// gives up (proving the bound is real), the stream client waits and gets the event.
    #[tokio::test]
    async fn a_quiet_watch_outlives_the_read_timeout_on_the_stream_client() {
        use futures::StreamExt;
        use k8s_openapi::api::core::v1::ConfigMap;
        use kube::api::{Api, WatchEvent, WatchParams};

        use super::test_server::{Reply, handle, serve};

        let bound = Duration::from_millis(400);
        let event = serde_json::json!({"type": "ADDED", "object": {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "late", "namespace": "default", "resourceVersion": "7"}}});
        let url = serve(move |_, _| Reply {
            quiet: bound * 4,
            ..Reply::json(200, event.clone())
        })
        .await;
        let cluster = handle(&url, bound);
        let first_event = |client: kube::Client| async move {
            let api: Api<ConfigMap> = Api::namespaced(client, "default");
            let mut stream = api.watch(&WatchParams::default(), "0").await?.boxed();
            stream.next().await.transpose()
        };
        let overall = Duration::from_secs(30);

        let kube = cluster.connect().await.expect("connected");
        let outcome = tokio::time::timeout(overall, first_event(kube.client))
            .await
            .expect("the ordinary client gives up by itself");
        assert!(
            outcome.is_err(),
            "the ordinary client must bound quiet reads: {outcome:?}"
        );

        assert_eq!(kube.endpoint, url);
        let outcome = tokio::time::timeout(overall, first_event(kube.stream))
            .await
            .expect("the event arrives");
        match outcome {
            Ok(Some(WatchEvent::Added(cm))) => {
                assert_eq!(cm.metadata.name.as_deref(), Some("late"));
            }
            other => panic!("the stream client must outlive the read bound: {other:?}"),
        }
    }

    /// One process, two connections with their own budgets (a `cluster` with its own
    /// `api_retry_timeout` beside the provider's) to an API that refuses connections: each gives
    /// up after its own, concurrently.
    #[tokio::test]
    async fn each_connection_retries_for_its_own_budget() {
        use k8s_openapi::api::core::v1::ConfigMap;

        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let source = ConfigSource::Direct {
            host: format!("http://127.0.0.1:{port}"),
            ca_pem: None,
            client_cert_pem: None,
            client_key_pem: None,
            token: None,
        };
        let cache = ClientCache::default();
        let (short, long) = (Duration::from_millis(400), Duration::from_millis(2000));
        let gives_up_after = |budget: Duration| {
            let handle = cache.handle(&source, RetryBudget::new(budget));
            async move {
                let kube = handle.connect().await.expect("connected");
                let api: Api<ConfigMap> = Api::namespaced(kube.client.clone(), "default");
                let started = std::time::Instant::now();
                let out = kube.retry("get", || api.get_opt("x")).await;
                assert!(out.as_ref().is_err_and(retry::is_transient), "{out:?}");
                started.elapsed()
            }
        };
        let (short_took, long_took) = tokio::join!(gives_up_after(short), gives_up_after(long));
        assert!(
            short_took >= short && short_took < long,
            "the short budget: {short_took:?}"
        );
        assert!(long_took >= long, "the long budget: {long_took:?}");
    }
}
