//! Pod log buffers: the kubelet (cluster model) appends container output here, `GET pods/log`
//! reads it, `follow=true` streams it until the container's buffer is closed or the pod is gone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::Stream;
use tokio::sync::watch;

type Key = (String, String, String);

/// The most a container's buffer keeps (like the kubelet's log rotation): older output is dropped
/// from the front (an eighth more at a time), and offsets stay valid because they count from the container's first byte.
pub const MAX_BUFFER_BYTES: usize = 10 * 1024 * 1024;

#[derive(Debug)]
struct Buffer {
    data: Vec<u8>,
    /// The stream offset of `data[0]` (bytes dropped from the front so far).
    base: usize,
    closed: bool,
    /// Output of the previous attempt (a restarted container), for `previous=true`.
    previous: Option<Vec<u8>>,
    /// Bumped on every append/close so followers wake up.
    version: watch::Sender<u64>,
}

impl Buffer {
    fn end(&self) -> usize {
        self.base + self.data.len()
    }

    /// The bytes from stream offset `offset` on (from the oldest kept byte when it was dropped),
    /// and the offset after them.
    fn read_from(&self, offset: usize) -> (Vec<u8>, usize) {
        let start = offset.saturating_sub(self.base).min(self.data.len());
        (self.data[start..].to_vec(), self.end())
    }
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
            data: Vec::new(),
            base: 0,
            closed: false,
            previous: None,
            version: watch::channel(0).0,
        })
    }

    /// Appends output of a container (creates the buffer on first use). Beyond
    /// [`MAX_BUFFER_BYTES`] the oldest output is dropped.
    pub fn append(&self, namespace: &str, pod: &str, container: &str, bytes: &[u8]) {
        self.with(|m| {
            let b = Self::buffer(m, key(namespace, pod, container));
            b.data.extend_from_slice(bytes);
            if b.data.len() > MAX_BUFFER_BYTES {
                // Drop an eighth more than needed so a chatty container does not move 10 MiB
                // on every line.
                let drop = b.data.len() - MAX_BUFFER_BYTES + MAX_BUFFER_BYTES / 8;
                b.data.drain(..drop);
                b.base += drop;
            }
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
                b.base = b.end();
                b.previous = Some(std::mem::take(&mut b.data));
            }
            b.closed = false;
            b.version.send_modify(|v| *v += 1);
        });
    }

    /// The previous attempt's output, if the container was restarted.
    pub fn read_previous(&self, namespace: &str, pod: &str, container: &str) -> Option<Vec<u8>> {
        self.with(|m| m.get(&key(namespace, pod, container))?.previous.clone())
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
        self.with(|m| {
            m.get(&key(namespace, pod, container))
                .map(|b| (b.data.clone(), b.end()))
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
        let this = self.clone();
        let k = key(namespace, pod, container);
        let rx = self.with(|m| m.get(&k).map(|b| b.version.subscribe()));
        futures::stream::unfold(
            (this, k, rx, offset, false),
            |(this, k, rx, offset, done)| async move {
                let mut rx = rx?;
                if done {
                    return None;
                }
                loop {
                    // Mark the current version seen *before* reading, so an append between the
                    // read and the wait below still wakes us (no lost wake-up).
                    rx.borrow_and_update();
                    let (chunk, next, closed) = this.with(|m| match m.get(&k) {
                        Some(b) => {
                            let (chunk, next) = b.read_from(offset);
                            (chunk, next, b.closed)
                        }
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
