//! [`SimCluster`]: a running simulated cluster: PKI, HTTPS API server, seeded objects and
//! controllers. Dropping it (or [`SimCluster::shutdown`]) stops everything.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::SimConfig;
use crate::controller::{self, Controller, ControllerContext};
use crate::faults::Faults;
use crate::pki::Pki;
use crate::server::{self, ServerState};
use crate::store::Store;

/// A running simulated cluster.
pub struct SimCluster {
    addr: SocketAddr,
    state: Arc<ServerState>,
    config: SimConfig,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for SimCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimCluster")
            .field("addr", &self.addr)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl SimCluster {
    /// Generates the PKI, binds the listener, seeds the initial objects and starts the built-in
    /// and cluster controllers. Errors: PKI generation, binding the listen address.
    pub async fn start(config: SimConfig) -> anyhow::Result<SimCluster> {
        Self::start_with(config, Vec::new()).await
    }

    /// [`SimCluster::start`] plus extra controllers (for tests of a controller in isolation).
    pub async fn start_with(
        config: SimConfig,
        extra: Vec<Box<dyn Controller>>,
    ) -> anyhow::Result<SimCluster> {
        let pki = Pki::generate()?;
        let listen = config
            .listen
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| anyhow::anyhow!("failed to bind {listen}: {e}"))?;
        let addr = listener.local_addr()?;
        let store = Store::new(config.pace);
        store.set_pod_security(config.pod_security);
        store.set_rbac(config.rbac);
        crate::seed::seed(&store, &config, addr)
            .map_err(|e| anyhow::anyhow!("failed to seed the cluster: {e}"))?;
        let state = Arc::new(ServerState {
            store: store.clone(),
            faults: Faults::default(),
            pki: std::sync::Arc::new(pki),
            shutdown: CancellationToken::new(),
        });
        let mut tasks = vec![tokio::spawn(server::serve(listener, state.clone()))];
        let ctx = ControllerContext {
            store,
            config: config.clone(),
            faults: state.faults.clone(),
            shutdown: state.shutdown.clone(),
        };
        let controllers = controller::builtin_controllers()
            .into_iter()
            .chain(controller::cluster_controllers(&config))
            .chain(extra);
        for c in controllers {
            let name = c.name().to_string();
            tracing::debug!(controller = %name, "starting controller");
            tasks.push(tokio::spawn(c.run(ctx.clone())));
        }
        tracing::info!(%addr, "talos-sim API server listening");
        Ok(SimCluster {
            addr,
            state,
            config,
            tasks,
        })
    }

    /// `https://127.0.0.1:PORT`.
    pub fn server_url(&self) -> String {
        format!("https://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    pub fn ca_pem(&self) -> &str {
        &self.state.pki.ca_pem
    }

    pub fn admin_cert_pem(&self) -> &str {
        &self.state.pki.admin_cert_pem
    }

    pub fn admin_key_pem(&self) -> &str {
        &self.state.pki.admin_key_pem
    }

    pub fn admin_token(&self) -> &str {
        &self.state.pki.admin_token
    }

    fn kubeconfig(&self, user: &str) -> String {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: talos-sim\n  cluster:\n    server: {}\n    certificate-authority-data: {}\ncontexts:\n- name: admin@talos-sim\n  context:\n    cluster: talos-sim\n    user: admin@talos-sim\n    namespace: default\ncurrent-context: admin@talos-sim\npreferences: {{}}\nusers:\n- name: admin@talos-sim\n  user:\n{user}",
            self.server_url(),
            b64(self.ca_pem()),
        )
    }

    /// Kubeconfig with client-certificate auth: context `admin@talos-sim`, cluster `talos-sim`.
    pub fn kubeconfig_yaml(&self) -> String {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        self.kubeconfig(&format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(self.admin_cert_pem()),
            b64(self.admin_key_pem())
        ))
    }

    /// A bearer token of ServiceAccount `namespace/name` (valid while the ServiceAccount
    /// exists): requests with it are authorized by RBAC as
    /// `system:serviceaccount:NAMESPACE:NAME`, like a projected token on a real cluster.
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        crate::server::service_account_token(&self.state.pki, namespace, name)
    }

    /// Kubeconfig authenticating as ServiceAccount `namespace/name` (same cluster and context
    /// names as [`SimCluster::kubeconfig_yaml`]).
    pub fn service_account_kubeconfig_yaml(&self, namespace: &str, name: &str) -> String {
        self.kubeconfig(&format!(
            "    token: {}\n",
            self.service_account_token(namespace, name)
        ))
    }

    /// Kubeconfig with bearer-token auth (same names).
    pub fn token_kubeconfig_yaml(&self) -> String {
        self.kubeconfig(&format!("    token: {}\n", self.admin_token()))
    }

    /// Writes [`SimCluster::kubeconfig_yaml`] to `path` (mode 0600 on Unix).
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig_yaml())?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        }
        Ok(())
    }

    /// The in-process API (for controllers and test setup, not for assertions).
    pub fn store(&self) -> &Store {
        &self.state.store
    }

    pub fn faults(&self) -> &Faults {
        &self.state.faults
    }

    /// Stops the server and controllers and waits for them (at most 5 s, then aborts them).
    pub async fn shutdown(mut self) {
        self.state.shutdown.cancel();
        for t in self.tasks.drain(..) {
            let abort = t.abort_handle();
            if tokio::time::timeout(std::time::Duration::from_secs(5), t)
                .await
                .is_err()
            {
                tracing::warn!("a controller did not stop within 5 s; aborting it");
                abort.abort();
            }
        }
    }
}

impl Drop for SimCluster {
    fn drop(&mut self) {
        self.state.shutdown.cancel();
        for t in &self.tasks {
            t.abort();
        }
    }
}
