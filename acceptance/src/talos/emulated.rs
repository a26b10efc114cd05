//! Emulated programs for the images that cannot run here. Each connects to the API endpoint of
//! its environment first (unreachable: the real program's error, exit 1, so the kubelet's
//! CrashLoopBackOff follows), then does what the provider depends on, through the API as its
//! pod's ServiceAccount:
//! - the Cilium agent image: `cilium-agent` becomes Ready (the kubelet then marks the node's CNI
//!   up); the `mount-cgroup` init container fails on Talos (`cilium-mount: Permission denied`);
//!   other init containers succeed; the pre-flight's containers (upstream's
//!   `cilium-pre-flight-check`: `touch /tmp/ready; sleep 1h`, Ready at once, the probes' 5 s delay
//!   not waited for, as the agent's are not; `cnp-validator` and
//!   `cilium-pre-flight-fqdn-precache`: connect, then Ready) run until killed;
//! - the Cilium operator, Envoy, Hubble relay and UI, the cluster-mesh apiserver, Flux's
//!   controllers that do not run here (helm-controller, notification-controller, the image
//!   automation controllers; source-controller and kustomize-controller are real where built,
//!   see [`super::programs::flux_image`]), Argo CD's components: Ready once connected;
//! - the Flux Operator at the versions not built here (images tagged older than v0.59.0, the
//!   older test charts 0.28.0 and 0.33.0; v0.59.0 is the real program): reconciles every
//!   FluxInstance to `Ready=True` (`ReconciliationSucceeded`), or, when its sync URL contains
//!   `unreachable` or it carries the annotation `talos-sim.dev/unreachable: "true"`, to
//!   `Ready=False` `ReconciliationFailed` naming `GitRepository/<ns>/<ns>`, worded as the real
//!   operator words it, but at once (the real one says so after its health-check wait, 5 minutes
//!   by default). Unlike the real operator it reconciles every FluxInstance, not only `flux` in
//!   its namespace (field notes §10);
//! - `pause`: runs until killed.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::json;

use super::programs::{Container, Exit, Program, ProgramFuture};

/// Annotation on a FluxInstance making its sync source unreachable.
pub const UNREACHABLE_ANNOTATION: &str = "talos-sim.dev/unreachable";

/// The emulated program for an image repository, if there is one.
pub fn lookup(repository: &str) -> Option<Arc<dyn Program>> {
    let last = repository.rsplit('/').next().unwrap_or(repository);
    Some(match repository {
        "cilium/cilium" => Arc::new(CiliumAgentImage),
        "cilium/operator-generic" | "cilium/operator" => {
            Arc::new(Daemon::cilium("cilium-operator-generic"))
        }
        // Envoy and Hubble relay talk to the agents, not to the Kubernetes API (the chart mounts
        // no ServiceAccount token into the relay).
        "cilium/cilium-envoy" | "cilium/hubble-relay" => Arc::new(Daemon::offline(last)),
        "cilium/hubble-ui"
        | "cilium/hubble-ui-backend"
        | "cilium/clustermesh-apiserver"
        | "cilium/certgen" => Arc::new(Daemon::cilium(last)),
        "controlplaneio-fluxcd/flux-operator" => Arc::new(FluxOperator),
        "pause" | "google_containers/pause" => Arc::new(Pause),
        "kube-proxy" => Arc::new(Daemon::json(last)),
        // The chart repositories' podinfo: a web server that needs no API.
        "stefanprodan/podinfo" => Arc::new(Daemon::offline(last)),
        _ if repository.starts_with("fluxcd/") && last.ends_with("-controller") => {
            Arc::new(Daemon::json(last))
        }
        _ if repository.starts_with("argoproj/")
            || last == "redis"
            || last == "dex"
            || last == "haproxy" =>
        {
            Arc::new(Daemon::json(last))
        }
        _ => return None,
    })
}

/// Runs until killed.
pub struct Pause;

impl Program for Pause {
    fn run(&self, _container: Container) -> ProgramFuture {
        Box::pin(std::future::pending())
    }
}

/// A long-running component: connects, is Ready, runs until killed.
pub struct Daemon {
    name: String,
    /// Cilium's logfmt (`level=info msg=...`) or controller-runtime's JSON lines.
    logfmt: bool,
    /// Whether it connects to the Kubernetes API before it is Ready.
    uses_api: bool,
}

impl Daemon {
    fn cilium(name: &str) -> Daemon {
        Daemon {
            name: name.into(),
            logfmt: true,
            uses_api: true,
        }
    }

