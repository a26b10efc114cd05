//! The Service dataplane of pod-network pods, as Cilium's kube-proxy replacement gives it once the
//! CNI is up, on loopback only.
//!
//! Each Service (ClusterIP or headless; not `default/kubernetes`, which [`super::network`] routes
//! to the apiserver, nor `ExternalName`) gets a loopback address of its own, `127.253.X.Y`, the
//! same in every pod. A pod-network pod's `/etc/hosts` names it as Kubernetes DNS does from the
//! pod's namespace: `NAME.NS.svc.cluster.local`, `NAME.NS.svc`, `NAME.NS`, and `NAME` for a Service
//! of the pod's own namespace, each also with a trailing dot. While the Service has a Ready
//! endpoint (its EndpointSlices, written by the real endpointslice controller from the selector
//! and pod readiness), the pod's network namespace listens on that address at each TCP Service
//! port; a connection is relayed into a Ready endpoint pod's network namespace (the socket is
//! created there), to `127.0.0.1` at the slice's port (the `targetPort`, named ports resolved by
//! the controller). With no Ready endpoint nothing listens, so clients get `connection refused`,
//! as from kube-proxy's reject rule; an endpoint whose program does not listen resets the
//! connection. Services and endpoints that change after a pod started are picked up: its hosts
//! file is rewritten and its listeners follow the slices. Unlike kube-proxy's NAT, a listener
//! takes its port from a program that binds every address, so a pod gets no listener on a port
//! its own containers declare (e.g. the Flux programs' metrics port 8080 and the flux-operator
//! Service's 8080): such a pod cannot reach a Service on a port it serves itself.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::runtime::watcher;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::netns::NetNs;

/// `namespace/name` of a Service.
type Key = (String, String);

#[derive(Clone, Debug, PartialEq, Eq)]
struct ServicePort {
    name: String,
    port: u16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct ServiceEntry {
    addr: Ipv4Addr,
    ports: Vec<ServicePort>,
}

#[derive(Clone, Debug, Default)]
struct Slice {
    service: Key,
    /// Service port name → endpoint port.
    ports: HashMap<String, u16>,
    /// UIDs of the Ready endpoint pods.
    ready: Vec<String>,
}

struct PodNet {
    namespace: String,
    netns: Weak<NetNs>,
    /// The pod's `/etc` (its `hosts` is rewritten when Services change); pod network only.
    etc: Option<PathBuf>,
    /// The ports the pod's own containers declare: its programs bind them on every address, and
    /// a Service listener on the same port would refuse that bind (`address already in use`),
    /// which kube-proxy's NAT never does. So the pod does not reach Services on those ports.
    own_ports: HashSet<u16>,
    listeners: HashMap<SocketAddr, CancellationToken>,
}

impl PodNet {
    /// The Service addresses the pod should listen on and does not yet.
    fn missing(&self, wanted: &HashMap<SocketAddr, (Key, String)>) -> Vec<SocketAddr> {
        wanted
            .keys()
            .filter(|a| !self.listeners.contains_key(a) && !self.own_ports.contains(&a.port()))
            .copied()
            .collect()
    }
}

#[derive(Default)]
struct State {
    services: BTreeMap<Key, ServiceEntry>,
    addrs: HashMap<Key, Ipv4Addr>,
    next_addr: u32,
    slices: HashMap<Key, Slice>,
    pods: HashMap<String, PodNet>,
}

impl State {
    fn addr_for(&mut self, key: &Key) -> Ipv4Addr {
        if let Some(addr) = self.addrs.get(key) {
            return *addr;
        }
        self.next_addr += 1;
        let n = self.next_addr;
        let addr = Ipv4Addr::new(127, 253, (n / 250) as u8, (n % 250) as u8 + 1);
        self.addrs.insert(key.clone(), addr);
        addr
    }

    /// The Ready endpoints of a Service port: (pod UID, port).
    fn endpoints(&self, key: &Key, port_name: &str) -> Vec<(String, u16)> {
        let mut out = Vec::new();
        for slice in self.slices.values().filter(|s| &s.service == key) {
            if let Some(port) = slice.ports.get(port_name) {
                out.extend(slice.ready.iter().map(|uid| (uid.clone(), *port)));
            }
        }
        out
    }

    /// Where the pods' namespaces should listen: each port of a Service with a Ready endpoint.
    fn listening(&self) -> HashMap<SocketAddr, (Key, String)> {
        let mut out = HashMap::new();
        for (key, entry) in &self.services {
            for port in &entry.ports {
                if !self.endpoints(key, &port.name).is_empty() {
                    out.insert(
                        SocketAddr::from((entry.addr, port.port)),
                        (key.clone(), port.name.clone()),
                    );
                }
            }
        }
        out
    }

