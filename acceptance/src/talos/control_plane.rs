//! [`ControlPlane`]: the real etcd, kube-apiserver, kube-controller-manager and kube-scheduler,
//! started as child processes with Talos' settings where they matter to the provider:
//! - Pod Security admission as Talos configures it: enforce `baseline`, audit and warn
//!   `restricted`, `kube-system` exempt;
//! - `Node,RBAC` authorization and the `NodeRestriction` admission plugin;
//! - ServiceAccount tokens signed by the cluster's key, issuer `https://kubernetes.default.svc.cluster.local`;
//! - the Service CIDR `10.96.0.0/12` (the `kubernetes` Service is `10.96.0.1:443`), or another
//!   ([`ControlPlaneOptions::service_cidr`]: the Service is then at its first address);
//! - the apiserver reaches kubelets at their `InternalIP` (loopback addresses here) with its own
//!   client certificate;
//! - the controller-manager runs every controller with per-controller ServiceAccount credentials.
//!
//! Everything listens on random loopback ports and keeps its data in a temporary directory;
//! dropping the value kills every process (see [`super::process`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine;

use super::pki::{API_SERVER_SANS, CertPair, ClusterPki, Usage};
use super::process::{Supervised, free_port};
use super::tools::Tools;

/// The Service CIDR, as Talos' default.
pub const SERVICE_CIDR: &str = "10.96.0.0/12";

/// The `kubernetes` Service's ClusterIP in `cidr`: its first address, which the apiserver
/// reserves for it (`10.96.0.1` in Talos' default). Errors say what is wrong with `cidr`.
pub fn service_host(cidr: &str) -> anyhow::Result<String> {
    let (network, bits) = cidr
        .split_once('/')
        .ok_or_else(|| anyhow::anyhow!("Service CIDR {cidr:?}: not ADDRESS/BITS"))?;
    let bits: u32 = bits
        .parse()
        .map_err(|_| anyhow::anyhow!("Service CIDR {cidr:?}: the prefix length is no number"))?;
    let first = match network.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) if (8..=30).contains(&bits) => {
            let mask = u32::MAX << (32 - bits);
            std::net::IpAddr::V4((u32::from(ip) & mask).wrapping_add(1).into())
        }
        Ok(std::net::IpAddr::V6(ip)) if (64..=126).contains(&bits) => {
            let mask = u128::MAX << (128 - bits);
            std::net::IpAddr::V6((u128::from(ip) & mask).wrapping_add(1).into())
        }
        Ok(_) => anyhow::bail!(
            "Service CIDR {cidr:?}: the prefix length is out of range (IPv4 /8-/30, IPv6 /64-/126)"
        ),
        Err(_) => anyhow::bail!("Service CIDR {cidr:?}: {network:?} is no IP address"),
    };
    Ok(first.to_string())
}

/// Talos' Pod Security defaults.
const ADMISSION_CONFIG: &str = r#"apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: baseline
      enforce-version: latest
      audit: restricted
      audit-version: latest
      warn: restricted
      warn-version: latest
    exemptions:
      usernames: []
      runtimeClasses: []
      namespaces: [kube-system]
"#;

