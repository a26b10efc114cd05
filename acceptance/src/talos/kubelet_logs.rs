//! The kubelets' container logs: [`LogStore`], what the emulated container runtime writes (one
//! log per container attempt, like the CRI log files), and [`KubeletLogServer`], the kubelet's
//! HTTPS endpoint `GET /containerLogs/{namespace}/{pod}/{container}` that the real
//! kube-apiserver calls for `pods/log` (`kubectl logs`, kube's `Api::<Pod>::logs`/`log_stream`).
//!
//! The store is keyed by pod name, like the kubelet's pod manager (the API server asks by name),
//! and remembers the pod's UID: a recreated pod with the same name starts with no logs.
//!
//! What a request gets follows the kubelet (`validateContainerLogStatus`, kuberuntime
//! `ReadLogs`):
//! - a running or terminated container: its current attempt; a container waiting after a
//!   terminated attempt (`CrashLoopBackOff`): that attempt, which is also what `previous=true`
//!   reads then (the kubelet reads `lastState.terminated`); otherwise `previous=true` reads the
//!   attempt before the current one;
//! - a container that never started: `400 container "c" in pod "p" is waiting to start: <reason>`;
//! - `tailLines` first, then `sinceTime`/`sinceSeconds` per line (also while following), then
//!   `timestamps` (RFC 3339 with nanoseconds, before each line), then `limitBytes` (counting the
//!   timestamps; the stream ends once reached);
//! - `follow=true` streams until the attempt ends ([`LogStore::close`], the next
//!   [`LogStore::open`], [`LogStore::set_waiting`]) or the pod is removed.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

/// The most an attempt's log keeps (the kubelet's `containerLogMaxSize`): older output is
/// dropped from the front, an eighth more at a time.
pub const MAX_LOG_BYTES: usize = 10 * 1024 * 1024;

/// The kubelet's log port (`status.daemonEndpoints.kubeletEndpoint.Port`).
pub const KUBELET_PORT: u16 = 10250;

/// One attempt's output: the kept bytes, and when each line was written.
#[derive(Debug)]
struct Attempt {
    /// Unique in the store: followers find their attempt by it.
    id: u64,
    data: Vec<u8>,
    /// The offset of `data[0]` in the attempt's output (bytes dropped from the front so far).
    base: usize,
    /// (offset of a line's first byte, when it was written), ascending. The first kept byte
    /// always has an entry at or before it.
    lines: VecDeque<(usize, SystemTime)>,
    /// Whether the next byte appended continues a line.
    mid_line: bool,
    /// The attempt ended: followers get the rest and EOF.
    closed: bool,
    /// Notified on every append and on close; dropped with the attempt (followers end).
    changed: watch::Sender<()>,
}

impl Attempt {
    fn new(id: u64) -> Attempt {
        Attempt {
            id,
            data: Vec::new(),
            base: 0,
            lines: VecDeque::new(),
            mid_line: false,
            closed: false,
            changed: watch::channel(()).0,
        }
    }

    fn end(&self) -> usize {
        self.base + self.data.len()
    }

    fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            self.changed.send_replace(());
        }
    }

    fn append(&mut self, bytes: &[u8], now: SystemTime) {
        for (at, b) in (self.end()..).zip(bytes) {
            if !self.mid_line {
                self.lines.push_back((at, now));
                self.mid_line = true;
            }
            if *b == b'\n' {
                self.mid_line = false;
            }
        }
        self.data.extend_from_slice(bytes);
        if self.data.len() > MAX_LOG_BYTES {
            // Drop an eighth more than needed so a chatty container does not move 10 MiB on
            // every line.
            let drop = self.data.len() - MAX_LOG_BYTES + MAX_LOG_BYTES / 8;
            self.data.drain(..drop);
            self.base += drop;
            let mut cut = None;
            while self.lines.front().is_some_and(|(o, _)| *o < self.base) {
                cut = self.lines.pop_front();
            }
            // The first kept bytes belong to a line whose start was dropped: keep its time.
            if let Some((_, t)) = cut {
                if self.lines.front().is_none_or(|(o, _)| *o > self.base) {
                    self.lines.push_front((self.base, t));
                }
            }
        }
        self.changed.send_replace(());
    }

    /// The line `offset` belongs to: (its first byte's offset, when it was written).
    fn line_of(&self, offset: usize) -> Option<(usize, SystemTime)> {
        let i = self.lines.partition_point(|(o, _)| *o <= offset);
        i.checked_sub(1).map(|i| self.lines[i])
    }

    /// The offset of the last `n` lines.
    fn tail_start(&self, n: usize) -> usize {
        self.end() - tail_lines(&self.data, n).len()
    }

    /// The output from `from` on: lines written before `since` left out, each line prefixed
    /// with its time and a space when `timestamps` (a chunk starting mid-line gets none).
    fn render(&self, from: usize, since: Option<SystemTime>, timestamps: bool) -> Vec<u8> {
        let start = from.clamp(self.base, self.end());
        let slice = &self.data[start - self.base..];
        if !timestamps && since.is_none() {
            return slice.to_vec();
        }
        let mut out = Vec::with_capacity(slice.len() + slice.len() / 8);
        let mut at = start;
        for segment in slice.split_inclusive(|b| *b == b'\n') {
            let line = self.line_of(at);
            let kept = match (since, line) {
                (Some(since), Some((_, t))) => t >= since,
                _ => true,
            };
            if kept {
                match line {
                    Some((o, t)) if timestamps && o == at => {
                        out.extend_from_slice(format_rfc3339_nano(t).as_bytes());
                        out.push(b' ');
                    }
                    _ => {}
                }
                out.extend_from_slice(segment);
            }
            at += segment.len();
        }
        out
    }
}

