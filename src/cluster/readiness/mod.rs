//! Readiness of what a chart runs, judged natively: the rollout of DaemonSets and Deployments (as
//! `kubectl rollout status` and `cilium status --wait` judge it: desired == ready == updated at the
//! current generation), node readiness, and the pods behind them. A waiting caller gets, on
//! failure, the workloads that are not ready, the pods and why, and the known signature when a
//! crashing container shows one (which ends the wait at once: it will not fix itself).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::LogParams;
use kube::runtime::{WatchStreamExt, watcher};
use tokio_util::sync::CancellationToken;

mod observe;
mod rollout;
mod slim;

pub use observe::*;
pub use rollout::*;

use super::Kube;
use super::diagnosis::{Diagnosis, diagnose};
use super::pods::{container_statuses, describe_container, warnings_about};
use slim::Slim;

/// Pods that wait without changing (no pod network, image pulls) show why only in events: looked
/// at this often while waiting.
const EVENT_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// Why the wait ended without readiness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotReady {
    /// `kind/name: ready/desired` of each workload not rolled out.
    pub workloads: Vec<String>,
    /// `pod on node: container states` of pods that are not ready.
    pub pods: Vec<String>,
    pub nodes: Vec<String>,
    pub log_tail: Vec<String>,
    /// `Reason: message` of Warning events of the pods that are not ready.
    pub events: Vec<String>,
    pub diagnosis: Option<Diagnosis>,
    pub interrupted: bool,
}

fn watch<K>(api: Api<K>, config: watcher::Config) -> impl Stream<Item = watcher::Event<K>> + Send
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    watcher(api, config)
        .default_backoff()
        .filter_map(|e| async move {
            e.map_err(|e| tracing::debug!(error = %e, "watch interrupted; resuming"))
                .ok()
        })
}

fn key<K: kube::Resource>(o: &K) -> String {
    o.meta().name.clone().unwrap_or_default()
}

/// Keeps the cache in step with the watch; what enters it is trimmed to what the wait reads
/// ([`Slim`]).
fn apply_event<K: kube::Resource + Clone + Slim>(
    cache: &mut BTreeMap<String, K>,
    event: watcher::Event<K>,
) {
    match event {
        watcher::Event::Apply(mut o) | watcher::Event::InitApply(mut o) => {
            o.slim();
            cache.insert(key(&o), o);
        }
        watcher::Event::Delete(o) => {
            cache.remove(&key(&o));
        }
        watcher::Event::Init | watcher::Event::InitDone => {}
    }
}

struct State {
    daemonsets: BTreeMap<String, DaemonSet>,
    deployments: BTreeMap<String, Deployment>,
    statefulsets: BTreeMap<String, StatefulSet>,
    jobs: BTreeMap<String, Job>,
    nodes: BTreeMap<String, Node>,
    pods: BTreeMap<String, Pod>,
    /// (pod, container, restart count) whose logs were already looked at.
    inspected: BTreeSet<(String, String, i32)>,
    /// Pods that existed when the wait's first list came in: they may be of the previous
    /// revision (see [`State::is_current`]).
    preexisting: Option<BTreeSet<String>>,
    log_tail: Vec<String>,
    events: Vec<String>,
    started: Instant,
    /// The wait is for the CNI itself (nodes must turn Ready): its own pods may wait for the
    /// network for a while, that is not a mistake.
    installing_cni: bool,
    /// Restarts after which a container backing off (`CrashLoopBackOff`) ends the wait: for
    /// pods whose crashing means they cannot run ([`wait_ready_failing_crash_loops`]).
    crash_loop_restarts: Option<i32>,
}

impl State {
    /// Nothing seen yet; `installing_cni`: the wait is for the CNI itself.
    fn new(installing_cni: bool) -> State {
        State {
            daemonsets: BTreeMap::new(),
            deployments: BTreeMap::new(),
            statefulsets: BTreeMap::new(),
            jobs: BTreeMap::new(),
            nodes: BTreeMap::new(),
            pods: BTreeMap::new(),
            inspected: BTreeSet::new(),
            crash_loop_restarts: None,
            preexisting: None,
            log_tail: Vec::new(),
            events: Vec::new(),
            started: Instant::now(),
            installing_cni,
        }
    }

