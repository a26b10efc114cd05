//! [`TalosCluster`]: a real control plane with the Talos node layer around it: nodes with their
//! kubelets, KubePrism on every node, the network before the CNI, the chart repositories, and
//! the emulated programs. Dropping it ends every process and task.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::Api;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::control_plane::{self, ControlPlane, ControlPlaneOptions};
use super::fault_proxy::{FaultProxy, FaultProxyConfig};
use super::git::{GitConfig, GitServers};
use super::kubelet::Kubelet;
use super::kubelet_faults::{self, FaultKind, KubeletFaults, Source};
use super::kubelet_logs::{KubeletLogServer, LogStore};
use super::manifests::{self, InlineManifest, TalosVersion};
use super::netns::{NetNs, Relay};
use super::network::{self, Vantage};
use super::nodes::{self, NodeInfo, Role};
use super::pki::Usage;
use super::programs::{self, FluxImage, ImageKind};
use super::services::Dataplane;
use super::tools::Tools;

/// Settings of a cluster.
#[derive(Clone, Debug)]
pub struct TalosConfig {
    pub control_planes: usize,
    pub workers: usize,
    /// KubePrism's port on every node (`None`: KubePrism off, as before Talos 1.6).
    pub kubeprism: Option<u16>,
    /// Talos runs kube-proxy (`cluster.proxy.disabled: false`): Service IPs route before the CNI.
    pub kube_proxy: bool,
    /// `cluster.network.serviceSubnets` (Talos' default `10.96.0.0/12`): the apiserver's
    /// `--service-cluster-ip-range`; the `kubernetes` Service is at its first address.
    pub service_cidr: String,
    /// How long a dial to an unreachable address takes before `i/o timeout` (30 s on a real
    /// node; shorter here so that tests of the failure do not wait that long).
    pub dial_timeout: Duration,
    pub pod_security: bool,
    pub controller_manager_flags: Vec<String>,
    /// Cilium of this chart version installed as Talos' inline manifests do it
    /// (`cluster.inlineManifests` from `helm template`): its objects, no Helm release; applied
    /// as [`talos_version`](Self::talos_version) applies manifests (see [`super::manifests`]).
    pub inline_cilium: Option<String>,
    /// The Talos version whose manifest handling the node layer follows (1.13+: the inventory).
    pub talos_version: TalosVersion,
    /// Git repositories served over SSH on loopback, their hosts resolved inside pods
    /// ([`super::git`]).
    pub git: GitConfig,
    /// Kubelet faults in force from the start ([`super::kubelet_faults`]; `serve
    /// --image-pull-failure` / `--crash-loop`): (kind, image pattern, nodes or every node).
    pub kubelet_faults: Vec<(FaultKind, String, Option<Vec<String>>)>,
}

impl Default for TalosConfig {
    fn default() -> Self {
        TalosConfig {
            control_planes: 1,
            workers: 1,
            kubeprism: Some(network::KUBEPRISM_PORT),
            kube_proxy: false,
            service_cidr: control_plane::SERVICE_CIDR.to_owned(),
            dial_timeout: Duration::from_secs(3),
            pod_security: true,
            controller_manager_flags: Vec::new(),
            inline_cilium: None,
            talos_version: TalosVersion::default(),
            git: GitConfig::default(),
            kubelet_faults: Vec::new(),
        }
    }
}

/// What the node layer shares between nodes and pods.
pub struct Shared {
    pub dir: PathBuf,
    pub logs: LogStore,
    pub dial_timeout: Duration,
    pub tools: Tools,
    /// Where clients reach the API: the fault proxy in front of the apiserver.
    apiserver: SocketAddr,
    server_url: String,
    ca_pem: String,
    /// The CA bundle of the pods: the cluster CA and the chart repositories'.
    trusted_pem: String,
    charts: Option<(SocketAddr, Vec<String>)>,
    kubeprism: Option<u16>,
    /// The `kubernetes` Service's ClusterIP (see [`TalosConfig::service_cidr`]).
    pub service_host: String,
    /// Nodes whose kube-proxy container is Ready: their Service IPs route, before any CNI.
    kube_proxy_ready: Mutex<HashSet<String>>,
    nodes: Vec<NodeInfo>,
    cni: Mutex<HashSet<String>>,
    cni_tx: watch::Sender<u64>,
    cilium_kpr: AtomicBool,
    ids: AtomicU64,
    node_clients: Mutex<HashMap<String, kube::Client>>,
    kubectl: Option<PathBuf>,
    /// The Service dataplane of pod-network pods (names, listeners, relays to endpoints).
    pub services: Arc<Dataplane>,
    /// The `hosts` lines of every pod (see [`base_hosts`]).
    base_hosts: String,
    /// The Git hosts' relays: (listen in the pod, the server on the machine).
    git_relays: Vec<(SocketAddr, SocketAddr)>,
    /// Image pulls that fail and programs that crash, on chosen nodes ([`super::kubelet_faults`]).
    pub kubelet_faults: KubeletFaults,
    /// The images each node has pulled: (node, image reference).
    images: Mutex<HashSet<(String, String)>>,
}