/// The last `n` lines of `data` (a last line without a newline counts).
fn tail_lines(data: &[u8], n: usize) -> &[u8] {
    if n == 0 {
        return &data[data.len()..];
    }
    let body = data.strip_suffix(b"\n").unwrap_or(data);
    let mut count = 0;
    for (i, b) in body.iter().enumerate().rev() {
        if *b == b'\n' {
            count += 1;
            if count == n {
                return &data[i + 1..];
            }
        }
    }
    data
}

/// RFC 3339 UTC with nanoseconds, trailing zeros trimmed (Go's `time.RFC3339Nano`).
fn format_rfc3339_nano(t: SystemTime) -> String {
    crate::util::format_rfc3339_nano(t)
}

/// Parses Go's `time.RFC3339` (what `sinceTime` is): `2006-01-02T15:04:05[.fraction](Z|±hh:mm)`.
fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let secs = crate::util::parse_rfc3339(s)?;
    let rest = s.get(19..)?;
    let (nanos, zone) = match rest.strip_prefix('.') {
        Some(frac) => {
            let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return None;
            }
            let padded = format!("{:0<9}", &frac[..digits.min(9)]);
            (padded.parse::<u32>().ok()?, &frac[digits..])
        }
        None => (0, rest),
    };
    let zone_ok = zone.eq_ignore_ascii_case("z")
        || (zone.len() == 6
            && matches!(zone.as_bytes()[0], b'+' | b'-')
            && zone.as_bytes()[3] == b':'
            && zone[1..3].bytes().all(|b| b.is_ascii_digit())
            && zone[4..6].bytes().all(|b| b.is_ascii_digit()));
    zone_ok.then(|| UNIX_EPOCH + Duration::new(secs, nanos))
}

#[derive(Debug, Default)]
struct Container {
    current: Option<Attempt>,
    /// The attempt before `current` (the kubelet's `lastState.terminated` while running).
    previous: Option<Attempt>,
    /// Why the container is not running (set by [`LogStore::set_waiting`], cleared by `open`).
    waiting: Option<String>,
}

#[derive(Debug)]
struct PodLogs {
    uid: String,
    containers: HashMap<String, Container>,
}

#[derive(Debug, Default)]
struct Inner {
    pods: HashMap<(String, String), PodLogs>,
    next_attempt: u64,
}

impl Inner {
    /// The pod's entry, replaced (old logs dropped, followers ended) if it belonged to a pod
    /// with another UID.
    fn pod(&mut self, namespace: &str, pod: &str, uid: &str) -> &mut PodLogs {
        let entry = self
            .pods
            .entry((namespace.to_string(), pod.to_string()))
            .or_insert_with(|| PodLogs {
                uid: uid.to_string(),
                containers: HashMap::new(),
            });
        if entry.uid != uid {
            *entry = PodLogs {
                uid: uid.to_string(),
                containers: HashMap::new(),
            };
        }
        entry
    }

    fn container(&self, namespace: &str, pod: &str, container: &str) -> Option<&Container> {
        self.pods
            .get(&(namespace.to_string(), pod.to_string()))?
            .containers
            .get(container)
    }

    fn container_mut(
        &mut self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Option<&mut Container> {
        self.pods
            .get_mut(&(namespace.to_string(), pod.to_string()))?
            .containers
            .get_mut(container)
    }

    fn attempt(&self, namespace: &str, pod: &str, container: &str, id: u64) -> Option<&Attempt> {
        let c = self.container(namespace, pod, container)?;
        [c.current.as_ref(), c.previous.as_ref()]
            .into_iter()
            .flatten()
            .find(|a| a.id == id)
    }
}

/// How a log is read: the kubelet's `PodLogOptions` (`follow`, `previous`, `timestamps`,
/// `tailLines`, `limitBytes`, and `sinceSeconds`/`sinceTime` as one point in time).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub tail_lines: Option<usize>,
    pub limit_bytes: Option<usize>,
    /// Lines written before are left out.
    pub since: Option<SystemTime>,
}