    fn offline(name: &str) -> Daemon {
        Daemon {
            uses_api: false,
            ..Daemon::cilium(name)
        }
    }

    fn json(name: &str) -> Daemon {
        Daemon {
            name: name.into(),
            logfmt: false,
            uses_api: true,
        }
    }
}

impl Program for Daemon {
    fn run(&self, c: Container) -> ProgramFuture {
        // A pod without a ServiceAccount token (`automountServiceAccountToken: false`, as charts
        // set it for Redis or Hubble relay) runs a program that does not talk to the API.
        let token = c
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.automount_service_account_token)
            != Some(false);
        let (name, logfmt, uses_api) = (self.name.clone(), self.logfmt, self.uses_api && token);
        Box::pin(async move {
            if c.init {
                // An init step of a daemon's image (copying a binary, writing a config): done.
                tokio::time::sleep(Duration::from_millis(100)).await;
                return Exit::code(0);
            }
            if let Err(e) = if uses_api {
                c.dial().await.map(|_| ())
            } else {
                Ok(())
            } {
                if logfmt {
                    c.out(&format!("level=error msg=\"Unable to contact k8s api-server\" error=\"Get \\\"{}\\\": {e}\" subsys=k8s-client", c.version_url()));
                    c.out(&format!("level=fatal msg=\"Unable to create k8s client\" error=\"{e}\" subsys={name}"));
                } else {
                    c.out(&format!("{{\"level\":\"error\",\"msg\":\"unable to create manager\",\"error\":\"Get \\\"{}\\\": {e}\"}}", c.version_url()));
                }
                return Exit::code(1);
            }
            c.set_ready(true);
            if logfmt {
                c.out(&format!("level=info msg=\"Started\" subsys={name}"));
            } else {
                c.out(&format!(
                    "{{\"level\":\"info\",\"msg\":\"starting manager\",\"component\":\"{name}\"}}"
                ));
            }
            std::future::pending().await
        })
    }
}

/// Everything run from `quay.io/cilium/cilium`, by container name and command.
pub struct CiliumAgentImage;

impl Program for CiliumAgentImage {
    fn run(&self, c: Container) -> ProgramFuture {
        Box::pin(async move {
            let argv0 = c
                .argv
                .first()
                .map(|a| a.rsplit('/').next().unwrap_or(a).to_owned())
                .unwrap_or_default();
            match (c.name.as_str(), argv0.as_str()) {
                (_, "cilium-agent") => agent(&c).await,
                ("mount-cgroup", _) => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    c.out(
                        "nsenter: failed to execute /opt/cni/bin/cilium-mount: Permission denied",
                    );
                    Exit::code(126)
                }
                // The pre-flight DaemonSet's check: the image pulled and started is all it shows.
                ("cilium-pre-flight-check", _) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    c.set_ready(true);
                    std::future::pending().await
                }
                // `cilium-dbg preflight validate-cnp` (the pre-flight Deployment) and the FQDN
                // pre-cache poller read the API: unreachable, they fail as the agent does.
                ("cnp-validator" | "cilium-pre-flight-fqdn-precache", _) => {
                    if let Err(e) = c.dial().await {
                        c.out(&format!("level=fatal msg=\"Unable to contact k8s api-server\" error=\"Get \\\"{}\\\": {e}\" subsys=preflight", c.version_url()));
                        return Exit::code(1);
                    }
                    c.set_ready(true);
                    std::future::pending().await
                }
                ("config", _) => {
                    if let Err(e) = c.dial().await {
                        c.out(&format!("level=fatal msg=\"Unable to contact k8s api-server\" error=\"Get \\\"{}\\\": {e}\" subsys=build-config", c.version_url()));
                        return Exit::code(1);
                    }
                    c.out("level=info msg=\"Running\" subsys=build-config");
                    Exit::code(0)
                }
                _ => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Exit::code(0)
                }
            }
        })
    }
}