    /// Whether a pod is of its workload's current revision, so its crash says something about
    /// what was just installed. A DaemonSet pod says so itself (`pod-template-generation`); for
    /// the others, a pod created during the wait is current, and an older one only once its
    /// workload has every replica updated. Old pods still crashing from the broken revision a
    /// fix replaces must not fail the fix's wait.
    fn is_current(&self, pod: &Pod) -> bool {
        let owner = pod
            .metadata
            .owner_references
            .as_ref()
            .and_then(|o| o.iter().find(|o| o.controller == Some(true)).or(o.first()));
        let Some(owner) = owner else {
            return true;
        };
        if owner.kind == "DaemonSet" {
            if let (Some(ds), Some(generation)) = (
                self.daemonsets.get(&owner.name),
                pod.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("pod-template-generation"))
                    .and_then(|g| g.parse::<i64>().ok()),
            ) {
                return Some(generation) >= ds.metadata.generation;
            }
        }
        let created_during_wait = self
            .preexisting
            .as_ref()
            .is_some_and(|before| !before.contains(&key(pod)));
        if created_during_wait {
            return true;
        }
        let rollout = match owner.kind.as_str() {
            "DaemonSet" => self.daemonsets.get(&owner.name).map(daemonset_rollout),
            "StatefulSet" => self.statefulsets.get(&owner.name).map(statefulset_rollout),
            "Job" => self.jobs.get(&owner.name).map(job_rollout),
            "ReplicaSet" => self
                .deployments
                .iter()
                .find(|(name, _)| {
                    owner
                        .name
                        .strip_prefix(name.as_str())
                        .is_some_and(|rest| rest.starts_with('-'))
                })
                .map(|(_, d)| deployment_rollout(d)),
            _ => None,
        };
        rollout.is_none_or(|r| r.observed && r.updated >= r.desired)
    }

    /// Whether a Warning event no longer says anything about its pod: a `FailedScheduling` of a
    /// pod that has been scheduled since (a pod-network pod waits for the CNI first; once it
    /// runs, what stops the pod now is what matters, such as an image that cannot be pulled).
    fn outdated(&self, event: &k8s_openapi::api::core::v1::Event) -> bool {
        event.reason.as_deref() == Some("FailedScheduling")
            && event
                .involved_object
                .name
                .as_ref()
                .and_then(|n| self.pods.get(n))
                .and_then(|p| p.spec.as_ref())
                .is_some_and(|s| s.node_name.is_some())
    }

    /// Not-ready pods of the current revisions.
    fn stuck_pods(&self) -> impl Iterator<Item = &Pod> {
        self.pods
            .values()
            .filter(|p| !pod_ready(p) && self.is_current(p))
    }

    fn rollout_of(&self, w: &WorkloadRef) -> Rollout {
        match w.kind {
            Kind::DaemonSet => self
                .daemonsets
                .get(&w.name)
                .map(daemonset_rollout)
                .unwrap_or_default(),
            Kind::Deployment => self
                .deployments
                .get(&w.name)
                .map(deployment_rollout)
                .unwrap_or_default(),
            Kind::StatefulSet => self
                .statefulsets
                .get(&w.name)
                .map(statefulset_rollout)
                .unwrap_or_default(),
            Kind::Job => self.jobs.get(&w.name).map(job_rollout).unwrap_or_default(),
        }
    }

    fn not_ready(&self, workloads: &[WorkloadRef], nodes: bool) -> NotReady {
        let workloads = workloads
            .iter()
            .filter_map(|w| {
                let r = self.rollout_of(w);
                (!r.done()).then(|| match r.exists {
                    true => format!(
                        "{:?} {}/{}: {} of {} ready, {} available, {} updated",
                        w.kind, w.namespace, w.name, r.ready, r.desired, r.available, r.updated
                    ),
                    false => format!("{:?} {}/{}: does not exist", w.kind, w.namespace, w.name),
                })
            })
            .collect();
        let mut pods: Vec<String> = self.stuck_pods().map(describe_pod).collect();
        let replaced = self
            .pods
            .values()
            .filter(|p| !pod_ready(p) && !self.is_current(p))
            .count();
        if replaced > 0 {
            pods.push(format!(
                "{replaced} not-ready pod(s) of the previous revision, being replaced"
            ));
        }
        NotReady {
            workloads,
            pods,
            nodes: if nodes {
                self.nodes.values().filter_map(node_not_ready).collect()
            } else {
                Vec::new()
            },
            log_tail: self.log_tail.clone(),
            events: self.events.clone(),
            diagnosis: None,
            interrupted: false,
        }
    }
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn describe_pod(pod: &Pod) -> String {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_else(|| "no node".into());
    let containers: Vec<String> = container_statuses(pod)
        .filter(|c| !c.ready)
        .map(describe_container)
        .collect();
    let phase = pod.status.as_ref().and_then(|s| s.phase.clone());
    format!(
        "pod {name} on {node} ({}): {}",
        phase.unwrap_or_default(),
        if containers.is_empty() {
            "starting".to_owned()
        } else {
            containers.join("; ")
        }
    )
}