impl LogOptions {
    /// Decodes and validates a `containerLogs` query like the kubelet: booleans are true unless
    /// absent, `0` or `false`; the legacy `tail` (`all` = no limit) stands for `tailLines`;
    /// `sinceSeconds` counts back from `now`. Undecodable values are
    /// [`LogError::UndecodableQuery`], negative `tailLines`, `limitBytes`/`sinceSeconds` below 1
    /// or both `sinceTime` and `sinceSeconds` [`LogError::InvalidRequest`].
    pub fn from_query(query: Option<&str>, now: SystemTime) -> Result<LogOptions, LogError> {
        let pairs = crate::util::parse_query(query);
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let flag =
            |name: &str| get(name).is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"));
        let int = |name: &str| -> Result<Option<i64>, LogError> {
            match get(name) {
                None | Some("") => Ok(None),
                Some(v) => v
                    .parse::<i64>()
                    .map(Some)
                    .map_err(|_| LogError::UndecodableQuery),
            }
        };
        let tail_lines = match get("tail") {
            Some("all") => None,
            Some(v) if !v.is_empty() => {
                Some(v.parse::<i64>().map_err(|_| LogError::UndecodableQuery)?)
            }
            _ => int("tailLines")?,
        };
        let limit_bytes = int("limitBytes")?;
        let since_seconds = int("sinceSeconds")?;
        let since_time = match get("sinceTime") {
            None | Some("") => None,
            Some(v) => Some(parse_rfc3339(v).ok_or(LogError::UndecodableQuery)?),
        };
        if tail_lines.is_some_and(|n| n < 0)
            || limit_bytes.is_some_and(|n| n < 1)
            || since_seconds.is_some_and(|n| n < 1)
            || (since_seconds.is_some() && since_time.is_some())
        {
            return Err(LogError::InvalidRequest);
        }
        let to_usize = |n: i64| usize::try_from(n).unwrap_or(usize::MAX);
        let since = since_time.or_else(|| {
            since_seconds.map(|n| {
                now.checked_sub(Duration::from_secs(n.unsigned_abs()))
                    .unwrap_or(UNIX_EPOCH)
            })
        });
        Ok(LogOptions {
            follow: flag("follow"),
            previous: flag("previous"),
            timestamps: flag("timestamps"),
            tail_lines: tail_lines.map(to_usize),
            limit_bytes: limit_bytes.map(to_usize),
            since,
        })
    }
}

/// Why a log cannot be read; [`status`](Self::status) and the message are what the kubelet
/// answers (the API server passes the message on as the error's message).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    #[error("{{\"message\": \"Unable to decode query.\"}}")]
    UndecodableQuery,
    #[error("{{\"message\": \"Invalid request.\"}}")]
    InvalidRequest,
    #[error("pod \"{pod}\" does not exist")]
    PodNotFound { pod: String },
    #[error("container \"{container}\" not found in pod \"{pod}\"")]
    ContainerNotFound { pod: String, container: String },
    #[error("container \"{container}\" in pod \"{pod}\" is waiting to start: {}", waiting_message(.reason))]
    WaitingToStart {
        pod: String,
        container: String,
        reason: String,
    },
    #[error("container \"{container}\" in pod \"{pod}\" is waiting to start - no logs yet")]
    NoLogsYet { pod: String, container: String },
    #[error("previous terminated container \"{container}\" in pod \"{pod}\" not found")]
    PreviousNotFound { pod: String, container: String },
}

/// The kubelet spells out the common image pull failures.
fn waiting_message(reason: &str) -> &str {
    match reason {
        "ErrImagePull" => "image can't be pulled",
        "ImagePullBackOff" => "trying and failing to pull image",
        other => other,
    }
}

impl LogError {
    /// The HTTP status the kubelet answers with.
    pub fn status(&self) -> u16 {
        match self {
            LogError::InvalidRequest => 422,
            LogError::PodNotFound { .. } | LogError::ContainerNotFound { .. } => 404,
            _ => 400,
        }
    }
}

/// A log being read: the bytes so far, then (following) what is appended until the attempt
/// ends, the pod is removed or `limitBytes` is reached.
pub type LogStream = BoxStream<'static, Bytes>;

/// Where a follower continues.
struct Follow {
    attempt: u64,
    offset: usize,
    changed: watch::Receiver<()>,
}

/// The node's container logs, keyed by (namespace, pod name, container). Cheap to clone
/// (shared); one per node, or one for the whole cluster (pods are keyed by namespace and name).
///
/// The kubelet emulation calls [`set_waiting`](Self::set_waiting) for every container when it
/// admits a pod (`ContainerCreating`, `PodInitializing`, ...), [`open`](Self::open) when a
/// container attempt starts, [`append`](Self::append) with its output,
/// [`close`](Self::close) when it exits, [`set_waiting`](Self::set_waiting) again while it waits
/// for a restart (`CrashLoopBackOff`), and [`remove_pod`](Self::remove_pod) when the pod is gone.
/// A pod the store has no container of is unknown to the kubelet (`404`).
#[derive(Clone, Debug, Default)]
pub struct LogStore {
    inner: Arc<Mutex<Inner>>,
}

impl LogStore {
    pub fn new() -> LogStore {
        LogStore::default()
    }

