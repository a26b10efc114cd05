//! Cluster-model acceptance tests: the simulated Talos cluster observed through the Kubernetes
//! API (`kube` client), as a user or the provider would observe a real one. The store is used
//! only for setup without an API equivalent (killing a pod).
//!
//! Index:
//! - `common`: start a cluster, clients, polling, manifests (bootstrap Jobs, Cilium values).
//! - `pre_cni`: node taints, FailedScheduling, ContainerCreating before the CNI, hostNetwork pods.
//! - `bootstrap`: the Cilium bootstrap Job over KubePrism, and how it fails without it.
//! - `cilium_talos`: Talos-incompatible Cilium values crash the agent.
//! - `cilium_chart`: the simulated chart per accepted version (`cilium-envoy` by default, Hubble
//!   relay/UI and their Services when enabled, two operators one per node), its images known to
//!   the node layer, every component rolled out.
//! - `kube_proxy`: the `kube-proxy` DaemonSet with `kube_proxy: true`, none without; a kube-proxy
//!   that does not run leaves the Service IP unrouted.
//! - `helm`: release records, name reuse and in-progress errors, revisions (which one is superseded).
//! - `idle`: an idle cluster's CPU use (event-driven controllers).
//! - `inputs`: ConfigMaps/Secrets in env, envFrom and volumes; missing ones keep pods waiting.
//! - `jobs`: deadlines with hanging programs, TTL, killed pods, image pull failures, counters that
//!   never go down, condition order seen by a watch, refused pod creates (missing ServiceAccount).
//! - `kubectl`: the seeds' `failed to download openapi` signature; a shell script using kubectl.
//! - `workloads`: Deployment rollouts, DaemonSet placement, `cilium status --wait`,
//!   `ReplicaFailure` while pod creates are refused.
//! - `flux`: the Flux Operator after Cilium, FluxInstance readiness.
//! - `pod_security`: Talos' Pod Security defaults (baseline enforced, kube-system exempt),
//!   namespace labels, the real messages, FailedCreate for a host-network Job.
//! - `tools`: unknown flags fail like the real helm/cilium/kubectl; `failed` release replaced;
//!   the restricted `alpine/helm` installer reading values from a ConfigMap and a Secret.
//! - `inline_cilium`: Cilium from Talos inline manifests; adoption with `helm --take-ownership`.
//! - `engine_rbac`: talosboot's bootstrap engine with `rbac = "minimal"` (rules derived by
//!   rendering the Cilium chart, missing permissions diagnosed, no roles left behind).
//! - `rbac`: programs act as their pod's ServiceAccount; helm and kubectl print the API server's
//!   Forbidden like the real tools (`common::start` binds cluster-admin to all ServiceAccounts,
//!   `common::start_strict` does not).
//! - `render`: the provider's render Job (`helm template ... | sed` with `pipefail`) prints only
//!   `---`/`apiVersion:`/`kind:` lines, needs neither permissions nor a reachable API, creates
//!   nothing, and fails with helm's error in the log.

#[path = "cluster_model/bootstrap.rs"]
mod bootstrap;
#[path = "cluster_model/cilium_chart.rs"]
mod cilium_chart;
#[path = "cluster_model/cilium_talos.rs"]
mod cilium_talos;
#[path = "cluster_model/common.rs"]
mod common;
#[path = "cluster_model/engine_rbac.rs"]
mod engine_rbac;
#[path = "cluster_model/flux.rs"]
mod flux;
#[path = "cluster_model/helm.rs"]
mod helm;
#[path = "cluster_model/idle.rs"]
mod idle;
#[path = "cluster_model/inline_cilium.rs"]
mod inline_cilium;
#[path = "cluster_model/inputs.rs"]
mod inputs;
#[path = "cluster_model/jobs.rs"]
mod jobs;
#[path = "cluster_model/kube_proxy.rs"]
mod kube_proxy;
#[path = "cluster_model/kubectl.rs"]
mod kubectl;
#[path = "cluster_model/pod_security.rs"]
mod pod_security;
#[path = "cluster_model/pre_cni.rs"]
mod pre_cni;
#[path = "cluster_model/rbac.rs"]
mod rbac;
#[path = "cluster_model/render.rs"]
mod render;
#[path = "cluster_model/tools.rs"]
mod tools;
#[path = "cluster_model/workloads.rs"]
mod workloads;
