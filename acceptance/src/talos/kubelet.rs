//! A node's kubelet, acting through the API as `system:node:NAME` (so the real Node authorizer
//! and `NodeRestriction` judge it): it watches the pods bound to its node and, for each, runs
//! the sandbox, volumes, image "pulls", init containers and containers, writes the pod status as
//! the kubelet does, restarts containers by the pod's `restartPolicy` (CrashLoopBackOff), and
//! finishes deletions (kill, then delete with grace 0 and the pod's UID as precondition).
//!
//! What a container runs is decided by [`super::programs`]; real programs run in a
//! [`super::sandbox`], emulated ones in this process. Before either starts, the pre-CNI network
//! rule of [`super::network`] decides whether its API endpoint is reachable.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Container as ContainerSpec, Pod, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::watcher;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::cluster::Shared;
use super::kubelet_faults::FaultKind;
use super::network::{self, Endpoint, Route, Vantage};
use super::programs::{Container, Exit, ImageKind};
use super::sandbox::{self, Mount, SandboxSpec};

/// A pod (template) annotation that makes its containers hang until the pod is deleted.
pub const HANG_ANNOTATION: &str = "talos-sim.dev/hang";
/// Setting (or changing) this annotation kills the pod's running containers with SIGKILL, as
/// the OOM killer or a crashed runtime does: each ends with exit code 137 and the pod's restart
/// policy applies. The chaos suite's "bootstrap pod killed".
pub const KILL_ANNOTATION: &str = "talos-sim.dev/kill";

fn kill_request(pod: &Pod) -> Option<String> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(KILL_ANNOTATION)
        .cloned()
}

/// The kubelet's words when a pod outlives its `activeDeadlineSeconds` (its status reason and
/// message, and the event it records).
const DEADLINE_REASON: &str = "DeadlineExceeded";
const DEADLINE_MESSAGE: &str = "Pod was active on the node longer than the specified deadline";

/// The image `PATH` of the Helm and shell images.
const IMAGE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const RUNC: &str = "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process";

/// The image pull back-off: the real kubelet's starts at 10 s and doubles up to 5 minutes;
/// here 1 s up to 5 s, so that a test sees a cleared fault recover within seconds.
const PULL_BACKOFF_START: Duration = Duration::from_secs(1);
const PULL_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// The container's `imagePullPolicy`, defaulted as the apiserver defaults it (`Always` for an
/// untagged or `:latest` image, else `IfNotPresent`).
fn pull_policy(spec: &ContainerSpec) -> String {
    spec.image_pull_policy.clone().unwrap_or_else(|| {
        let image = spec.image.as_deref().unwrap_or_default();
        let tag = super::programs::tag(image);
        if tag.is_empty() || tag == "latest" {
            "Always".into()
        } else {
            "IfNotPresent".into()
        }
    })
}

/// What containerd answers for an image its registry does not have, as the kubelet reports it.
fn pull_error(image: &str) -> String {
    format!(
        "rpc error: code = NotFound desc = failed to pull and unpack image \"{image}\": failed to resolve reference \"{image}\": {image}: not found"
    )
}

/// A duration as Go prints it (`500ms`, `10s`, `1m20s`), for the kubelet's back-off messages.
fn go_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let secs = d.as_secs();
    let frac = ms % 1000;
    let s = if frac == 0 {
        format!("{}s", secs % 60)
    } else {
        format!(
            "{}.{}s",
            secs % 60,
            format!("{frac:03}").trim_end_matches('0')
        )
    };
    match secs / 60 {
        0 => s,
        m => format!("{m}m{s}"),
    }
}

/// The events a kubelet recorded, for aggregation: the real recorder's correlator counts an
/// identical event (same object, type, reason and message) on the one it wrote first.
pub type EventCache = std::sync::Mutex<HashMap<(String, String, String, String), (String, i32)>>;

/// One node's kubelet.
pub struct Kubelet {
    pub node: String,
    pub client: kube::Client,
    pub shared: Arc<Shared>,
    pub host_netns: Arc<super::netns::NetNs>,
    pub events: EventCache,
}

fn now() -> String {
    crate::util::now_rfc3339()
}

impl Kubelet {
    /// Runs until `stop`: one task per pod bound to the node.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let pods: Api<Pod> = Api::all(self.client.clone());
        let config = watcher::Config::default().fields(&format!("spec.nodeName={}", self.node));
        let mut events = watcher(pods, config).boxed();
        let mut workers: HashMap<String, watch::Sender<Arc<Pod>>> = HashMap::new();
        loop {
            let event = tokio::select! {
                _ = stop.cancelled() => return,
                event = events.next() => event,
            };
            let pods = match event {
                Some(Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod))) => vec![pod],
                Some(Ok(watcher::Event::Delete(pod))) => {
                    if let Some(uid) = &pod.metadata.uid {
                        workers.remove(uid);
                    }
                    continue;
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => {
                    tracing::debug!(node = %self.node, error = %e, "kubelet watch error");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
                None => return,
            };
            for pod in pods {
                let Some(uid) = pod.metadata.uid.clone() else {
                    continue;
                };
                let pod = Arc::new(pod);
                if let Some(tx) = workers.get(&uid) {
                    tx.send_replace(pod);
                    continue;
                }
                let (tx, rx) = watch::channel(pod);
                workers.insert(uid, tx);
                let kubelet = self.clone();
                let stop = stop.child_token();
                tokio::spawn(async move { PodWorker::new(kubelet, rx, stop).run().await });
            }
            workers.retain(|_, tx| !tx.is_closed());
        }
    }
}

/// A container's status as the pod status shows it.
#[derive(Clone, Debug)]
struct ContainerStatus {
    name: String,
    image: String,
    state: Value,
    last_state: Value,
    restart_count: i32,
    ready: bool,
    started: bool,
}

impl ContainerStatus {
    fn new(spec: &ContainerSpec) -> ContainerStatus {
        ContainerStatus {
            name: spec.name.clone(),
            image: spec.image.clone().unwrap_or_default(),
            state: json!({"waiting": {"reason": "ContainerCreating"}}),
            last_state: json!({}),
            restart_count: 0,
            ready: false,
            started: false,
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "name": self.name, "image": self.image, "imageID": "", "state": self.state,
            "lastState": self.last_state, "restartCount": self.restart_count, "ready": self.ready,
            "started": self.started,
        })
    }

    fn terminated(&self) -> Option<i64> {
        self.state
            .pointer("/terminated/exitCode")
            .and_then(Value::as_i64)
    }
}

/// What a container runner tells its pod.
enum Update {
    Status(ContainerStatus),
    /// The runner will not run the container again.
    Done,
}

