//! One pod's life on its node: volumes (`FailedMount` while a ConfigMap or Secret is missing),
//! sandbox (pod network or host network), image pulls, init containers in order, then the
//! containers side by side, and the pod phase.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};

use super::container::{Outcome, Spec, run_restarting};
use super::status::{PodRuntime, Slot};
use super::{Kubelet, Signals};
use crate::cluster::events::{self, EventType};
use crate::cluster::network;
use crate::cluster::nodes::NETWORK_NOT_READY;
use crate::cluster::obj;
use crate::programs::{Image, files, qualified_reference};

/// Runs the pod until its containers are done, it is deleted, or its
/// `spec.activeDeadlineSeconds` (scaled) passes.
pub(crate) async fn run(k: Kubelet, pod: Arc<Value>, sig: Signals) {
    let node = obj::s(&pod, "/spec/nodeName").to_string();
    let host_ip = network::node_ip(&k.store, &node).unwrap_or_default();
    let rt = PodRuntime::new(k.store.clone(), (*pod).clone(), &host_ip);
    rt.update(|_| {});
    let Some(deadline) = obj::i64_at(&pod, "/spec/activeDeadlineSeconds") else {
        return lifecycle(&k, &rt, &pod, &sig, &node, &host_ip).await;
    };
    let deadline = k
        .config
        .pace
        .scale(Duration::from_secs(deadline.max(0) as u64));
    tokio::select! {
        _ = lifecycle(&k, &rt, &pod, &sig, &node, &host_ip) => {}
        _ = tokio::time::sleep(deadline) => deadline_exceeded(&k, &rt),
    }
}

fn deadline_exceeded(k: &Kubelet, rt: &PodRuntime) {
    const MESSAGE: &str = "Pod was active on the node longer than the specified deadline";
    rt.update(|s| {
        for c in s.init.iter_mut().chain(s.main.iter_mut()) {
            if let Some(running) = c.state.get("running").cloned() {
                c.state = json!({"terminated": {"exitCode": 137, "reason": "Error", "startedAt": running.get("startedAt"),
                    "finishedAt": crate::util::now_rfc3339(), "containerID": c.container_id}});
            }
            c.ready = false;
            k.store.logs().close(rt.namespace(), rt.name(), &c.name);
        }
        s.phase = "Failed".into();
        s.reason = Some("DeadlineExceeded".into());
        s.message = Some(MESSAGE.into());
    });
    events::record(
        &k.store,
        &rt.pod,
        EventType::Normal,
        "DeadlineExceeded",
        MESSAGE,
        "kubelet",
    );
}

async fn lifecycle(
    k: &Kubelet,
    rt: &PodRuntime,
    pod: &Value,
    sig: &Signals,
    node: &str,
    host_ip: &str,
) {
    if !volumes_mounted(k, rt, sig).await {
        return;
    }
    let Some(pod_ip) = sandbox(k, rt, sig, node, host_ip).await else {
        return;
    };
    let Some(images) = pull_images(k, rt, sig).await else {
        return;
    };
    let latest = sig.latest();
    let spec_of = |slot: Slot, c: &Value, image: Image| Spec {
        slot,
        container: Arc::new(c.clone()),
        image,
        kubelet: k.clone(),
        pod: latest.clone(),
        pod_ip: pod_ip.clone(),
        host_ip: host_ip.to_string(),
    };
    let mut images = images.into_iter();
    for (i, c) in obj::arr(pod, "/spec/initContainers").iter().enumerate() {
        let Some(image) = images.next() else { return };
        match run_restarting(rt, sig, &spec_of(Slot::Init(i), c, image)).await {
            Outcome::Exited(0) => {}
            Outcome::Exited(_) => return finish(rt, "Failed"),
            Outcome::Stopped => return stopped(rt),
        }
    }
    let specs: Vec<Spec> = obj::arr(pod, "/spec/containers")
        .iter()
        .enumerate()
        .filter_map(|(i, c)| Some(spec_of(Slot::Main(i), c, images.next()?)))
        .collect();
    let outcomes =
        futures::future::join_all(specs.iter().map(|s| run_restarting(rt, sig, s))).await;
    if outcomes.contains(&Outcome::Stopped) {
        return stopped(rt);
    }
    let ok = outcomes.iter().all(|o| *o == Outcome::Exited(0));
    finish(rt, if ok { "Succeeded" } else { "Failed" });
}

fn finish(rt: &PodRuntime, phase: &str) {
    rt.update(|s| {
        s.phase = phase.into();
        for c in s.main.iter_mut().chain(s.init.iter_mut()) {
            c.ready = false;
        }
    });
}

/// The pod is being deleted: its containers were killed.
fn stopped(rt: &PodRuntime) {
    if obj::s(&rt.pod, "/spec/restartPolicy") != "Always" {
        finish(rt, "Failed");
    }
}