/// Controllers a test cluster does without: volumes (no test has a PersistentVolume or a CSI
/// driver), quotas and autoscaling (none set), certificate requests (kubelet certificates are
/// minted, not requested), dynamic resources, ReplicationControllers, node TTL annotations,
/// mirrored Endpoints, storage-version and admission-policy status, legacy token cleanup.
/// The controller-manager builds its controllers one by one, each with its own ServiceAccount
/// credentials, before it starts any: these were about half of that work, and of the wait for
/// the `default` ServiceAccount that every cluster start ends with. Every controller a test or
/// a chart relies on runs: Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs, CronJobs,
/// TTL after finished, garbage collection, namespaces, ServiceAccounts and their tokens, root CA
/// ConfigMaps, node lifecycle and taint eviction, pod GC, Endpoints and EndpointSlices, Service
/// CIDRs, disruption budgets, ClusterRole aggregation.
const UNUSED_CONTROLLERS: [&str; 22] = [
    "persistentvolume-attach-detach-controller",
    "persistentvolume-binder-controller",
    "persistentvolume-expander-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
    "ephemeral-volume-controller",
    "volumeattributesclass-protection-controller",
    "resourcequota-controller",
    "horizontal-pod-autoscaler-controller",
    "certificatesigningrequest-approving-controller",
    "certificatesigningrequest-cleaner-controller",
    "certificatesigningrequest-signing-controller",
    "podcertificaterequest-cleaner-controller",
    "kube-apiserver-serving-clustertrustbundle-publisher-controller",
    "resourceclaim-controller",
    "device-taint-eviction-controller",
    "replicationcontroller-controller",
    "ttl-controller",
    "endpointslice-mirroring-controller",
    "storage-version-migrator-controller",
    "validatingadmissionpolicy-status-controller",
    "legacy-serviceaccount-token-cleaner-controller",
];

/// Settings of one control plane.
#[derive(Clone, Debug, Default)]
pub struct ControlPlaneOptions {
    /// Pod Security admission as Talos configures it (default on).
    pub no_pod_security: bool,
    /// Extra flags for kube-controller-manager (e.g. a shorter `--node-monitor-grace-period`).
    pub controller_manager_flags: Vec<String>,
    /// The Service CIDR (`None`: Talos' default, [`SERVICE_CIDR`]).
    pub service_cidr: Option<String>,
}

/// A running control plane.
pub struct ControlPlane {
    pub pki: ClusterPki,
    /// `https://127.0.0.1:PORT`.
    pub server: String,
    pub api_port: u16,
    admin: CertPair,
    /// The apiserver's serving certificate (a proxy in front of it presents the same).
    pub serving: CertPair,
    /// The front-proxy client certificate (see [`super::fault_proxy`]).
    pub front_proxy_client: CertPair,
    /// The apiserver's client certificate for kubelets; kubelets trust the cluster CA.
    pub dir: tempfile::TempDir,
    processes: Vec<Supervised>,
    pub tools: Tools,
    /// How long the start took, up to a ready apiserver with its controllers running (set by
    /// [`Self::wait_for_default_service_account`]).
    pub started_in: Duration,
    begin: Instant,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("server", &self.server)
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

/// A kubeconfig for `server` with client-certificate credentials.
pub fn kubeconfig(server: &str, ca_pem: &str, user: &CertPair, name: &str) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: talos-sim\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\ncontexts:\n- name: {name}@talos-sim\n  context:\n    cluster: talos-sim\n    user: {name}@talos-sim\n    namespace: default\ncurrent-context: {name}@talos-sim\npreferences: {{}}\nusers:\n- name: {name}@talos-sim\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
        b64(ca_pem),
        b64(&user.cert_pem),
        b64(&user.key_pem),
    )
}

