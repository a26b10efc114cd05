//! Bounded fault injection: failed requests, latency, dropped connections, an unreachable API.
//! Every fault ends by itself (after a number of requests or a duration).
//!
//! Injected by the fault proxy in front of the apiserver
//! ([`TalosCluster::faults`](crate::talos::TalosCluster::faults)).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// Which requests a fault applies to. Empty fields match everything.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Matcher {
    /// Substring of the request path (e.g. `/secrets`, `/namespaces/kube-system/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_contains: Option<String>,
    /// Kubernetes verb: get, list, watch, create, update, patch, delete (or an HTTP method).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verb: Option<String>,
}

impl Matcher {
    pub fn any() -> Self {
        Matcher::default()
    }

    pub fn path(substring: &str) -> Self {
        Matcher {
            path_contains: Some(substring.into()),
            verb: None,
        }
    }

    pub fn matches(&self, path: &str, verb: &str, method: &str) -> bool {
        self.path_contains
            .as_deref()
            .is_none_or(|p| path.contains(p))
            && self
                .verb
                .as_deref()
                .is_none_or(|v| v.eq_ignore_ascii_case(verb) || v.eq_ignore_ascii_case(method))
    }
}

/// A fault (serializable, for a test's log).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum FaultSpec {
    /// The next `count` matching requests answer `status` (500, 503, 429, ...) with a Status body;
    /// `retryAfterSeconds` adds a `Retry-After` header (default 1 for 429).
    #[serde(rename_all = "camelCase")]
    Error {
        status: u16,
        count: u32,
        #[serde(default)]
        retry_after_seconds: Option<u64>,
        #[serde(flatten)]
        matcher: Matcher,
    },
    /// Matching requests are delayed by `delayMs`, for `count` requests or `durationMs`.
    #[serde(rename_all = "camelCase")]
    Latency {
        delay_ms: u64,
        #[serde(default)]
        count: Option<u32>,
        #[serde(default)]
        duration_ms: Option<u64>,
        #[serde(flatten)]
        matcher: Matcher,
    },
    /// The next `count` matching requests get their connection closed without a response.
    #[serde(rename_all = "camelCase")]
    DropConnection {
        count: u32,
        #[serde(flatten)]
        matcher: Matcher,
    },
    /// For `durationMs`, new connections are closed at once and open ones are cut.
    #[serde(rename_all = "camelCase")]
    Unreachable { duration_ms: u64 },
}

/// `now + ms`, capped at a year (no overflow on absurd inputs).
fn deadline(ms: u64) -> Instant {
    Instant::now() + Duration::from_millis(ms).min(Duration::from_secs(365 * 24 * 3600))
}

/// What the server must do with one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Pass,
    Fail {
        status: u16,
        retry_after: Option<u64>,
    },
    Drop,
}

#[derive(Debug)]
struct Active {
    spec: FaultSpec,
    remaining: Option<u32>,
    until: Option<Instant>,
}

#[derive(Debug)]
struct Inner {
    active: Mutex<Vec<Active>>,
    /// `true` while the API is unreachable.
    unreachable: watch::Sender<bool>,
    unreachable_until: Mutex<Option<Instant>>,
}

/// The fault injector shared by the proxy's connections. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Faults {
    inner: Arc<Inner>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            inner: Arc::new(Inner {
                active: Mutex::new(Vec::new()),
                unreachable: watch::channel(false).0,
                unreachable_until: Mutex::new(None),
            }),
        }
    }
}

impl Faults {
    /// Adds a fault.
    pub fn inject(&self, spec: FaultSpec) {
        tracing::info!(?spec, "fault injected");
        match &spec {
            FaultSpec::Unreachable { duration_ms } => {
                let until = deadline(*duration_ms);
                *self
                    .inner
                    .unreachable_until
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = Some(until);
                self.inner.unreachable.send_replace(true);
                let this = self.clone();
                let d = until.saturating_duration_since(Instant::now());
                if let Ok(handle) = tokio::runtime::Handle::try_current() {
                    handle.spawn(async move {
                        tokio::time::sleep(d).await;
                        this.is_unreachable();
                    });
                }
            }
            FaultSpec::Error { count, .. } | FaultSpec::DropConnection { count, .. } => {
                self.lock().push(Active {
                    spec: spec.clone(),
                    remaining: Some(*count),
                    until: None,
                });
            }
            FaultSpec::Latency {
                count, duration_ms, ..
            } => {
                let until = duration_ms.map(deadline);
                let remaining = if count.is_none() && until.is_none() {
                    Some(1)
                } else {
                    *count
                };
                self.lock().push(Active {
                    spec: spec.clone(),
                    remaining,
                    until,
                });
            }
        }
    }

    /// The next `count` requests matching `matcher` fail with `status`.
    pub fn fail_requests(&self, status: u16, count: u32, matcher: Matcher) {
        self.inject(FaultSpec::Error {
            status,
            count,
            retry_after_seconds: None,
            matcher,
        });
    }

    /// The next `count` matching requests answer 429 Too Many Requests with `Retry-After`.
    pub fn throttle(&self, count: u32, retry_after_seconds: u64, matcher: Matcher) {
        self.inject(FaultSpec::Error {
            status: 429,
            count,
            retry_after_seconds: Some(retry_after_seconds),
            matcher,
        });
    }

    /// Matching requests wait `delay` first, during `duration`.
    pub fn delay_for(&self, delay: Duration, duration: Duration, matcher: Matcher) {
        self.inject(FaultSpec::Latency {
            delay_ms: delay.as_millis() as u64,
            count: None,
            duration_ms: Some(duration.as_millis() as u64),
            matcher,
        });
    }