struct PodWorker {
    kubelet: Arc<Kubelet>,
    pod: watch::Receiver<Arc<Pod>>,
    stop: CancellationToken,
    init: Vec<ContainerStatus>,
    main: Vec<ContainerStatus>,
    pod_ip: Option<String>,
    host_ip: String,
    start_time: String,
    initialized: bool,
    published: Option<Value>,
    /// Bumped for every new kill request ([`KILL_ANNOTATION`]).
    kills: watch::Sender<u64>,
    /// Set once the pod outlived its `activeDeadlineSeconds`: its containers are killed and it
    /// fails for good (shared with the status writer while the containers wind down).
    deadline_exceeded: Arc<AtomicBool>,
}

impl PodWorker {
    fn new(
        kubelet: Arc<Kubelet>,
        pod: watch::Receiver<Arc<Pod>>,
        stop: CancellationToken,
    ) -> PodWorker {
        let spec = pod.borrow().spec.clone().unwrap_or_default();
        let host_ip = kubelet.shared.node_ip(&kubelet.node);
        PodWorker {
            init: spec
                .init_containers
                .iter()
                .flatten()
                .map(ContainerStatus::new)
                .collect(),
            main: spec.containers.iter().map(ContainerStatus::new).collect(),
            kubelet,
            pod,
            stop,
            pod_ip: None,
            host_ip,
            start_time: now(),
            initialized: false,
            published: None,
            kills: watch::channel(0).0,
            deadline_exceeded: Arc::new(AtomicBool::new(false)),
        }
    }

    /// How long the pod may stay active on the node (`spec.activeDeadlineSeconds`), counted, as
    /// the kubelet counts it, from when the node took the pod up.
    fn active_deadline(&self) -> Option<Duration> {
        self.current()
            .spec
            .as_ref()
            .and_then(|s| s.active_deadline_seconds)
            .map(|secs| Duration::from_secs(secs.max(0) as u64))
    }

    fn current(&self) -> Arc<Pod> {
        self.pod.borrow().clone()
    }

    fn namespace(&self) -> String {
        self.current()
            .metadata
            .namespace
            .clone()
            .unwrap_or_default()
    }

    fn name(&self) -> String {
        self.current().metadata.name.clone().unwrap_or_default()
    }

    fn deleting(&self) -> bool {
        self.current().metadata.deletion_timestamp.is_some()
    }

    fn finished(&self) -> bool {
        matches!(
            self.current()
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
    }

    async fn run(mut self) {
        let cancel = self.stop.child_token();
        if !self.finished() {
            let pod = self.current();
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            for status in self.init.iter().chain(&self.main) {
                self.kubelet.shared.logs.set_waiting(
                    &self.namespace(),
                    &self.name(),
                    &uid,
                    &status.name,
                    "ContainerCreating",
                );
            }
            self.publish().await;
            let mut pod = self.pod.clone();
            let stop = self.stop.clone();
            let kills = self.kills.clone();
            let mut kill = kill_request(&self.current());
            let deadline = self.active_deadline();
            let deadline_exceeded = self.deadline_exceeded.clone();
            let expiry = async move {
                match deadline {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(expiry);
            let work = self.start(cancel.clone());
            tokio::pin!(work);
            loop {
                tokio::select! {
                    _ = &mut work => break,
                    // The kubelet's active deadline: the pod fails and its containers are
                    // killed; the loop goes on until they have wound down.
                    _ = &mut expiry, if !deadline_exceeded.load(Ordering::Relaxed) => {
                        deadline_exceeded.store(true, Ordering::Relaxed);
                        cancel.cancel();
                    }
                    changed = pod.changed() => {
                        if changed.is_err() || pod.borrow().metadata.deletion_timestamp.is_some() {
                            break;
                        }
                        let requested = kill_request(&pod.borrow());
                        if requested.is_some() && requested != kill {
                            kill = requested;
                            kills.send_modify(|n| *n += 1);
                        }
                    }
                    _ = stop.cancelled() => return,
                }
            }
        }
        if self.deadline_exceeded.load(Ordering::Relaxed) {
            self.event("Normal", DEADLINE_REASON, DEADLINE_MESSAGE)
                .await;
            self.publish().await;
        }
        cancel.cancel();
        // Deletion: the containers were killed with `cancel`; remove the pod for good.
        while !self.deleting() {
            if self.pod.changed().await.is_err() {
                return;
            }
        }
        self.finish_deletion().await;
    }

    async fn finish_deletion(&self) {
        let pod = self.current();
        if let Some(uid) = &pod.metadata.uid {
            self.kubelet.shared.services.unregister_pod(uid);
            self.kubelet
                .events
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|key, _| &key.0 != uid);
        }
        let pods: Api<Pod> = Api::namespaced(self.kubelet.client.clone(), &self.namespace());
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        for _ in 0..20 {
            match pods.delete(&self.name(), &params).await {
                Ok(_) => break,
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => break,
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
        self.kubelet
            .shared
            .logs
            .remove_pod(&self.namespace(), &self.name());
    }

    /// Sandbox, volumes, init containers, containers; returns when every container is done
    /// for good (restartPolicy) or never.
    async fn start(&mut self, cancel: CancellationToken) {
        let pod = self.current();
        let spec = pod.spec.clone().unwrap_or_default();
        let host_network = spec.host_network == Some(true);
        let shared = self.kubelet.shared.clone();
        let node = self.kubelet.node.clone();
        // The sandbox: a pod network only once the node's CNI is up.
        if !host_network {
            let mut cni = shared.cni_watch();
            let mut warned = false;
            while !shared.cni_ready(&node) {
                if !warned {
                    warned = true;
                    self.event("Warning", "FailedCreatePodSandBox", "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox: network is not ready: container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized").await;
                }
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = cni.changed() => {}
                    _ = tokio::time::sleep(Duration::from_secs(10)) => { warned = false; }
                }
            }
            self.pod_ip = Some(shared.allocate_pod_ip(&node));
        } else {
            self.pod_ip = Some(self.host_ip.clone());
        }
        self.publish().await;
        let netns = if host_network {
            self.kubelet.host_netns.clone()
        } else {
            match shared.pod_netns().await {
                Ok(ns) => Arc::new(ns),
                Err(e) => {
                    self.event(
                        "Warning",
                        "FailedCreatePodSandBox",
                        &format!("Failed to create pod sandbox: {e}"),
                    )
                    .await;
                    return;
                }
            }
        };
        // The Service dataplane: every pod is an endpoint; a pod-network pod also a client.
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let etc = (!host_network).then(|| shared.dir.join("pods").join(&uid).join("etc"));
        let own_ports = spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers)
            .flat_map(|c| c.ports.iter().flatten())
            .filter_map(|p| u16::try_from(p.container_port).ok())
            .collect();
        shared
            .services
            .register_pod(&uid, &self.namespace(), &netns, etc, own_ports);
        let volumes = match self.volumes(&cancel).await {
            Some(v) => v,
            None => return,
        };
        let ctx = Arc::new(PodContext {
            kubelet: self.kubelet.clone(),
            pod: pod.clone(),
            netns,
            volumes,
            host_network,
            restart_policy: spec
                .restart_policy
                .clone()
                .unwrap_or_else(|| "Always".into()),
            kills: self.kills.subscribe(),
        });
        let (tx, mut rx) = mpsc::unbounded_channel();
        // Init containers, in order; a failed one fails the pod (Never) or is retried.
        for (i, container) in spec.init_containers.iter().flatten().enumerate() {
            let runner = tokio::spawn(run_container(
                ctx.clone(),
                container.clone(),
                true,
                self.init[i].clone(),
                tx.clone(),
                cancel.clone(),
            ));
            let mut ok = false;
            while let Some(Update::Status(status)) = rx.recv().await {
                ok = status.terminated() == Some(0);
                self.set_status(status, true).await;
            }
            let _ = runner.await;
            if !ok {
                self.publish().await;
                return;
            }
        }
        self.initialized = true;
        self.publish().await;
        let mut running = spec.containers.len();
        for (i, container) in spec.containers.iter().enumerate() {
            tokio::spawn(run_container(
                ctx.clone(),
                container.clone(),
                false,
                self.main[i].clone(),
                tx.clone(),
                cancel.clone(),
            ));
        }
        drop(tx);
        while running > 0 {
            match rx.recv().await {
                Some(Update::Status(status)) => self.set_status(status, false).await,
                Some(Update::Done) => running -= 1,
                None => break,
            }
        }
    }

    async fn set_status(&mut self, status: ContainerStatus, init: bool) {
        let list = if init { &mut self.init } else { &mut self.main };
        if let Some(slot) = list.iter_mut().find(|c| c.name == status.name) {
            *slot = status;
        }
        self.publish().await;
    }

    fn phase(&self) -> &'static str {
        if self.deadline_exceeded.load(Ordering::Relaxed) {
            return "Failed";
        }
        let policy = self
            .current()
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.clone())
            .unwrap_or_else(|| "Always".into());
        let failed_init = self
            .init
            .iter()
            .any(|c| c.terminated().is_some_and(|code| code != 0));
        if failed_init && policy == "Never" {
            return "Failed";
        }
        if !self.initialized {
            return "Pending";
        }
        if self.main.iter().all(|c| c.terminated().is_some()) && policy != "Always" {
            let all_ok = self.main.iter().all(|c| c.terminated() == Some(0));
            if all_ok {
                return "Succeeded";
            }
            if policy == "Never" {
                return "Failed";
            }
        }
        if self
            .main
            .iter()
            .any(|c| c.started || c.restart_count > 0 || c.terminated().is_some())
        {
            "Running"
        } else {
            "Pending"
        }
    }

