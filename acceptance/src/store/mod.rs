//! The object store and its in-process API: the one place where Kubernetes semantics live.
//!
//! HTTP requests and in-process controllers go through the same functions, so a controller
//! written against [`Store`] sees exactly what `kube`/`kubectl` see: resourceVersions, admission
//! (defaulting, validation, immutability), managed fields, finalizers, watch events.
//!
//! # Objects
//! Objects are `serde_json::Value`s in their JSON wire form, keyed by ([`GroupResource`],
//! namespace, name); the namespace is `""` for cluster-scoped resources. The type table
//! ([`types::Registry`]) says which resources exist; creating a CustomResourceDefinition adds one.
//!
//! # API for controllers (the cluster model)
//! ```no_run
//! # use talos_sim::store::{Store, GroupResource, WriteOptions, ListOptions, DeleteOptions, Patch};
//! # use serde_json::json;
//! # fn demo(store: &Store) -> Result<(), talos_sim::store::ApiError> {
//! let pods = GroupResource::core("pods");
//! let opts = WriteOptions::manager("kubelet");
//! // read
//! let pod = store.get(&pods, "kube-system", "cilium-abc")?;
//! let list = store.list(&pods, Some("kube-system"), &ListOptions::default().labels("k8s-app=cilium"))?;
//! // write (same admission and resourceVersion checks as HTTP)
//! let created = store.create(&pods, "default", json!({"apiVersion": "v1", "kind": "Pod",
//!     "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}), &opts)?;
//! store.patch_status(&pods, "default", "p", Patch::Merge(json!({"status": {"phase": "Running"}})), &opts)?;
//! store.delete(&pods, "default", "p", &DeleteOptions::default())?;
//! # Ok(()) }
//! ```
//! - [`Store::update`] replaces an object; a `metadata.resourceVersion` in the body is a
//!   precondition (409 Conflict when stale), no resourceVersion means unconditional, except for
//!   Leases and custom resources (422, like the real server). Updating a missing Lease,
//!   Endpoints, Event or RBAC object creates it.
//! - [`Store::create`] refuses a body with a `metadata.resourceVersion` (500, like the real
//!   server) and answers 409 `object is being deleted: ...` while an old object of that name
//!   waits for its finalizers. Creating a namespace creates its `default` ServiceAccount; a pod
//!   whose ServiceAccount (default `default`) is missing is refused with 403 Forbidden, so
//!   controllers creating pods must expect that (record an event, retry).
//! - For types with a status subresource (pods, nodes, namespaces, services, deployments,
//!   daemonsets, replicasets, jobs, CRDs and CRs declaring it), writes to the main resource ignore
//!   `.status`; use [`Store::update_status`] / [`Store::patch_status`], which only change `.status`.
//! - A write that changes nothing is a no-op: no new resourceVersion, no event.
//! - Errors are [`ApiError`]s (code, reason, message) exactly as HTTP clients receive them.
//!
//! # Events
//! [`Store::subscribe`] gives every change of every type as a [`StoreEvent`] (a
//! `tokio::sync::broadcast` receiver). A lagging receiver gets `RecvError::Lagged`: re-list and
//! continue. [`Store::watch`] gives, atomically, the events to replay (all current objects as
//! `Added`, or the history since a resourceVersion) plus a receiver for what follows.
//!
//! # Deletion and garbage collection
//! [`Store::delete`] honours finalizers (`deletionTimestamp` set, object kept until
//! `metadata.finalizers` is empty), `propagationPolicy` (Foreground/Background/Orphan, with the
//! `foregroundDeletion`/`orphan` finalizers), namespace termination and pod grace periods.
//! The asynchronous part (ownerReference GC, emptying terminating namespaces, ending pod grace
//! periods) is [`Store::housekeeping`], run periodically by the built-in `gc` controller.
//!
//! # Pods and the kubelet
//! - Binding: set `spec.nodeName` with an update (allowed once, from empty; the rest of a pod's
//!   spec is immutable except images, `activeDeadlineSeconds` and tolerations, like the real
//!   server). Status goes through [`Store::update_status`] / [`Store::patch_status`].
//! - Deleting a pod bound to a node sets `deletionTimestamp` and keeps it for its grace period
//!   (shortened by [`Pace::pod_grace`]); the kubelet may end it earlier by deleting again with
//!   `grace_period_seconds: Some(0)`. Unbound pods disappear at once.
//! - [`Store::logs`] holds container output ([`PodLogs`]): the kubelet calls `append` as the
//!   program writes (the first call marks the container as started for `pods/log`), `close` when
//!   it exits (ends `follow` streams), `reopen` on restart. A scheduled pod's container without a
//!   buffer answers `pods/log` with `container "c" in pod "p" is waiting to start: <reason>`
//!   (the reason from `status.containerStatuses[].state.waiting`).
//!
//! # Helpers
//! [`Store::find_type`] maps `apiVersion` + `kind` to a [`ResourceType`] (for ownerReferences and
//! manifests), [`Store::resource_types`] lists everything served, [`Store::compact`] simulates an
//! etcd compaction (the history also forgets its oldest events beyond 10,000 events or
//! [`HISTORY_BYTE_LIMIT`] bytes of objects), [`Store::resource_version`] is the current global resourceVersion.

