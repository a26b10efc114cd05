//! Pod log buffers: the kubelet (cluster model) appends container output here, `GET pods/log`
//! reads it, `follow=true` streams it until the container's buffer is closed or the pod is gone.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use bytes::Bytes;
use futures::Stream;
use tokio::sync::watch;

type Key = (String, String, String);

/// The most a container's buffer keeps (like the kubelet's log rotation): older output is dropped
/// from the front (an eighth more at a time), and offsets stay valid because they count from the container's first byte.
pub const MAX_BUFFER_BYTES: usize = 10 * 1024 * 1024;

/// One attempt's output: the kept bytes, and when each line was written.
#[derive(Debug, Default, Clone)]
struct Attempt {
    data: Vec<u8>,
    /// The stream offset of `data[0]` (bytes dropped from the front so far).
    base: usize,
    /// (stream offset of a line's first byte, when it was written), ascending.
    lines: VecDeque<(usize, SystemTime)>,
    /// Whether the next byte appended starts a line.
    mid_line: bool,
}

impl Attempt {
    fn end(&self) -> usize {
        self.base + self.data.len()
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
        if self.data.len() > MAX_BUFFER_BYTES {
            // Drop an eighth more than needed so a chatty container does not move 10 MiB
            // on every line.
            let drop = self.data.len() - MAX_BUFFER_BYTES + MAX_BUFFER_BYTES / 8;
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
    }

    /// The stream offset of the first line written at or after `since` (the end if none).
    fn offset_since(&self, since: Option<SystemTime>) -> usize {
        match since {
            None => self.base,
            Some(since) => self
                .lines
                .iter()
                .find(|(_, t)| *t >= since)
                .map(|(o, _)| *o)
                .unwrap_or_else(|| self.end()),
        }
    }

    fn time_of_line_at(&self, offset: usize) -> Option<SystemTime> {
        self.lines
            .binary_search_by_key(&offset, |(o, _)| *o)
            .ok()
            .map(|i| self.lines[i].1)
    }

    /// The bytes from stream offset `from` on, each line prefixed with its RFC 3339 (nano)
    /// time and a space when `timestamps`, like the kubelet.
    fn render(&self, from: usize, timestamps: bool) -> Vec<u8> {
        let start = from.clamp(self.base, self.end());
        let slice = &self.data[start - self.base..];
        if !timestamps {
            return slice.to_vec();
        }
        let mut out = Vec::with_capacity(slice.len() + slice.len() / 8);
        let mut at = start;
        for segment in slice.split_inclusive(|b| *b == b'\n') {
            if let Some(t) = self.time_of_line_at(at) {
                out.extend_from_slice(crate::util::format_rfc3339_nano(t).as_bytes());
                out.push(b' ');
            }
            out.extend_from_slice(segment);
            at += segment.len();
        }
        out
    }
}

#[derive(Debug)]
struct Buffer {
    current: Attempt,
    closed: bool,
    /// Output of the previous attempt (a restarted container), for `previous=true`.
    previous: Option<Attempt>,
    /// Bumped on every append/close so followers wake up.
    version: watch::Sender<u64>,
}

impl Buffer {
    fn end(&self) -> usize {
        self.current.end()
    }
}

/// How a log is read: `sinceTime`/`sinceSeconds` (lines written at or after) and `timestamps`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogView {
    pub since: Option<SystemTime>,
    pub timestamps: bool,
}

/// Log buffers keyed by (namespace, pod, container). Cheap to clone (shared).
#[derive(Clone, Debug, Default)]
pub struct PodLogs {
    inner: Arc<Mutex<HashMap<Key, Buffer>>>,
}

fn key(ns: &str, pod: &str, container: &str) -> Key {
    (ns.to_string(), pod.to_string(), container.to_string())
}