    async fn publish(&mut self) {
        let phase = self.phase();
        let ready = self.initialized && self.main.iter().all(|c| c.ready);
        let condition = |kind: &str, status: bool| json!({"type": kind, "status": if status { "True" } else { "False" }, "lastTransitionTime": now()});
        let mut status = json!({
            "phase": phase,
            "hostIP": self.host_ip,
            "hostIPs": [{"ip": self.host_ip}],
            "podIP": self.pod_ip,
            "podIPs": self.pod_ip.as_ref().map(|ip| vec![json!({"ip": ip})]).unwrap_or_default(),
            "startTime": self.start_time,
            "conditions": [
                condition("PodReadyToStartContainers", self.pod_ip.is_some()),
                condition("Initialized", self.initialized),
                condition("Ready", ready),
                condition("ContainersReady", ready),
                condition("PodScheduled", true),
            ],
            "initContainerStatuses": self.init.iter().map(ContainerStatus::to_json).collect::<Vec<_>>(),
            "containerStatuses": self.main.iter().map(ContainerStatus::to_json).collect::<Vec<_>>(),
        });
        if self.deadline_exceeded.load(Ordering::Relaxed) {
            status["reason"] = json!(DEADLINE_REASON);
            status["message"] = json!(DEADLINE_MESSAGE);
        }
        // Conditions carry times: compare without them, so an unchanged status is not rewritten.
        let mut key = status.clone();
        if let Some(list) = key["conditions"].as_array_mut() {
            for c in list {
                c.as_object_mut().map(|o| o.remove("lastTransitionTime"));
            }
        }
        if self.published.as_ref() == Some(&key) {
            return;
        }
        let pods: Api<Pod> = Api::namespaced(self.kubelet.client.clone(), &self.namespace());
        let patch = json!({"status": status});
        for attempt in 0..10 {
            match pods
                .patch_status(&self.name(), &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    self.published = Some(key);
                    return;
                }
                Err(kube::Error::Api(e)) if e.code == 404 => return,
                Err(e) => {
                    tracing::debug!(error = %e, attempt, "pod status update failed");
                    tokio::time::sleep(Duration::from_millis(100 << attempt.min(4))).await;
                }
            }
        }
    }

    async fn event(&self, kind: &str, reason: &str, message: &str) {
        event(&self.kubelet, &self.current(), kind, reason, message).await;
    }

    /// Materializes the pod's volumes on the host (for real programs; emulated ones read the
    /// API). Missing objects keep the pod `ContainerCreating` with `FailedMount`, retried.
    async fn volumes(&self, cancel: &CancellationToken) -> Option<HashMap<String, PathBuf>> {
        let pod = self.current();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let root = self
            .kubelet
            .shared
            .dir
            .join("pods")
            .join(&uid)
            .join("volumes");
        let mut backoff = Duration::from_millis(500);
        loop {
            match materialize(&self.kubelet, &pod, &root).await {
                Ok(volumes) => return Some(volumes),
                Err(message) => {
                    self.event("Warning", "FailedMount", &message).await;
                    tokio::select! {
                        _ = cancel.cancelled() => return None,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
        }
    }
}

async fn event(kubelet: &Kubelet, pod: &Pod, kind: &str, reason: &str, message: &str) {
    use k8s_openapi::api::core::v1::Event;
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let events: Api<Event> = Api::namespaced(kubelet.client.clone(), &ns);
    let key = (
        pod.metadata.uid.clone().unwrap_or_default(),
        kind.to_owned(),
        reason.to_owned(),
        message.to_owned(),
    );
    let seen = {
        let mut cache = kubelet.events.lock().unwrap_or_else(|e| e.into_inner());
        cache.get_mut(&key).map(|(name, count)| {
            *count += 1;
            (name.clone(), *count)
        })
    };
    if let Some((name, count)) = seen {
        let patch = json!({"count": count, "lastTimestamp": now()});
        match events
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return,
            Err(e) => tracing::debug!(error = %e, "failed to count an event"),
        }
    }
    let name = format!(
        "{}.{:x}",
        pod.metadata.name.as_deref().unwrap_or("pod"),
        kubelet.shared.next_id()
    );
    let event: Event = match serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": {"kind": "Pod", "namespace": ns, "name": pod.metadata.name, "uid": pod.metadata.uid, "apiVersion": "v1"},
        "reason": reason, "message": message, "type": kind,
        "source": {"component": "kubelet", "host": kubelet.node},
        "firstTimestamp": now(), "lastTimestamp": now(), "count": 1,
        "reportingComponent": "kubelet", "reportingInstance": kubelet.node,
    })) {
        Ok(e) => e,
        Err(_) => return,
    };
    match events.create(&PostParams::default(), &event).await {
        Ok(created) => {
            if let Some(name) = created.metadata.name {
                kubelet
                    .events
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, (name, 1));
            }
        }
        Err(e) => tracing::debug!(error = %e, "failed to record an event"),
    }
}