/// Waits until the pod's `configMap`/`secret` volumes can be set up (the kubelet's volume
/// manager, before the sandbox): meanwhile the containers stay `ContainerCreating` and a
/// `FailedMount` event is recorded per try, retried with the volume manager's back-off
/// (0.5 s doubling to 2m2s, scaled). `false` when the pod stopped first.
async fn volumes_mounted(k: &Kubelet, rt: &PodRuntime, sig: &Signals) -> bool {
    let mut backoff = Duration::from_millis(500);
    while let Some(message) = files::mount_error(&k.store, &rt.pod) {
        events::record(
            &k.store,
            &rt.pod,
            EventType::Warning,
            "FailedMount",
            &message,
            "kubelet",
        );
        if sig.sleep_or_stop(k.config.pace.scale(backoff)).await {
            stopped(rt);
            return false;
        }
        backoff = (backoff * 2).min(Duration::from_secs(122));
    }
    true
}

/// Sets up the pod network (or the host network). Returns the pod IP; `None` when the pod
/// stopped while the CNI was not ready.
async fn sandbox(
    k: &Kubelet,
    rt: &PodRuntime,
    sig: &Signals,
    node: &str,
    host_ip: &str,
) -> Option<String> {
    if rt.pod.pointer("/spec/hostNetwork") == Some(&json!(true)) {
        rt.update(|s| {
            s.sandbox_ready = true;
            s.pod_ip = Some(host_ip.to_string());
        });
        return Some(host_ip.to_string());
    }
    let message = format!("network is not ready: {NETWORK_NOT_READY}");
    while !network::pod_network_ready(&k.store, node) {
        events::record(
            &k.store,
            &rt.pod,
            EventType::Warning,
            "FailedCreatePodSandBox",
            &message,
            "kubelet",
        );
        if sig
            .sleep_or_stop(k.config.pace.scale(Duration::from_secs(10)))
            .await
        {
            stopped(rt);
            return None;
        }
    }
    let cidr = k
        .store
        .get(&obj::nodes(), "", node)
        .map(|n| obj::s(&n, "/spec/podCIDR").to_string())
        .unwrap_or_default();
    let base = cidr.trim_end_matches("0/24");
    let n = k.next_ip.fetch_add(1, Ordering::Relaxed) % 250 + 2;
    let ip = if base.is_empty() {
        format!("10.244.0.{n}")
    } else {
        format!("{base}{n}")
    };
    rt.update(|s| {
        s.sandbox_ready = true;
        s.pod_ip = Some(ip.clone());
    });
    Some(ip)
}

/// Resolves every container's image (init containers first). An unknown image cycles
/// `ErrImagePull` / `ImagePullBackOff` until the pod is deleted (`None`).
async fn pull_images(k: &Kubelet, rt: &PodRuntime, sig: &Signals) -> Option<Vec<Image>> {
    let slots = obj::arr(&rt.pod, "/spec/initContainers")
        .iter()
        .enumerate()
        .map(|(i, c)| (Slot::Init(i), c));
    let slots: Vec<(Slot, &Value)> = slots
        .chain(
            obj::arr(&rt.pod, "/spec/containers")
                .iter()
                .enumerate()
                .map(|(i, c)| (Slot::Main(i), c)),
        )
        .collect();
    let mut out = Vec::new();
    for (slot, c) in slots {
        let image = obj::s(c, "/image");
        match k.registry.image(image) {
            Some(found) => {
                let msg = format!("Container image \"{image}\" already present on machine");
                events::record(
                    &k.store,
                    &rt.pod,
                    EventType::Normal,
                    "Pulled",
                    &msg,
                    "kubelet",
                );
                out.push(found.clone());
            }
            None => {
                image_pull_backoff(k, rt, sig, slot, image).await;
                return None;
            }
        }
    }
    Some(out)
}

async fn image_pull_backoff(k: &Kubelet, rt: &PodRuntime, sig: &Signals, slot: Slot, image: &str) {
    let full = qualified_reference(image);
    let err = format!(
        "rpc error: code = NotFound desc = failed to pull and unpack image \"{full}\": failed to resolve reference \"{full}\": {full}: not found"
    );
    let mut backoff = Duration::from_secs(10);
    loop {
        let rec = |reason: &str, ty: EventType, msg: &str| {
            events::record(&k.store, &rt.pod, ty, reason, msg, "kubelet")
        };
        rec(
            "Pulling",
            EventType::Normal,
            &format!("Pulling image \"{image}\""),
        );
        rec(
            "Failed",
            EventType::Warning,
            &format!("Failed to pull image \"{image}\": {err}"),
        );
        rec("Failed", EventType::Warning, "Error: ErrImagePull");
        set_waiting(rt, slot, "ErrImagePull", &err);
        if sig
            .sleep_or_stop(k.config.pace.scale(Duration::from_secs(2)))
            .await
        {
            return stopped(rt);
        }
        rec(
            "BackOff",
            EventType::Normal,
            &format!("Back-off pulling image \"{image}\""),
        );
        rec("Failed", EventType::Warning, "Error: ImagePullBackOff");
        set_waiting(
            rt,
            slot,
            "ImagePullBackOff",
            &format!("Back-off pulling image \"{image}\": ErrImagePull: {err}"),
        );
        if sig.sleep_or_stop(k.config.pace.scale(backoff)).await {
            return stopped(rt);
        }
        backoff = (backoff * 2).min(Duration::from_secs(300));
    }
}

fn set_waiting(rt: &PodRuntime, slot: Slot, reason: &str, message: &str) {
    rt.update(|s| {
        s.sandbox_ready = true;
        if let Some(c) = s.container(slot) {
            c.state = json!({"waiting": {"reason": reason, "message": message}});
        }
    });
}