/// How long a diagnosis that waits for a CNI must last before it ends the wait, when no CNI is
/// being installed right now.
const NO_CNI_GRACE: std::time::Duration = std::time::Duration::from_secs(20);

/// Warning events of the pods that are not ready (one LIST); a permanent diagnosis if they show one
/// (a pod waiting for a pod network before the CNI, an image that cannot be pulled).
async fn inspect_events(clients: &Kube, namespace: &str, state: &mut State) -> Option<Diagnosis> {
    let stuck: BTreeSet<String> = state.stuck_pods().map(key).collect();
    if stuck.is_empty() {
        return None;
    }
    let api: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(clients.client.clone(), namespace);
    let warnings = warnings_about(&api, |n| stuck.contains(n)).await.ok()?;
    let mut lines: Vec<String> = warnings
        .into_iter()
        .filter(|e| !state.outdated(e))
        .map(|e| {
            format!(
                "{} {}: {}",
                e.involved_object.name.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                super::scrub_api_message(e.message.unwrap_or_default().trim())
            )
        })
        .collect();
    lines.dedup();
    let skip = lines.len().saturating_sub(8);
    state.events = lines.into_iter().skip(skip).collect();
    diagnose(state.events.iter().map(String::as_str)).filter(|d| {
        d.is_permanent()
            || (!state.installing_cni
                && d.waits_for_cni()
                && state.started.elapsed() >= NO_CNI_GRACE)
    })
}