async fn materialize(
    kubelet: &Kubelet,
    pod: &Pod,
    root: &Path,
) -> Result<HashMap<String, PathBuf>, String> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let mut out = HashMap::new();
    let configmaps: Api<ConfigMap> = Api::namespaced(kubelet.client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(kubelet.client.clone(), &ns);
    let fs_group = spec.security_context.as_ref().and_then(|s| s.fs_group);
    for volume in spec.volumes.iter().flatten() {
        let dir = root.join(&volume.name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let mut files: Vec<(String, Vec<u8>)> = Vec::new();
        // The files' mode: the volume's `defaultMode` (an SSH client refuses a private key
        // that others may read), else 0644.
        let mode = volume
            .secret
            .as_ref()
            .and_then(|s| s.default_mode)
            .or(volume.config_map.as_ref().and_then(|c| c.default_mode))
            .or(volume.projected.as_ref().and_then(|p| p.default_mode))
            .map_or(0o644, |m| (m & 0o777) as u32);
        if let Some(cm) = &volume.config_map {
            files.extend(
                configmap_files(
                    &configmaps,
                    &cm.name,
                    cm.items.as_deref(),
                    cm.optional == Some(true),
                    &volume.name,
                )
                .await?,
            );
        } else if let Some(secret) = &volume.secret {
            let name = secret.secret_name.clone().unwrap_or_default();
            files.extend(
                secret_files(
                    &secrets,
                    &name,
                    secret.items.as_deref(),
                    secret.optional == Some(true),
                    &volume.name,
                )
                .await?,
            );
        } else if volume.empty_dir.is_some() {
            set_mode(&dir, 0o1777);
        } else if let Some(projected) = &volume.projected {
            for source in projected.sources.iter().flatten() {
                if let Some(token) = &source.service_account_token {
                    let value = token_for(
                        kubelet,
                        pod,
                        token.expiration_seconds,
                        token.audience.clone(),
                    )
                    .await?;
                    files.push((token.path.clone(), value.into_bytes()));
                }
                if let Some(cm) = &source.config_map {
                    files.extend(
                        configmap_files(
                            &configmaps,
                            &cm.name,
                            cm.items.as_deref(),
                            cm.optional == Some(true),
                            &volume.name,
                        )
                        .await?,
                    );
                }
                if let Some(secret) = &source.secret {
                    files.extend(
                        secret_files(
                            &secrets,
                            &secret.name,
                            secret.items.as_deref(),
                            secret.optional == Some(true),
                            &volume.name,
                        )
                        .await?,
                    );
                }
                if let Some(downward) = &source.downward_api {
                    for item in downward.items.iter().flatten() {
                        let value = match item.field_ref.as_ref().map(|f| f.field_path.as_str()) {
                            Some("metadata.namespace") => ns.clone(),
                            Some("metadata.name") => pod.metadata.name.clone().unwrap_or_default(),
                            Some("metadata.uid") => pod.metadata.uid.clone().unwrap_or_default(),
                            Some("spec.serviceAccountName") => {
                                spec.service_account_name.clone().unwrap_or_default()
                            }
                            _ => String::new(),
                        };
                        files.push((item.path.clone(), value.into_bytes()));
                    }
                }
            }
        } else {
            // hostPath and others: emulated programs only; nothing to write.
        }
        for (path, bytes) in files {
            let file = dir.join(path.trim_start_matches('/'));
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
            }
            std::fs::write(&file, bytes).map_err(|e| e.to_string())?;
            set_mode(&file, mode);
            if let Some(gid) = fs_group {
                chown(&file, gid);
            }
        }
        out.insert(volume.name.clone(), dir);
    }
    Ok(out)
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
}

fn chown(path: &Path, gid: i64) {
    let _ = std::os::unix::fs::chown(path, None, Some(gid as u32));
}

async fn configmap_files(
    api: &Api<ConfigMap>,
    name: &str,
    items: Option<&[k8s_openapi::api::core::v1::KeyToPath]>,
    optional: bool,
    volume: &str,
) -> Result<Vec<(String, Vec<u8>)>, String> {
    let cm = match api.get_opt(name).await {
        Ok(Some(cm)) => cm,
        Ok(None) if optional => return Ok(Vec::new()),
        Ok(None) => {
            return Err(format!(
                "MountVolume.SetUp failed for volume \"{volume}\" : configmap \"{name}\" not found"
            ));
        }
        Err(e) => {
            return Err(format!(
                "MountVolume.SetUp failed for volume \"{volume}\" : {e}"
            ));
        }
    };
    let mut all: BTreeMap<String, Vec<u8>> = cm
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.into_bytes()))
        .collect();
    all.extend(
        cm.binary_data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0)),
    );
    select_items(
        all,
        items,
        volume,
        "configmap references non-existent config key",
    )
}

async fn secret_files(
    api: &Api<Secret>,
    name: &str,
    items: Option<&[k8s_openapi::api::core::v1::KeyToPath]>,
    optional: bool,
    volume: &str,
) -> Result<Vec<(String, Vec<u8>)>, String> {
    let secret = match api.get_opt(name).await {
        Ok(Some(s)) => s,
        Ok(None) if optional => return Ok(Vec::new()),
        Ok(None) => {
            return Err(format!(
                "MountVolume.SetUp failed for volume \"{volume}\" : secret \"{name}\" not found"
            ));
        }
        Err(e) => {
            return Err(format!(
                "MountVolume.SetUp failed for volume \"{volume}\" : {e}"
            ));
        }
    };
    let mut all: BTreeMap<String, Vec<u8>> = secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    all.extend(
        secret
            .string_data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.into_bytes())),
    );
    select_items(all, items, volume, "references non-existent secret key")
}