impl ControlPlane {
    /// Mints the PKI, starts etcd, the apiserver (waiting for `/readyz`), the controller-manager
    /// and the scheduler. Errors name the component that failed, with the end of its log.
    pub async fn start(tools: Tools, options: ControlPlaneOptions) -> anyhow::Result<ControlPlane> {
        let begin = Instant::now();
        let dir = tempfile::Builder::new().prefix("talos-sim-").tempdir()?;
        let pki_dir = dir.path().join("pki");
        std::fs::create_dir_all(&pki_dir)?;
        let pki = ClusterPki::generate()?;
        pki.write(&pki_dir)?;
        let p = |name: &str| pki_dir.join(name).display().to_string();

        let service_cidr = options.service_cidr.as_deref().unwrap_or(SERVICE_CIDR);
        // The Service address is among the names, as on Talos: in-cluster clients dial it.
        let service_ip = service_host(service_cidr)?;
        let sans: Vec<&str> = API_SERVER_SANS
            .iter()
            .copied()
            .chain([service_ip.as_str()])
            .collect();
        let serving = pki.leaf("kube-apiserver", &[], &sans, Usage::Server)?;
        serving.write(&pki_dir, "apiserver")?;
        let kubelet_client = pki.leaf(
            "apiserver-kubelet-client",
            &["system:masters"],
            &[],
            Usage::Client,
        )?;
        kubelet_client.write(&pki_dir, "apiserver-kubelet-client")?;
        let admin = pki.leaf("admin", &["system:masters"], &[], Usage::Client)?;
        // The front-proxy CA: the apiserver trusts `X-Remote-User`/`X-Remote-Group` from a client
        // that this CA signs as `front-proxy-client` (the fault proxy), and from nothing else.
        let front_proxy_ca = ClusterPki::generate()?;
        std::fs::write(pki_dir.join("front-proxy-ca.crt"), &front_proxy_ca.ca_pem)?;
        let front_proxy_client =
            front_proxy_ca.leaf("front-proxy-client", &[], &[], Usage::Client)?;

        let etcd_client = free_port()?;
        let etcd_peer = free_port()?;
        let api_port = free_port()?;
        let server = format!("https://127.0.0.1:{api_port}");
        std::fs::write(dir.path().join("admission.yaml"), ADMISSION_CONFIG)?;

        let mut processes = Vec::new();
        let etcd_url = format!("http://127.0.0.1:{etcd_client}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer}");
        processes.push(Supervised::start(
            "etcd",
            &tools.etcd,
            &strings(&[
                "--name=default",
                &format!("--data-dir={}", dir.path().join("etcd").display()),
                &format!("--listen-client-urls={etcd_url}"),
                &format!("--advertise-client-urls={etcd_url}"),
                &format!("--listen-peer-urls={peer_url}"),
                &format!("--initial-advertise-peer-urls={peer_url}"),
                &format!("--initial-cluster=default={peer_url}"),
                "--log-level=warn",
                // A test cluster's data dies with it: no fsync (etcd's own flag for this).
                "--unsafe-no-fsync",
                "--listen-metrics-urls=",
            ]),
            dir.path().join("etcd.log"),
        )?);

        let mut api_args = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={api_port}"),
            format!("--service-cluster-ip-range={service_cidr}"),
            format!("--tls-cert-file={}", p("apiserver.crt")),
            format!("--tls-private-key-file={}", p("apiserver.key")),
            format!("--client-ca-file={}", p("ca.crt")),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", p("sa.pub")),
            format!("--service-account-signing-key-file={}", p("sa.key")),
            "--authorization-mode=Node,RBAC".into(),
            "--enable-admission-plugins=NodeRestriction".into(),
            "--allow-privileged=true".into(),
            "--endpoint-reconciler-type=none".into(),
            "--kubelet-preferred-address-types=InternalIP".into(),
            format!(
                "--kubelet-client-certificate={}",
                p("apiserver-kubelet-client.crt")
            ),
            format!("--kubelet-client-key={}", p("apiserver-kubelet-client.key")),
            format!("--kubelet-certificate-authority={}", p("ca.crt")),
            format!("--requestheader-client-ca-file={}", p("front-proxy-ca.crt")),
            "--requestheader-allowed-names=front-proxy-client".into(),
            "--requestheader-username-headers=X-Remote-User".into(),
            "--requestheader-group-headers=X-Remote-Group".into(),
            "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
            "--profiling=false".into(),
            "--v=1".into(),
        ];
        if !options.no_pod_security {
            api_args.push(format!(
                "--admission-control-config-file={}",
                dir.path().join("admission.yaml").display()
            ));
        } else {
            api_args.push("--disable-admission-plugins=PodSecurity".into());
        }
        processes.push(Supervised::start(
            "kube-apiserver",
            &tools.kube_apiserver,
            &api_args,
            dir.path().join("kube-apiserver.log"),
        )?);