mod admission;
mod apply;
mod delete;
mod error;
pub mod fields;
mod logs;
pub mod managed;
mod patch;
pub mod pod_security;
pub mod rbac;
pub mod selector;
pub mod types;
mod write;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use base64::Engine;
use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast};

use crate::config::Pace;
pub use error::{ApiError, Cause};
pub use logs::{LogView, PodLogs, tail_lines};
pub use patch::Patch;
pub use rbac::{Request as AccessRequest, UserInfo};
use selector::{FieldSelector, LabelSelector};
pub use types::{GroupResource, ResourceType};

/// What happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Added,
    Modified,
    Deleted,
}

/// One change, as broadcast to subscribers.
#[derive(Clone, Debug)]
pub struct StoreEvent {
    pub kind: EventKind,
    pub gr: GroupResource,
    pub namespace: String,
    pub name: String,
    /// The object after the change (for `Deleted`: the last state, with the deletion's RV).
    pub object: Arc<Value>,
    /// The object before the change (`None` for `Added`).
    pub old: Option<Arc<Value>>,
    pub resource_version: u64,
}

/// The start of a watch: see [`Store::watch`].
#[derive(Debug)]
pub struct WatchStart {
    /// The events to replay first (current objects as `Added`, or the history since an RV).
    pub initial: Vec<StoreEvent>,
    /// Every change committed after the snapshot (all types; filter by `gr`/namespace).
    pub events: broadcast::Receiver<StoreEvent>,
    /// The resourceVersion the snapshot was taken at (the global RV under the lock, or the
    /// requested RV when newer): events on `events` all have a larger one.
    pub resource_version: u64,
}

/// Options of a write (create, update, patch).
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// `fieldManager`; required for apply; defaults to `talos-sim` otherwise.
    pub field_manager: Option<String>,
    /// `force` for server-side apply conflicts.
    pub force: bool,
    /// `dryRun=All`: validate and return the result without storing it.
    pub dry_run: bool,
}

impl WriteOptions {
    pub fn manager(name: &str) -> Self {
        WriteOptions {
            field_manager: Some(name.into()),
            ..Default::default()
        }
    }
}

/// Options of a list.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
}

impl ListOptions {
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.into());
        self
    }
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.into());
        self
    }
}

/// The result of a list.
#[derive(Clone, Debug)]
pub struct ObjectList {
    pub items: Vec<Value>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<u64>,
}

/// `propagationPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    Foreground,
    Background,
    Orphan,
}

/// Options of a delete (the `DeleteOptions` body / query).
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// `None` = the resource's default (Background; Orphan for batch/v1 Jobs like the real server).
    pub propagation: Option<Propagation>,
    pub grace_period_seconds: Option<u64>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub dry_run: bool,
}

type Objects = BTreeMap<GroupResource, BTreeMap<(String, String), Value>>;

pub(crate) struct State {
    rv: u64,
    objects: Objects,
    /// Recorded events with their approximate size in bytes.
    history: VecDeque<(StoreEvent, usize)>,
    history_limit: usize,
    /// The most bytes (approximate object sizes) the history may hold, besides the count.
    history_byte_limit: usize,
    history_bytes: usize,
    /// Watches from a resourceVersion below this answer 410 Gone.
    oldest_watchable: u64,
    registry: types::Registry,
    /// Scheduled pods in their grace period: removal deadline.
    pod_deadlines: HashMap<(String, String), Instant>,
    /// A change that housekeeping may need to act on (a deletion started or finished).
    dirty: bool,
}

