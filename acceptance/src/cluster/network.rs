//! Networking of the simulated Talos cluster: which API endpoint a program can reach from where.
//!
//! # The rule (see `README.md` beside this file)
//! A program in a pod builds its API URL from `KUBERNETES_SERVICE_HOST`/`KUBERNETES_SERVICE_PORT`
//! (an explicit container `env` entry wins over the kubelet-injected `10.96.0.1`/`443`). From a
//! pod on node N, with `hostNetwork` H:
//! - KubePrism, `localhost`/`127.0.0.1`:`kubeprism_port`: reachable iff H and KubePrism is
//!   enabled; otherwise `connect: connection refused` (nothing listens in the pod's own netns).
//! - `localhost:6443` on a control-plane node with H: the API server's own port.
//! - The `kubernetes` Service, `10.96.0.1:443`: reachable iff N has a Service dataplane (a Ready
//!   pod of the `kube-system/kube-proxy` DaemonSet runs on N, or the Cilium agent is Ready on N
//!   with kube-proxy replacement on) and (H or N has a pod network). Otherwise the SYN goes
//!   nowhere: `i/o timeout` (a client that dials while the dataplane comes up connects once it
//!   is there, within its dial timeout: SYNs are retransmitted).
//! - A control-plane node IP on `:6443`: reachable from H anywhere, or from a pod network.
//! - Anything else: `i/o timeout` (IPs) or `no such host` (names).
//!
//! A node has a pod network once its CNI is initialized, i.e. its `Ready` condition is `True`
//! (set by the node controller when a Ready `cilium` agent pod runs there).

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use super::obj;
use crate::config::{Pace, SimConfig};
use crate::store::{GroupResource, ListOptions, Store};

/// The `kubernetes` Service address the kubelet injects.
pub const SERVICE_HOST: &str = "10.96.0.1";
pub const SERVICE_PORT: u16 = 443;
/// The API server's port on control-plane nodes.
pub const APISERVER_PORT: u16 = 6443;

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

/// Where a connection starts: a node, from its host network namespace or from a pod network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vantage {
    pub node: String,
    pub host_network: bool,
}

/// An API endpoint as a client sees it (`host` as written in the URL).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl Endpoint {
    /// `https://host:port`, as client-go prints it.
    pub fn url(&self) -> String {
        format!("https://{}", join_host_port(&self.host, self.port))
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", join_host_port(&self.host, self.port))
    }
}

fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// How long clients wait for a TCP connection before `i/o timeout` (30 s, scaled by the pace).
pub fn dial_timeout(pace: Pace) -> Duration {
    pace.scale(Duration::from_secs(30))
}

/// The node's `InternalIP`.
pub fn node_ip(store: &Store, node: &str) -> Option<String> {
    let n = store.get(&obj::nodes(), "", node).ok()?;
    obj::arr(&n, "/status/addresses")
        .iter()
        .find(|a| obj::s(a, "/type") == "InternalIP")
        .map(|a| obj::s(a, "/address").to_string())
}

fn is_control_plane(node: &Value) -> bool {
    node.pointer("/metadata/labels/node-role.kubernetes.io~1control-plane")
        .is_some()
}

/// Whether the node's CNI is up (pod network exists): its `Ready` condition is `True`.
pub fn pod_network_ready(store: &Store, node: &str) -> bool {
    store
        .get(&obj::nodes(), "", node)
        .is_ok_and(|n| obj::condition_true(&n, "Ready"))
}

/// Whether Cilium replaces kube-proxy (`cilium-config` key `kube-proxy-replacement`).
fn cilium_kpr(store: &Store) -> bool {
    store
        .get(
            &GroupResource::core("configmaps"),
            "kube-system",
            "cilium-config",
        )
        .is_ok_and(|cm| {
            matches!(
                obj::s(&cm, "/data/kube-proxy-replacement"),
                "true" | "strict"
            )
        })
}

/// Whether a Ready kube-proxy pod (DaemonSet `kube-system/kube-proxy`, label
/// `k8s-app=kube-proxy`) runs on `node`: it has programmed the Service rules there.
pub fn kube_proxy_routes(store: &Store, node: &str) -> bool {
    let pods = store.list(
        &obj::pods(),
        Some("kube-system"),
        &ListOptions::default().labels("k8s-app=kube-proxy"),
    );
    pods.is_ok_and(|list| {
        list.items.iter().any(|p| {
            obj::s(p, "/spec/nodeName") == node && obj::pod_ready(p) && !obj::is_deleting(p)
        })
    })
}

/// Whether Service ClusterIPs route on `node`: kube-proxy runs there, or Cilium (kube-proxy
/// replacement) is up there.
pub fn service_routing(store: &Store, node: &str) -> bool {
    kube_proxy_routes(store, node) || (pod_network_ready(store, node) && cilium_kpr(store))
}

/// Checks whether `endpoint` is reachable from `from` (see the module docs for the rule).
pub fn check_api(
    store: &Store,
    config: &SimConfig,
    from: &Vantage,
    endpoint: &Endpoint,
) -> Result<(), DialError> {
    let host = endpoint.host.as_str();
    let port = endpoint.port;
    let loopback = matches!(host, "localhost" | "127.0.0.1" | "::1");
    let ip = if host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    let addr = join_host_port(ip, port);
    let node = store.get(&obj::nodes(), "", &from.node).ok();
    let pod_net = pod_network_ready(store, &from.node);
    if loopback {
        let kubeprism = from.host_network && config.kubeprism_port == Some(port);
        let apiserver = from.host_network
            && port == APISERVER_PORT
            && node.as_ref().is_some_and(is_control_plane);
        return if kubeprism || apiserver {
            Ok(())
        } else {
            Err(DialError::Refused { addr })
        };
    }
    if host == SERVICE_HOST {
        let ok = port == SERVICE_PORT
            && service_routing(store, &from.node)
            && (from.host_network || pod_net);
        return if ok {
            Ok(())
        } else {
            Err(DialError::Timeout { addr })
        };
    }
    if !host
        .chars()
        .all(|c| c.is_ascii_digit() || c == '.' || c == ':')
    {
        return Err(DialError::NoSuchHost {
            host: host.to_string(),
        });
    }
    let cp_ips = control_plane_ips(store);
    if port == APISERVER_PORT && cp_ips.iter().any(|i| i == host) && (from.host_network || pod_net)
    {
        return Ok(());
    }
    Err(DialError::Timeout { addr })
}

fn control_plane_ips(store: &Store) -> Vec<String> {
    let Ok(list) = store.list(&obj::nodes(), None, &Default::default()) else {
        return Vec::new();
    };
    list.items
        .iter()
        .filter(|n| is_control_plane(n))
        .filter_map(|n| node_ip(store, obj::name(n)))
        .collect()
}
