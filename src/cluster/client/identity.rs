//! The non-secret identity of a cluster: its API server URL and a digest of the CA it is trusted
//! with. Taken from a connection's settings without contacting the cluster, so a plan can tell
//! that a resource now points at another cluster (and plan its replacement) before anything
//! connects. The digest is a plain SHA-256 here; what is stored is keyed by the caller (a CA is
//! not secret, but a bare hash would still tell which states share one).

use sha2::{Digest, Sha256};

use super::{ClusterError, ConfigSource, load_config, redact_user_info};

/// Which cluster a connection reaches, with nothing that grants access to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClusterIdentity {
    /// The API server URL, user info removed, without a trailing `/`.
    pub api_server: String,
    /// Lower-case hex SHA-256 of the trusted CA certificates (DER, in order); of nothing when the
    /// connection trusts the system roots.
    pub ca_sha256: String,
}

/// The identity of the cluster `source` connects to (a kubeconfig file is read; no network).
///
/// # Errors
/// [`ClusterError::InvalidConfig`] when the settings do not load, as a connection would report.
pub async fn identity(source: &ConfigSource) -> Result<ClusterIdentity, ClusterError> {
    let cfg = load_config(source).await?;
    Ok(of_config(&cfg))
}

pub(crate) fn of_config(cfg: &kube::Config) -> ClusterIdentity {
    let mut hasher = Sha256::new();
    for der in cfg.root_cert.iter().flatten() {
        hasher.update(der);
    }
    let ca_sha256 = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let api_server = redact_user_info(&cfg.cluster_url.to_string())
        .trim_end_matches('/')
        .to_owned();
    ClusterIdentity {
        api_server,
        ca_sha256,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIBADAKBggqhkjOPQQDAjAjMSEwHwYDVQQDDBhrM3Mtc2Vy\ndmVyLWNhQDE3MDAwMDAwMDAwHhcNMjMxMTE0MjIxMzIwWhcNMzMxMTExMjIxMzIw\nWjAjMSEwHwYDVQQDDBhrM3Mtc2VydmVyLWNhQDE3MDAwMDAwMDAwWTATBgcqhkjO\nPQIBBggqhkjOPQMBBwNCAAQ4j7Bz3ZkYkNf9mN0mQ5b6i0cOeXy3c4ZtqjC4oZzO\n-----END CERTIFICATE-----\n";

    fn direct(host: &str, token: &str) -> ConfigSource {
        ConfigSource::Direct {
            host: host.into(),
            ca_pem: None,
            client_cert_pem: None,
            client_key_pem: None,
            token: Some(token.into()),
        }
    }

    #[tokio::test]
    async fn the_identity_names_the_server_and_not_the_credentials() {
        let a = identity(&direct("https://10.0.0.1:6443/", "SECRET-A"))
            .await
            .expect("identity");
        let b = identity(&direct("https://10.0.0.1:6443", "SECRET-B"))
            .await
            .expect("identity");
        assert_eq!(a, b, "another credential, the same cluster");
        assert_eq!(a.api_server, "https://10.0.0.1:6443");
        assert!(!format!("{a:?}").contains("SECRET"));
        let other = identity(&direct("https://10.0.0.2:6443", "SECRET-A"))
            .await
            .expect("identity");
        assert_ne!(a, other);
    }

    #[tokio::test]
    async fn a_kubeconfig_that_does_not_load_is_an_invalid_config() {
        let source = ConfigSource::KubeconfigRaw {
            yaml: "apiVersion: v1\nkind: Config\nclusters: []\n".into(),
            context: None,
        };
        assert!(matches!(
            identity(&source).await,
            Err(ClusterError::InvalidConfig(_))
        ));
        let _ = CA;
    }
}
