//! The network of a Talos node before and after the CNI: which API endpoint a pod can reach.
//!
//! A program builds its API URL from `KUBERNETES_SERVICE_HOST`/`KUBERNETES_SERVICE_PORT` (an
//! explicit `env` entry wins over the kubelet's Service address, `10.96.0.1`/`443` with Talos' default
//! Service CIDR, the first address of [`TalosConfig::service_cidr`](super::TalosConfig) with
//! another). From a pod on node N with
//! host networking H:
//! - KubePrism, `localhost`/`127.0.0.1`:7445: reachable iff H and KubePrism is on; otherwise
//!   `connect: connection refused` (nothing listens in the pod's own network namespace).
//! - `localhost:6443` on a control-plane node with H: the apiserver's own port.
//! - The `kubernetes` Service (`10.96.0.1:443` by default): reachable iff N has a Service dataplane (kube-proxy
//!   runs, or Cilium with kube-proxy replacement is up on N) and (H or N has a pod network).
//!   Otherwise the SYN goes nowhere: `i/o timeout` after the client's dial timeout.
//! - Anything else: `i/o timeout` (addresses) or `no such host` (names).
//!
//! The rule is decided here, before a real process starts, so that no packet is ever sent to an
//! address outside loopback: a reachable endpoint is served inside the pod's loopback-only network
//! namespace by a relay to the apiserver ([`Route`]); an unreachable one never gets a process.

use std::fmt;

/// The `kubernetes` Service address with Talos' default Service CIDR.
pub const SERVICE_HOST: &str = "10.96.0.1";
pub const SERVICE_PORT: u16 = 443;
/// The apiserver's port on control-plane nodes.
pub const APISERVER_PORT: u16 = 6443;
/// KubePrism's default port.
pub const KUBEPRISM_PORT: u16 = 7445;

/// Why a TCP connection to the API failed, worded like Go's `net` errors.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DialError {
    #[error("dial tcp {addr}: i/o timeout")]
    Timeout { addr: String },
    #[error("dial tcp {addr}: connect: connection refused")]
    Refused { addr: String },
    #[error("dial tcp: lookup {host}: no such host")]
    NoSuchHost { host: String },
}

impl DialError {
    /// Whether the failure only shows after the client's dial timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(self, DialError::Timeout { .. })
    }
}

