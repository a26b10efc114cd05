//! Running one container: its configuration (environment from ConfigMaps and Secrets:
//! `CreateContainerConfigError` while they are missing), program resolution, the runtime's start
//! checks (Talos forbids `SYS_MODULE`; a start error is never in the log), running / terminated
//! states, logs, readiness, restarts with back-off.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;

use super::status::{PodRuntime, Slot};
use super::{Kubelet, Signals, env};
use crate::cluster::events::{self, EventType};
use crate::cluster::obj;
use crate::config::Pace;
use crate::programs::{Exit, Image, ProgramContext};
use crate::store::UserInfo;
use crate::util::{hex, now_rfc3339, random_bytes};

/// How a container (with its restarts) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Exited(i32),
    /// The pod is being deleted or is gone.
    Stopped,
}

/// Everything needed to start the container again.
pub(crate) struct Spec {
    pub slot: Slot,
    pub container: Arc<Value>,
    pub image: Image,
    pub kubelet: Kubelet,
    /// The pod as the kubelet saw it when the sandbox was ready.
    pub pod: Arc<Value>,
    pub pod_ip: String,
    pub host_ip: String,
}

impl Spec {
    fn pace(&self) -> Pace {
        self.kubelet.config.pace
    }

    /// The program context of one start: environment (read from the store now, as the kubelet
    /// does on every container creation) and argv by Kubernetes' rule (`command` replaces the
    /// image's ENTRYPOINT, `args` its CMD, `$(VAR)` expanded). `Err`: the
    /// `CreateContainerConfigError` message.
    fn context(&self) -> Result<ProgramContext, String> {
        let k = &self.kubelet;
        let c = &self.container;
        let env = env::build(&k.store, &self.pod, c, &self.pod_ip, &self.host_ip)?;
        let strings = |p: &str| {
            obj::arr(c, p)
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect::<Vec<_>>()
        };
        let (command, args) = (strings("/command"), strings("/args"));
        let mut argv = if command.is_empty() {
            self.image.entrypoint.clone()
        } else {
            command.clone()
        };
        match (command.is_empty(), args.is_empty()) {
            (_, false) => argv.extend(args),
            (true, true) => argv.extend(self.image.cmd.iter().cloned()),
            (false, true) => {}
        }
        let argv = argv.iter().map(|a| env::expand(a, &env)).collect();
        // Programs reach the API as their pod's ServiceAccount (RBAC applies to them).
        let sa = self
            .pod
            .pointer("/spec/serviceAccountName")
            .and_then(Value::as_str)
            .unwrap_or("default");
        let user = UserInfo::service_account(obj::namespace(&self.pod), sa);
        Ok(ProgramContext {
            store: k.store.as_user(user),
            config: k.config.clone(),
            registry: k.registry.clone(),
            image: self.image.clone(),
            pod: self.pod.clone(),
            container: c.clone(),
            argv,
            env,
            ready: Arc::new(watch::channel(false).0),
            stdout: None,
            stdin: None,
        })
    }
}

/// Runs the container, restarting it per the pod's `restartPolicy` with CrashLoopBackOff.
pub(crate) async fn run_restarting(rt: &PodRuntime, sig: &Signals, spec: &Spec) -> Outcome {
    let policy = obj::s(&rt.pod, "/spec/restartPolicy").to_string();
    let init = matches!(spec.slot, Slot::Init(_));
    let mut backoff = Duration::from_secs(10);
    loop {
        let code = match run_once(rt, sig, spec).await {
            Some(code) => code,
            None => return Outcome::Stopped,
        };
        let restart = match policy.as_str() {
            "Never" => false,
            "OnFailure" => code != 0,
            _ => !init || code != 0,
        };
        if !restart {
            return Outcome::Exited(code);
        }
        let name = obj::s(&spec.container, "/name").to_string();
        let message = format!(
            "back-off {}s restarting failed container={name} pod={}_{}({})",
            backoff.as_secs(),
            rt.name(),
            rt.namespace(),
            obj::uid(&rt.pod)
        );
        rt.update(|s| {
            if let Some(c) = s.container(spec.slot) {
                c.last_state = json!({"terminated": c.state.get("terminated").cloned().unwrap_or(Value::Null)});
                c.state = json!({"waiting": {"reason": "CrashLoopBackOff", "message": message}});
                c.restart_count += 1;
            }
        });
        let msg = format!(
            "Back-off restarting failed container {name} in pod {}_{}({})",
            rt.name(),
            rt.namespace(),
            obj::uid(&rt.pod)
        );
        events::record(
            &rt.store,
            &rt.pod,
            EventType::Warning,
            "BackOff",
            &msg,
            "kubelet",
        );
        if sig.sleep_or_stop(spec.pace().scale(backoff)).await {
            return Outcome::Stopped;
        }
        backoff = (backoff * 2).min(Duration::from_secs(300));
    }
}