fn select_items(
    all: BTreeMap<String, Vec<u8>>,
    items: Option<&[k8s_openapi::api::core::v1::KeyToPath]>,
    volume: &str,
    missing: &str,
) -> Result<Vec<(String, Vec<u8>)>, String> {
    match items {
        None => Ok(all.into_iter().collect()),
        Some(items) => items
            .iter()
            .map(|item| {
                all.get(&item.key)
                    .map(|v| (item.path.clone(), v.clone()))
                    .ok_or_else(|| {
                        format!(
                            "MountVolume.SetUp failed for volume \"{volume}\" : {missing}: {}",
                            item.key
                        )
                    })
            })
            .collect(),
    }
}

/// A token of the pod's ServiceAccount bound to the pod, as the kubelet requests it.
pub(crate) async fn token_for(
    kubelet: &Kubelet,
    pod: &Pod,
    expiration: Option<i64>,
    audience: Option<String>,
) -> Result<String, String> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let account = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .unwrap_or_else(|| "default".into());
    let request: TokenRequest = serde_json::from_value(json!({
        "spec": {
            "audiences": audience.map(|a| vec![a]).unwrap_or_default(),
            "expirationSeconds": expiration.unwrap_or(3607).max(600),
            "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": pod.metadata.name, "uid": pod.metadata.uid},
        }
    }))
    .map_err(|e| e.to_string())?;
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(kubelet.client.clone(), &ns);
    let response: TokenRequest = accounts
        .create_subresource("token", &account, &PostParams::default(), &request)
        .await
        .map_err(|e| format!("failed to fetch token: {e}"))?;
    Ok(response.status.map(|s| s.token).unwrap_or_default())
}

/// What every container of a pod shares.
struct PodContext {
    kubelet: Arc<Kubelet>,
    pod: Arc<Pod>,
    netns: Arc<super::netns::NetNs>,
    volumes: HashMap<String, PathBuf>,
    host_network: bool,
    restart_policy: String,
    kills: watch::Receiver<u64>,
}

