//! [`ProgramContext`]: what a program sees of its container: argv, environment, files from
//! volume mounts, the network (API reachability), stdin/stdout/stderr and readiness.
//!
//! stdout and stderr both land in the pod log (they share it, as in `kubectl logs`), unless a
//! shell pipeline captured stdout ([`ProgramContext::with_stdout_captured`]) to feed the next
//! stage's stdin ([`ProgramContext::with_stdin`]); stderr always reaches the log, so a failing
//! stage's diagnostics stay visible behind a filter such as `sed`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use super::{Image, ProgramRegistry, files};
use crate::cluster::network::{self, DialError, Endpoint, Vantage};
use crate::cluster::obj;
use crate::config::SimConfig;
use crate::store::Store;

/// The running container, as its program sees it. Cheap to clone.
#[derive(Clone)]
pub struct ProgramContext {
    /// The in-process API: programs that reached the API server act through it, authorized as
    /// their pod's ServiceAccount (see [`crate::store::rbac`]); `store.system()` is the node's view.
    pub store: Store,
    pub config: SimConfig,
    /// All programs (a shell runs other commands of its image through it).
    pub registry: ProgramRegistry,
    /// The container's image.
    pub image: Image,
    /// The pod, as the kubelet last saw it.
    pub pod: Arc<Value>,
    /// The container's spec.
    pub container: Arc<Value>,
    pub argv: Vec<String>,
    /// The resolved environment (explicit `env` wins over kubelet-injected service variables).
    pub env: BTreeMap<String, String>,
    pub(crate) ready: Arc<watch::Sender<bool>>,
    /// `None`: stdout is the pod log.
    pub(crate) stdout: Option<Capture>,
    /// `None`: nothing to read (the container's own process: pods here never get `stdin: true`).
    pub(crate) stdin: Option<Arc<[u8]>>,
}

/// A program's stdout when a pipe takes it instead of the pod log. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Capture(Arc<Mutex<Vec<u8>>>);

impl Capture {
    fn write(&self, bytes: &[u8]) {
        // A poisoned lock only means another writer panicked; its bytes are still worth keeping.
        let mut buffer = self.0.lock().unwrap_or_else(|e| e.into_inner());
        buffer.extend_from_slice(bytes);
    }

    /// Everything written so far, leaving the capture empty.
    pub fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl std::fmt::Debug for ProgramContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgramContext")
            .field("pod", &self.pod_name())
            .field("container", &self.container_name())
            .field("argv", &self.argv)
            .finish_non_exhaustive()
    }
}

impl ProgramContext {
    pub fn namespace(&self) -> &str {
        obj::namespace(&self.pod)
    }

    pub fn pod_name(&self) -> &str {
        obj::name(&self.pod)
    }

    pub fn container_name(&self) -> &str {
        obj::s(&self.container, "/name")
    }

    pub fn node(&self) -> &str {
        obj::s(&self.pod, "/spec/nodeName")
    }

    pub fn host_network(&self) -> bool {
        self.pod.pointer("/spec/hostNetwork") == Some(&Value::Bool(true))
    }

    /// The same container running another argv (a shell's child process).
    pub fn with_argv(&self, argv: Vec<String>) -> ProgramContext {
        ProgramContext {
            argv,
            ..self.clone()
        }
    }

    /// This context with stdout going to a fresh [`Capture`] (a pipeline stage before the last).
    pub fn with_stdout_captured(&self) -> (ProgramContext, Capture) {
        let capture = Capture::default();
        let ctx = ProgramContext {
            stdout: Some(capture.clone()),
            ..self.clone()
        };
        (ctx, capture)
    }

    /// This context reading `input` on stdin (the previous pipeline stage's output).
    pub fn with_stdin(&self, input: Vec<u8>) -> ProgramContext {
        ProgramContext {
            stdin: Some(input.into()),
            ..self.clone()
        }
    }

    /// What the program reads on stdin (empty when nothing is piped in).
    pub fn stdin(&self) -> &[u8] {
        self.stdin.as_deref().unwrap_or_default()
    }

