//! The pod status the kubelet maintains (phase, conditions, container statuses, IPs), held in
//! memory by the pod's task and written whole through `pods/status` after every change.

use std::sync::Mutex;

use serde_json::{Value, json};

use crate::cluster::obj;
use crate::store::Store;
use crate::util::now_rfc3339;

/// One container's status.
#[derive(Clone, Debug)]
pub(crate) struct Container {
    pub name: String,
    pub image: String,
    pub restart_count: i64,
    pub state: Value,
    pub last_state: Value,
    pub ready: bool,
    pub started: bool,
    pub container_id: Option<String>,
}

impl Container {
    fn new(spec: &Value, waiting: &str) -> Self {
        Container {
            name: obj::s(spec, "/name").to_string(),
            image: obj::s(spec, "/image").to_string(),
            restart_count: 0,
            state: json!({"waiting": {"reason": waiting}}),
            last_state: json!({}),
            ready: false,
            started: false,
            container_id: None,
        }
    }

    pub fn terminated(&self) -> Option<&Value> {
        self.state.get("terminated")
    }

    pub fn exit_code(&self) -> Option<i64> {
        self.terminated()
            .and_then(|t| t.get("exitCode"))
            .and_then(Value::as_i64)
    }

    fn to_json(&self) -> Value {
        let mut v = json!({
            "name": self.name, "image": self.image, "imageID": "", "ready": self.ready,
            "started": self.started, "restartCount": self.restart_count,
            "state": self.state, "lastState": self.last_state,
        });
        if let Some(id) = &self.container_id {
            v["containerID"] = json!(id);
            v["imageID"] = json!(format!(
                "{}@sha256:{}",
                crate::programs::qualified_reference(&self.image),
                "0".repeat(64)
            ));
        }
        v
    }
}

/// Which container a status belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    Init(usize),
    Main(usize),
}

/// The status of one pod.
#[derive(Debug)]
pub(crate) struct PodStatus {
    /// `Succeeded`/`Failed` once the pod is done; before that the rendered phase is derived from
    /// the containers (see `current_phase`).
    pub phase: String,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub host_ip: String,
    pub pod_ip: Option<String>,
    pub start_time: String,
    pub sandbox_ready: bool,
    pub init: Vec<Container>,
    pub main: Vec<Container>,
    conditions: Vec<Value>,
}

impl PodStatus {
    pub fn new(pod: &Value, host_ip: &str) -> Self {
        let inits = obj::arr(pod, "/spec/initContainers");
        let main_waiting = if inits.is_empty() {
            "ContainerCreating"
        } else {
            "PodInitializing"
        };
        PodStatus {
            phase: "Pending".into(),
            reason: None,
            message: None,
            host_ip: host_ip.to_string(),
            pod_ip: None,
            start_time: now_rfc3339(),
            sandbox_ready: false,
            init: inits
                .iter()
                .map(|c| Container::new(c, "PodInitializing"))
                .collect(),
            main: obj::arr(pod, "/spec/containers")
                .iter()
                .map(|c| Container::new(c, main_waiting))
                .collect(),
            conditions: obj::arr(pod, "/status/conditions").to_vec(),
        }
    }

    pub fn container(&mut self, slot: Slot) -> Option<&mut Container> {
        match slot {
            Slot::Init(i) => self.init.get_mut(i),
            Slot::Main(i) => self.main.get_mut(i),
        }
    }