impl Shared {
    pub fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    pub fn node_ip(&self, node: &str) -> String {
        self.nodes
            .iter()
            .find(|n| n.name == node)
            .map(|n| n.ip.clone())
            .unwrap_or_default()
    }

    pub fn cni_ready(&self, node: &str) -> bool {
        self.cni
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(node)
    }

    /// Whether `node` has pulled `image` (its container runtime's image store).
    pub fn has_image(&self, node: &str, image: &str) -> bool {
        self.images
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&(node.to_owned(), image.to_owned()))
    }

    /// Records a successful pull.
    pub fn pulled(&self, node: &str, image: &str) {
        self.images
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((node.to_owned(), image.to_owned()));
    }

    pub fn cni_watch(&self) -> watch::Receiver<u64> {
        self.cni_tx.subscribe()
    }

    /// An address for a pod-network pod (a status value only: nothing dials it).
    pub fn allocate_pod_ip(&self, node: &str) -> String {
        let index = self.nodes.iter().position(|n| n.name == node).unwrap_or(0);
        let id = self.next_id();
        format!("10.244.{}.{}", index, 2 + id % 250)
    }

    pub fn vantage(&self, node: &str) -> Vantage {
        let info = self.nodes.iter().find(|n| n.name == node);
        let cni = self.cni_ready(node);
        Vantage {
            host_network: false,
            control_plane: info.is_some_and(|n| n.role == Role::ControlPlane),
            pod_network: cni,
            service_routing: self
                .kube_proxy_ready
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(node)
                || (cni && self.cilium_kpr.load(Ordering::Relaxed)),
            kubeprism: self.kubeprism,
            service_host: self.service_host.clone(),
            control_plane_ips: self
                .nodes
                .iter()
                .filter(|n| n.role == Role::ControlPlane)
                .map(|n| n.ip.clone())
                .collect(),
        }
    }

    /// The relays of a network namespace: the chart repositories on `127.0.0.1:443`, the
    /// Service and node addresses (renamed, see [`network::Route`]) on `127.0.0.2`, and on the
    /// host network KubePrism and a control plane's own `:6443`.
    fn relays(&self, host_network: Option<&NodeInfo>) -> Vec<Relay> {
        let relay = |listen: &str, target: SocketAddr| Relay {
            listen: listen.parse().expect("a socket address"),
            target,
        };
        let mut relays = vec![
            relay("127.0.0.2:443", self.apiserver),
            relay("127.0.0.2:6443", self.apiserver),
        ];
        if let Some((charts, _)) = &self.charts {
            relays.push(relay("127.0.0.1:443", *charts));
        }
        relays.extend(self.git_relays.iter().map(|(listen, target)| Relay {
            listen: *listen,
            target: *target,
        }));
        if let Some(node) = host_network {
            if let Some(port) = self.kubeprism {
                relays.push(relay(&format!("127.0.0.1:{port}"), self.apiserver));
            }
            if node.role == Role::ControlPlane && self.kubeprism != Some(network::APISERVER_PORT) {
                relays.push(relay("127.0.0.1:6443", self.apiserver));
            }
        }
        relays
    }

    pub async fn pod_netns(&self) -> std::io::Result<NetNs> {
        NetNs::create(self.relays(None)).await
    }

    /// The real Helm binary of the major the image carries ([`programs::HelmMajor`]).
    fn helm_for(&self, image: &str) -> PathBuf {
        match programs::HelmMajor::of_image(image) {
            programs::HelmMajor::V3 => self.tools.helm.clone(),
            programs::HelmMajor::V4 => self.tools.helm4.clone(),
        }
    }

    pub fn image_kind(&self, image: &str) -> Option<ImageKind> {
        let repository = programs::repository(image);
        let last = repository.rsplit('/').next().unwrap_or(&repository);
        let mut binaries = Vec::new();
        let kubectl = self
            .kubectl
            .iter()
            .map(|k| (k.clone(), "kubectl".to_owned()));
        match last {
            "helm" | "helm-kubectl" | "flux-operator-bootstrap" => {
                binaries.push((self.helm_for(image), "helm".to_owned()));
                binaries.extend(self.busybox());
                binaries.extend(kubectl);
                Some(ImageKind::Real {
                    binaries,
                    entrypoint: vec!["helm".into()],
                    cmd: vec!["--help".into()],
                })
            }
            // cilium-cli's Helm mode is the Helm SDK with the Cilium chart: a shim over the real
            // Helm (`acceptance/images/cilium-cli.sh`).
            "cilium-cli" | "cilium-cli-ci" => Some(ImageKind::Real {
                binaries: vec![
                    (self.helm_for(image), "helm".to_owned()),
                    (
                        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("images/cilium-cli.sh"),
                        "cilium".to_owned(),
                    ),
                ],
                entrypoint: vec!["cilium".into()],
                cmd: vec![],
            }),
            "kubectl" => Some(ImageKind::Real {
                binaries: kubectl.collect(),
                entrypoint: vec!["kubectl".into()],
                cmd: vec![],
            }),
            "busybox" | "alpine" => Some(ImageKind::Real {
                binaries: self.busybox(),
                entrypoint: vec![],
                cmd: vec!["sh".into()],
            }),
            "debian" | "ubuntu" | "bash" => Some(ImageKind::Real {
                binaries,
                entrypoint: vec![],
                cmd: vec!["sh".into()],
            }),
            // The Flux programs built here are always the real ones; only the versions and
            // components that cannot run here are emulated (`programs::flux_image`).
            _ => match programs::flux_image(image, &self.tools, &self.dir) {
                FluxImage::Real(kind) => Some(kind),
                FluxImage::NotBuilt => None,
                FluxImage::Other => super::emulated::lookup(&repository).map(ImageKind::Emulated),
            },
        }
    }

    /// Alpine's userland for Alpine-based images: busybox as `sh` (ash: `set -o pipefail`, which
    /// the machine's dash lacks) and its text tools, when `acceptance/scripts/install-busybox.sh`
    /// has installed it.
    fn busybox(&self) -> Vec<(PathBuf, String)> {
        let busybox = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".work/busybox/bin/busybox");
        if !busybox.is_file() {
            return Vec::new();
        }
        [
            "sh", "ash", "sed", "grep", "awk", "cat", "head", "tail", "tr", "cut", "sort", "wc",
            "base64", "echo", "printf", "ls", "id", "env", "mkdir", "rm", "cp", "mv", "sleep",
            "test", "[", "seq", // the network applets of the busybox and Alpine images
            "wget", "nc", "httpd", "nslookup",
        ]
        .iter()
        .map(|applet| (busybox.clone(), (*applet).to_owned()))
        .collect()
    }

    /// The kubelet reports a container's readiness; a Ready `cilium-agent` brings up the node's
    /// CNI (and its Service dataplane when Cilium replaces kube-proxy), a Ready `kube-proxy` the
    /// node's Service routing.
    pub fn container_ready(
        self: &Arc<Self>,
        node: &str,
        image: &str,
        container: &str,
        ready: bool,
    ) {
        if programs::repository(image) == "kube-proxy" {
            let mut on = self
                .kube_proxy_ready
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if ready {
                on.insert(node.to_owned());
            } else {
                on.remove(node);
            }
            return;
        }
        if programs::repository(image) != "cilium/cilium" || container != "cilium-agent" {
            return;
        }
        let changed = {
            let mut cni = self.cni.lock().unwrap_or_else(|e| e.into_inner());
            if ready {
                cni.insert(node.to_owned())
            } else {
                cni.remove(node)
            }
        };
        if !changed {
            return;
        }
        let shared = self.clone();
        let node = node.to_owned();
        tokio::spawn(async move {
            let client = shared
                .node_clients
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&node)
                .cloned();
            let Some(client) = client else { return };
            if ready {
                let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
                if let Ok(Some(cm)) = configmaps.get_opt("cilium-config").await {
                    let kpr = cm
                        .data
                        .and_then(|d| d.get("kube-proxy-replacement").cloned())
                        .is_some_and(|v| v == "true" || v == "strict");
                    shared.cilium_kpr.store(kpr, Ordering::Relaxed);
                }
            }
            shared.cni_tx.send_modify(|v| *v += 1);
            if let Some(info) = shared.nodes.iter().find(|n| n.name == node) {
                let ready = shared.cni_ready(&node);
                if let Err(e) = nodes::set_ready(&client, info, ready).await {
                    tracing::warn!(error = %e, "failed to update the node's Ready condition");
                }
            }
        });
    }

    /// A client acting as the pod's ServiceAccount, with a token the kubelet requests for it.
    pub async fn service_account_client(
        &self,
        kubelet: &Kubelet,
        pod: &Pod,
    ) -> anyhow::Result<kube::Client> {
        let token = super::kubelet::token_for(kubelet, pod, Some(3600), None)
            .await
            .map_err(|e| anyhow::anyhow!(e))?;
        let b64 = |s: &str| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, s);
        let yaml = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority-data: {}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: {token}\n",
            self.server_url,
            b64(&self.ca_pem)
        );
        control_plane::client_from_kubeconfig(&yaml).await
    }

    /// A pod's `/etc`: `hosts` naming the chart repositories, the renamed `kubernetes` Service
    /// and, for a pod-network pod (`namespace` given), the Services as seen from its namespace
    /// ([`super::services`]); a CA bundle with the cluster CA, users for the pods' non-root ids.
    pub fn write_etc(&self, dir: &Path, namespace: Option<&str>) -> std::io::Result<()> {
        if dir.join("hosts").exists() {
            return Ok(());
        }
        std::fs::create_dir_all(dir.join("ssl/certs"))?;
        match namespace {
            Some(namespace) => self.services.write_hosts(dir, namespace)?,
            None => std::fs::write(dir.join("hosts"), &self.base_hosts)?,
        }
        std::fs::write(dir.join("resolv.conf"), "")?;
        std::fs::write(dir.join("nsswitch.conf"), "hosts: files dns\n")?;
        std::fs::write(
            dir.join("passwd"),
            "root:x:0:0:root:/root:/bin/sh\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
        )?;
        std::fs::write(dir.join("group"), "root:x:0:\nnonroot:x:65532:\n")?;
        std::fs::write(dir.join("ssl/certs/ca-certificates.crt"), &self.trusted_pem)?;
        Ok(())
    }
}