    /// The `/etc/hosts` lines of the Services as seen from `namespace`.
    fn hosts_lines(&self, namespace: &str) -> String {
        let mut out = String::new();
        for ((ns, name), entry) in &self.services {
            let mut names = vec![
                format!("{name}.{ns}.svc.cluster.local"),
                format!("{name}.{ns}.svc"),
                format!("{name}.{ns}"),
            ];
            if ns == namespace {
                names.push(name.clone());
            }
            let dotted: Vec<String> = names.iter().map(|n| format!("{n}.")).collect();
            names.extend(dotted);
            out.push_str(&format!("{}\t{}\n", entry.addr, names.join(" ")));
        }
        out
    }
}

/// The dataplane of one cluster: the Services and slices it watches, the pods' namespaces.
pub struct Dataplane {
    state: Mutex<State>,
    changed: Notify,
    /// The hosts lines every pod has (localhost, the chart repositories, the API, Git).
    base_hosts: String,
    turn: AtomicU64,
}

impl Dataplane {
    pub fn new(base_hosts: String) -> Arc<Dataplane> {
        Arc::new(Dataplane {
            state: Mutex::new(State::default()),
            changed: Notify::new(),
            base_hosts,
            turn: AtomicU64::new(0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A pod's network namespace: an endpoint for Services, and for a pod-network pod (`etc`
    /// given) a client with Service names and listeners, except on `own_ports`.
    pub fn register_pod(
        &self,
        uid: &str,
        namespace: &str,
        netns: &Arc<NetNs>,
        etc: Option<PathBuf>,
        own_ports: HashSet<u16>,
    ) {
        self.lock().pods.insert(
            uid.to_owned(),
            PodNet {
                namespace: namespace.to_owned(),
                netns: Arc::downgrade(netns),
                etc,
                own_ports,
                listeners: HashMap::new(),
            },
        );
        self.changed.notify_one();
    }

    /// The pod is gone: its listeners end with its namespace.
    pub fn unregister_pod(&self, uid: &str) {
        if let Some(pod) = self.lock().pods.remove(uid) {
            for stop in pod.listeners.values() {
                stop.cancel();
            }
        }
    }

    /// A pod's whole `hosts` file (written under the lock, so a concurrent change of Services
    /// rewrites it after this).
    pub fn write_hosts(&self, etc: &std::path::Path, namespace: &str) -> std::io::Result<()> {
        let state = self.lock();
        let text = format!("{}{}", self.base_hosts, state.hosts_lines(namespace));
        write_atomically(&etc.join("hosts"), &text)
    }

    /// Watches Services and EndpointSlices with `client` and keeps every pod's namespace in step,
    /// until `stop`.
    pub async fn run(self: Arc<Self>, client: kube::Client, stop: CancellationToken) {
        tokio::spawn(self.clone().watch_services(client.clone(), stop.clone()));
        tokio::spawn(self.clone().watch_slices(client, stop.clone()));
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = self.changed.notified() => {}
            }
            self.reconcile().await;
        }
    }

    async fn watch_services(self: Arc<Self>, client: kube::Client, stop: CancellationToken) {
        let mut events = watcher(Api::<Service>::all(client), watcher::Config::default()).boxed();
        let mut init: HashSet<Key> = HashSet::new();
        loop {
            let event = tokio::select! {
                _ = stop.cancelled() => return,
                event = events.next() => event,
            };
            match event {
                Some(Ok(watcher::Event::Apply(svc))) => {
                    self.set_service(key_of(&svc.metadata), &svc);
                }
                Some(Ok(watcher::Event::Delete(svc))) => {
                    self.lock().services.remove(&key_of(&svc.metadata));
                }
                Some(Ok(watcher::Event::Init)) => init.clear(),
                Some(Ok(watcher::Event::InitApply(svc))) => {
                    let key = key_of(&svc.metadata);
                    init.insert(key.clone());
                    self.set_service(key, &svc);
                }
                Some(Ok(watcher::Event::InitDone)) => {
                    self.lock().services.retain(|k, _| init.contains(k));
                    init.clear();
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "Service watch error");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
                None => return,
            }
            self.changed.notify_one();
        }
    }

    fn set_service(&self, key: Key, svc: &Service) {
        let spec = svc.spec.clone().unwrap_or_default();
        let mut state = self.lock();
        if key.0 == "default" && key.1 == "kubernetes"
            || spec.type_.as_deref() == Some("ExternalName")
        {
            state.services.remove(&key);
            return;
        }
        let ports = spec
            .ports
            .iter()
            .flatten()
            .filter(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP")
            .filter_map(|p| {
                Some(ServicePort {
                    name: p.name.clone().unwrap_or_default(),
                    port: u16::try_from(p.port).ok()?,
                })
            })
            .collect();
        let addr = state.addr_for(&key);
        state.services.insert(key, ServiceEntry { addr, ports });
    }

    async fn watch_slices(self: Arc<Self>, client: kube::Client, stop: CancellationToken) {
        let mut events = watcher(
            Api::<EndpointSlice>::all(client),
            watcher::Config::default(),
        )
        .boxed();
        let mut init: HashMap<Key, Slice> = HashMap::new();
        loop {
            let event = tokio::select! {
                _ = stop.cancelled() => return,
                event = events.next() => event,
            };
            match event {
                Some(Ok(watcher::Event::Apply(slice))) => {
                    let key = key_of(&slice.metadata);
                    let parsed = parse_slice(&slice);
                    let mut state = self.lock();
                    match parsed {
                        Some(s) => state.slices.insert(key, s),
                        None => state.slices.remove(&key),
                    };
                }
                Some(Ok(watcher::Event::Delete(slice))) => {
                    self.lock().slices.remove(&key_of(&slice.metadata));
                }
                Some(Ok(watcher::Event::Init)) => init.clear(),
                Some(Ok(watcher::Event::InitApply(slice))) => {
                    if let Some(s) = parse_slice(&slice) {
                        init.insert(key_of(&slice.metadata), s);
                    }
                    continue;
                }
                Some(Ok(watcher::Event::InitDone)) => {
                    self.lock().slices = std::mem::take(&mut init);
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "EndpointSlice watch error");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
                None => return,
            }
            self.changed.notify_one();
        }
    }

    /// Brings every pod's hosts file and listeners in line with the Services and their slices.
    async fn reconcile(self: &Arc<Self>) {
        let (wanted, work) = {
            let mut state = self.lock();
            state.pods.retain(|_, p| p.netns.strong_count() > 0);
            let wanted = state.listening();
            let mut work = Vec::new();
            for (uid, pod) in state.pods.iter_mut() {
                if pod.etc.is_none() {
                    continue;
                }
                pod.listeners.retain(|addr, stop| {
                    let keep = wanted.contains_key(addr);
                    if !keep {
                        stop.cancel();
                    }
                    keep
                });
                let missing = pod.missing(&wanted);
                if let (false, Some(netns)) = (missing.is_empty(), pod.netns.upgrade()) {
                    work.push((uid.clone(), netns, missing));
                }
            }
            // The hosts files, under the lock (see `write_hosts`).
            for pod in state.pods.values() {
                if let Some(etc) = &pod.etc
                    && etc.join("hosts").exists()
                {
                    let text = format!("{}{}", self.base_hosts, state.hosts_lines(&pod.namespace));
                    if std::fs::read_to_string(etc.join("hosts")).ok().as_deref() != Some(&text) {
                        let _ = write_atomically(&etc.join("hosts"), &text);
                    }
                }
            }
            (wanted, work)
        };
        for (uid, netns, addrs) in work {
            let bound = match netns.bind(addrs.clone()).await {
                Ok(bound) => bound,
                Err(e) => {
                    tracing::warn!(error = %e, "failed to enter a pod's network namespace");
                    continue;
                }
            };
            let mut state = self.lock();
            let Some(pod) = state.pods.get_mut(&uid) else {
                continue;
            };
            for (addr, listener) in addrs.into_iter().zip(bound) {
                let Some(target) = wanted.get(&addr) else {
                    continue;
                };
                match listener {
                    Ok(listener) => {
                        let stop = netns.stopped();
                        pod.listeners.insert(addr, stop.clone());
                        tokio::spawn(self.clone().serve(listener, target.clone(), stop));
                    }
                    Err(e) => tracing::warn!(%addr, error = %e, "failed to listen for a Service"),
                }
            }
        }
    }

    async fn serve(
        self: Arc<Self>,
        listener: TcpListener,
        target: (Key, String),
        stop: CancellationToken,
    ) {
        loop {
            let accepted = tokio::select! {
                _ = stop.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let Ok((inbound, _)) = accepted else { continue };
            let dataplane = self.clone();
            let target = target.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                match dataplane.connect(&target).await {
                    Some(mut outbound) => {
                        let mut inbound = inbound;
                        tokio::select! {
                            _ = stop.cancelled() => {}
                            _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        }
                    }
                    // As the endpoint's kernel answers a port nobody listens on: a reset.
                    None => reset(inbound),
                }
            });
        }
    }

    /// A connection to one Ready endpoint of the Service port (round robin over them), made in
    /// the endpoint pod's network namespace.
    async fn connect(&self, (key, port_name): &(Key, String)) -> Option<TcpStream> {
        let candidates: Vec<(Arc<NetNs>, u16)> = {
            let state = self.lock();
            state
                .endpoints(key, port_name)
                .into_iter()
                .filter_map(|(uid, port)| Some((state.pods.get(&uid)?.netns.upgrade()?, port)))
                .collect()
        };
        if candidates.is_empty() {
            return None;
        }
        let turn = self.turn.fetch_add(1, Ordering::Relaxed) as usize;
        let (netns, port) = &candidates[turn % candidates.len()];
        netns
            .connect(SocketAddr::from(([127, 0, 0, 1], *port)))
            .await
            .ok()
    }
}

fn key_of(meta: &kube::api::ObjectMeta) -> Key {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// A slice's Service, ports and Ready pod endpoints (`None` for a slice of no Service).
fn parse_slice(slice: &EndpointSlice) -> Option<Slice> {
    let service = slice
        .metadata
        .labels
        .as_ref()?
        .get("kubernetes.io/service-name")?
        .clone();
    let namespace = slice.metadata.namespace.clone().unwrap_or_default();
    let ports = slice
        .ports
        .iter()
        .flatten()
        .filter(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP")
        .filter_map(|p| {
            Some((
                p.name.clone().unwrap_or_default(),
                u16::try_from(p.port?).ok()?,
            ))
        })
        .collect();
    let ready = slice
        .endpoints
        .iter()
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
        .filter_map(|e| {
            let target = e.target_ref.as_ref()?;
            (target.kind.as_deref() == Some("Pod"))
                .then(|| target.uid.clone())
                .flatten()
        })
        .collect();
    Some(Slice {
        service: (namespace, service),
        ports,
        ready,
    })
}

/// Closes a connection with a reset (`SO_LINGER` 0), as a port with no listener answers.
fn reset(stream: TcpStream) {
    if let Ok(std) = stream.into_std() {
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: setsockopt(2) on a socket we own, with a correctly sized value.
        unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&std),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            );
        }
    }
}

fn write_atomically(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kubernetes_dns_from_the_pod_namespace() {
        let mut state = State::default();
        let key = ("flux-system".to_owned(), "source-controller".to_owned());
        let addr = state.addr_for(&key);
        state.services.insert(
            key,
            ServiceEntry {
                addr,
                ports: vec![ServicePort {
                    name: "http".into(),
                    port: 80,
                }],
            },
        );
        let same = state.hosts_lines("flux-system");
        assert!(same.starts_with("127.253.0.2\t"), "{same}");
        let names: Vec<&str> = same.split_whitespace().skip(1).collect();
        for name in [
            "source-controller",
            "source-controller.",
            "source-controller.flux-system",
            "source-controller.flux-system.svc",
            "source-controller.flux-system.svc.cluster.local",
            "source-controller.flux-system.svc.cluster.local.",
        ] {
            assert!(names.contains(&name), "{name} in {same}");
        }
        let other = state.hosts_lines("default");
        let names: Vec<&str> = other.split_whitespace().collect();
        assert!(!names.contains(&"source-controller"), "{other}");
        assert!(
            names.contains(&"source-controller.flux-system.svc"),
            "{other}"
        );
    }

    #[test]
    fn only_ports_with_a_ready_endpoint_listen() {
        let mut state = State::default();
        let key = ("default".to_owned(), "web".to_owned());
        let addr = state.addr_for(&key);
        state.services.insert(
            key.clone(),
            ServiceEntry {
                addr,
                ports: vec![ServicePort {
                    name: "http".into(),
                    port: 80,
                }],
            },
        );
        assert!(state.listening().is_empty());
        state.slices.insert(
            ("default".into(), "web-abcde".into()),
            Slice {
                service: key.clone(),
                ports: HashMap::from([("http".to_owned(), 8080)]),
                ready: vec!["uid-1".into()],
            },
        );
        assert_eq!(state.endpoints(&key, "http"), vec![("uid-1".into(), 8080)]);
        assert!(
            state
                .listening()
                .contains_key(&SocketAddr::from((addr, 80)))
        );
    }

    /// A pod whose program binds its declared port on every address (as Go's `:8080` does) must
    /// not find that port taken by a Service listener in its own namespace.
    #[test]
    fn a_pod_does_not_listen_on_service_ports_its_containers_declare() {
        let svc = ("flux-system".to_owned(), "flux-operator".to_owned());
        let wanted = HashMap::from([
            (
                SocketAddr::from(([127, 253, 0, 2], 8080)),
                (svc.clone(), "http".to_owned()),
            ),
            (
                SocketAddr::from(([127, 253, 0, 3], 80)),
                (svc, "http".to_owned()),
            ),
        ]);
        let pod = |own_ports: &[u16]| PodNet {
            namespace: "flux-system".into(),
            netns: Weak::new(),
            etc: None,
            own_ports: own_ports.iter().copied().collect(),
            listeners: HashMap::new(),
        };
        assert_eq!(
            pod(&[8080, 9440]).missing(&wanted),
            vec![SocketAddr::from(([127, 253, 0, 3], 80))]
        );
        assert_eq!(pod(&[]).missing(&wanted).len(), 2);
    }
}
