//! Configuration of a simulated cluster.

use std::net::SocketAddr;
use std::time::Duration;

/// How fast simulated time runs: program durations, grace periods, controller ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pace {
    /// For tests: everything simulated takes milliseconds.
    #[default]
    Fast,
    /// For the demo: durations a human can follow (seconds).
    Human,
}

impl Pace {
    /// Scales a "human" duration to this pace (Fast divides by 50, with a 1 ms floor).
    pub fn scale(self, human: Duration) -> Duration {
        match self {
            Pace::Human => human,
            Pace::Fast => (human / 50).max(Duration::from_millis(1)),
        }
    }

    /// The grace period a deleted, scheduled pod stays `Terminating` before it disappears.
    pub fn pod_grace(self) -> Duration {
        self.scale(Duration::from_secs(2))
    }

    /// Longest pause of the store's housekeeping loop (GC, namespace termination, pod grace);
    /// deletions and grace-period ends wake it earlier.
    pub fn housekeeping_tick(self) -> Duration {
        match self {
            Pace::Fast => Duration::from_millis(200),
            Pace::Human => Duration::from_secs(1),
        }
    }
}

impl std::str::FromStr for Pace {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fast" => Ok(Pace::Fast),
            "human" => Ok(Pace::Human),
            other => Err(format!("unknown pace {other:?} (expected fast or human)")),
        }
    }
}

/// Shape of the simulated cluster. `Default` gives 1 control plane, 1 worker, KubePrism on 7445,
/// no kube-proxy, fast pace, an ephemeral port on 127.0.0.1, Pod Security on, RBAC on, no CNI.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub control_planes: usize,
    pub workers: usize,
    /// Talos KubePrism port (the node-local API endpoint, `127.0.0.1:<port>` on every node).
    /// Recorded for the cluster model; the API server itself listens on [`SimConfig::listen`].
    pub kubeprism_port: Option<u16>,
    /// Whether Talos deploys kube-proxy (the default of Talos itself; off here, as with
    /// `cluster.proxy.disabled: true`): DaemonSet `kube-system/kube-proxy`, whose Ready pods route
    /// Service ClusterIPs on their nodes before a CNI is up.
    pub kube_proxy: bool,
    pub pace: Pace,
    /// Address of the HTTPS listener; `None` = `127.0.0.1:0` (an ephemeral port).
    pub listen: Option<SocketAddr>,
    /// Pod Security admission as Talos configures it (`enforce: baseline`, `warn: restricted`,
    /// `kube-system` exempt, namespace labels honoured). Default on.
    pub pod_security: bool,
    /// RBAC for pod identities: programs act as their pod's ServiceAccount and are authorized
    /// by the stored Roles and bindings (see `store::rbac`). Default on; the admin always is admin.
    pub rbac: bool,
    /// A Cilium version (e.g. `"1.16.3"`) Talos installed from the machine config's
    /// `inlineManifests` before the cluster started: the chart's objects with the Talos values,
    /// applied without Helm (no ownership metadata, no release record). `None` = no CNI.
    pub inline_cilium: Option<String>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            control_planes: 1,
            workers: 1,
            kubeprism_port: Some(7445),
            kube_proxy: false,
            pace: Pace::Fast,
            listen: None,
            pod_security: true,
            rbac: true,
            inline_cilium: None,
        }
    }
}