struct Inner {
    state: Mutex<State>,
    events: broadcast::Sender<StoreEvent>,
    logs: PodLogs,
    pace: Pace,
    /// Whether the PodSecurity admission plugin runs (Talos' default configuration).
    pod_security: std::sync::atomic::AtomicBool,
    /// Whether requests of handles with a user ([`Store::as_user`]) are authorized (RBAC).
    rbac: std::sync::atomic::AtomicBool,
    /// Signalled on writes that may need housekeeping (deletions).
    housekeeping: Notify,
}

/// The in-process API server store. Cheap to clone (shared).
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
    /// The user requests are authorized as (RBAC, see [`rbac`]); `None`: the system.
    user: Option<Arc<rbac::UserInfo>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("resource_version", &self.resource_version())
            .finish()
    }
}

impl Store {
    /// An empty store with the built-in types (no namespaces: see `SimCluster::start` for seeding).
    pub fn new(pace: Pace) -> Self {
        let (events, _) = broadcast::channel(8192);
        Store {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    rv: 0,
                    objects: BTreeMap::new(),
                    history: VecDeque::new(),
                    history_limit: 10_000,
                    history_byte_limit: HISTORY_BYTE_LIMIT,
                    history_bytes: 0,
                    oldest_watchable: 0,
                    registry: types::Registry::builtin(),
                    pod_deadlines: HashMap::new(),
                    dirty: false,
                }),
                events,
                logs: PodLogs::default(),
                pace,
                pod_security: std::sync::atomic::AtomicBool::new(true),
                rbac: std::sync::atomic::AtomicBool::new(true),
                housekeeping: Notify::new(),
            }),
            user: None,
        }
    }

    pub(crate) fn lock(&self) -> StateGuard<'_> {
        StateGuard {
            guard: self.inner.state.lock().unwrap_or_else(|e| e.into_inner()),
            housekeeping: &self.inner.housekeeping,
        }
    }

    pub fn pace(&self) -> Pace {
        self.inner.pace
    }

    /// Turns the PodSecurity admission plugin on (the default: Talos' configuration, see
    /// [`pod_security`]) or off.
    pub fn set_pod_security(&self, enabled: bool) {
        self.inner
            .pod_security
            .store(enabled, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether PodSecurity admission runs.
    pub fn pod_security(&self) -> bool {
        self.inner
            .pod_security
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The PodSecurity `warn` mode's warning for a pod or workload `obj` written to namespace
    /// `ns` (`would violate PodSecurity "restricted:latest": ...`), if any.
    pub fn pod_security_warning(
        &self,
        gr: &GroupResource,
        ns: &str,
        obj: &Value,
    ) -> Option<String> {
        if !self.pod_security() {
            return None;
        }
        let template = pod_security::template_of(gr, obj)?;
        let namespace = self
            .lock()
            .object(&GroupResource::core("namespaces"), "", ns)?
            .clone();
        pod_security::warning(&namespace, template)
    }

    /// The latest resourceVersion (a global counter, like etcd's revision).
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// Container log buffers.
    pub fn logs(&self) -> &PodLogs {
        &self.inner.logs
    }

    /// The type for a group/resource, if served.
    pub fn resource_type(&self, gr: &GroupResource) -> Option<ResourceType> {
        self.lock().registry.get(gr).cloned()
    }

    /// The type serving `apiVersion` + `kind` (e.g. `("batch/v1", "Job")`).
    pub fn find_type(&self, api_version: &str, kind: &str) -> Option<ResourceType> {
        self.lock().registry.by_kind(api_version, kind).cloned()
    }

    /// All served types.
    pub fn resource_types(&self) -> Vec<ResourceType> {
        self.lock().registry.all().cloned().collect()
    }

    /// Reads one object. Errors: 404 NotFound (also for unknown types).
    pub fn get(&self, gr: &GroupResource, namespace: &str, name: &str) -> Result<Value, ApiError> {
        let st = self.lock();
        let ty = st.registry.get(gr).ok_or_else(ApiError::no_route)?;
        let ns = if ty.namespaced { namespace } else { "" };
        self.authorize_locked(&st, &access("get", gr, None, ns, name))?;
        st.objects
            .get(gr)
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
            .ok_or_else(|| ApiError::not_found(gr, name))
    }

    /// Lists objects (all namespaces when `namespace` is `None`), sorted by namespace and name.
    /// Errors: 400 for bad selectors or continue tokens, 404 for unknown types.
    pub fn list(
        &self,
        gr: &GroupResource,
        namespace: Option<&str>,
        opts: &ListOptions,
    ) -> Result<ObjectList, ApiError> {
        let labels = LabelSelector::parse(opts.label_selector.as_deref().unwrap_or(""))?;
        let fields =
            FieldSelector::parse(opts.field_selector.as_deref().unwrap_or(""), &gr.resource)?;
        let start = match &opts.continue_token {
            Some(t) if !t.is_empty() => Some(decode_continue(t)?),
            _ => None,
        };
        let st = self.lock();
        let ty = st.registry.get(gr).ok_or_else(ApiError::no_route)?;
        let scope = if ty.namespaced {
            namespace.unwrap_or("")
        } else {
            ""
        };
        self.authorize_locked(&st, &access("list", gr, None, scope, ""))?;
        let mut items = Vec::new();
        let mut last_key = None;
        let mut remaining = 0u64;
        for ((ns, name), obj) in st.objects.get(gr).into_iter().flatten() {
            if namespace.is_some_and(|n| n != ns) || !labels.matches(obj) || !fields.matches(obj) {
                continue;
            }
            if start.as_ref().is_some_and(|s| (ns, name) <= (&s.0, &s.1)) {
                continue;
            }
            if opts.limit.is_some_and(|l| l > 0 && items.len() >= l) {
                remaining += 1;
                continue;
            }
            last_key = Some((ns.clone(), name.clone()));
            items.push(obj.clone());
        }
        let continue_token =
            (remaining > 0).then(|| encode_continue(last_key.unwrap_or_default(), st.rv));
        Ok(ObjectList {
            items,
            resource_version: st.rv,
            continue_token,
            remaining: (remaining > 0).then_some(remaining),
        })
    }

    /// Every change from now on, of every type.
    pub fn subscribe(&self) -> broadcast::Receiver<StoreEvent> {
        self.inner.events.subscribe()
    }

    /// Atomically: the events a watch starts with, a receiver for everything after them, and the
    /// resourceVersion of that snapshot (every event on the receiver is newer than it).
    /// `since = None`: every current object of `gr` (in `namespace`) as `Added`. `Some(rv)`: the
    /// recorded events of `gr` after `rv`; 410 Gone when `rv` is older than the history kept.
    /// The receiver carries all types; filter by `gr`/namespace.
    pub fn watch(
        &self,
        gr: &GroupResource,
        namespace: Option<&str>,
        since: Option<u64>,
    ) -> Result<WatchStart, ApiError> {
        let st = self.lock();
        let ty = st.registry.get(gr).ok_or_else(ApiError::no_route)?;
        let scope = if ty.namespaced {
            namespace.unwrap_or("")
        } else {
            ""
        };
        self.authorize_locked(&st, &access("watch", gr, None, scope, ""))?;
        let rx = self.inner.events.subscribe();
        let in_ns = |ns: &str| namespace.is_none_or(|n| n == ns);
        let initial = match since {
            None => st
                .objects
                .get(gr)
                .into_iter()
                .flatten()
                .filter(|((ns, _), _)| in_ns(ns))
                .map(|((ns, name), obj)| StoreEvent {
                    kind: EventKind::Added,
                    gr: gr.clone(),
                    namespace: ns.clone(),
                    name: name.clone(),
                    object: Arc::new(obj.clone()),
                    old: None,
                    resource_version: rv_of(obj),
                })
                .collect(),
            Some(rv) if rv < st.oldest_watchable => {
                return Err(ApiError::gone(rv, st.oldest_watchable));
            }
            Some(rv) => st
                .history
                .iter()
                .map(|(e, _)| e)
                .filter(|e| e.resource_version > rv && &e.gr == gr && in_ns(&e.namespace))
                .cloned()
                .collect(),
        };
        Ok(WatchStart {
            initial,
            events: rx,
            resource_version: st.rv.max(since.unwrap_or(0)),
        })
    }

    /// Forgets the event history, like an etcd compaction: watches from an older
    /// resourceVersion then get 410 Gone ("too old resource version").
    pub fn compact(&self) {
        let mut st = self.lock();
        st.history.clear();
        st.history_bytes = 0;
        st.oldest_watchable = st.rv;
    }

    /// Waits until a write may need housekeeping (a deletion started or finished), the next pod
    /// grace period ends, or `max` elapses.
    pub async fn housekeeping_wanted(&self, max: std::time::Duration) {
        let next_deadline = self.lock().pod_deadlines.values().min().copied();
        let wait = next_deadline
            .map(|d| d.saturating_duration_since(Instant::now()).min(max))
            .unwrap_or(max);
        let _ = tokio::time::timeout(wait, self.inner.housekeeping.notified()).await;
    }
}

/// The most bytes of objects the watch history keeps (besides at most 10,000 events): large
/// objects (Helm release Secrets) must not pin hundreds of MiB. Older watches then get 410.
pub const HISTORY_BYTE_LIMIT: usize = 64 * 1024 * 1024;

/// Roughly the size of `v` as JSON (strings and keys plus a little per value), without
/// serializing it.
fn approx_size(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(a) => 2 + a.iter().map(|x| approx_size(x) + 1).sum::<usize>(),
        Value::Object(m) => {
            2 + m
                .iter()
                .map(|(k, x)| k.len() + 4 + approx_size(x))
                .sum::<usize>()
        }
    }
}

/// The authorizer's attributes of a request on `gr`.
pub(crate) fn access<'a>(
    verb: &'a str,
    gr: &'a GroupResource,
    sub: Option<&'a str>,
    namespace: &'a str,
    name: &'a str,
) -> rbac::Request<'a> {
    rbac::Request {
        verb,
        group: &gr.group,
        resource: &gr.resource,
        subresource: sub,
        namespace,
        name,
    }
}