    fn with<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g)
    }

    /// Starts a new attempt of a container (its log starts empty); the current one, ended, is
    /// kept as the previous attempt (`previous=true`) and its followers end. A `uid` other than
    /// the one the store has for the pod name is a new pod: the old pod's logs are dropped.
    pub fn open(&self, namespace: &str, pod: &str, uid: &str, container: &str) {
        self.with(|inner| {
            let id = inner.next_attempt;
            inner.next_attempt += 1;
            let c = inner
                .pod(namespace, pod, uid)
                .containers
                .entry(container.to_string())
                .or_default();
            if let Some(mut current) = c.current.take() {
                current.close();
                c.previous = Some(current);
            }
            c.current = Some(Attempt::new(id));
            c.waiting = None;
        });
    }

    /// Appends output of the container's current attempt, noting when each line started. Beyond
    /// [`MAX_LOG_BYTES`] the oldest output is dropped. Output after [`close`](Self::close)
    /// (a pipe drained late) is kept for readers, but ended followers do not see it. Output of a
    /// container that was never [`open`](Self::open)ed is dropped.
    pub fn append(&self, namespace: &str, pod: &str, container: &str, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let now = SystemTime::now();
        self.with(|inner| {
            match inner
                .container_mut(namespace, pod, container)
                .and_then(|c| c.current.as_mut())
            {
                Some(a) => a.append(bytes, now),
                None => tracing::debug!(
                    namespace,
                    pod,
                    container,
                    "output of a container that was not started dropped"
                ),
            }
        });
    }

    /// The container's current attempt ended: followers get the rest and EOF.
    pub fn close(&self, namespace: &str, pod: &str, container: &str) {
        self.with(|inner| {
            if let Some(a) = inner
                .container_mut(namespace, pod, container)
                .and_then(|c| c.current.as_mut())
            {
                a.close();
            }
        });
    }

    /// The container is waiting (`state.waiting.reason`, e.g. `ContainerCreating`,
    /// `PodInitializing`, `ErrImagePull`, `CrashLoopBackOff`); a running attempt ends. Until it
    /// starts once, reading its log fails with [`LogError::WaitingToStart`]; after an attempt,
    /// that attempt is read (by `previous=true` too). Replaces a pod with another `uid` like
    /// [`open`](Self::open).
    pub fn set_waiting(
        &self,
        namespace: &str,
        pod: &str,
        uid: &str,
        container: &str,
        reason: &str,
    ) {
        self.with(|inner| {
            let c = inner
                .pod(namespace, pod, uid)
                .containers
                .entry(container.to_string())
                .or_default();
            if let Some(a) = c.current.as_mut() {
                a.close();
            }
            c.waiting = Some(reason.to_string());
        });
    }

    /// Drops all logs of a pod (it is gone from the node): followers end, requests get `404`.
    pub fn remove_pod(&self, namespace: &str, pod: &str) {
        self.with(|inner| inner.pods.remove(&(namespace.to_string(), pod.to_string())));
    }

    /// The UID of the pod the store has logs of under this name.
    pub fn pod_uid(&self, namespace: &str, pod: &str) -> Option<String> {
        self.with(|inner| {
            inner
                .pods
                .get(&(namespace.to_string(), pod.to_string()))
                .map(|p| p.uid.clone())
        })
    }

    /// What a request reads now (`follow` is ignored).
    pub fn read(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        options: &LogOptions,
    ) -> Result<Vec<u8>, LogError> {
        let options = LogOptions {
            follow: false,
            ..options.clone()
        };
        self.with(|inner| Self::begin(inner, namespace, pod, container, &options))
            .map(|(first, _)| first)
    }

    /// A request's log: what there is now, and when `options.follow`, what is appended until
    /// the attempt ends or the pod is removed. Errors are decided now, as the kubelet does
    /// before it answers.
    pub fn stream(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        options: &LogOptions,
    ) -> Result<LogStream, LogError> {
        let (first, follow) =
            self.with(|inner| Self::begin(inner, namespace, pod, container, options))?;
        let left = options.limit_bytes.map(|limit| limit - first.len());
        let head = futures::stream::iter((!first.is_empty()).then(|| Bytes::from(first)));
        let Some(follow) = follow else {
            return Ok(head.boxed());
        };
        let rest = self.follow(
            (
                namespace.to_string(),
                pod.to_string(),
                container.to_string(),
            ),
            follow,
            options.since,
            options.timestamps,
        );
        let rest = match left {
            Some(left) => limit_bytes(rest, left).boxed(),
            None => rest.boxed(),
        };
        Ok(head.chain(rest).boxed())
    }

    /// Picks the attempt a request reads (the kubelet's `validateContainerLogStatus`), renders
    /// what it gets now, and where following continues (`None`: the answer ends there).
    fn begin(
        inner: &Inner,
        namespace: &str,
        pod: &str,
        container: &str,
        options: &LogOptions,
    ) -> Result<(Vec<u8>, Option<Follow>), LogError> {
        let p = inner
            .pods
            .get(&(namespace.to_string(), pod.to_string()))
            .ok_or_else(|| LogError::PodNotFound {
                pod: pod.to_string(),
            })?;
        let c = p
            .containers
            .get(container)
            .ok_or_else(|| LogError::ContainerNotFound {
                pod: pod.to_string(),
                container: container.to_string(),
            })?;
        let names = || (pod.to_string(), container.to_string());
        // Waiting after an attempt ended: the kubelet reads `lastState.terminated`, which is
        // that attempt, for current and previous logs alike.
        let waiting_after_attempt =
            c.waiting.is_some() && c.current.as_ref().is_some_and(|a| a.closed);
        let attempt = if options.previous {
            let previous = if waiting_after_attempt {
                c.current.as_ref()
            } else {
                c.previous.as_ref()
            };
            previous.ok_or_else(|| {
                let (pod, container) = names();
                LogError::PreviousNotFound { pod, container }
            })?
        } else {
            match (&c.current, &c.waiting) {
                (Some(a), _) => a,
                (None, Some(reason)) => {
                    let (pod, container) = names();
                    return Err(LogError::WaitingToStart {
                        pod,
                        container,
                        reason: reason.clone(),
                    });
                }
                (None, None) => {
                    let (pod, container) = names();
                    return Err(LogError::NoLogsYet { pod, container });
                }
            }
        };
        let from = match options.tail_lines {
            Some(n) => attempt.tail_start(n),
            None => attempt.base,
        };
        let mut first = attempt.render(from, options.since, options.timestamps);
        if let Some(limit) = options.limit_bytes {
            first.truncate(limit);
        }
        let limit_reached = options.limit_bytes.is_some_and(|l| first.len() >= l);
        let follow = (options.follow && !attempt.closed && !limit_reached).then(|| Follow {
            attempt: attempt.id,
            offset: attempt.end(),
            changed: attempt.changed.subscribe(),
        });
        Ok((first, follow))
    }

    /// The output of an attempt from `follow.offset` on, as it is appended, until the attempt
    /// is closed or dropped.
    fn follow(
        &self,
        key: (String, String, String),
        follow: Follow,
        since: Option<SystemTime>,
        timestamps: bool,
    ) -> impl futures::Stream<Item = Bytes> + Send + 'static {
        let state = (self.clone(), key, follow, false);
        futures::stream::unfold(state, move |(this, key, mut follow, done)| async move {
            if done {
                return None;
            }
            loop {
                // Mark the current version seen *before* reading, so an append between the
                // read and the wait below still wakes us (no lost wake-up).
                follow.changed.borrow_and_update();
                let (chunk, next, closed) = this.with(|inner| {
                    match inner.attempt(&key.0, &key.1, &key.2, follow.attempt) {
                        Some(a) => (
                            a.render(follow.offset, since, timestamps),
                            a.end(),
                            a.closed,
                        ),
                        None => (Vec::new(), follow.offset, true),
                    }
                });
                follow.offset = next;
                if !chunk.is_empty() {
                    return Some((Bytes::from(chunk), (this, key, follow, closed)));
                }
                if closed || follow.changed.changed().await.is_err() {
                    return None;
                }
            }
        })
    }
}