/// The `hosts` lines of every pod: localhost, the chart repositories, the renamed `kubernetes`
/// Service, the Git hosts.
fn base_hosts(charts: Option<&(SocketAddr, Vec<String>)>, git: Option<&GitServers>) -> String {
    let charts = charts.map(|(_, h)| h.join(" ")).unwrap_or_default();
    let git = git.map(GitServers::hosts_lines).unwrap_or_default();
    format!(
        "127.0.0.1\tlocalhost {charts}\n::1\tlocalhost\n127.0.0.2\tkubernetes kubernetes.default kubernetes.default.svc kubernetes.default.svc.cluster.local\n{git}"
    )
}

/// The Helm values of the Talos docs' inline-manifest method for Cilium: IPAM `kubernetes`,
/// kube-proxy replacement over KubePrism, cgroup auto-mount off, capabilities without
/// `SYS_MODULE`.
pub const INLINE_CILIUM_VALUES: &str = r#"{
  "ipam": {"mode": "kubernetes"},
  "kubeProxyReplacement": true,
  "k8sServiceHost": "localhost",
  "k8sServicePort": 7445,
  "cgroup": {"autoMount": {"enabled": false}, "hostRoot": "/sys/fs/cgroup"},
  "securityContext": {"capabilities": {
    "ciliumAgent": ["CHOWN", "KILL", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "SYS_ADMIN", "SYS_RESOURCE", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID"],
    "cleanCiliumState": ["NET_ADMIN", "SYS_ADMIN", "SYS_RESOURCE"]
  }}
}"#;

