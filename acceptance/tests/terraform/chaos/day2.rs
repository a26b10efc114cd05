//! The chaos run's day-2 faults, each waiting for the moment a real cluster has it:
//! - a Cilium version upgrade (one minor, [`CILIUM_VERSIONS`]) whose CLI is killed while the
//!   upgrade's Jobs run or once the agents roll ([`UpgradeMoment`]);
//! - the API unreachable once the agents roll (the provider waits for the DaemonSet's rollout);
//! - the bootstrap pod killed once the Helm release record of the new revision exists, so the
//!   record says `pending-upgrade` and the Job never reports ([`new_record`]);
//! - the Git server refusing the deploy key for a while ([`GitRefusal`]), so the real
//!   source-controller's fetch fails until it accepts the key again.
//!
//! And what they may leave: the pre-flight release of an upgrade whose CLI was killed
//! ([`preflight_leftovers`]), the chart version each release record holds (for the state check),
//! and whether Flux syncs again once the Git server accepts the key ([`wait_source_ready`]).

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use serde_json::json;

use super::{MANAGED, NS};
use crate::flux_bootstrap::FluxCluster;

/// The two Cilium versions the run moves between: the newest patches of two consecutive minors
/// the embedded chart repository serves, so every move, up or down, is one the provider's
/// upgrade-path check allows (one minor, from the newest patch).
pub(super) const CILIUM_VERSIONS: [&str; 2] = ["1.18.4", "1.19.7"];

/// The other version of [`CILIUM_VERSIONS`].
pub(super) fn other_version(version: &str) -> &'static str {
    if version == CILIUM_VERSIONS[0] {
        CILIUM_VERSIONS[1]
    } else {
        CILIUM_VERSIONS[0]
    }
}

/// The agent DaemonSet's generation (0 when it is not there): a Helm upgrade that changes the
/// agents' template bumps it, and the rollout follows.
pub(super) async fn agent_generation(client: &kube::Client) -> i64 {
    Api::<DaemonSet>::namespaced(client.clone(), NS)
        .get_opt("cilium")
        .await
        .ok()
        .flatten()
        .and_then(|d| d.metadata.generation)
        .unwrap_or(0)
}

