//! The Talos node layer over the real control plane (`talos_sim::talos`): real etcd,
//! kube-apiserver, controller-manager and scheduler, real Helm in pod sandboxes, emulated nodes,
//! kubelets, KubePrism and the programs that cannot run here.
//!
//! Index:
//! - `control_plane`: versions, start time and memory, Pod Security and RBAC refusals by the real server
//! - `pods`: the kubelet: pre-CNI networking, real Helm through KubePrism, `kubectl logs` through
//!   the real apiserver, image pulls, restarts, deletion, kubelet faults from their ConfigMap
//! - `git`: Git on loopback: the hosts users name resolve inside pods to the SSH git-server; a pod's
//!   git clones with an authorized key, sees a new commit, is refused once the key is revoked
//! - `flux`: the real Flux Operator installed by its chart 0.59.0 reconciles the FluxInstance
//!   `flux` to Ready with the real source-controller and kustomize-controller; `other` is ignored
//! - `helm`: release records written by the real Helm, read by the provider
//! - `faults`: the fault proxy in front of the apiserver: identities pass, faults are bounded
//! - `bootstrap`: KubePrism off: its override is refused, the control plane's own address works
//! - `cilium`: the engine installs Cilium from its repository; every node becomes Ready; with
//!   Hubble relay and UI every component rolls out, one operator per node (real scheduler)
//! - `cilium_upgrade`: day 2 on three nodes with the machine's Helm: a chart upgrade rolls the
//!   agents one node at a time (`upgradeCompatibility` kept), the pre-flight release beside
//!   `cilium` with an image unpullable on one node (`ErrImagePull`, events, recovery once
//!   cleared, uninstall), an agent restart drops its node's pod network (`CrashLoopBackOff` keeps
//!   it down until cleared)
//! - `engine`: the engine with `rbac = "minimal"` under the real RBAC authorizer: derived rules,
//!   diagnoses of a missing permission, no role left behind
//! - `manifests`: Talos' manifest handling by version: the 1.13+ inventory, `upgrade-k8s`' prune
//!   (annotated or not), `--manifests-no-prune`, another inventory's object, 1.12 without inventory
//! - `kubectl`: a bootstrap Job's shell script applies manifests with the real kubectl over KubePrism
//! - `jobs`: the real Job controller with the kubelet: backoff, deadlines, TTL, condition order,
//!   refused creates until the ServiceAccount exists, a restarted container's logs
//! - `inputs`: ConfigMaps and Secrets in env, envFrom and volumes: missing ones keep a pod waiting
//! - `pre_cni`: taints and conditions before the CNI, the real scheduler's refusal, pod networks
//! - `pod_security`: the real evaluator's messages, namespace levels, a Job refused until privileged
//! - `rbac`: the real Helm and kubectl print the authorizer's refusals in a Job's log
//! - `render`: the engine's render Job prints only kinds, needs no API, shows Helm's errors
//! - `services`: the Service dataplane after the CNI: names in a pod's hosts file, a listener per
//!   Service port relayed into a Ready endpoint's network namespace, refused without one
//! - `workloads`: ReplicaFailure until a ServiceAccount exists, rollouts, DaemonSet placement

#[path = "talos/bootstrap.rs"]
mod bootstrap;
#[path = "talos/cilium.rs"]
mod cilium;
#[path = "talos/cilium_upgrade.rs"]
mod cilium_upgrade;
#[path = "talos/common.rs"]
mod common;
#[path = "talos/control_plane.rs"]
mod control_plane;
#[path = "talos/engine.rs"]
mod engine;
#[path = "talos/faults.rs"]
mod faults;
#[path = "talos/flux.rs"]
mod flux;
#[path = "talos/git.rs"]
mod git;
#[path = "talos/helm.rs"]
mod helm;
#[path = "talos/inputs.rs"]
mod inputs;
#[path = "talos/jobs.rs"]
mod jobs;
#[path = "talos/kubectl.rs"]
mod kubectl;
#[path = "talos/manifests.rs"]
mod manifests;
#[path = "talos/pod_security.rs"]
mod pod_security;
#[path = "talos/pods.rs"]
mod pods;
#[path = "talos/pre_cni.rs"]
mod pre_cni;
#[path = "talos/rbac.rs"]
mod rbac;
#[path = "talos/render.rs"]
mod render;
#[path = "talos/services.rs"]
mod services;
#[path = "talos/workloads.rs"]
mod workloads;