        let mut plane = ControlPlane {
            pki,
            server,
            api_port,
            admin,
            serving,
            front_proxy_client,
            dir,
            processes,
            tools,
            started_in: Duration::ZERO,
            begin,
        };
        // The controller-manager and the scheduler retry until the apiserver answers: start them
        // at once rather than after its readiness, which saves their start-up time.
        let component = |plane: &ControlPlane, user: &str, file: &str| -> anyhow::Result<PathBuf> {
            let cert = plane.pki.leaf(user, &[], &[], Usage::Client)?;
            let path = plane.dir.path().join(file);
            std::fs::write(
                &path,
                kubeconfig(&plane.server, &plane.pki.ca_pem, &cert, "component"),
            )?;
            Ok(path)
        };
        let cm_config = component(
            &plane,
            "system:kube-controller-manager",
            "controller-manager.kubeconfig",
        )?;
        let scheduler_config = component(&plane, "system:kube-scheduler", "scheduler.kubeconfig")?;
        let pki_path = |name: &str| {
            plane
                .dir
                .path()
                .join("pki")
                .join(name)
                .display()
                .to_string()
        };
        let mut cm_args = vec![
            format!("--kubeconfig={}", cm_config.display()),
            format!("--authentication-kubeconfig={}", cm_config.display()),
            format!("--authorization-kubeconfig={}", cm_config.display()),
            "--leader-elect=false".into(),
            "--bind-address=127.0.0.1".into(),
            "--secure-port=0".into(),
            format!(
                "--controllers=*,{}",
                UNUSED_CONTROLLERS.map(|c| format!("-{c}")).join(",")
            ),
            "--use-service-account-credentials=true".into(),
            // Its client's default rate (20 requests/s, burst 30) paces the start: building the
            // controllers makes a ServiceAccount and a token for each, about 1.5 s of every
            // cluster start spent waiting on the limiter, with the apiserver idle.
            "--kube-api-qps=200".into(),
            "--kube-api-burst=400".into(),
            format!("--service-account-private-key-file={}", pki_path("sa.key")),
            format!("--root-ca-file={}", pki_path("ca.crt")),
            format!("--cluster-signing-cert-file={}", pki_path("ca.crt")),
            format!("--cluster-signing-key-file={}", pki_path("ca.key")),
            format!("--service-cluster-ip-range={service_cidr}"),
            "--v=1".into(),
        ];
        cm_args.extend(options.controller_manager_flags.iter().cloned());
        let cm = Supervised::start(
            "kube-controller-manager",
            &plane.tools.kube_controller_manager,
            &cm_args,
            plane.dir.path().join("kube-controller-manager.log"),
        )?;
        plane.processes.push(cm);
        let scheduler = Supervised::start(
            "kube-scheduler",
            &plane.tools.kube_scheduler,
            &strings(&[
                &format!("--kubeconfig={}", scheduler_config.display()),
                &format!("--authentication-kubeconfig={}", scheduler_config.display()),
                &format!("--authorization-kubeconfig={}", scheduler_config.display()),
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--v=1",
            ]),
            plane.dir.path().join("kube-scheduler.log"),
        )?;
        plane.processes.push(scheduler);
        plane.wait_ready(Duration::from_secs(60)).await?;
        tracing::info!(after = ?begin.elapsed(), "kube-apiserver ready");
        plane.begin = begin;
        Ok(plane)
    }

    /// An admin client (`O=system:masters`).
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        client_from_kubeconfig(&self.kubeconfig_yaml()).await
    }

    /// A client authenticated by a certificate the CA signs for `user` in `groups`.
    pub async fn client_as(&self, user: &str, groups: &[&str]) -> anyhow::Result<kube::Client> {
        let cert = self.pki.leaf(user, groups, &[], Usage::Client)?;
        client_from_kubeconfig(&kubeconfig(&self.server, &self.pki.ca_pem, &cert, "user")).await
    }

    /// The admin kubeconfig: context `admin@talos-sim`, cluster `talos-sim`.
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig(&self.server, &self.pki.ca_pem, &self.admin, "admin")
    }

    /// The admin kubeconfig pointing at another address of the same apiserver (a proxy, KubePrism).
    pub fn kubeconfig_for(&self, server: &str) -> String {
        kubeconfig(server, &self.pki.ca_pem, &self.admin, "admin")
    }

    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig_yaml())
    }

    /// The process ids of the control-plane components (each leads its own process group).
    pub fn pids(&self) -> Vec<u32> {
        self.processes.iter().filter_map(Supervised::pid).collect()
    }

    /// The resident memory of every control-plane process, in KiB, by name.
    pub fn rss_kib(&self) -> Vec<(String, u64)> {
        self.processes
            .iter()
            .filter_map(|p| {
                let status = std::fs::read_to_string(format!("/proc/{}/status", p.pid()?)).ok()?;
                let kib = status
                    .lines()
                    .find(|l| l.starts_with("VmRSS:"))?
                    .split_whitespace()
                    .nth(1)?
                    .parse()
                    .ok()?;
                Some((p.name.clone(), kib))
            })
            .collect()
    }

    /// A component that has exited, with the end of its log.
    fn exited_component(&mut self) -> Option<String> {
        self.processes.iter_mut().find_map(|p| {
            let status = p.exited()?;
            Some(format!("{} exited ({status}):\n{}", p.name, p.log_tail(20)))
        })
    }

    async fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        let client = self.client().await?;
        loop {
            if let Some(dead) = self.exited_component() {
                anyhow::bail!("the control plane failed to start: {dead}");
            }
            let request = http::Request::get("/readyz").body(Vec::new())?;
            if let Ok(text) = client.request_text(request).await
                && text.trim() == "ok"
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "kube-apiserver was not ready within {timeout:?}:\n{}",
                    self.processes[1].log_tail(20)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Pods are refused until the serviceaccount controller has created `default` in their
    /// namespace; wait for it once, so a test's first pod is not refused. [`Self::start`]
    /// returns as soon as the apiserver is ready, so that the caller can do its own start-up
    /// (nodes) while the controller-manager builds its controllers; then it waits here. Sets
    /// [`Self::started_in`].
    pub async fn wait_for_default_service_account(
        &mut self,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        self.wait_for_default_service_account_inner(timeout).await?;
        self.started_in = self.begin.elapsed();
        tracing::info!(server = %self.server, started_in = ?self.started_in, "control plane ready");
        Ok(())
    }

    async fn wait_for_default_service_account_inner(
        &mut self,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        use k8s_openapi::api::core::v1::ServiceAccount;
        let deadline = Instant::now() + timeout;
        let client = self.client().await?;
        let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(client, "default");
        loop {
            if let Some(dead) = self.exited_component() {
                anyhow::bail!("the control plane failed to start: {dead}");
            }
            if accounts.get_opt("default").await.ok().flatten().is_some() {
                return Ok(());
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "the controller-manager did not create the default ServiceAccount within {timeout:?}"
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A `kube::Client` from kubeconfig text.
pub async fn client_from_kubeconfig(yaml: &str) -> anyhow::Result<kube::Client> {
    let config = kube::config::Kubeconfig::from_yaml(yaml)?;
    let config =
        kube::Config::from_custom_kubeconfig(config, &kube::config::KubeConfigOptions::default())
            .await?;
    Ok(kube::Client::try_from(config)?)
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::service_host;

    #[test]
    fn the_kubernetes_service_is_at_the_first_address_of_the_cidr() {
        assert_eq!(service_host("10.96.0.0/12").unwrap(), "10.96.0.1");
        assert_eq!(service_host("10.100.0.0/16").unwrap(), "10.100.0.1");
        assert_eq!(service_host("172.20.7.9/24").unwrap(), "172.20.7.1");
        assert_eq!(service_host("fd00:10:96::/112").unwrap(), "fd00:10:96::1");
        for bad in ["10.96.0.0", "10.96.0.0/x", "10.96.0.0/31", "example/16"] {
            assert!(service_host(bad).is_err(), "{bad}");
        }
    }
}