impl PodLogs {
    fn with<R>(&self, f: impl FnOnce(&mut HashMap<Key, Buffer>) -> R) -> R {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g)
    }

    fn buffer(map: &mut HashMap<Key, Buffer>, k: Key) -> &mut Buffer {
        map.entry(k).or_insert_with(|| Buffer {
            current: Attempt::default(),
            closed: false,
            previous: None,
            version: watch::channel(0).0,
        })
    }

    /// Appends output of a container (creates the buffer on first use), noting when each line
    /// was written. Beyond [`MAX_BUFFER_BYTES`] the oldest output is dropped.
    pub fn append(&self, namespace: &str, pod: &str, container: &str, bytes: &[u8]) {
        let now = SystemTime::now();
        self.with(|m| {
            let b = Self::buffer(m, key(namespace, pod, container));
            b.current.append(bytes, now);
            b.version.send_modify(|v| *v += 1);
        });
    }

    /// Marks a container's output as finished: followers get the rest and their stream ends.
    pub fn close(&self, namespace: &str, pod: &str, container: &str) {
        self.with(|m| {
            let b = Self::buffer(m, key(namespace, pod, container));
            b.closed = true;
            b.version.send_modify(|v| *v += 1);
        });
    }

    /// Starts a new attempt of a container, like the kubelet's per-attempt log files: the current
    /// output becomes the previous attempt's (`previous=true`), the current log starts empty.
    /// Offsets keep growing, so followers of the old attempt see only the new output.
    pub fn reopen(&self, namespace: &str, pod: &str, container: &str) {
        self.with(|m| {
            let k = key(namespace, pod, container);
            let fresh = !m.contains_key(&k);
            let b = Self::buffer(m, k);
            if !fresh {
                let end = b.end();
                let old = std::mem::replace(
                    &mut b.current,
                    Attempt {
                        base: end,
                        ..Attempt::default()
                    },
                );
                b.previous = Some(old);
            }
            b.closed = false;
            b.version.send_modify(|v| *v += 1);
        });
    }

    /// The previous attempt's output, if the container was restarted.
    pub fn read_previous(&self, namespace: &str, pod: &str, container: &str) -> Option<Vec<u8>> {
        self.read_previous_view(namespace, pod, container, LogView::default())
    }

    /// [`read_previous`](Self::read_previous) with `since`/`timestamps`.
    pub fn read_previous_view(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        view: LogView,
    ) -> Option<Vec<u8>> {
        self.with(|m| {
            let p = m.get(&key(namespace, pod, container))?.previous.as_ref()?;
            Some(p.render(p.offset_since(view.since), view.timestamps))
        })
    }

    /// Whether the container has a buffer (has started, from the API server's point of view).
    pub fn exists(&self, namespace: &str, pod: &str, container: &str) -> bool {
        self.with(|m| m.contains_key(&key(namespace, pod, container)))
    }

    /// Everything logged so far (at most the last [`MAX_BUFFER_BYTES`]).
    pub fn read(&self, namespace: &str, pod: &str, container: &str) -> Vec<u8> {
        self.read_with_offset(namespace, pod, container).0
    }

    /// What [`read`](Self::read) returns, and the stream offset just after it (for
    /// [`follow`](Self::follow)).
    pub fn read_with_offset(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> (Vec<u8>, usize) {
        self.read_view(namespace, pod, container, LogView::default())
    }

    /// The current attempt's lines written at or after `view.since` (all without), with
    /// timestamps when `view.timestamps`, and the stream offset just after them.
    pub fn read_view(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        view: LogView,
    ) -> (Vec<u8>, usize) {
        self.with(|m| {
            m.get(&key(namespace, pod, container))
                .map(|b| {
                    let c = &b.current;
                    (
                        c.render(c.offset_since(view.since), view.timestamps),
                        c.end(),
                    )
                })
                .unwrap_or_default()
        })
    }

    /// Drops all buffers of a pod (the pod was deleted); followers end.
    pub fn remove_pod(&self, namespace: &str, pod: &str) {
        self.with(|m| {
            m.retain(|(ns, p, _), b| {
                let gone = ns == namespace && p == pod;
                if gone {
                    b.closed = true;
                    b.version.send_modify(|v| *v += 1);
                }
                !gone
            })
        });
    }

    /// A stream of the log from stream offset `offset` on, following appends until the buffer
    /// is closed or removed (the pod was deleted). A container without a buffer gives an empty
    /// stream at once; following never creates a buffer.
    pub fn follow(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        offset: usize,
    ) -> impl Stream<Item = Bytes> + Send + 'static {
        self.follow_view(namespace, pod, container, offset, false)
    }

    /// [`follow`](Self::follow), each line prefixed with its time when `timestamps`.
    pub fn follow_view(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        offset: usize,
        timestamps: bool,
    ) -> impl Stream<Item = Bytes> + Send + 'static {
        let this = self.clone();
        let k = key(namespace, pod, container);
        let rx = self.with(|m| m.get(&k).map(|b| b.version.subscribe()));
        futures::stream::unfold(
            (this, k, rx, offset, false),
            move |(this, k, rx, offset, done)| async move {
                let mut rx = rx?;
                if done {
                    return None;
                }
                loop {
                    // Mark the current version seen *before* reading, so an append between the
                    // read and the wait below still wakes us (no lost wake-up).
                    rx.borrow_and_update();
                    let (chunk, next, closed) = this.with(|m| match m.get(&k) {
                        Some(b) => (b.current.render(offset, timestamps), b.end(), b.closed),
                        None => (Vec::new(), offset, true),
                    });
                    if !chunk.is_empty() {
                        return Some((Bytes::from(chunk), (this, k, Some(rx), next, closed)));
                    }
                    if closed {
                        return None;
                    }
                    if rx.changed().await.is_err() {
                        return None;
                    }
                }
            },
        )
    }
}