/// Looks at crashed containers of not-ready pods: their state messages and (once per attempt)
/// their log tail; returns a permanent diagnosis if one is found.
async fn inspect(clients: &Kube, namespace: &str, state: &mut State) -> Option<Diagnosis> {
    // A container that never started says why in its waiting state (an image that cannot be
    // pulled): read it there, not only from events, which a kubelet may aggregate or drop.
    let waiting = state.stuck_pods().flat_map(|p| {
        container_statuses(p)
            .filter(|c| c.state.as_ref().is_some_and(|s| s.waiting.is_some()))
            .map(describe_container)
    });
    for text in waiting {
        if let Some(d) = diagnose([text.as_str()]).filter(Diagnosis::is_permanent) {
            return Some(d);
        }
    }
    let pods: Api<Pod> = Api::namespaced(clients.client.clone(), namespace);
    let crashed: Vec<(String, String, i32, bool, bool, String)> = state
        .stuck_pods()
        .flat_map(|p| {
            let name = key(p);
            container_statuses(p)
                .filter(|c| {
                    c.restart_count > 0 || c.state.as_ref().is_some_and(|s| s.terminated.is_some())
                })
                .map(move |c| {
                    let text = describe_container(c);
                    let previous = c.state.as_ref().is_some_and(|s| s.terminated.is_none());
                    let backing_off = c
                        .state
                        .as_ref()
                        .and_then(|s| s.waiting.as_ref())
                        .is_some_and(|w| w.reason.as_deref() == Some("CrashLoopBackOff"));
                    (
                        name.clone(),
                        c.name.clone(),
                        c.restart_count,
                        previous,
                        backing_off,
                        text,
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    for (pod, container, restarts, previous, backing_off, text) in crashed {
        if let Some(d) = diagnose([text.as_str()]).filter(Diagnosis::is_permanent) {
            return Some(d);
        }
        let gives_up = backing_off
            && state
                .crash_loop_restarts
                .is_some_and(|limit| restarts >= limit);
        if !state
            .inspected
            .insert((pod.clone(), container.clone(), restarts))
            && !gives_up
        {
            continue;
        }
        let params = LogParams {
            container: Some(container.clone()),
            previous,
            tail_lines: Some(20),
            limit_bytes: Some(8 * 1024),
            ..Default::default()
        };
        if let Ok(log) = pods.logs(&pod, &params).await {
            let lines: Vec<String> = log
                .lines()
                .map(|l| format!("{pod}/{container}: {l}"))
                .collect();
            if let Some(d) =
                diagnose(lines.iter().map(String::as_str)).filter(Diagnosis::is_permanent)
            {
                state.log_tail = lines;
                return Some(d);
            }
            state.log_tail = lines;
        }
        if gives_up {
            return Some(Diagnosis::crash_loop(
                namespace, &pod, &container, restarts, &text,
            ));
        }
    }
    None
}

/// Waits until every workload is rolled out (and, with `nodes`, every node Ready without the
/// `not-ready:NoSchedule` taint), until `deadline`. `pods` selects the pods behind the workloads. A Service-IP
/// timeout in the diagnosis is worded for this cluster (kube-proxy deployed or not).
pub async fn wait_ready(
    clients: &Kube,
    namespace: &str,
    workloads: &[WorkloadRef],
    pods: &str,
    nodes: bool,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Vec<Rollout>, NotReady> {
    let watched = Watched {
        namespace,
        workloads,
        pods,
        nodes,
        crash_loop_restarts: None,
    };
    wait_watched(clients, watched, deadline, cancel).await
}

/// [`wait_ready`] for pods whose crashing means they cannot run (Cilium's pre-flight check, which
/// only starts the new image): a container backing off (`CrashLoopBackOff`) after `restarts`
/// restarts ends the wait, with its last log lines, whatever they say. Other waits leave crash
/// loops to `timeout` unless a known failure shows, since components such as `hubble-relay`
/// restart a few times while the agents come up.
pub async fn wait_ready_failing_crash_loops(
    clients: &Kube,
    namespace: &str,
    workloads: &[WorkloadRef],
    pods: &str,
    restarts: i32,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Vec<Rollout>, NotReady> {
    let watched = Watched {
        namespace,
        workloads,
        pods,
        nodes: false,
        crash_loop_restarts: Some(restarts),
    };
    wait_watched(clients, watched, deadline, cancel).await
}

async fn wait_watched(
    clients: &Kube,
    watched: Watched<'_>,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Vec<Rollout>, NotReady> {
    let waited = watch_until_ready(clients, watched, deadline, cancel).await;
    match waited {
        Ok(rollouts) => Ok(rollouts),
        Err(mut not_ready) => {
            super::kube_proxy::explain(clients, &mut not_ready.diagnosis).await;
            Err(not_ready)
        }
    }
}

/// What [`wait_ready`] waits for.
#[derive(Clone, Copy)]
struct Watched<'a> {
    namespace: &'a str,
    workloads: &'a [WorkloadRef],
    pods: &'a str,
    nodes: bool,
    crash_loop_restarts: Option<i32>,
}

async fn watch_until_ready(
    clients: &Kube,
    watched: Watched<'_>,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Vec<Rollout>, NotReady> {
    let Watched {
        namespace,
        workloads,
        pods,
        nodes,
        crash_loop_restarts,
    } = watched;
    let s = &clients.stream;
    // Every object of the kind in the namespace; the pods only as far as the selector names them.
    let every = watcher::Config::default;
    let ds = watch(Api::<DaemonSet>::namespaced(s.clone(), namespace), every());
    let deploy = watch(Api::<Deployment>::namespaced(s.clone(), namespace), every());
    let sts = watch(
        Api::<StatefulSet>::namespaced(s.clone(), namespace),
        every(),
    );
    let job_stream = watch(Api::<Job>::namespaced(s.clone(), namespace), every());
    let node_stream = watch(Api::<Node>::all(s.clone()), every());
    let pod_stream = watch(
        Api::<Pod>::namespaced(s.clone(), namespace),
        every().labels(pods),
    );
    tokio::pin!(ds, deploy, sts, job_stream, node_stream, pod_stream);
    let mut state = State::new(nodes);
    state.crash_loop_restarts = crash_loop_restarts;
    let deadline = tokio::time::Instant::from_std(deadline);
    let mut synced = [false; 6];
    let mut event_check =
        tokio::time::interval_at(tokio::time::Instant::now() + EVENT_CHECK, EVENT_CHECK);
    loop {
        let mut pods_changed = false;
        tokio::select! {
            Some(e) = ds.next() => { synced[0] |= matches!(e, watcher::Event::InitDone); apply_event(&mut state.daemonsets, e) }
            Some(e) = deploy.next() => { synced[1] |= matches!(e, watcher::Event::InitDone); apply_event(&mut state.deployments, e) }
            Some(e) = node_stream.next() => { synced[2] |= matches!(e, watcher::Event::InitDone); apply_event(&mut state.nodes, e) }
            Some(e) = pod_stream.next() => {
                let init_done = matches!(e, watcher::Event::InitDone);
                synced[3] |= init_done;
                apply_event(&mut state.pods, e);
                if init_done && state.preexisting.is_none() {
                    state.preexisting = Some(state.pods.keys().cloned().collect());
                }
                pods_changed = true
            }
            Some(e) = sts.next() => { synced[4] |= matches!(e, watcher::Event::InitDone); apply_event(&mut state.statefulsets, e) }
            Some(e) = job_stream.next() => { synced[5] |= matches!(e, watcher::Event::InitDone); apply_event(&mut state.jobs, e) }
            _ = event_check.tick() => {
                if let Some(d) = inspect_events(clients, namespace, &mut state).await {
                    let mut nr = state.not_ready(workloads, nodes);
                    nr.diagnosis = Some(d);
                    return Err(nr);
                }
            }
            _ = tokio::time::sleep_until(deadline) => {
                let _ = inspect(clients, namespace, &mut state).await;
                let _ = inspect_events(clients, namespace, &mut state).await;
                let mut nr = state.not_ready(workloads, nodes);
                nr.diagnosis = diagnose(nr.pods.iter().chain(&nr.log_tail).chain(&nr.events).map(String::as_str));
                return Err(nr);
            }
            _ = cancel.cancelled() => {
                let mut nr = state.not_ready(workloads, nodes);
                nr.interrupted = true;
                return Err(nr);
            }
        }
        if !synced.iter().all(|s| *s) {
            continue;
        }
        let all_rolled_out = workloads.iter().all(|w| state.rollout_of(w).done());
        let nodes_ready = !nodes
            || (!state.nodes.is_empty()
                && state.nodes.values().all(|n| node_not_ready(n).is_none()));
        if all_rolled_out && nodes_ready {
            return Ok(workloads.iter().map(|w| state.rollout_of(w)).collect());
        }
        if pods_changed {
            if let Some(d) = inspect(clients, namespace, &mut state).await {
                let mut nr = state.not_ready(workloads, nodes);
                nr.diagnosis = Some(d);
                return Err(nr);
            }
        }
    }
}

#[cfg(test)]
mod tests;