/// Waits until the container's configuration (environment from ConfigMaps and Secrets) can be
/// built: meanwhile the container is waiting with `CreateContainerConfigError` and a `Failed`
/// event, retried every 10 s (scaled) like the kubelet's pod worker back-off. `None` when the
/// pod stopped meanwhile.
async fn configured(rt: &PodRuntime, sig: &Signals, spec: &Spec) -> Option<ProgramContext> {
    loop {
        let message = match spec.context() {
            Ok(ctx) => return Some(ctx),
            Err(message) => message,
        };
        rt.update(|s| {
            if let Some(c) = s.container(spec.slot) {
                c.state = json!({"waiting": {"reason": "CreateContainerConfigError", "message": message}});
            }
        });
        events::record(
            &rt.store,
            &rt.pod,
            EventType::Warning,
            "Failed",
            &format!("Error: {message}"),
            "kubelet",
        );
        if sig
            .sleep_or_stop(spec.pace().scale(Duration::from_secs(10)))
            .await
        {
            return None;
        }
    }
}

/// Starts the container once and waits for it. `None` when the pod stopped meanwhile.
async fn run_once(rt: &PodRuntime, sig: &Signals, spec: &Spec) -> Option<i32> {
    let ctx = &configured(rt, sig, spec).await?;
    let name = obj::s(&spec.container, "/name").to_string();
    let started_at = now_rfc3339();
    let id = format!("containerd://{}", hex(&random_bytes::<32>()));
    new_attempt(ctx);
    let exit = match start_check(spec, ctx) {
        Err(exit) => exit,
        Ok(program) => {
            let has_probe = spec.container.get("readinessProbe").is_some();
            let init = matches!(spec.slot, Slot::Init(_));
            rt.update(|s| {
                if let Some(c) = s.container(spec.slot) {
                    c.state = json!({"running": {"startedAt": started_at}});
                    c.started = true;
                    c.ready = !init && !has_probe;
                    c.container_id = Some(id.clone());
                }
            });
            events::record(
                &rt.store,
                &rt.pod,
                EventType::Normal,
                "Created",
                &format!("Created container: {name}"),
                "kubelet",
            );
            events::record(
                &rt.store,
                &rt.pod,
                EventType::Normal,
                "Started",
                &format!("Started container {name}"),
                "kubelet",
            );
            let hang =
                !init && obj::s(&rt.pod, "/metadata/annotations/talos-sim.dev~1hang") == "true";
            let run = if hang {
                Box::pin(std::future::pending())
            } else {
                program.run(ctx.clone())
            };
            match supervise(rt, sig, spec, ctx, run, has_probe && !init).await {
                Some(exit) => exit,
                None => {
                    terminate(
                        rt,
                        spec,
                        ctx,
                        &started_at,
                        &id,
                        &Exit {
                            code: 137,
                            reason: Some("Error".into()),
                            message: None,
                        },
                    );
                    return None;
                }
            }
        }
    };
    // A start error comes from the runtime, not the process: it is in the container's
    // terminated state and the `Failed` event, never in its log.
    if let Some(m) = exit.message.as_ref().filter(|_| exit.is_start_error()) {
        events::record(
            &rt.store,
            &rt.pod,
            EventType::Warning,
            "Failed",
            &format!("Error: {m}"),
            "kubelet",
        );
    }
    terminate(rt, spec, ctx, &started_at, &id, &exit);
    Some(exit.code)
}

