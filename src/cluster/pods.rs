//! What pods and their events say, as text for reports and diagnoses: a container's state in
//! one line, and the Warning events about given objects. Shared by the engine's report of a
//! failed run and the readiness wait.

use k8s_openapi::api::core::v1::{ContainerStatus, Event, Pod};
use kube::Api;
use kube::api::ListParams;

use super::scrub_api_message;

/// The Warning events of `events`' namespace about the objects `named` accepts (one LIST).
pub async fn warnings_about(
    events: &Api<Event>,
    named: impl Fn(&str) -> bool,
) -> Result<Vec<Event>, kube::Error> {
    let list = events.list(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter(|e| e.involved_object.name.as_deref().is_some_and(&named))
        .collect())
}

/// The statuses of a pod's init containers, then of its containers.
pub fn container_statuses(pod: &Pod) -> impl Iterator<Item = &ContainerStatus> {
    let status = pod.status.as_ref();
    status
        .and_then(|s| s.init_container_statuses.as_ref())
        .into_iter()
        .flatten()
        .chain(
            status
                .and_then(|s| s.container_statuses.as_ref())
                .into_iter()
                .flatten(),
        )
}

/// `name: state` of a container (waiting, terminated with its exit code, running), with its last
/// attempt when it restarted; messages scrubbed.
pub fn describe_container(c: &ContainerStatus) -> String {
    let state = c.state.as_ref();
    let describe = |s: Option<&k8s_openapi::api::core::v1::ContainerState>| -> Option<String> {
        let s = s?;
        if let Some(w) = &s.waiting {
            return Some(format!(
                "waiting ({}){}",
                w.reason.as_deref().unwrap_or("unknown"),
                w.message
                    .as_ref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ));
        }
        if let Some(t) = &s.terminated {
            return Some(format!(
                "terminated (exit code {}, {}){}",
                t.exit_code,
                t.reason.as_deref().unwrap_or("unknown"),
                t.message
                    .as_ref()
                    .map(|m| format!(": {}", m.trim()))
                    .unwrap_or_default()
            ));
        }
        s.running.as_ref().map(|_| "running".to_owned())
    };
    let now = scrub_api_message(&describe(state).unwrap_or_else(|| "no state yet".into()));
    match describe(c.last_state.as_ref()) {
        Some(last) if c.restart_count > 0 => {
            let restarts = match c.restart_count {
                1 => "1 restart".to_owned(),
                n => format!("{n} restarts"),
            };
            format!("{}: {now}; last attempt {last} ({restarts})", c.name)
        }
        _ => format!("{}: {now}", c.name),
    }
}