/// At most `left` bytes of `stream`; it ends once they are sent (`limitBytes` while following).
fn limit_bytes(
    stream: impl futures::Stream<Item = Bytes> + Send + 'static,
    left: usize,
) -> impl futures::Stream<Item = Bytes> + Send + 'static {
    let stream = Box::pin(stream);
    futures::stream::unfold((stream, left), |(mut stream, left)| async move {
        if left == 0 {
            return None;
        }
        let mut chunk = stream.next().await?;
        chunk.truncate(left);
        let left = left - chunk.len();
        Some((chunk, (stream, left)))
    })
}

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// A node's kubelet endpoint for the API server: HTTPS with a mandatory client certificate
/// signed by the cluster CA, `GET /containerLogs/{namespace}/{pod}/{container}` from a
/// [`LogStore`], and `GET /healthz`. Stops when dropped (or [`shutdown`](Self::shutdown)),
/// ending open log streams.
#[derive(Debug)]
pub struct KubeletLogServer {
    addr: SocketAddr,
    shutdown: CancellationToken,
}

impl KubeletLogServer {
    /// Listens on `bind:port` (`port` 0: any free port) with the kubelet's serving certificate
    /// (PEM, chain allowed; it needs the node's IP as an IP SAN) and key, accepting clients
    /// whose certificate is signed by `client_ca_pem`. Must be called within a Tokio runtime.
    pub fn start(
        bind: IpAddr,
        port: u16,
        serving_cert_pem: &str,
        serving_key_pem: &str,
        client_ca_pem: &str,
        store: LogStore,
    ) -> anyhow::Result<KubeletLogServer> {
        let runtime = tokio::runtime::Handle::try_current()
            .context("the kubelet log server needs a Tokio runtime")?;
        let tls = tls_config(serving_cert_pem, serving_key_pem, client_ca_pem)?;
        let listener = std::net::TcpListener::bind((bind, port))
            .with_context(|| format!("failed to listen on {bind}:{port}"))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(listener)?
        };
        let shutdown = CancellationToken::new();
        runtime.spawn(serve(
            listener,
            TlsAcceptor::from(tls),
            store,
            shutdown.clone(),
        ));
        tracing::debug!(%addr, "kubelet log server listening");
        Ok(KubeletLogServer { addr, shutdown })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops listening and ends all connections.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }
}

impl Drop for KubeletLogServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

fn tls_config(
    cert_pem: &str,
    key_pem: &str,
    client_ca_pem: &str,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .context("invalid kubelet serving certificate PEM")?;
    anyhow::ensure!(!chain.is_empty(), "no kubelet serving certificate in PEM");
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .context("invalid kubelet serving key PEM")?;
    let mut roots = RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
        roots
            .add(ca.context("invalid client CA PEM")?)
            .context("invalid client CA certificate")?;
    }
    anyhow::ensure!(!roots.is_empty(), "no client CA certificate in PEM");
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .context("failed to build the client certificate verifier")?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .context("invalid kubelet serving certificate or key")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

async fn serve(
    listener: tokio::net::TcpListener,
    acceptor: TlsAcceptor,
    store: LogStore,
    shutdown: CancellationToken,
) {
    loop {
        let (tcp, peer) = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "kubelet log server: accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let store = store.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let tls = tokio::select! {
                _ = shutdown.cancelled() => return,
                r = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)) => match r {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "kubelet log server: TLS handshake failed");
                        return;
                    }
                    Err(_) => return,
                },
            };
            let service = hyper::service::service_fn(move |req| {
                let store = store.clone();
                async move { Ok::<_, Infallible>(handle(&store, &req)) }
            });
            let builder = auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection(TokioIo::new(tls), service);
            tokio::select! {
                r = conn => if let Err(e) = r {
                    tracing::debug!(%peer, error = %e, "kubelet log server: connection ended");
                },
                _ = shutdown.cancelled() => {}
            }
        });
    }
}