/// The last `n` lines of `data`.
pub fn tail_lines(data: &[u8], n: usize) -> &[u8] {
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

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[test]
    fn tails_lines() {
        assert_eq!(tail_lines(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(tail_lines(b"a\nb\nc", 5), b"a\nb\nc");
        assert_eq!(tail_lines(b"a\n", 0), b"");
    }

    #[tokio::test]
    async fn follow_ends_on_close() {
        let logs = PodLogs::default();
        logs.append("ns", "p", "c", b"one\n");
        let s = logs.follow("ns", "p", "c", 0);
        let l2 = logs.clone();
        tokio::spawn(async move {
            l2.append("ns", "p", "c", b"two\n");
            l2.close("ns", "p", "c");
        });
        let all: Vec<Bytes> = s.collect().await;
        assert_eq!(all.concat(), b"one\ntwo\n");
    }

    #[tokio::test]
    async fn follow_without_a_buffer_ends_and_creates_none() {
        let logs = PodLogs::default();
        let all: Vec<Bytes> = logs.follow("ns", "p", "c", 0).collect().await;
        assert!(all.is_empty());
        assert!(!logs.exists("ns", "p", "c"));
    }

    #[test]
    fn lines_keep_their_times_for_since_and_timestamps() {
        let logs = PodLogs::default();
        logs.append("ns", "p", "c", b"one\n");
        std::thread::sleep(std::time::Duration::from_millis(5));
        let mid = SystemTime::now();
        logs.append("ns", "p", "c", b"two\nthree\n");
        let since = |since| {
            logs.read_view(
                "ns",
                "p",
                "c",
                LogView {
                    since: Some(since),
                    timestamps: false,
                },
            )
            .0
        };
        assert_eq!(since(mid), b"two\nthree\n");
        assert_eq!(since(SystemTime::UNIX_EPOCH), b"one\ntwo\nthree\n");
        let (stamped, _) = logs.read_view(
            "ns",
            "p",
            "c",
            LogView {
                since: None,
                timestamps: true,
            },
        );
        let text = String::from_utf8(stamped).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        for (line, want) in lines.iter().zip(["one", "two", "three"]) {
            let (ts, rest) = line.split_once(' ').unwrap();
            assert_eq!(rest, want);
            assert!(ts.ends_with('Z') && ts.contains('T'), "{ts}");
        }
    }

    #[test]
    fn buffers_are_capped_from_the_front() {
        let logs = PodLogs::default();
        logs.append("ns", "p", "c", &vec![b'a'; MAX_BUFFER_BYTES]);
        logs.append("ns", "p", "c", b"tail");
        let (data, end) = logs.read_with_offset("ns", "p", "c");
        assert!(data.len() <= MAX_BUFFER_BYTES);
        assert!(data.len() >= MAX_BUFFER_BYTES / 2);
        assert!(data.ends_with(b"tail"));
        assert_eq!(end, MAX_BUFFER_BYTES + 4);
    }
}
