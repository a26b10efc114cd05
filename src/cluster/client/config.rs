//! Where the cluster is, as plain data: a raw kubeconfig, a kubeconfig file, or the endpoint and
//! credentials one by one. The provider block's schema and its decoding into these types live in
//! the provider layer (`provider::config`); this layer knows nothing of schemas.

/// Where the connection settings come from, once known.
#[derive(Clone, PartialEq)]
pub enum ConfigSource {
    KubeconfigRaw {
        yaml: String,
        context: Option<String>,
    },
    KubeconfigFile {
        path: String,
        context: Option<String>,
    },
    Direct {
        host: String,
        ca_pem: Option<String>,
        client_cert_pem: Option<String>,
        client_key_pem: Option<String>,
        token: Option<String>,
    },
}

/// Never prints credentials: only which kind of source is used.
impl std::fmt::Debug for ConfigSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigSource::KubeconfigRaw { context, .. } => f
                .debug_struct("KubeconfigRaw")
                .field("context", context)
                .finish_non_exhaustive(),
            ConfigSource::KubeconfigFile { path, context } => f
                .debug_struct("KubeconfigFile")
                .field("path", path)
                .field("context", context)
                .finish(),
            ConfigSource::Direct { host, .. } => f
                .debug_struct("Direct")
                .field("host", &super::redact_user_info(host))
                .finish_non_exhaustive(),
        }
    }
}

/// The provider configuration as the cluster client needs it.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderConfig {
    /// Some attribute that decides the connection is unknown (plan before the cluster exists).
    Unknown,
    /// Nothing set in the provider block and no `KUBE_CONFIG_PATH`.
    Missing,
    Known(ConfigSource),
}