/// Starts the log of the container's next attempt. A real kubelet starts an empty log per
/// attempt and keeps the previous one for `previous=true`; the store's `PodLogs` has no
/// per-attempt buffers yet, so `reopen` keeps the earlier output (README, known gaps). This is
/// the one place to switch once it has.
fn new_attempt(ctx: &ProgramContext) {
    ctx.store
        .logs()
        .reopen(ctx.namespace(), ctx.pod_name(), ctx.container_name());
}

/// Waits for the program, tracking readiness; a kill (node reboot) ends it with 137.
/// `None` when the pod is deleted or gone.
async fn supervise(
    rt: &PodRuntime,
    sig: &Signals,
    spec: &Spec,
    ctx: &ProgramContext,
    run: crate::programs::ProgramFuture,
    probe: bool,
) -> Option<Exit> {
    let mut ready_rx: watch::Receiver<bool> = ctx.ready.subscribe();
    let (mut stop, mut kill) = (sig.clone(), sig.clone());
    let kill_mark = sig.kill_mark();
    tokio::pin!(run);
    loop {
        tokio::select! {
            exit = &mut run => return Some(exit),
            _ = stop.stopped() => return None,
            _ = kill.killed(&kill_mark) => {
                ctx.out("signal: killed");
                return Some(Exit { code: 137, reason: Some("Error".into()), message: None });
            }
            r = ready_rx.changed(), if probe => {
                if r.is_err() { continue; }
                let ready = *ready_rx.borrow_and_update();
                rt.update(|s| if let Some(c) = s.container(spec.slot) { c.ready = ready });
            }
        }
    }
}

fn terminate(
    rt: &PodRuntime,
    spec: &Spec,
    ctx: &ProgramContext,
    started_at: &str,
    id: &str,
    exit: &Exit,
) {
    let name = obj::s(&spec.container, "/name").to_string();
    let reason = exit.reason.clone().unwrap_or_else(|| {
        if exit.code == 0 {
            "Completed".into()
        } else {
            "Error".into()
        }
    });
    let mut terminated = json!({"exitCode": exit.code, "reason": reason, "startedAt": started_at,
        "finishedAt": now_rfc3339(), "containerID": id});
    if let Some(m) = &exit.message {
        terminated["message"] = json!(m);
    }
    rt.update(|s| {
        if let Some(c) = s.container(spec.slot) {
            c.state = json!({"terminated": terminated});
            c.ready = false;
            c.container_id = Some(id.to_string());
        }
    });
    ctx.store.logs().close(rt.namespace(), rt.name(), &name);
    ctx.set_ready(false);
}

const RUNC: &str = "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process";

/// What the runtime checks before the process runs: the executable exists in the image, and
/// no forbidden capability (`SYS_MODULE` on Talos) is requested.
fn start_check(
    spec: &Spec,
    ctx: &ProgramContext,
) -> Result<Arc<dyn crate::programs::Program>, Exit> {
    let caps = obj::arr(&spec.container, "/securityContext/capabilities/add");
    if caps
        .iter()
        .any(|c| matches!(c.as_str(), Some("SYS_MODULE") | Some("CAP_SYS_MODULE")))
    {
        return Err(Exit::start_error(format!(
            "{RUNC}: unable to apply caps: operation not permitted: unknown"
        )));
    }
    let argv0 = ctx.argv.first().cloned().unwrap_or_default();
    let not_found = || {
        Exit::start_error(format!(
            "{RUNC}: exec: \"{argv0}\": executable file not found in $PATH: unknown"
        ))
    };
    ctx.registry
        .resolve(&ctx.image, &argv0)
        .ok_or_else(not_found)
}