/// Waits, at most `secs`, until the agent DaemonSet's generation passes `before`: the upgrade
/// changed the agents, which now roll while the provider waits for them.
pub(super) async fn agents_rolling(client: &kube::Client, before: i64, secs: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if agent_generation(client).await > before {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// When a [`super::Fault::KillCliUpgrade`] kills the CLI.
#[derive(Debug, Clone, Copy)]
pub(super) enum UpgradeMoment {
    /// While a bootstrap Job of the upgrade runs (the pre-flight's install or the upgrade's).
    Job,
    /// Once the agent DaemonSet changed: during the rollout wait.
    Rollout,
}

/// The newest revision of release `name`'s records in [`NS`] (0: none).
pub(super) async fn newest_revision(client: &kube::Client, name: &str) -> i64 {
    Api::<Secret>::namespaced(client.clone(), NS)
        .list_metadata(&ListParams::default().labels(&format!("owner=helm,name={name}")))
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter_map(|s| s.metadata.labels?.get("version")?.parse().ok())
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

/// Waits, at most `secs`, for a release record of `name` newer than `before` that Helm has not
/// yet marked final (`pending-*`): the record exists, the Job is still at work. Returns its
/// revision.
pub(super) async fn new_record(
    client: &kube::Client,
    name: &str,
    before: i64,
    secs: u64,
) -> Option<i64> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let lp = ListParams::default().labels(&format!("owner=helm,name={name}"));
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if let Ok(list) = secrets.list_metadata(&lp).await {
            let pending = list.items.into_iter().find_map(|s| {
                let labels = s.metadata.labels?;
                let revision: i64 = labels.get("version")?.parse().ok()?;
                let status = labels.get("status")?;
                (revision > before && status.starts_with("pending")).then_some(revision)
            });
            if pending.is_some() {
                return pending;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// Kills the running bootstrap pods' containers (SIGKILL, as the OOM killer does: exit code
/// 137); returns how many pods it asked.
pub(super) async fn kill_bootstrap_pods(client: &kube::Client, token: u64) -> usize {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let Ok(list) = pods.list(&ListParams::default().labels(MANAGED)).await else {
        return 0;
    };
    let patch = json!({"metadata": {"annotations": {"talos-sim.dev/kill": token.to_string()}}});
    let mut killed = 0;
    for pod in list.items.into_iter().filter(|p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            && p.metadata.deletion_timestamp.is_none()
    }) {
        let Some(name) = pod.metadata.name else {
            continue;
        };
        if pods
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .is_ok()
        {
            killed += 1;
        }
    }
    killed
}

/// The chart version of each record of release `cilium`, by revision.
pub(super) async fn record_chart_versions(
    client: &kube::Client,
) -> std::collections::BTreeMap<i64, String> {
    crate::harness::records(client, NS, "cilium")
        .await
        .into_iter()
        .map(|(revision, record)| {
            (
                revision,
                record["chart"]["metadata"]["version"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

/// What an upgrade's pre-flight check left: its DaemonSet, its release's records.
pub(super) async fn preflight_leftovers(client: &kube::Client) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(Some(_)) = Api::<DaemonSet>::namespaced(client.clone(), NS)
        .get_opt("cilium-pre-flight-check")
        .await
    {
        out.push("DaemonSet/cilium-pre-flight-check".to_owned());
    }
    if newest_revision(client, "cilium-preflight").await > 0 {
        out.push("Release/cilium-preflight".to_owned());
    }
    out
}

fn git_repositories(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("source.toolkit.fluxcd.io", "v1", "GitRepository");
    Api::namespaced_with(
        client.clone(),
        "flux-system",
        &ApiResource::from_gvk_with_plural(&gvk, "gitrepositories"),
    )
}

/// Asks source-controller to fetch the sync source now (what `flux reconcile source git` does);
/// nothing when Flux has not created it yet.
pub(super) async fn request_fetch(client: &kube::Client, token: &str) {
    let patch = json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": token}}});
    let _ = git_repositories(client)
        .patch(
            "flux-system",
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await;
}

/// The sync source's Ready condition: (status, message).
pub(super) async fn source_ready(client: &kube::Client) -> Option<(String, String)> {
    let source = git_repositories(client)
        .get_opt("flux-system")
        .await
        .ok()
        .flatten()?;
    let conditions = source.data["status"]["conditions"].as_array()?.clone();
    conditions.iter().find(|c| c["type"] == "Ready").map(|c| {
        (
            c["status"].as_str().unwrap_or_default().to_owned(),
            c["message"].as_str().unwrap_or_default().to_owned(),
        )
    })
}

/// The sync source's conditions: `type=status (reason): message`, one a line.
pub(super) async fn source_conditions(client: &kube::Client) -> String {
    let Ok(Some(source)) = git_repositories(client).get_opt("flux-system").await else {
        return "(no GitRepository flux-system/flux-system)".to_owned();
    };
    source.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{}={} ({}): {}\n",
                c["type"].as_str().unwrap_or_default(),
                c["status"].as_str().unwrap_or_default(),
                c["reason"].as_str().unwrap_or_default(),
                c["message"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// Whether a condition of the sync source (`Ready=False`, `FetchFailed=True`) gives the Git
/// server's refusal of its key.
pub(super) async fn source_refused(client: &kube::Client) -> bool {
    source_conditions(client).await.lines().any(|line| {
        (line.starts_with("Ready=False") || line.starts_with("FetchFailed=True"))
            && (line.contains("unable to authenticate") || line.contains("handshake failed"))
    })
}

/// Waits, at most `secs`, for the sync source to be Ready again (asking for a fetch every few
/// seconds); the last Ready message when it is not.
pub(super) async fn wait_source_ready(client: &kube::Client, secs: u64) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut last = None;
    let mut asked = 0u32;
    while Instant::now() < deadline {
        last = source_ready(client).await;
        if last.as_ref().is_some_and(|(s, _)| s == "True") {
            return Ok(());
        }
        asked += 1;
        request_fetch(client, &format!("chaos-converge-{asked}")).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    Err(format!(
        "the sync source is not Ready {secs} s after the Git server accepts the key again: {last:?}"
    ))
}

/// The Git server refusing the deploy key: revoked at [`GitRefusal::start`], accepted again at
/// [`GitRefusal::end`] (or when dropped, so a step that ends early never leaves it refused).
pub(super) struct GitRefusal<'a> {
    cluster: &'a FluxCluster,
    public_key: String,
    refusing: std::cell::Cell<bool>,
}

impl<'a> GitRefusal<'a> {
    pub(super) fn new(cluster: &'a FluxCluster) -> GitRefusal<'a> {
        GitRefusal {
            cluster,
            public_key: cluster.deploy_public_key(),
            refusing: std::cell::Cell::new(false),
        }
    }

    /// From the next login on, the Git server refuses the deploy key (OpenSSH's "unable to
    /// authenticate", as a host that dropped the key or an outage of its auth says).
    pub(super) fn start(&self) {
        if let Some(git) = self.cluster.git() {
            git.revoke(&self.public_key).expect("revoke the deploy key");
            self.refusing.set(true);
        }
    }

    /// The Git server accepts the deploy key again.
    pub(super) fn end(&self) {
        if self.refusing.replace(false) {
            if let Some(git) = self.cluster.git() {
                git.authorize(&self.public_key)
                    .expect("authorize the deploy key again");
            }
        }
    }
}

impl Drop for GitRefusal<'_> {
    fn drop(&mut self) {
        self.end();
    }
}