    fn update_conditions(&mut self) {
        let finished = matches!(self.phase.as_str(), "Succeeded" | "Failed");
        let c = &mut self.conditions;
        let bool_s = |b: bool| if b { "True" } else { "False" };
        obj::set_condition(
            c,
            "PodReadyToStartContainers",
            bool_s(self.sandbox_ready && !finished),
            "",
            "",
        );
        let pending_init: Vec<&str> = self
            .init
            .iter()
            .filter(|i| i.exit_code() != Some(0))
            .map(|i| i.name.as_str())
            .collect();
        match pending_init.is_empty() {
            true => obj::set_condition(c, "Initialized", "True", "", ""),
            false => obj::set_condition(
                c,
                "Initialized",
                "False",
                "ContainersNotInitialized",
                &format!(
                    "containers with incomplete status: [{}]",
                    pending_init.join(" ")
                ),
            ),
        }
        let unready: Vec<String> = self
            .main
            .iter()
            .filter(|c| !c.ready)
            .map(|c| c.name.clone())
            .collect();
        let (status, reason, message) = match (unready.is_empty(), finished) {
            (true, _) => ("True", "", String::new()),
            (false, true) => ("False", "PodCompleted", String::new()),
            (false, false) => (
                "False",
                "ContainersNotReady",
                format!("containers with unready status: [{}]", unready.join(" ")),
            ),
        };
        obj::set_condition(c, "ContainersReady", status, reason, &message);
        obj::set_condition(c, "Ready", status, reason, &message);
        obj::set_condition(c, "PodScheduled", "True", "", "");
        for cond in c.iter_mut() {
            if let Some(m) = cond.as_object_mut() {
                m.retain(|k, v| !(v.as_str() == Some("") && (k == "reason" || k == "message")));
            }
        }
    }

    /// The phase: `Succeeded`/`Failed` once the pod task set it, else derived from the
    /// containers as the kubelet's `getPhase` does: Pending while an init container has not
    /// completed or a container waits without having run (e.g. `ContainerCreating`,
    /// `CreateContainerConfigError`), Running once every container runs or ran.
    fn current_phase(&self) -> &str {
        if matches!(self.phase.as_str(), "Succeeded" | "Failed") {
            return &self.phase;
        }
        if self.init.iter().any(|c| c.exit_code() != Some(0)) {
            return "Pending";
        }
        let ran = |c: &Container| {
            c.state.get("running").is_some()
                || c.terminated().is_some()
                || c.last_state.get("terminated").is_some_and(|t| !t.is_null())
        };
        if !self.main.is_empty() && self.main.iter().all(ran) {
            "Running"
        } else {
            "Pending"
        }
    }

    pub fn render(&mut self) -> Value {
        self.update_conditions();
        let mut v = json!({
            "phase": self.current_phase(), "conditions": self.conditions, "hostIP": self.host_ip,
            "hostIPs": [{"ip": self.host_ip}], "startTime": self.start_time, "qosClass": "BestEffort",
            "containerStatuses": self.main.iter().map(Container::to_json).collect::<Vec<_>>(),
        });
        if !self.init.is_empty() {
            v["initContainerStatuses"] =
                json!(self.init.iter().map(Container::to_json).collect::<Vec<_>>());
        }
        if let Some(ip) = &self.pod_ip {
            v["podIP"] = json!(ip);
            v["podIPs"] = json!([{"ip": ip}]);
        }
        if let Some(r) = &self.reason {
            v["reason"] = json!(r);
        }
        if let Some(m) = &self.message {
            v["message"] = json!(m);
        }
        v
    }
}

/// A pod's status plus where to write it.
#[derive(Debug)]
pub(crate) struct PodRuntime {
    pub store: Store,
    pub pod: Value,
    status: Mutex<PodStatus>,
}

impl PodRuntime {
    pub fn new(store: Store, pod: Value, host_ip: &str) -> Self {
        let status = Mutex::new(PodStatus::new(&pod, host_ip));
        PodRuntime { store, pod, status }
    }

    pub fn namespace(&self) -> &str {
        obj::namespace(&self.pod)
    }

    pub fn name(&self) -> &str {
        obj::name(&self.pod)
    }

    /// Changes the status and writes it (`pods/status`, guarded by the pod's UID).
    pub fn update(&self, f: impl FnOnce(&mut PodStatus)) {
        let mut st = self.status.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut st);
        let body = json!({
            "metadata": {"name": self.name(), "namespace": self.namespace(), "uid": obj::uid(&self.pod)},
            "status": st.render(),
        });
        if let Err(e) = self.store.update_status(
            &obj::pods(),
            self.namespace(),
            body,
            &obj::manager("kubelet"),
        ) {
            tracing::debug!(pod = self.name(), %e, "failed to write pod status");
        }
    }
}