/// A running cluster.
pub struct TalosCluster {
    pub plane: ControlPlane,
    /// In front of the apiserver for every client but the node layer's own: the kubeconfig,
    /// KubePrism and the Service address lead here.
    pub proxy: FaultProxy,
    pub shared: Arc<Shared>,
    pub config: TalosConfig,
    kubelets: HashMap<String, CancellationToken>,
    stop: CancellationToken,
    _log_servers: Vec<KubeletLogServer>,
    _host_netns: Vec<Arc<NetNs>>,
    /// The Git servers of [`TalosConfig::git`].
    git: Option<GitServers>,
    /// From the first process started to every node registered and its kubelet running.
    pub started_in: Duration,
}

impl std::fmt::Debug for TalosCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TalosCluster")
            .field("plane", &self.plane)
            .finish_non_exhaustive()
    }
}

/// A loopback address for a node, unique in this process and, by the process id, unlikely to
/// collide with another test process's: `127.P.H.L`.
fn next_node_address() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let p = 1 + std::process::id() % 250;
    format!("127.{p}.{}.{}", (n / 250) % 250, 2 + n % 250)
}

/// The chart repositories: one [`ChartServer`](super::charts::ChartServer) per process, on its own
/// thread and runtime (so it outlives the runtime of the test that started it first), packaging
/// the charts once. Pods trust its CA beside the cluster's.
struct Charts {
    addr: SocketAddr,
    hostnames: Vec<String>,
    ca_pem: String,
    /// (chart, version, package) of every published chart.
    packages: Vec<(String, String, PathBuf)>,
}