    /// The next `count` matching requests wait `delay` first.
    pub fn delay_requests(&self, delay: Duration, count: u32, matcher: Matcher) {
        self.inject(FaultSpec::Latency {
            delay_ms: delay.as_millis() as u64,
            count: Some(count),
            duration_ms: None,
            matcher,
        });
    }

    /// The next `count` matching requests get their TCP connection closed without a response.
    pub fn drop_connections(&self, count: u32, matcher: Matcher) {
        self.inject(FaultSpec::DropConnection { count, matcher });
    }

    /// The API is unreachable for `duration` (connections refused/cut), then recovers.
    pub fn unreachable_for(&self, duration: Duration) {
        self.inject(FaultSpec::Unreachable {
            duration_ms: duration.as_millis() as u64,
        });
    }

    /// Removes every fault.
    pub fn clear(&self) {
        self.lock().clear();
        *self
            .inner
            .unreachable_until
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
        self.inner.unreachable.send_replace(false);
    }

    /// The faults still active.
    pub fn active(&self) -> Vec<FaultSpec> {
        let mut out: Vec<FaultSpec> = self.lock().iter().map(|a| a.spec.clone()).collect();
        if let Some(until) = *self
            .inner
            .unreachable_until
            .lock()
            .unwrap_or_else(|e| e.into_inner())
        {
            let left = until.saturating_duration_since(Instant::now());
            if !left.is_zero() {
                out.push(FaultSpec::Unreachable {
                    duration_ms: left.as_millis() as u64,
                });
            }
        }
        out
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Active>> {
        self.inner.active.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the API is unreachable now (and ends the period when it is over).
    pub fn is_unreachable(&self) -> bool {
        let mut until = self
            .inner
            .unreachable_until
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match *until {
            Some(t) if Instant::now() < t => true,
            Some(_) => {
                *until = None;
                self.inner.unreachable.send_replace(false);
                false
            }
            None => false,
        }
    }

    /// Resolves when the API becomes unreachable (for cutting open streams).
    pub async fn until_unreachable(&self) {
        let mut rx = self.inner.unreachable.subscribe();
        let _ = rx.wait_for(|u| *u).await;
    }

    /// Decides the fate of one request: the delay to apply first and the action.
    pub fn on_request(&self, path: &str, verb: &str, method: &str) -> (Duration, Action) {
        let now = Instant::now();
        let mut delay = Duration::ZERO;
        let mut action = Action::Pass;
        let mut active = self.lock();
        active.retain(|a| a.remaining != Some(0) && a.until.is_none_or(|u| now < u));
        for a in active.iter_mut() {
            let m = match &a.spec {
                FaultSpec::Error { matcher, .. }
                | FaultSpec::Latency { matcher, .. }
                | FaultSpec::DropConnection { matcher, .. } => matcher,
                FaultSpec::Unreachable { .. } => continue,
            };
            if !m.matches(path, verb, method) {
                continue;
            }
            match &a.spec {
                FaultSpec::Latency { delay_ms, .. } => {
                    delay = delay.saturating_add(Duration::from_millis(*delay_ms))
                }
                FaultSpec::Error {
                    status,
                    retry_after_seconds,
                    ..
                } if action == Action::Pass => {
                    let retry_after = retry_after_seconds.or((*status == 429).then_some(1));
                    action = Action::Fail {
                        status: *status,
                        retry_after,
                    };
                }
                FaultSpec::DropConnection { .. } if action == Action::Pass => action = Action::Drop,
                _ => continue,
            }
            if let Some(r) = a.remaining.as_mut() {
                *r = r.saturating_sub(1);
            }
        }
        active.retain(|a| a.remaining != Some(0));
        (delay, action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_faults_are_bounded() {
        let f = Faults::default();
        f.throttle(2, 3, Matcher::path("/configmaps"));
        assert_eq!(f.on_request("/api/v1/pods", "list", "GET").1, Action::Pass);
        assert_eq!(
            f.on_request("/api/v1/configmaps", "list", "GET").1,
            Action::Fail {
                status: 429,
                retry_after: Some(3)
            }
        );
        assert_eq!(
            f.on_request("/api/v1/configmaps", "list", "GET").1,
            Action::Fail {
                status: 429,
                retry_after: Some(3)
            }
        );
        assert_eq!(
            f.on_request("/api/v1/configmaps", "list", "GET").1,
            Action::Pass
        );
        assert!(f.active().is_empty());
    }

    #[tokio::test]
    async fn absurd_durations_do_not_overflow() {
        let f = Faults::default();
        f.inject(FaultSpec::Unreachable {
            duration_ms: u64::MAX,
        });
        assert!(f.is_unreachable());
        f.clear();
        for _ in 0..2 {
            f.inject(FaultSpec::Latency {
                delay_ms: u64::MAX,
                count: Some(1),
                duration_ms: Some(u64::MAX),
                matcher: Matcher::any(),
            });
        }
        let (delay, action) = f.on_request("/api", "get", "GET");
        assert_eq!(action, Action::Pass);
        assert!(delay > Duration::from_secs(1));
    }

    #[test]
    fn specs_parse_from_json() {
        let s: FaultSpec = serde_json::from_str(
            r#"{"type":"error","status":503,"count":2,"pathContains":"/secrets","verb":"get"}"#,
        )
        .unwrap();
        assert_eq!(
            s,
            FaultSpec::Error {
                status: 503,
                count: 2,
                retry_after_seconds: None,
                matcher: Matcher {
                    path_contains: Some("/secrets".into()),
                    verb: Some("get".into())
                }
            }
        );
        let u: FaultSpec =
            serde_json::from_str(r#"{"type":"unreachable","durationMs":500}"#).unwrap();
        assert_eq!(u, FaultSpec::Unreachable { duration_ms: 500 });
    }
}