pub(crate) fn rv_of(obj: &Value) -> u64 {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
}

fn encode_continue(key: (String, String), rv: u64) -> String {
    let raw = json!({"ns": key.0, "name": key.1, "rv": rv}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(token: &str) -> Result<(String, String), ApiError> {
    let bad = || ApiError::bad_request("continue key is not valid: illegal base64 data");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    Ok((
        v.get("ns").and_then(Value::as_str).unwrap_or("").into(),
        v.get("name").and_then(Value::as_str).unwrap_or("").into(),
    ))
}

/// The locked state; dropping it wakes the housekeeping loop when a commit asked for it.
pub(crate) struct StateGuard<'a> {
    guard: MutexGuard<'a, State>,
    housekeeping: &'a Notify,
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.guard
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.guard
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        if std::mem::take(&mut self.guard.dirty) {
            self.housekeeping.notify_one();
        }
    }
}

impl State {
    /// Stores a change: bumps the global resourceVersion, records and broadcasts the event.
    fn commit(
        &mut self,
        tx: &broadcast::Sender<StoreEvent>,
        gr: &GroupResource,
        kind: EventKind,
        mut obj: Value,
        old: Option<Value>,
    ) -> Value {
        self.rv += 1;
        if kind == EventKind::Deleted || obj.pointer("/metadata/deletionTimestamp").is_some() {
            self.dirty = true;
        }
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), json!(self.rv.to_string()));
        }
        let ns = meta_str(&obj, "namespace").unwrap_or("").to_string();
        let name = meta_str(&obj, "name").unwrap_or("").to_string();
        let key = (ns.clone(), name.clone());
        let objects = self.objects.entry(gr.clone()).or_default();
        match kind {
            EventKind::Deleted => {
                objects.remove(&key);
            }
            _ => {
                objects.insert(key, obj.clone());
            }
        }
        let ev = StoreEvent {
            kind,
            gr: gr.clone(),
            namespace: ns,
            name,
            object: Arc::new(obj.clone()),
            old: old.map(Arc::new),
            resource_version: self.rv,
        };
        let size = approx_size(&ev.object) + ev.old.as_deref().map_or(0, approx_size);
        self.history.push_back((ev.clone(), size));
        self.history_bytes += size;
        while self.history.len() > self.history_limit
            || (self.history_bytes > self.history_byte_limit && self.history.len() > 1)
        {
            if let Some((e, size)) = self.history.pop_front() {
                self.history_bytes -= size;
                self.oldest_watchable = e.resource_version;
            }
        }
        let _ = tx.send(ev);
        obj
    }

    fn object(&self, gr: &GroupResource, ns: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(gr)
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
    }
}