/// An API endpoint as a client sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl Endpoint {
    /// From a container's resolved environment; `service_host` where it names no host.
    pub fn from_env(
        env: &std::collections::BTreeMap<String, String>,
        service_host: &str,
    ) -> Endpoint {
        Endpoint {
            host: env
                .get("KUBERNETES_SERVICE_HOST")
                .cloned()
                .unwrap_or_else(|| service_host.into()),
            port: env
                .get("KUBERNETES_SERVICE_PORT")
                .and_then(|p| p.parse().ok())
                .unwrap_or(SERVICE_PORT),
        }
    }

    /// `https://host:port`, as client-go prints it.
    pub fn url(&self) -> String {
        format!("https://{self}")
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// What the pod's network looks like from where it runs.
#[derive(Clone, Debug, Default)]
pub struct Vantage {
    pub host_network: bool,
    /// The node runs a control-plane (its apiserver on `:6443`).
    pub control_plane: bool,
    /// The node's CNI is up (a Ready Cilium agent runs there).
    pub pod_network: bool,
    /// Service ClusterIPs route on the node (kube-proxy, or Cilium's replacement).
    pub service_routing: bool,
    /// The `kubernetes` Service's ClusterIP (the first address of the cluster's Service CIDR).
    pub service_host: String,
    /// KubePrism's port, `None` when it is off.
    pub kubeprism: Option<u16>,
    /// `InternalIP`s of the control-plane nodes.
    pub control_plane_ips: Vec<String>,
}

/// How a reachable endpoint is served inside the pod's network namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// A relay listening on `127.0.0.1:PORT` (KubePrism, a control plane's own `:6443`).
    Loopback(u16),
    /// The Service IP or a node address: the relay listens on a loopback address of the pod's
    /// namespace and the program is given this host name instead of the address (the API
    /// server's certificate covers it), so the process never dials outside loopback.
    Renamed { host: &'static str, port: u16 },
}

/// Decides whether `endpoint` is reachable from `from` (see the module docs for the rule).
pub fn route(from: &Vantage, endpoint: &Endpoint) -> Result<Route, DialError> {
    let host = endpoint.host.as_str();
    let port = endpoint.port;
    let loopback = matches!(host, "localhost" | "127.0.0.1" | "::1");
    let ip = if host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    let addr = Endpoint {
        host: ip.into(),
        port,
    }
    .to_string();
    if loopback {
        if from.host_network
            && (from.kubeprism == Some(port) || (port == APISERVER_PORT && from.control_plane))
        {
            return Ok(Route::Loopback(port));
        }
        return Err(DialError::Refused { addr });
    }
    if host == from.service_host {
        if port == SERVICE_PORT && from.service_routing && (from.host_network || from.pod_network) {
            return Ok(Route::Renamed {
                host: "kubernetes.default.svc",
                port,
            });
        }
        return Err(DialError::Timeout { addr });
    }
    if !host
        .chars()
        .all(|c| c.is_ascii_digit() || c == '.' || c == ':')
    {
        return Err(DialError::NoSuchHost { host: host.into() });
    }
    if port == APISERVER_PORT
        && from.control_plane_ips.iter().any(|i| i == host)
        && (from.host_network || from.pod_network)
    {
        return Ok(Route::Renamed {
            host: "kubernetes",
            port,
        });
    }
    Err(DialError::Timeout { addr })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(host: &str, port: u16) -> Endpoint {
        Endpoint {
            host: host.into(),
            port,
        }
    }

    fn talos_before_cni(host_network: bool) -> Vantage {
        Vantage {
            host_network,
            kubeprism: Some(KUBEPRISM_PORT),
            service_host: SERVICE_HOST.into(),
            ..Vantage::default()
        }
    }

    #[test]
    fn kubeprism_is_reachable_from_the_host_network_only() {
        assert_eq!(
            route(&talos_before_cni(true), &endpoint("localhost", 7445)),
            Ok(Route::Loopback(7445))
        );
        assert_eq!(
            route(&talos_before_cni(false), &endpoint("localhost", 7445))
                .unwrap_err()
                .to_string(),
            "dial tcp 127.0.0.1:7445: connect: connection refused"
        );
    }

    #[test]
    fn the_service_ip_times_out_before_the_cni() {
        let err = route(&talos_before_cni(true), &endpoint(SERVICE_HOST, 443)).unwrap_err();
        assert!(err.is_timeout());
        assert_eq!(err.to_string(), "dial tcp 10.96.0.1:443: i/o timeout");
        let after = Vantage {
            pod_network: true,
            service_routing: true,
            ..talos_before_cni(false)
        };
        assert!(route(&after, &endpoint(SERVICE_HOST, 443)).is_ok());
    }

    #[test]
    fn another_service_cidr_moves_the_service_address() {
        let other = Vantage {
            service_host: "10.100.0.1".into(),
            ..talos_before_cni(true)
        };
        let err = route(&other, &endpoint("10.100.0.1", 443)).unwrap_err();
        assert_eq!(err.to_string(), "dial tcp 10.100.0.1:443: i/o timeout");
        let after = Vantage {
            pod_network: true,
            service_routing: true,
            ..other
        };
        assert!(route(&after, &endpoint("10.100.0.1", 443)).is_ok());
        assert!(
            route(&after, &endpoint(SERVICE_HOST, 443)).is_err(),
            "the default address is no Service in this cluster"
        );
    }

    #[test]
    fn kubeprism_off_refuses() {
        let off = Vantage {
            host_network: true,
            ..Vantage::default()
        };
        assert!(matches!(
            route(&off, &endpoint("127.0.0.1", 7445)),
            Err(DialError::Refused { .. })
        ));
    }
}