fn text(status: u16, body: impl Into<Bytes>) -> Response<Body> {
    let mut resp = Response::new(Full::new(body.into()).boxed_unsync());
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

fn handle(store: &LogStore, req: &Request<Incoming>) -> Response<Body> {
    let path = req.uri().path();
    let route = if path == "/healthz" {
        Some(None)
    } else {
        path.strip_prefix("/containerLogs/")
            .map(|rest| rest.split('/').collect::<Vec<_>>())
            .filter(|segs| segs.len() == 3 && segs.iter().all(|s| !s.is_empty()))
            .map(Some)
    };
    let Some(route) = route else {
        return text(404, "404 page not found\n");
    };
    if req.method() != Method::GET {
        return text(405, "405: Method Not Allowed");
    }
    let Some(segs) = route else {
        return text(200, "ok");
    };
    let [ns, pod, container] = [segs[0], segs[1], segs[2]].map(crate::util::percent_decode);
    let result = LogOptions::from_query(req.uri().query(), SystemTime::now())
        .and_then(|options| store.stream(&ns, &pod, &container, &options));
    tracing::debug!(
        %ns, %pod, %container, query = req.uri().query().unwrap_or(""),
        error = result.as_ref().err().map(tracing::field::display),
        "kubelet containerLogs"
    );
    match result {
        Ok(stream) => {
            let body = StreamBody::new(stream.map(|b| Ok::<_, Infallible>(Frame::data(b))));
            let mut resp = Response::new(body.boxed_unsync());
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            resp
        }
        Err(e) => text(e.status(), e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: &str = "ns";

    fn opts() -> LogOptions {
        LogOptions::default()
    }

    fn read(logs: &LogStore, o: &LogOptions) -> Result<Vec<u8>, LogError> {
        logs.read(NS, "p", "c", o)
    }

    async fn collect(s: LogStream) -> Vec<u8> {
        s.collect::<Vec<Bytes>>().await.concat()
    }

    fn started() -> LogStore {
        let logs = LogStore::new();
        logs.set_waiting(NS, "p", "u1", "c", "ContainerCreating");
        logs.open(NS, "p", "u1", "c");
        logs
    }

    #[test]
    fn tails_lines() {
        assert_eq!(tail_lines(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(tail_lines(b"a\nb\nc", 5), b"a\nb\nc");
        assert_eq!(tail_lines(b"a\nb\nc", 1), b"c");
        assert_eq!(tail_lines(b"a\n", 0), b"");
        let logs = started();
        logs.append(NS, "p", "c", b"one\ntwo\nthree\n");
        let tail = |n| {
            read(
                &logs,
                &LogOptions {
                    tail_lines: Some(n),
                    ..opts()
                },
            )
            .unwrap()
        };
        assert_eq!(tail(2), b"two\nthree\n");
        assert_eq!(tail(0), b"");
        assert_eq!(tail(10), b"one\ntwo\nthree\n");
    }

    #[test]
    fn limit_bytes_counts_timestamps() {
        let logs = started();
        logs.append(NS, "p", "c", b"one\ntwo\n");
        let limited = |limit, timestamps| {
            read(
                &logs,
                &LogOptions {
                    limit_bytes: Some(limit),
                    timestamps,
                    ..opts()
                },
            )
            .unwrap()
        };
        assert_eq!(limited(5, false), b"one\nt");
        assert_eq!(limited(100, false), b"one\ntwo\n");
        let stamped = limited(5, true);
        assert_eq!(stamped.len(), 5);
        assert!(stamped.starts_with(b"20"), "{stamped:?}");
    }

    #[tokio::test]
    async fn follow_ends_on_close() {
        let logs = started();
        logs.append(NS, "p", "c", b"one\n");
        let s = logs
            .stream(
                NS,
                "p",
                "c",
                &LogOptions {
                    follow: true,
                    ..opts()
                },
            )
            .unwrap();
        let l2 = logs.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            l2.append(NS, "p", "c", b"two\n");
            l2.close(NS, "p", "c");
        });
        assert_eq!(collect(s).await, b"one\ntwo\n");
    }

    #[tokio::test]
    async fn follow_ends_on_the_next_attempt_and_on_removal() {
        let logs = started();
        let follow = LogOptions {
            follow: true,
            ..opts()
        };
        let s = logs.stream(NS, "p", "c", &follow).unwrap();
        logs.append(NS, "p", "c", b"first\n");
        logs.open(NS, "p", "u1", "c");
        logs.append(NS, "p", "c", b"second\n");
        assert_eq!(collect(s).await, b"first\n");

        let s = logs.stream(NS, "p", "c", &follow).unwrap();
        logs.remove_pod(NS, "p");
        assert_eq!(collect(s).await, b"second\n");
        assert_eq!(
            read(&logs, &opts()),
            Err(LogError::PodNotFound { pod: "p".into() })
        );
    }

    #[tokio::test]
    async fn follow_with_limit_bytes_ends_at_the_limit() {
        let logs = started();
        logs.append(NS, "p", "c", b"ab");
        let s = logs
            .stream(
                NS,
                "p",
                "c",
                &LogOptions {
                    follow: true,
                    limit_bytes: Some(5),
                    ..opts()
                },
            )
            .unwrap();
        logs.append(NS, "p", "c", b"cd\nefgh\n");
        // Not closed: the stream still ends, at the limit.
        assert_eq!(collect(s).await, b"abcd\n");
        // The limit reached by what there is: nothing to follow.
        let s = logs
            .stream(
                NS,
                "p",
                "c",
                &LogOptions {
                    follow: true,
                    limit_bytes: Some(3),
                    ..opts()
                },
            )
            .unwrap();
        assert_eq!(collect(s).await, b"abc");
    }

    #[tokio::test]
    async fn follow_with_tail_and_timestamps_continues_lines() {
        let logs = started();
        logs.append(NS, "p", "c", b"old\nlast\n");
        let s = logs
            .stream(
                NS,
                "p",
                "c",
                &LogOptions {
                    follow: true,
                    tail_lines: Some(1),
                    timestamps: true,
                    ..opts()
                },
            )
            .unwrap();
        logs.append(NS, "p", "c", b"par");
        let mut s = s;
        let mut got = Vec::new();
        while !got.ends_with(b"par") {
            got.extend_from_slice(&s.next().await.unwrap());
        }
        logs.append(NS, "p", "c", b"tial\nnext\n");
        logs.close(NS, "p", "c");
        got.extend(collect(s).await);
        let text = String::from_utf8(got).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        // A line split over chunks gets one timestamp.
        for (line, want) in lines.iter().zip(["last", "partial", "next"]) {
            let (ts, rest) = line.split_once(' ').unwrap();
            assert_eq!(rest, want);
            assert!(parse_rfc3339(ts).is_some(), "{ts}");
        }
    }

    #[test]
    fn lines_keep_their_times_for_since_and_timestamps() {
        let logs = started();
        logs.append(NS, "p", "c", b"one\n");
        std::thread::sleep(Duration::from_millis(5));
        let mid = SystemTime::now();
        logs.append(NS, "p", "c", b"two\nthree\n");
        let since = |since| {
            read(
                &logs,
                &LogOptions {
                    since: Some(since),
                    ..opts()
                },
            )
            .unwrap()
        };
        assert_eq!(since(mid), b"two\nthree\n");
        assert_eq!(since(UNIX_EPOCH), b"one\ntwo\nthree\n");
        assert_eq!(since(SystemTime::now() + Duration::from_secs(60)), b"");
        let stamped = read(
            &logs,
            &LogOptions {
                timestamps: true,
                ..opts()
            },
        )
        .unwrap();
        let text = String::from_utf8(stamped).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        let mut times = Vec::new();
        for (line, want) in lines.iter().zip(["one", "two", "three"]) {
            let (ts, rest) = line.split_once(' ').unwrap();
            assert_eq!(rest, want);
            assert!(ts.ends_with('Z') && ts.contains('T'), "{ts}");
            times.push(parse_rfc3339(ts).unwrap());
        }
        assert!(times[0] < mid && mid <= times[1], "{times:?}");
    }

    #[test]
    fn logs_are_capped_from_the_front_keeping_line_times() {
        let logs = started();
        logs.append(NS, "p", "c", &vec![b'a'; MAX_LOG_BYTES]);
        std::thread::sleep(Duration::from_millis(5));
        let mid = SystemTime::now();
        logs.append(NS, "p", "c", b"\ntail");
        let data = read(&logs, &opts()).unwrap();
        assert!(data.len() <= MAX_LOG_BYTES);
        assert!(data.len() >= MAX_LOG_BYTES / 2);
        assert!(data.ends_with(b"a\ntail"));
        // The cut line keeps its (earlier) time: `since` leaves it out, timestamps prefix it.
        let since = read(
            &logs,
            &LogOptions {
                since: Some(mid),
                ..opts()
            },
        )
        .unwrap();
        assert_eq!(since, b"tail");
        let stamped = read(
            &logs,
            &LogOptions {
                timestamps: true,
                tail_lines: Some(2),
                ..opts()
            },
        )
        .unwrap();
        let text = String::from_utf8_lossy(&stamped);
        assert!(
            text.starts_with("20") && text.contains("Z aaa"),
            "{}",
            &text[..40]
        );
    }

    #[test]
    fn previous_attempts_and_waiting() {
        let logs = LogStore::new();
        let previous = LogOptions {
            previous: true,
            ..opts()
        };
        assert_eq!(
            read(&logs, &opts()),
            Err(LogError::PodNotFound { pod: "p".into() })
        );
        logs.set_waiting(NS, "p", "u1", "c", "ContainerCreating");
        let e = read(&logs, &opts()).unwrap_err();
        assert_eq!(e.status(), 400);
        assert_eq!(
            e.to_string(),
            "container \"c\" in pod \"p\" is waiting to start: ContainerCreating"
        );
        let e = logs.read(NS, "p", "other", &opts()).unwrap_err();
        assert_eq!(e.status(), 404);
        assert_eq!(e.to_string(), "container \"other\" not found in pod \"p\"");
        logs.set_waiting(NS, "p", "u1", "c", "ImagePullBackOff");
        assert_eq!(
            read(&logs, &opts()).unwrap_err().to_string(),
            "container \"c\" in pod \"p\" is waiting to start: trying and failing to pull image"
        );
        assert_eq!(
            read(&logs, &previous).unwrap_err().to_string(),
            "previous terminated container \"c\" in pod \"p\" not found"
        );

        logs.open(NS, "p", "u1", "c");
        logs.append(NS, "p", "c", b"first\n");
        assert_eq!(read(&logs, &opts()).unwrap(), b"first\n");
        assert!(read(&logs, &previous).is_err());
        // Exited for good: still its log, no previous.
        logs.close(NS, "p", "c");
        assert_eq!(read(&logs, &opts()).unwrap(), b"first\n");
        assert!(read(&logs, &previous).is_err());
        // Waiting for a restart: the ended attempt, for previous too.
        logs.set_waiting(NS, "p", "u1", "c", "CrashLoopBackOff");
        assert_eq!(read(&logs, &opts()).unwrap(), b"first\n");
        assert_eq!(read(&logs, &previous).unwrap(), b"first\n");
        // Restarted: the new attempt, previous is the one before.
        logs.open(NS, "p", "u1", "c");
        logs.append(NS, "p", "c", b"second\n");
        assert_eq!(read(&logs, &opts()).unwrap(), b"second\n");
        assert_eq!(read(&logs, &previous).unwrap(), b"first\n");
        logs.open(NS, "p", "u1", "c");
        assert_eq!(read(&logs, &opts()).unwrap(), b"");
        assert_eq!(read(&logs, &previous).unwrap(), b"second\n");
    }

    #[test]
    fn a_recreated_pod_starts_without_logs() {
        let logs = started();
        logs.append(NS, "p", "c", b"old pod\n");
        logs.open(NS, "p", "u1", "c");
        logs.append(NS, "p", "c", b"old pod again\n");
        assert_eq!(logs.pod_uid(NS, "p").as_deref(), Some("u1"));
        logs.set_waiting(NS, "p", "u2", "c", "ContainerCreating");
        assert_eq!(logs.pod_uid(NS, "p").as_deref(), Some("u2"));
        assert!(matches!(
            read(&logs, &opts()),
            Err(LogError::WaitingToStart { .. })
        ));
        logs.open(NS, "p", "u2", "c");
        assert_eq!(read(&logs, &opts()).unwrap(), b"");
        assert!(
            read(
                &logs,
                &LogOptions {
                    previous: true,
                    ..opts()
                }
            )
            .is_err()
        );
        // Output of a container never opened is dropped.
        logs.append(NS, "p", "never", b"x");
        assert!(logs.read(NS, "p", "never", &opts()).is_err());
    }

    #[test]
    fn decodes_queries_like_the_kubelet() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let q = |s: &str| LogOptions::from_query(Some(s), now);
        assert_eq!(LogOptions::from_query(None, now), Ok(opts()));
        assert_eq!(
            q("follow=true&previous=1&timestamps&tailLines=3&limitBytes=10"),
            Ok(LogOptions {
                follow: true,
                previous: true,
                timestamps: true,
                tail_lines: Some(3),
                limit_bytes: Some(10),
                since: None,
            })
        );
        assert_eq!(q("follow=false&previous=0&timestamps=FALSE"), Ok(opts()));
        assert_eq!(q("tail=all").unwrap().tail_lines, None);
        assert_eq!(q("tail=4").unwrap().tail_lines, Some(4));
        assert_eq!(
            q("sinceSeconds=10").unwrap().since,
            Some(now - Duration::from_secs(10))
        );
        assert_eq!(
            q("sinceTime=2023-11-14T22:13:20Z").unwrap().since,
            Some(now)
        );
        assert_eq!(
            q("sinceTime=2023-11-15T00:13:20.5%2B02:00").unwrap().since,
            Some(now + Duration::from_millis(500))
        );
        assert_eq!(q("tailLines=x"), Err(LogError::UndecodableQuery));
        assert_eq!(q("sinceTime=yesterday"), Err(LogError::UndecodableQuery));
        assert_eq!(
            q("sinceTime=2023-11-14T22:13:20"),
            Err(LogError::UndecodableQuery)
        );
        assert_eq!(q("tailLines=-1"), Err(LogError::InvalidRequest));
        assert_eq!(q("limitBytes=0"), Err(LogError::InvalidRequest));
        assert_eq!(q("sinceSeconds=0"), Err(LogError::InvalidRequest));
        assert_eq!(
            q("sinceSeconds=5&sinceTime=2023-11-14T22:13:20Z"),
            Err(LogError::InvalidRequest)
        );
        assert_eq!(LogError::InvalidRequest.status(), 422);
        assert_eq!(
            LogError::UndecodableQuery.to_string(),
            r#"{"message": "Unable to decode query."}"#
        );
    }

    #[test]
    fn formats_timestamps_like_go() {
        let t = UNIX_EPOCH + Duration::new(1_796_130_000, 123_456_789);
        assert_eq!(format_rfc3339_nano(t), "2026-12-01T13:00:00.123456789Z");
        assert_eq!(parse_rfc3339("2026-12-01T13:00:00.123456789Z"), Some(t));
        let t = UNIX_EPOCH + Duration::new(1_796_130_000, 120_000_000);
        assert_eq!(format_rfc3339_nano(t), "2026-12-01T13:00:00.12Z");
    }
}
