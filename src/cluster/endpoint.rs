//! The bootstrap pod's API endpoint (`HOST:PORT` outside the Service CIDR), parsed without I/O.

use std::fmt;

/// The bootstrap pod's API endpoint, outside the Service CIDR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiEndpoint {
    pub host: String,
    pub port: u16,
}

/// Talos KubePrism: every node, before any CNI, with a certificate that covers `localhost`.
pub const KUBEPRISM: &str = "localhost:7445";

impl ApiEndpoint {
    /// `host:port`, `https://host:port`, `https://host` (port 443) or `[v6]:port` (the host kept
    /// without brackets, as `KUBERNETES_SERVICE_HOST` takes it). One parser for the resources'
    /// `api_endpoint` and the `cilium_talos_values` function.
    ///
    /// # Errors
    /// [`EndpointError`] for another scheme, a path, a missing host or port, or a bad port.
    pub fn parse(endpoint: &str) -> Result<ApiEndpoint, EndpointError> {
        let trimmed = endpoint.trim();
        let (rest, default_port) = match trimmed.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => (rest, Some(443)),
            Some(_) => return Err(EndpointError::Scheme(endpoint.to_owned())),
            None => (trimmed, None),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let shape = || EndpointError::Shape(endpoint.to_owned());
        if rest.contains(['/', '?', '#', '@']) || rest.chars().any(char::is_whitespace) {
            return Err(shape());
        }
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or_else(shape)?;
            match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None if after.is_empty() => (host, None),
                None => return Err(shape()),
            }
        } else {
            match rest.split_once(':') {
                Some((host, port)) if !port.contains(':') => (host, Some(port)),
                Some(_) => return Err(shape()), // a bare IPv6 address needs brackets
                None => (rest, None),
            }
        };
        if host.is_empty() {
            return Err(shape());
        }
        let port = match (port, default_port) {
            (Some(p), _) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| EndpointError::Port(endpoint.to_owned()))?,
            (None, Some(p)) => p,
            (None, None) => return Err(shape()),
        };
        Ok(ApiEndpoint {
            host: host.to_owned(),
            port,
        })
    }
}

/// Why an API endpoint could not be split into host and port.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("only https:// endpoints are supported, got {0:?}")]
    Scheme(String),
    #[error("expected host:port (e.g. \"localhost:7445\" or \"https://10.5.0.2:6443\"), got {0:?}")]
    Shape(String),
    #[error("invalid port in {0:?}: expected 1-65535")]
    Port(String),
}

impl fmt::Display for ApiEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_with_clear_errors() {
        assert_eq!(
            ApiEndpoint::parse("localhost:7445"),
            Ok(ApiEndpoint {
                host: "localhost".into(),
                port: 7445
            })
        );
        assert_eq!(
            ApiEndpoint::parse("[fd00::1]:6443").map(|e| e.to_string()),
            Ok("[fd00::1]:6443".into())
        );
        assert!(ApiEndpoint::parse("localhost").is_err());
        assert!(ApiEndpoint::parse("localhost:0").is_err());
        // As users copy it from a kubeconfig: the scheme is accepted, the host and port kept.
        assert_eq!(
            ApiEndpoint::parse("https://10.0.0.10:6443").map(|e| e.to_string()),
            Ok("10.0.0.10:6443".into())
        );
        assert!(ApiEndpoint::parse("http://x:6443").is_err());
        assert!(ApiEndpoint::parse("https://x:6443/api").is_err());
    }
}
