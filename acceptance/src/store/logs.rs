//! Pod log buffers: the kubelet (cluster model) appends container output here, `GET pods/log`
//! reads it, `follow=true` streams it until the container's buffer is closed or the pod is gone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::Stream;
use tokio::sync::watch;

type Key = (String, String, String);

#[derive(Debug)]
struct Buffer {
    data: Vec<u8>,
    closed: bool,
    /// Bumped on every append/close so followers wake up.
    version: watch::Sender<u64>,
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
            closed: false,
            version: watch::channel(0).0,
        })
    }

    /// Appends output of a container (creates the buffer on first use).
    pub fn append(&self, namespace: &str, pod: &str, container: &str, bytes: &[u8]) {
        self.with(|m| {
            let b = Self::buffer(m, key(namespace, pod, container));
            b.data.extend_from_slice(bytes);
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

    /// Reopens a container's buffer (a restarted container); previous output is kept.
    pub fn reopen(&self, namespace: &str, pod: &str, container: &str) {
        self.with(|m| {
            let b = Self::buffer(m, key(namespace, pod, container));
            b.closed = false;
            b.version.send_modify(|v| *v += 1);
        });
    }

    /// Whether the container has a buffer (has started, from the API server's point of view).
    pub fn exists(&self, namespace: &str, pod: &str, container: &str) -> bool {
        self.with(|m| m.contains_key(&key(namespace, pod, container)))
    }

    /// Everything logged so far.
    pub fn read(&self, namespace: &str, pod: &str, container: &str) -> Vec<u8> {
        self.with(|m| {
            m.get(&key(namespace, pod, container))
                .map(|b| b.data.clone())
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

    /// A stream of the log from byte `offset` on, following appends until the buffer is closed
    /// or removed.
    pub fn follow(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        offset: usize,
    ) -> impl Stream<Item = Bytes> + Send + 'static {
        let this = self.clone();
        let k = key(namespace, pod, container);
        let rx = self.with(|m| Self::buffer(m, k.clone()).version.subscribe());
        futures::stream::unfold(
            (this, k, rx, offset, false),
            |(this, k, mut rx, offset, done)| async move {
                if done {
                    return None;
                }
                loop {
                    let (chunk, closed, exists) = this.with(|m| match m.get(&k) {
                        Some(b) => (
                            b.data.get(offset..).map(<[u8]>::to_vec).unwrap_or_default(),
                            b.closed,
                            true,
                        ),
                        None => (Vec::new(), true, false),
                    });
                    if !chunk.is_empty() {
                        let next = offset + chunk.len();
                        return Some((Bytes::from(chunk), (this, k, rx, next, closed)));
                    }
                    if closed || !exists {
                        return None;
                    }
                    rx.borrow_and_update();
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
}