async fn agent(c: &Container) -> Exit {
    let version = super::programs::tag(&c.image).to_owned();
    c.out(&format!(
        "level=info msg=\"Cilium {version}\" subsys=daemon"
    ));
    c.out(&format!(
        "level=info msg=\"Establishing connection to apiserver\" host=\"{}\" subsys=k8s-client",
        c.endpoint.url()
    ));
    if let Err(e) = c.dial().await {
        c.out(&format!("level=error msg=\"Unable to contact k8s api-server\" error=\"Get \\\"{}\\\": {e}\" ipAddr=\"{}\" subsys=k8s-client", c.version_url(), c.endpoint.url()));
        c.out(&format!("level=fatal msg=\"failed to start: unable to create k8s client: unable to create k8s client: {e}\" subsys=daemon"));
        return Exit::code(1);
    }
    c.out("level=info msg=\"Connected to apiserver\" subsys=k8s-client");
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.set_ready(true);
    c.out("level=info msg=\"Daemon initialization completed\" subsys=daemon");
    std::future::pending().await
}

/// The Flux Operator: see the module docs.
pub struct FluxOperator;

impl Program for FluxOperator {
    fn run(&self, c: Container) -> ProgramFuture {
        Box::pin(async move {
            let client = match c.dial().await {
                Ok(client) => client,
                Err(e) => {
                    c.out(&format!("{{\"level\":\"error\",\"msg\":\"unable to get kubernetes version\",\"error\":\"Get \\\"{}\\\": {e}\"}}", c.version_url()));
                    return Exit::code(1);
                }
            };
            c.set_ready(true);
            c.out("{\"level\":\"info\",\"msg\":\"Starting Controller\",\"controller\":\"fluxinstance\"}");
            let gvk = GroupVersionKind::gvk("fluxcd.controlplane.io", "v1", "FluxInstance");
            let resource = ApiResource::from_gvk_with_plural(&gvk, "fluxinstances");
            let instances: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            loop {
                if let Ok(list) = instances.list(&Default::default()).await {
                    for instance in list.items {
                        reconcile(&client, &resource, &instance).await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    }
}

async fn reconcile(client: &kube::Client, resource: &ApiResource, instance: &DynamicObject) {
    let (Some(ns), Some(name)) = (&instance.metadata.namespace, &instance.metadata.name) else {
        return;
    };
    let generation = instance.metadata.generation.unwrap_or(1);
    let unreachable = instance
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(UNREACHABLE_ANNOTATION))
        .is_some_and(|v| v == "true")
        || instance
            .data
            .pointer("/spec/sync/url")
            .and_then(|u| u.as_str())
            .is_some_and(|u| u.contains("unreachable"));
    let observed = instance
        .data
        .pointer("/status/observedGeneration")
        .and_then(|g| g.as_i64());
    let ready = instance
        .data
        .pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .map(|c| c["status"] == "True");
    if observed == Some(generation) && ready == Some(!unreachable) {
        return;
    }
    let now = crate::util::now_rfc3339();
    let condition = if unreachable {
        // As the real operator words it once its health check gives up on the sync source
        // (flux-operator `aggregateNotReadyStatus`, fluxcd/pkg `ssa` WaitForSet), without the wait.
        let url = instance
            .data
            .pointer("/spec/sync/url")
            .and_then(|u| u.as_str())
            .unwrap_or("https://unreachable.example/");
        let host = url
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split(['/', ':']).next())
            .unwrap_or("unreachable.example");
        let source = format!("GitRepository/{ns}/{ns}");
        json!({"type": "Ready", "status": "False", "reason": "ReconciliationFailed", "message": format!("reconciliation failed: timeout waiting for: [{source} status: 'Failed']\n{source} status: failed to checkout and determine revision: unable to clone '{url}': dial tcp: lookup {host}: no such host"), "lastTransitionTime": now, "observedGeneration": generation})
    } else {
        json!({"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded", "message": "Reconciliation finished", "lastTransitionTime": now, "observedGeneration": generation})
    };
    let distribution = instance
        .data
        .pointer("/spec/distribution/version")
        .and_then(|v| v.as_str())
        .unwrap_or("2.x");
    let patch = json!({"status": {
        "observedGeneration": generation,
        "conditions": [condition],
        "components": [],
        "lastAppliedRevision": format!("v{}", distribution.trim_start_matches('v')),
    }});
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, resource);
    let _ = api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::talos::programs::repository;

    #[test]
    fn images_resolve_by_repository() {
        for image in [
            "quay.io/cilium/cilium:v1.18.4",
            "mirror.example/cilium/cilium-envoy:v1.34",
            "registry.k8s.io/pause:3.10",
            "ghcr.io/fluxcd/source-controller:v1.7.0",
        ] {
            assert!(lookup(&repository(image)).is_some(), "{image}");
        }
        assert!(lookup(&repository("docker.io/nginx:1")).is_none());
    }
}