/// The packed charts of one process live in `<tmp>/talos-sim-charts-<pid>` for as long as it
/// serves them: the server is a process-wide static, which is never dropped.
const CHART_DIR_PREFIX: &str = "talos-sim-charts-";

/// Removes the chart directories of processes that have ended (a test binary cannot clean up
/// after its statics), so runs do not pile them up in the temporary directory.
fn remove_stale_chart_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(CHART_DIR_PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn charts(helm: &Path) -> anyhow::Result<&'static Charts> {
    static CHARTS: std::sync::OnceLock<Result<Charts, String>> = std::sync::OnceLock::new();
    let helm = helm.to_owned();
    CHARTS
        .get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::Builder::new()
                .name("talos-sim-charts".into())
                .spawn(move || {
                    let runtime = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(rt) => rt,
                        Err(e) => {
                            let _ = tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    runtime.block_on(async move {
                        let started = async {
                            let charts_dir = super::charts::default_charts_dir();
                            let hostnames = super::charts::served_hostnames(&charts_dir)?;
                            let certs = super::charts::test_certificates(&hostnames)?;
                            remove_stale_chart_dirs();
                            let work_dir = std::env::temp_dir()
                                .join(format!("{CHART_DIR_PREFIX}{}", std::process::id()));
                            std::fs::create_dir_all(&work_dir)?;
                            let server = super::charts::ChartServer::start(
                                super::charts::ChartServerConfig {
                                    charts_dir,
                                    helm,
                                    work_dir,
                                    cert_pem: certs.cert_pem,
                                    key_pem: certs.key_pem,
                                },
                            )
                            .await?;
                            anyhow::Ok((server, hostnames, certs.ca_pem))
                        };
                        match started.await {
                            Ok((server, hostnames, ca_pem)) => {
                                let packages = server
                                    .published()
                                    .iter()
                                    .map(|p| (p.name.clone(), p.version.clone(), p.package.clone()))
                                    .collect();
                                let _ = tx.send(Ok(Charts {
                                    addr: server.addr(),
                                    hostnames,
                                    ca_pem,
                                    packages,
                                }));
                                // Serves for the rest of the process.
                                std::future::pending::<()>().await;
                                drop(server);
                            }
                            Err(e) => {
                                let _ = tx.send(Err(format!("{e:#}")));
                            }
                        }
                    });
                })
                .map_err(|e| e.to_string())?;
            rx.recv().map_err(|e| e.to_string())?
        })
        .as_ref()
        .map_err(|e| anyhow::anyhow!("the chart repositories failed to start: {e}"))
}