/// `$(VAR)` expansion of command and args, as the kubelet does (`$$` escapes).
fn expand(value: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(stripped) = tail.strip_prefix("$$") {
            out.push('$');
            rest = stripped;
        } else if let Some(inner) = tail.strip_prefix("$(")
            && let Some(end) = inner.find(')')
        {
            let name = &inner[..end];
            match env.get(name) {
                Some(v) => out.push_str(v),
                None => out.push_str(&tail[..end + 3]),
            }
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// The container's environment: the kubelet's Service variables, then the container's `env`
/// (which wins, as on a real node). `valueFrom` field references and ConfigMap/Secret keys are
/// resolved.
async fn environment(
    ctx: &PodContext,
    spec: &ContainerSpec,
) -> Result<BTreeMap<String, String>, String> {
    let mut env = BTreeMap::from([
        ("PATH".to_owned(), IMAGE_PATH.to_owned()),
        (
            "HOSTNAME".to_owned(),
            if ctx.host_network {
                ctx.kubelet.node.clone()
            } else {
                ctx.pod.metadata.name.clone().unwrap_or_default()
            },
        ),
        (
            "KUBERNETES_SERVICE_HOST".to_owned(),
            ctx.kubelet.shared.service_host.clone(),
        ),
        (
            "KUBERNETES_SERVICE_PORT".to_owned(),
            network::SERVICE_PORT.to_string(),
        ),
        (
            "KUBERNETES_SERVICE_PORT_HTTPS".to_owned(),
            network::SERVICE_PORT.to_string(),
        ),
        (
            "KUBERNETES_PORT".to_owned(),
            format!(
                "tcp://{}:{}",
                ctx.kubelet.shared.service_host,
                network::SERVICE_PORT
            ),
        ),
    ]);
    let ns = ctx.pod.metadata.namespace.clone().unwrap_or_default();
    // `envFrom` first (the kubelet's order: `env` entries win over it).
    for from in spec.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        if let Some(r) = &from.config_map_ref {
            let api: Api<ConfigMap> = Api::namespaced(ctx.kubelet.client.clone(), &ns);
            match api.get_opt(&r.name).await.map_err(|e| e.to_string())? {
                Some(cm) => {
                    for (k, v) in cm.data.unwrap_or_default() {
                        env.insert(format!("{prefix}{k}"), v);
                    }
                }
                None if r.optional == Some(true) => {}
                None => return Err(format!("configmap \"{}\" not found", r.name)),
            }
        }
        if let Some(r) = &from.secret_ref {
            let api: Api<Secret> = Api::namespaced(ctx.kubelet.client.clone(), &ns);
            match api.get_opt(&r.name).await.map_err(|e| e.to_string())? {
                Some(secret) => {
                    for (k, v) in secret.data.unwrap_or_default() {
                        env.insert(
                            format!("{prefix}{k}"),
                            String::from_utf8_lossy(&v.0).into_owned(),
                        );
                    }
                }
                None if r.optional == Some(true) => {}
                None => return Err(format!("secret \"{}\" not found", r.name)),
            }
        }
    }
    for var in spec.env.iter().flatten() {
        let value = if let Some(from) = &var.value_from {
            if let Some(field) = &from.field_ref {
                match field.field_path.as_str() {
                    "metadata.namespace" => ns.clone(),
                    "metadata.name" => ctx.pod.metadata.name.clone().unwrap_or_default(),
                    "spec.nodeName" => ctx.kubelet.node.clone(),
                    "status.hostIP" | "status.podIP" => {
                        ctx.kubelet.shared.node_ip(&ctx.kubelet.node)
                    }
                    _ => String::new(),
                }
            } else if let Some(key) = &from.config_map_key_ref {
                let api: Api<ConfigMap> = Api::namespaced(ctx.kubelet.client.clone(), &ns);
                match api.get_opt(&key.name).await.map_err(|e| e.to_string())? {
                    Some(cm) => match cm.data.and_then(|d| d.get(&key.key).cloned()) {
                        Some(v) => v,
                        None if key.optional == Some(true) => continue,
                        None => {
                            return Err(format!(
                                "couldn't find key {} in ConfigMap {ns}/{}",
                                key.key, key.name
                            ));
                        }
                    },
                    None if key.optional == Some(true) => continue,
                    None => return Err(format!("configmap \"{}\" not found", key.name)),
                }
            } else if let Some(key) = &from.secret_key_ref {
                let api: Api<Secret> = Api::namespaced(ctx.kubelet.client.clone(), &ns);
                match api.get_opt(&key.name).await.map_err(|e| e.to_string())? {
                    Some(s) => match s.data.and_then(|d| d.get(&key.key).cloned()) {
                        Some(v) => String::from_utf8_lossy(&v.0).into_owned(),
                        None if key.optional == Some(true) => continue,
                        None => {
                            return Err(format!(
                                "couldn't find key {} in Secret {ns}/{}",
                                key.key, key.name
                            ));
                        }
                    },
                    None if key.optional == Some(true) => continue,
                    None => return Err(format!("secret \"{}\" not found", key.name)),
                }
            } else {
                String::new()
            }
        } else {
            expand(var.value.as_deref().unwrap_or(""), &env)
        };
        env.insert(var.name.clone(), value);
    }
    Ok(env)
}

/// Runs one container until it is done for good, reporting every state change.
async fn run_container(
    ctx: Arc<PodContext>,
    spec: ContainerSpec,
    init: bool,
    mut status: ContainerStatus,
    updates: mpsc::UnboundedSender<Update>,
    cancel: CancellationToken,
) {
    let shared = ctx.kubelet.shared.clone();
    let ns = ctx.pod.metadata.namespace.clone().unwrap_or_default();
    let pod_name = ctx.pod.metadata.name.clone().unwrap_or_default();
    let image = spec.image.clone().unwrap_or_default();
    let uid = ctx.pod.metadata.uid.clone().unwrap_or_default();
    let send = |status: &ContainerStatus| {
        let _ = updates.send(Update::Status(status.clone()));
    };
    let mut backoff = Duration::from_millis(500);
    let mut pull_backoff = PULL_BACKOFF_START;
    loop {
        // The image: pulled, or the kubelet's pull failure and back-off (pkg/kubelet/images):
        // an image no emulation knows, or one made unpullable on this node
        // ([`super::kubelet_faults`]). Each retry pulls again, so a cleared fault lets it start.
        let kind = loop {
            let known = shared.image_kind(&image);
            // `IfNotPresent` (the default for a tagged image) does not pull an image the node
            // has: what a pre-flight pre-pulled survives a registry that fails later.
            let present =
                pull_policy(&spec) != "Always" && shared.has_image(&ctx.kubelet.node, &image);
            let injected = !present
                && shared
                    .kubelet_faults
                    .matches(FaultKind::ImagePull, &image, &ctx.kubelet.node);
            match known {
                Some(kind) if !injected => {
                    shared.pulled(&ctx.kubelet.node, &image);
                    break kind;
                }
                _ => {}
            }
            let message = pull_error(&image);
            let events = [
                ("Normal", "Pulling", format!("Pulling image \"{image}\"")),
                (
                    "Warning",
                    "Failed",
                    format!("Failed to pull image \"{image}\": {message}"),
                ),
                ("Warning", "Failed", "Error: ErrImagePull".to_owned()),
            ];
            for (kind, reason, text) in &events {
                event(&ctx.kubelet, &ctx.pod, kind, reason, text).await;
            }
            status.state = json!({"waiting": {"reason": "ErrImagePull", "message": message}});
            shared
                .logs
                .set_waiting(&ns, &pod_name, &uid, &spec.name, "ErrImagePull");
            send(&status);
            // The next sync of the pod finds the image in back-off.
            tokio::select! {
                _ = cancel.cancelled() => { let _ = updates.send(Update::Done); return; }
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            event(
                &ctx.kubelet,
                &ctx.pod,
                "Normal",
                "BackOff",
                &format!("Back-off pulling image \"{image}\""),
            )
            .await;
            event(
                &ctx.kubelet,
                &ctx.pod,
                "Warning",
                "Failed",
                "Error: ImagePullBackOff",
            )
            .await;
            status.state = json!({"waiting": {"reason": "ImagePullBackOff", "message": format!("Back-off pulling image \"{image}\": ErrImagePull: {message}")}});
            shared
                .logs
                .set_waiting(&ns, &pod_name, &uid, &spec.name, "ImagePullBackOff");
            send(&status);
            tokio::select! {
                _ = cancel.cancelled() => { let _ = updates.send(Update::Done); return; }
                _ = tokio::time::sleep(pull_backoff) => {}
            }
            pull_backoff = (pull_backoff * 2).min(PULL_BACKOFF_MAX);
        };
        let exit = match environment(&ctx, &spec).await {
            Err(message) => {
                event(
                    &ctx.kubelet,
                    &ctx.pod,
                    "Warning",
                    "Failed",
                    &format!("Error: {message}"),
                )
                .await;
                status.state = json!({"waiting": {"reason": "CreateContainerConfigError", "message": message}});
                shared.logs.set_waiting(
                    &ns,
                    &pod_name,
                    &uid,
                    &spec.name,
                    "CreateContainerConfigError",
                );
                send(&status);
                tokio::select! {
                    _ = cancel.cancelled() => { let _ = updates.send(Update::Done); return; }
                    _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                }
                continue;
            }
            Ok(env) => {
                let started_at = now();
                let (ready_tx, mut ready_rx) = watch::channel(false);
                let ready_tx = Arc::new(ready_tx);
                shared.logs.open(&ns, &pod_name, &uid, &spec.name);
                let run = start(&ctx, &spec, init, &kind, env, ready_tx.clone(), &cancel);
                tokio::pin!(run);
                status.state = json!({"running": {"startedAt": started_at}});
                status.started = true;
                status.ready = false;
                send(&status);
                let exit = loop {
                    tokio::select! {
                        exit = &mut run => break exit,
                        changed = ready_rx.changed() => {
                            if changed.is_ok() {
                                let ready = *ready_rx.borrow();
                                if ready != status.ready && !init {
                                    status.ready = ready;
                                    shared.container_ready(&ctx.kubelet.node, &image, &spec.name, ready);
                                    send(&status);
                                }
                            }
                        }
                    }
                };
                shared.logs.close(&ns, &pod_name, &spec.name);
                shared.container_ready(&ctx.kubelet.node, &image, &spec.name, false);
                if exit.reason.as_deref() == Some("StartError")
                    && let Some(message) = &exit.message
                {
                    event(
                        &ctx.kubelet,
                        &ctx.pod,
                        "Warning",
                        "Failed",
                        &format!("Error: {message}"),
                    )
                    .await;
                }
                let mut terminated = json!({
                    "exitCode": exit.code,
                    "reason": exit.reason.clone().unwrap_or_else(|| if exit.code == 0 { "Completed".into() } else { "Error".into() }),
                    "startedAt": started_at, "finishedAt": now(),
                });
                if let Some(message) = &exit.message {
                    terminated["message"] = json!(message);
                }
                status.state = json!({"terminated": terminated});
                status.ready = false;
                status.started = false;
                send(&status);
                exit
            }
        };
        if cancel.is_cancelled() {
            break;
        }
        let restart = match ctx.restart_policy.as_str() {
            "Never" => false,
            "OnFailure" => exit.code != 0,
            _ => !init || exit.code != 0,
        };
        if !restart {
            break;
        }
        status.last_state = status.state.clone();
        status.restart_count += 1;
        // The kubelet's words (pkg/kubelet/kuberuntime, doBackOff), the pod as `format.Pod`
        // prints it.
        let pod_ref = format!("{pod_name}_{ns}({uid})");
        event(
            &ctx.kubelet,
            &ctx.pod,
            "Warning",
            "BackOff",
            &format!(
                "Back-off restarting failed container {} in pod {pod_ref}",
                spec.name
            ),
        )
        .await;
        status.state = json!({"waiting": {"reason": "CrashLoopBackOff", "message": format!("back-off {} restarting failed container={} pod={pod_ref}", go_duration(backoff), spec.name)}});
        shared
            .logs
            .set_waiting(&ns, &pod_name, &uid, &spec.name, "CrashLoopBackOff");
        send(&status);
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(10));
    }
    let _ = updates.send(Update::Done);
}

/// Whether a container may start on Talos (the runtime's checks), else its start error.
fn start_check(spec: &ContainerSpec) -> Result<(), Exit> {
    let caps = spec
        .security_context
        .as_ref()
        .and_then(|s| s.capabilities.as_ref())
        .and_then(|c| c.add.clone())
        .unwrap_or_default();
    if caps
        .iter()
        .any(|c| c == "SYS_MODULE" || c == "CAP_SYS_MODULE")
    {
        return Err(Exit::start_error(format!(
            "{RUNC}: unable to apply caps: operation not permitted: unknown"
        )));
    }
    Ok(())
}

/// The helm subcommands that talk to the cluster.
fn helm_needs_api(argv: &[String]) -> bool {
    const OFFLINE: &[&str] = &[
        "template",
        "version",
        "package",
        "pull",
        "show",
        "inspect",
        "repo",
        "lint",
        "create",
        "dependency",
        "dep",
        "env",
        "completion",
        "help",
        "search",
        "verify",
        "plugin",
        "registry",
        "push",
    ];
    let words: Vec<String> = argv
        .iter()
        .flat_map(|a| a.split(|c: char| c.is_whitespace() || c == ';' || c == '|' || c == '&'))
        .map(|w| w.trim_matches(|c| c == '\'' || c == '"').to_owned())
        .filter(|w| !w.is_empty())
        .collect();
    let mut found = false;
    for (i, word) in words.iter().enumerate() {
        if word.rsplit('/').next() == Some("helm") {
            found = true;
            let sub = words[i + 1..].iter().find(|w| !w.starts_with('-'));
            if sub.is_some_and(|s| !OFFLINE.contains(&s.as_str())) {
                return true;
            }
            // `helm template --validate` asks the API for its version first.
            if sub.is_some_and(|s| s == "template")
                && words[i + 1..].iter().any(|w| w == "--validate")
            {
                return true;
            }
        }
    }
    // Without Helm: the cilium-cli shim runs Helm inside; any other program (a shell's `echo`)
    // runs, as it would on a node before the CNI.
    !found && words.iter().any(|w| w.rsplit('/').next() == Some("cilium"))
}

/// Runs one container to its end; a kill request ends it with 137 (SIGKILL).
async fn start(
    ctx: &Arc<PodContext>,
    spec: &ContainerSpec,
    init: bool,
    kind: &ImageKind,
    env: BTreeMap<String, String>,
    ready: Arc<watch::Sender<bool>>,
    cancel: &CancellationToken,
) -> Exit {
    let run = cancel.child_token();
    let mut kills = ctx.kills.clone();
    kills.mark_unchanged();
    let watcher = tokio::spawn({
        let run = run.clone();
        async move {
            if kills.changed().await.is_ok() {
                run.cancel();
            }
        }
    });
    let exit = start_program(ctx, spec, init, kind, env, ready, &run).await;
    watcher.abort();
    if run.is_cancelled() && !cancel.is_cancelled() {
        return Exit::code(137);
    }
    exit
}

async fn start_program(
    ctx: &Arc<PodContext>,
    spec: &ContainerSpec,
    init: bool,
    kind: &ImageKind,
    mut env: BTreeMap<String, String>,
    ready: Arc<watch::Sender<bool>>,
    cancel: &CancellationToken,
) -> Exit {
    if let Err(exit) = start_check(spec) {
        return exit;
    }
    // An injected crash ([`super::kubelet_faults`]): the program starts and exits 1.
    let image = spec.image.clone().unwrap_or_default();
    if !init
        && ctx.kubelet.shared.kubelet_faults.matches(
            FaultKind::CrashLoop,
            &image,
            &ctx.kubelet.node,
        )
    {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = cancel.cancelled() => return Exit::code(137),
        }
        return Exit::code(1);
    }
    // The node layer's pod-level fault: the program hangs (an installer stuck on a lock, a
    // network that swallows packets) until the pod is deleted.
    let hangs = ctx
        .pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(HANG_ANNOTATION))
        .is_some_and(|v| v == "true");
    if hangs {
        ready.send_replace(true);
        cancel.cancelled().await;
        return Exit::code(137);
    }
    let shared = &ctx.kubelet.shared;
    let node = &ctx.kubelet.node;
    let endpoint = Endpoint::from_env(&env, &shared.service_host);
    let vantage = Vantage {
        host_network: ctx.host_network,
        pod_network: shared.cni_ready(node),
        ..shared.vantage(node)
    };
    let route = network::route(&vantage, &endpoint);
    let (entrypoint, cmd) = match kind {
        ImageKind::Real {
            entrypoint, cmd, ..
        } => (entrypoint.clone(), cmd.clone()),
        ImageKind::Emulated(_) => (Vec::new(), Vec::new()),
    };
    let command: Vec<String> = spec
        .command
        .clone()
        .unwrap_or(entrypoint)
        .iter()
        .map(|a| expand(a, &env))
        .collect();
    let args: Vec<String> = spec
        .args
        .clone()
        .unwrap_or(if spec.command.is_some() {
            Vec::new()
        } else {
            cmd
        })
        .iter()
        .map(|a| expand(a, &env))
        .collect();
    let argv: Vec<String> = command.into_iter().chain(args).collect();
    let ns = ctx.pod.metadata.namespace.clone().unwrap_or_default();
    let pod_name = ctx.pod.metadata.name.clone().unwrap_or_default();
    match kind {
        ImageKind::Emulated(program) => {
            let api = match &route {
                Ok(_) => match shared.service_account_client(&ctx.kubelet, &ctx.pod).await {
                    Ok(client) => Some(client),
                    Err(e) => {
                        tracing::warn!(pod = %pod_name, namespace = %ns, error = %e, "no ServiceAccount credentials for an emulated program");
                        None
                    }
                },
                Err(_) => None,
            };
            let container = Container {
                pod: ctx.pod.clone(),
                name: spec.name.clone(),
                init,
                image: spec.image.clone().unwrap_or_default(),
                argv,
                env,
                node: node.clone(),
                endpoint,
                reachable: route.map(|_| ()),
                api,
                dial_timeout: shared.dial_timeout,
                logs: shared.logs.clone(),
                ready,
            };
            tokio::select! {
                exit = program.run(container) => exit,
                _ = cancel.cancelled() => Exit::code(137),
            }
        }
        ImageKind::Real { binaries, .. } => {
            match &route {
                Ok(Route::Renamed { host, .. }) => {
                    env.insert("KUBERNETES_SERVICE_HOST".into(), (*host).to_owned());
                }
                Ok(Route::Loopback(_)) => {}
                Err(e) if helm_needs_api(&argv) => {
                    // Decided here so that no process dials outside loopback: Helm's own words.
                    if e.is_timeout() {
                        tokio::select! {
                            _ = tokio::time::sleep(shared.dial_timeout) => {}
                            _ = cancel.cancelled() => return Exit::code(137),
                        }
                    }
                    let line = format!(
                        "Error: Kubernetes cluster unreachable: Get \"{}/version\": {e}\n",
                        endpoint.url()
                    );
                    shared
                        .logs
                        .append(&ns, &pod_name, &spec.name, line.as_bytes());
                    return Exit::code(1);
                }
                Err(_) => {}
            }
            let uid = ctx.pod.metadata.uid.clone().unwrap_or_default();
            let base = shared.dir.join("pods").join(&uid);
            let root = base.join(format!("{}-{}", spec.name, shared.next_id()));
            let etc = base.join("etc");
            if let Err(e) = std::fs::create_dir_all(&root)
                .and_then(|_| shared.write_etc(&etc, (!ctx.host_network).then_some(ns.as_str())))
            {
                return Exit::start_error(format!("{RUNC}: {e}"));
            }
            let mut mounts = Vec::new();
            for mount in spec.volume_mounts.iter().flatten() {
                if let Some(host) = ctx.volumes.get(&mount.name) {
                    let host = match &mount.sub_path {
                        Some(sub) if !sub.is_empty() => host.join(sub),
                        _ => host.clone(),
                    };
                    mounts.push(Mount {
                        host,
                        path: mount.mount_path.clone(),
                        read_only: mount.read_only == Some(true),
                    });
                }
            }
            let pod_security = ctx
                .pod
                .spec
                .as_ref()
                .and_then(|s| s.security_context.clone());
            let security = spec.security_context.clone();
            let uid_ = security
                .as_ref()
                .and_then(|s| s.run_as_user)
                .or(pod_security.as_ref().and_then(|s| s.run_as_user));
            let gid = security
                .as_ref()
                .and_then(|s| s.run_as_group)
                .or(pod_security.as_ref().and_then(|s| s.run_as_group));
            let groups: Vec<u32> = pod_security
                .as_ref()
                .and_then(|s| s.fs_group)
                .into_iter()
                .map(|g| g as u32)
                .collect();
            let sandbox = SandboxSpec {
                netns_fd: ctx.netns.raw_fd(),
                root,
                etc,
                binaries: binaries.clone(),
                mounts,
                argv,
                env,
                working_dir: spec.working_dir.clone(),
                uid: uid_.map(|u| u as u32),
                gid: gid.map(|g| g as u32),
                groups,
            };
            let mut child = match sandbox::spawn(&sandbox) {
                Ok(child) => child,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Exit::start_error(format!(
                        "{RUNC}: exec: \"{}\": executable file not found in $PATH: unknown",
                        sandbox.argv.first().cloned().unwrap_or_default()
                    ));
                }
                Err(e) => return Exit::start_error(format!("{RUNC}: {e}: unknown")),
            };
            ready.send_replace(true);
            let pump = |mut stream: Box<dyn tokio::io::AsyncRead + Send + Unpin>| {
                let logs = shared.logs.clone();
                let (ns, pod_name, name) = (ns.clone(), pod_name.clone(), spec.name.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 16 * 1024];
                    while let Ok(n) = stream.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        logs.append(&ns, &pod_name, &name, &buf[..n]);
                    }
                })
            };
            let out = child.stdout.take().map(|s| pump(Box::new(s)));
            let err = child.stderr.take().map(|s| pump(Box::new(s)));
            let status = tokio::select! {
                status = child.wait() => status.ok(),
                _ = cancel.cancelled() => {
                    if let Some(pid) = child.id() {
                        // SAFETY: kill(2) of our child's process group.
                        unsafe { libc::kill(-(pid as i32), libc::SIGKILL); }
                    }
                    let _ = child.wait().await;
                    None
                }
            };
            for pump in [out, err].into_iter().flatten() {
                let _ = pump.await;
            }
            use std::os::unix::process::ExitStatusExt;
            match status {
                Some(s) => Exit::code(s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(9))),
                None => Exit::code(137),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_durations_print_as_go_prints_them() {
        for (ms, printed) in [
            (500, "500ms"),
            (1000, "1s"),
            (2500, "2.5s"),
            (10_000, "10s"),
            (80_000, "1m20s"),
            (300_000, "5m0s"),
        ] {
            assert_eq!(go_duration(Duration::from_millis(ms)), printed);
        }
    }

    #[test]
    fn dollar_expansion_follows_the_kubelet() {
        let env = BTreeMap::from([("A".to_owned(), "x".to_owned())]);
        assert_eq!(expand("$(A)-$(B)-$$(A)-$", &env), "x-$(B)-$(A)-$");
    }

    #[test]
    fn helm_api_use_is_read_from_the_command() {
        let sh = |s: &str| vec!["sh".to_owned(), "-c".to_owned(), s.to_owned()];
        assert!(!helm_needs_api(&sh(
            "set -o pipefail; helm 'template' 'cilium' x | sed -n p"
        )));
        assert!(helm_needs_api(&sh("helm 'upgrade' '--install' cilium x")));
        assert!(helm_needs_api(&[
            "helm".into(),
            "--namespace".into(),
            "x".into(),
            "list".into()
        ]));
    }
}