    /// Writes one line to stdout.
    pub fn out(&self, line: &str) {
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        self.write_out(&bytes);
    }

    /// Writes raw bytes to stdout (`echo -n`, `cat`).
    pub fn write_out(&self, bytes: &[u8]) {
        match &self.stdout {
            Some(capture) => capture.write(bytes),
            None => self.log(bytes),
        }
    }

    /// Writes one line to stderr: always the pod log, even when stdout is piped.
    pub fn err(&self, line: &str) {
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        self.log(&bytes);
    }

    fn log(&self, bytes: &[u8]) {
        self.store.logs().append(
            self.namespace(),
            self.pod_name(),
            self.container_name(),
            bytes,
        );
    }

    /// Reports readiness (used when the container has a `readinessProbe`).
    pub fn set_ready(&self, ready: bool) {
        self.ready.send_replace(ready);
    }

    /// Sleeps for a human-scale duration, scaled by the pace.
    pub async fn sleep(&self, human: Duration) {
        tokio::time::sleep(self.config.pace.scale(human)).await;
    }

    /// The API endpoint in-cluster clients use: `KUBERNETES_SERVICE_HOST`/`_PORT`.
    pub fn endpoint(&self) -> Endpoint {
        let host = self
            .env
            .get("KUBERNETES_SERVICE_HOST")
            .cloned()
            .unwrap_or_else(|| network::SERVICE_HOST.into());
        let port = self
            .env
            .get("KUBERNETES_SERVICE_PORT")
            .and_then(|p| p.parse().ok())
            .unwrap_or(network::SERVICE_PORT);
        Endpoint { host, port }
    }

    /// Connects to the API endpoint: `Ok` when reachable from this pod (see
    /// [`network::check_api`]); a timeout only fails after the dial timeout (scaled by pace), and
    /// a route that appears meanwhile (kube-proxy or Cilium coming up on the node: the SYN is
    /// retransmitted) connects.
    pub async fn dial_api(&self) -> Result<(), DialError> {
        let from = Vantage {
            node: self.node().to_string(),
            host_network: self.host_network(),
        };
        let check =
            || network::check_api(&self.store.system(), &self.config, &from, &self.endpoint());
        let result = check();
        match &result {
            Err(e) if e.is_timeout() => {
                let timeout = network::dial_timeout(self.config.pace);
                let deadline = tokio::time::Instant::now() + timeout;
                let step = (timeout / 10).max(std::time::Duration::from_millis(5));
                while tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(
                        step.min(deadline.saturating_duration_since(tokio::time::Instant::now())),
                    )
                    .await;
                    if check().is_ok() {
                        return Ok(());
                    }
                }
                result
            }
            _ => result,
        }
    }

    /// Reads a file of the container: volume mounts of ConfigMaps, Secrets and projected
    /// volumes are read from the store at the time of the call.
    pub fn read_file(&self, path: &str) -> Result<Vec<u8>, files::FileError> {
        files::read(&self.store.system(), &self.pod, &self.container, path)
    }
}

#[cfg(test)]
impl ProgramContext {
    /// Container `main` of pod `default/test` running `argv` in `image` (a repository of the
    /// built-in registry), on an empty store with no nodes: no API endpoint is reachable.
    pub(crate) fn for_test(image: &str, argv: &[&str]) -> ProgramContext {
        let config = SimConfig::default();
        let registry = ProgramRegistry::builtin();
        let image = registry.image(image).cloned().expect("a built-in image");
        ProgramContext {
            store: Store::new(config.pace),
            config,
            registry,
            image,
            pod: Arc::new(
                serde_json::json!({"metadata": {"name": "test", "namespace": "default"}}),
            ),
            container: Arc::new(serde_json::json!({"name": "main"})),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: BTreeMap::new(),
            ready: Arc::new(watch::channel(false).0),
            stdout: None,
            stdin: None,
        }
    }

    /// The container's log so far.
    pub(crate) fn log_text(&self) -> String {
        let bytes =
            self.store
                .logs()
                .read(self.namespace(), self.pod_name(), self.container_name());
        String::from_utf8_lossy(&bytes).into_owned()
    }
}