impl TalosCluster {
    pub async fn start(config: TalosConfig) -> anyhow::Result<TalosCluster> {
        let begin = std::time::Instant::now();
        let tools = Tools::find()?;
        // Ports are picked free, then bound by the child processes: another process on the
        // machine can take one in between (etcd then exits at once). A fresh start picks others.
        let mut attempt = 1;
        let plane = loop {
            match ControlPlane::start(
                tools.clone(),
                ControlPlaneOptions {
                    no_pod_security: !config.pod_security,
                    controller_manager_flags: config.controller_manager_flags.clone(),
                    service_cidr: Some(config.service_cidr.clone()),
                },
            )
            .await
            {
                Ok(plane) => break plane,
                Err(e) if attempt < 3 => {
                    tracing::warn!(attempt, error = %format!("{e:#}"), "control plane start failed; retrying");
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        };
        let proxy = FaultProxy::start(FaultProxyConfig {
            serving: plane.serving.clone(),
            ca_pem: plane.pki.ca_pem.clone(),
            front_proxy_client: plane.front_proxy_client.clone(),
            upstream: SocketAddr::from(([127, 0, 0, 1], plane.api_port)),
        })
        .await?;
        let mut infos = Vec::new();
        for i in 0..config.control_planes {
            infos.push(NodeInfo {
                name: format!("talos-cp-{}", i + 1),
                role: Role::ControlPlane,
                ip: String::new(),
            });
        }
        for i in 0..config.workers {
            infos.push(NodeInfo {
                name: format!("talos-worker-{}", i + 1),
                role: Role::Worker,
                ip: String::new(),
            });
        }
        for info in infos.iter_mut() {
            info.ip = next_node_address();
        }
        let charts = tokio::task::spawn_blocking({
            let helm = tools.helm.clone();
            move || charts(&helm)
        })
        .await??;
        let kubectl = std::env::var_os("TALOSBOOT_KUBECTL")
            .map(PathBuf::from)
            .or_else(|| {
                Some(
                    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".work/kubectl/usr/bin/kubectl"),
                )
            })
            .filter(|p| p.is_file());
        let (cni_tx, _) = watch::channel(0);
        let chart_hosts = Some((charts.addr, charts.hostnames.clone()));
        let git = if config.git.is_empty() {
            None
        } else {
            Some(GitServers::start(&config.git).await?)
        };
        let hosts = base_hosts(chart_hosts.as_ref(), git.as_ref());
        let services = Dataplane::new(hosts.clone());
        let shared = Arc::new(Shared {
            dir: plane.dir.path().join("node"),
            logs: LogStore::new(),
            dial_timeout: config.dial_timeout,
            tools: tools.clone(),
            apiserver: proxy.addr(),
            server_url: proxy.url(),
            ca_pem: plane.pki.ca_pem.clone(),
            trusted_pem: format!("{}{}", plane.pki.ca_pem, charts.ca_pem),
            charts: chart_hosts,
            kubeprism: config.kubeprism,
            service_host: control_plane::service_host(&config.service_cidr)?,
            kube_proxy_ready: Mutex::new(HashSet::new()),
            nodes: infos.clone(),
            cni: Mutex::new(HashSet::new()),
            cni_tx,
            cilium_kpr: AtomicBool::new(false),
            ids: AtomicU64::new(1),
            node_clients: Mutex::new(HashMap::new()),
            kubectl,
            services: services.clone(),
            base_hosts: hosts,
            git_relays: git.as_ref().map(GitServers::relays).unwrap_or_default(),
            kubelet_faults: KubeletFaults::default(),
            images: Mutex::new(HashSet::new()),
        });
        std::fs::create_dir_all(&shared.dir)?;
        for (kind, pattern, nodes) in &config.kubelet_faults {
            shared
                .kubelet_faults
                .set(Source::Process, *kind, pattern, nodes.clone());
        }
        let stop = CancellationToken::new();
        tokio::spawn(services.run(plane.client().await?, stop.child_token()));
        tokio::spawn(kubelet_faults_from_configmap(
            plane.client().await?,
            shared.clone(),
            stop.child_token(),
        ));
        let mut cluster = TalosCluster {
            plane,
            proxy,
            shared: shared.clone(),
            config,
            kubelets: HashMap::new(),
            stop: stop.clone(),
            _log_servers: Vec::new(),
            _host_netns: Vec::new(),
            git,
            started_in: Duration::ZERO,
        };
        for info in &infos {
            cluster.start_node(info).await?;
        }
        // The nodes registered while the controller-manager built its controllers.
        cluster
            .plane
            .wait_for_default_service_account(Duration::from_secs(60))
            .await?;
        if cluster.config.kube_proxy {
            cluster.deploy_kube_proxy().await?;
        }
        if let Some(version) = cluster.config.inline_cilium.clone() {
            let package = charts
                .packages
                .iter()
                .find(|(name, v, _)| name == "cilium" && *v == version)
                .map(|(_, _, p)| p.clone())
                .ok_or_else(|| anyhow::anyhow!("no cilium chart {version} to inline"))?;
            cluster.apply_inline_cilium(&package).await?;
        }
        cluster.started_in = begin.elapsed();
        Ok(cluster)
    }

    async fn start_node(&mut self, info: &NodeInfo) -> anyhow::Result<()> {
        let client = self
            .plane
            .client_as(&format!("system:node:{}", info.name), &["system:nodes"])
            .await?;
        self.shared
            .node_clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(info.name.clone(), client.clone());
        nodes::register(&client, info).await?;
        nodes::label_role(&self.plane.client().await?, info).await?;
        let serving =
            self.plane
                .pki
                .leaf(&info.name, &[], &[&info.ip, &info.name], Usage::Server)?;
        let server = KubeletLogServer::start(
            info.ip.parse()?,
            nodes::KUBELET_PORT,
            &serving.cert_pem,
            &serving.key_pem,
            &self.plane.pki.ca_pem,
            self.shared.logs.clone(),
        )?;
        self._log_servers.push(server);
        let netns = Arc::new(NetNs::create(self.shared.relays(Some(info))).await?);
        self._host_netns.push(netns.clone());
        let stop = self.stop.child_token();
        tokio::spawn(nodes::heartbeat(client.clone(), info.clone(), stop.clone()));
        let kubelet = Arc::new(Kubelet {
            node: info.name.clone(),
            client,
            shared: self.shared.clone(),
            host_netns: netns,
            events: Default::default(),
        });
        tokio::spawn(kubelet.run(stop.clone()));
        self.kubelets.insert(info.name.clone(), stop);
        Ok(())
    }

    /// The `kube-proxy` DaemonSet Talos deploys unless `cluster.proxy.disabled: true` (applied
    /// with admin credentials, as Talos applies its bootstrap manifests).
    async fn deploy_kube_proxy(&self) -> anyhow::Result<()> {
        use k8s_openapi::api::apps::v1::DaemonSet;
        let daemonset: DaemonSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "kube-proxy", "namespace": "kube-system", "labels": {"k8s-app": "kube-proxy", "tier": "node"}},
            "spec": {
                "selector": {"matchLabels": {"k8s-app": "kube-proxy"}},
                "template": {
                    "metadata": {"labels": {"k8s-app": "kube-proxy", "tier": "node"}},
                    "spec": {
                        "hostNetwork": true,
                        "priorityClassName": "system-node-critical",
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [{
                            "name": "kube-proxy",
                            "image": format!("registry.k8s.io/kube-proxy:{}", nodes::KUBELET_VERSION),
                            "command": ["/usr/local/bin/kube-proxy", "--cluster-cidr=10.244.0.0/16", "--proxy-mode=iptables"],
                            "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": "localhost"}, {"name": "KUBERNETES_SERVICE_PORT", "value": "7445"}],
                            "securityContext": {"privileged": true},
                        }],
                    },
                },
            },
        }))?;
        Api::<DaemonSet>::namespaced(self.plane.client().await?, "kube-system")
            .create(&Default::default(), &daemonset)
            .await
            .map_err(|e| anyhow::anyhow!("failed to deploy kube-proxy: {e}"))?;
        Ok(())
    }

    /// Makes pulls of images matching `image_pattern` (`*` matches any run of characters: see
    /// [`super::kubelet_faults`]) fail on `nodes` (`None`: every node), as a registry without
    /// the image fails them: each container of the image waits in `ErrImagePull`, then
    /// `ImagePullBackOff`, and the kubelet records the events `Pulling`, `Failed` (`Failed to
    /// pull image "IMAGE": ...`, `Error: ErrImagePull`), `BackOff` (`Back-off pulling image
    /// "IMAGE"`) and `Failed` (`Error: ImagePullBackOff`) on the pod. Pods already running are
    /// not touched.
    pub fn set_image_pull_failure(&self, image_pattern: &str, nodes: Option<Vec<String>>) {
        self.shared
            .kubelet_faults
            .set(Source::Process, FaultKind::ImagePull, image_pattern, nodes);
    }

    /// Lifts [`set_image_pull_failure`](Self::set_image_pull_failure) for the same pattern on
    /// `nodes` (`None`: everywhere): the kubelet's next pull (its back-off is at most 5 s here)
    /// succeeds and the container starts.
    pub fn clear_image_pull_failure(&self, image_pattern: &str, nodes: Option<Vec<String>>) {
        self.shared.kubelet_faults.clear(
            Source::Process,
            FaultKind::ImagePull,
            image_pattern,
            nodes,
            &self.node_names(),
        );
    }

    /// Makes the containers (not the init containers) of images matching `image_pattern` on
    /// `nodes` (`None`: every node) start and exit 1 at once: the restart policy applies, so a
    /// pod's container goes `CrashLoopBackOff` with a growing restart count and the kubelet's
    /// `BackOff` event (`Back-off restarting failed container NAME in pod POD_NS(UID)`).
    /// A container already running goes on until it restarts (delete the pod to restart it).
    pub fn set_crash_loop(&self, image_pattern: &str, nodes: Option<Vec<String>>) {
        self.shared
            .kubelet_faults
            .set(Source::Process, FaultKind::CrashLoop, image_pattern, nodes);
    }

    /// Lifts [`set_crash_loop`](Self::set_crash_loop): the next restart after the back-off
    /// runs the program.
    pub fn clear_crash_loop(&self, image_pattern: &str, nodes: Option<Vec<String>>) {
        self.shared.kubelet_faults.clear(
            Source::Process,
            FaultKind::CrashLoop,
            image_pattern,
            nodes,
            &self.node_names(),
        );
    }

    /// Whether the kubelet of `node` has its pod network up (a Ready `cilium-agent` on it):
    /// what it checks before it creates a pod-network sandbox.
    pub fn cni_ready(&self, node: &str) -> bool {
        self.shared.cni_ready(node)
    }

    /// The package (`.tgz`) the chart repositories serve for `chart` at `version`, for a test's
    /// own `helm` on the machine (the repositories' hosts resolve only inside pods).
    pub fn chart_package(&self, chart: &str, version: &str) -> Option<PathBuf> {
        charts(&self.shared.tools.helm)
            .ok()?
            .packages
            .iter()
            .find(|(name, v, _)| name == chart && v == version)
            .map(|(_, _, path)| path.clone())
    }

    fn node_names(&self) -> Vec<String> {
        self.shared.nodes.iter().map(|n| n.name.clone()).collect()
    }

    /// Cilium as Talos' inline-manifest method installs it: `helm template` with the values the
    /// Talos docs give, as the inline manifest `cilium`, applied as the node of
    /// [`TalosConfig::talos_version`] applies it ([`manifests::boot`]), with no Helm release record.
    async fn apply_inline_cilium(&self, package: &Path) -> anyhow::Result<()> {
        let dir = self.plane.dir.path().join("inline-cilium");
        std::fs::create_dir_all(&dir)?;
        let values = dir.join("values.json");
        std::fs::write(&values, INLINE_CILIUM_VALUES)?;
        let rendered = tokio::process::Command::new(&self.shared.tools.helm)
            .arg("template")
            .arg("cilium")
            .arg(package)
            .args(["--namespace", "kube-system", "-f"])
            .arg(&values)
            .env("HELM_CACHE_HOME", dir.join("cache"))
            .env("HELM_CONFIG_HOME", dir.join("config"))
            .env("HELM_DATA_HOME", dir.join("data"))
            .output()
            .await?;
        anyhow::ensure!(
            rendered.status.success(),
            "helm template of the inline Cilium failed: {}",
            String::from_utf8_lossy(&rendered.stderr)
        );
        let cilium = InlineManifest {
            name: "cilium".into(),
            contents: String::from_utf8(rendered.stdout)?,
        };
        manifests::boot(
            &self.plane.client().await?,
            self.config.talos_version,
            &[cilium],
        )
        .await
        .map_err(|e| anyhow::anyhow!("applying the inline Cilium failed: {e}"))?;
        Ok(())
    }

    /// Stops a node's kubelet: no more Lease renewals or pod updates (the controller-manager
    /// then marks the node `Unknown`, as for a real node whose kubelet died).
    pub fn stop_kubelet(&mut self, node: &str) {
        if let Some(stop) = self.kubelets.remove(node) {
            stop.cancel();
        }
    }

    pub fn nodes(&self) -> &[NodeInfo] {
        &self.shared.nodes
    }

    /// An admin client straight to the apiserver (what a test checks with: no faults).
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        self.plane.client().await
    }

    /// The admin kubeconfig users get: through the fault proxy.
    pub fn kubeconfig_yaml(&self) -> String {
        self.plane.kubeconfig_for(&self.proxy.url())
    }

    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig_yaml())
    }

    /// The API endpoint users get (the fault proxy's).
    pub fn server_url(&self) -> String {
        self.proxy.url()
    }

    /// The Git servers ([`TalosConfig::git`]): commit to a repository, its head, the
    /// `known_hosts` lines, keys authorized or revoked at run time. `None` without repositories.
    pub fn git(&self) -> Option<&GitServers> {
        self.git.as_ref()
    }

    /// The faults the proxy injects between the clients and the apiserver.
    pub fn faults(&self) -> &crate::faults::Faults {
        self.proxy.faults()
    }
}

impl Drop for TalosCluster {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Keeps the faults of the ConfigMap `kube-system/talos-sim-kubelet-faults` in force (how a
/// running `talos-sim serve` is told at run time: keys `image-pull-failure` and `crash-loop`, one
/// `PATTERN` or `PATTERN@NODE,NODE` a line); a deleted ConfigMap clears them.
async fn kubelet_faults_from_configmap(
    client: kube::Client,
    shared: Arc<Shared>,
    stop: CancellationToken,
) {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let api: Api<ConfigMap> = Api::namespaced(client, "kube-system");
    let config =
        watcher::Config::default().fields(&format!("metadata.name={}", kubelet_faults::CONFIGMAP));
    let mut events = watcher(api, config).boxed();
    loop {
        let event = tokio::select! {
            _ = stop.cancelled() => return,
            event = events.next() => event,
        };
        match event {
            Some(Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm))) => {
                let data = cm.data.unwrap_or_default();
                shared
                    .kubelet_faults
                    .replace(Source::ConfigMap, kubelet_faults::rules_of(&data));
            }
            Some(Ok(watcher::Event::Delete(_))) => {
                shared.kubelet_faults.replace(Source::ConfigMap, Vec::new());
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                tracing::debug!(error = %e, "kubelet faults watch error");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            None => return,
        }
    }
}
