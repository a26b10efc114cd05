//! The objects one bootstrap run creates, built as plain values (no I/O): the namespace (only when
//! missing), a ServiceAccount, the RBAC binding (and, for [`Rbac::Minimal`], the run's own roles), a ConfigMap with the input files, a Secret with the
//! sensitive ones, and the Job.
//!
//! The pod is written to pass Pod Security `restricted` except for host networking: non-root, no
//! privilege escalation, all capabilities dropped, RuntimeDefault seccomp. So without host
//! networking it runs in any namespace, and the privileged label is only ever needed (and only ever
//! set) on a bootstrap namespace the engine creates itself.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde_json::{Value, json};

use super::{BootstrapNamespace, Rbac, RunSpec, rbac};

/// Label on everything the engine creates; `talosboot.dev/target` and `talosboot.dev/run` say
/// for what and by which run.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "talosboot");
pub const TARGET_LABEL: &str = "talosboot.dev/target";
pub const RUN_LABEL: &str = "talosboot.dev/run";
pub use crate::cluster::client::{PSA_ENFORCE, PSA_PRIVILEGED};

/// Labels a bootstrap namespace `privileged`: the one place the level is written into labels.
pub fn mark_privileged(labels: &mut BTreeMap<String, String>) {
    labels.insert(PSA_ENFORCE.into(), PSA_PRIVILEGED.into());
}

/// Where the input files are mounted in the bootstrap container.
pub const INPUTS_DIR: &str = "/talosboot/inputs";
pub const SECRETS_DIR: &str = "/talosboot/secrets";

/// A failed Job is kept for `kubectl logs` until the next run, or this long at most.
pub const TTL_AFTER_FINISHED_SECONDS: i64 = 24 * 3600;

/// Names and labels of one run.
#[derive(Debug, Clone)]
pub struct RunNames {
    /// `<prefix>-<run id>`: ServiceAccount, binding, ConfigMap, Secret and Job share it.
    pub object: String,
    pub run_id: String,
    pub target_label: String,
}

impl RunNames {
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned()),
            (TARGET_LABEL.to_owned(), self.target_label.clone()),
            (RUN_LABEL.to_owned(), self.run_id.clone()),
        ])
    }
}

fn typed<T: serde::de::DeserializeOwned>(value: Value) -> T {
    // The JSON below is written against the API types; a mismatch is a bug caught by the tests.
    serde_json::from_value(value).expect("bootstrap object matches its API type")
}

/// The bootstrap namespace as the engine creates it: the user's labels and annotations from the
/// start (admission policies read them at creation), plus the Pod Security level the pod needs.
pub fn namespace(ns: &BootstrapNamespace, host_network: bool) -> Namespace {
    let mut labels = ns.labels.clone();
    labels.insert(MANAGED_BY.0.into(), MANAGED_BY.1.into());
    if host_network {
        mark_privileged(&mut labels);
    }
    typed(json!({
        "metadata": {"name": ns.name, "labels": labels, "annotations": ns.annotations},
    }))
}

pub fn service_account(spec: &RunSpec, names: &RunNames) -> ServiceAccount {
    typed(json!({
        "metadata": {"name": names.object, "namespace": spec.namespace.name, "labels": names.labels()},
        "automountServiceAccountToken": true,
    }))
}

/// Whether a rule is granted cluster-wide (by the run's own ClusterRole).
fn any_cluster_wide(rules: &[rbac::Rule]) -> bool {
    rules.iter().any(|r| r.namespace.is_none())
}

/// The binding of the run's ServiceAccount: to `cluster-admin`, or to the run's own ClusterRole
/// ([`cluster_role`]) for [`Rbac::Minimal`]; none when no rule is cluster-wide.
pub fn cluster_role_binding(spec: &RunSpec, names: &RunNames) -> Option<ClusterRoleBinding> {
    let role = match &spec.rbac {
        Rbac::ClusterAdmin => "cluster-admin",
        Rbac::Minimal(rules) if !any_cluster_wide(rules) => return None,
        Rbac::Minimal(_) => names.object.as_str(),
    };
    Some(rbac::cluster_role_binding(
        names,
        &spec.namespace.name,
        role,
    ))
}

/// The run's own ClusterRole ([`Rbac::Minimal`] only): exactly the cluster-wide rules.
pub fn cluster_role(spec: &RunSpec, names: &RunNames) -> Option<ClusterRole> {
    match &spec.rbac {
        Rbac::ClusterAdmin => None,
        Rbac::Minimal(rules) if !any_cluster_wide(rules) => None,
        Rbac::Minimal(rules) => Some(rbac::cluster_role(names, rules)),
    }
}

/// The run's Roles and RoleBindings for rules limited to a namespace ([`Rbac::Minimal`] only).
pub fn namespaced_rbac(spec: &RunSpec, names: &RunNames) -> Vec<(Role, RoleBinding)> {
    match &spec.rbac {
        Rbac::ClusterAdmin => Vec::new(),
        Rbac::Minimal(rules) => rbac::namespaced(names, &spec.namespace.name, rules),
    }
}

pub fn config_map(spec: &RunSpec, names: &RunNames) -> ConfigMap {
    use base64::Engine;
    let binary: BTreeMap<&String, String> = spec
        .binary_files
        .iter()
        .map(|(k, v)| (k, base64::engine::general_purpose::STANDARD.encode(v)))
        .collect();
    typed(json!({
        "metadata": {"name": names.object, "namespace": spec.namespace.name, "labels": names.labels()},
        "data": spec.files,
        "binaryData": binary,
    }))
}

/// Only when the run has sensitive inputs.
pub fn secret(spec: &RunSpec, names: &RunNames) -> Option<Secret> {
    if spec.secret_files.is_empty() {
        return None;
    }
    Some(typed(json!({
        "metadata": {"name": names.object, "namespace": spec.namespace.name, "labels": names.labels()},
        "type": "Opaque",
        "stringData": spec.secret_files,
    })))
}

/// Tolerations every bootstrap pod needs on a fresh Talos cluster: nodes are `not-ready` until the
/// CNI runs, and a cluster may consist of control planes only.
fn default_tolerations() -> Vec<Value> {
    vec![
        json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.cloudprovider.kubernetes.io/uninitialized", "operator": "Exists", "effect": "NoSchedule"}),
    ]
}

fn env(spec: &RunSpec) -> Vec<Value> {
    let mut env: BTreeMap<String, String> =
        BTreeMap::from([("HOME".to_owned(), "/tmp".to_owned())]);
    env.extend(spec.env.clone());
    if let Some(endpoint) = &spec.job.api_endpoint {
        // An explicit entry wins over the kubelet's Service variables (10.96.0.1:443), which route
        // nowhere before the CNI's service dataplane exists.
        env.insert("KUBERNETES_SERVICE_HOST".into(), endpoint.host.clone());
        env.insert("KUBERNETES_SERVICE_PORT".into(), endpoint.port.to_string());
    }
    env.extend(spec.job.env.clone());
    env.into_iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect()
}

pub fn job(spec: &RunSpec, names: &RunNames) -> Job {
    let mut tolerations = default_tolerations();
    tolerations.extend(spec.job.tolerations.iter().cloned());
    let mut volumes = vec![
        json!({"name": "inputs", "configMap": {"name": names.object}}),
        json!({"name": "tmp", "emptyDir": {}}),
    ];
    let mut mounts = vec![
        json!({"name": "inputs", "mountPath": INPUTS_DIR, "readOnly": true}),
        json!({"name": "tmp", "mountPath": "/tmp"}),
    ];
    if !spec.secret_files.is_empty() {
        volumes.push(json!({"name": "secrets", "secret": {"secretName": names.object}}));
        mounts.push(json!({"name": "secrets", "mountPath": SECRETS_DIR, "readOnly": true}));
    }
    let host_network = spec.job.host_network;
    let mut pod_spec = json!({
        "serviceAccountName": names.object,
        "restartPolicy": "Never",
        "hostNetwork": host_network,
        "dnsPolicy": if host_network { "Default" } else { "ClusterFirst" },
        "enableServiceLinks": false,
        "tolerations": tolerations,
        "nodeSelector": spec.job.node_selector,
        "securityContext": {
            "runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumes": volumes,
        "containers": [{
            "name": "bootstrap",
            "image": spec.job.image,
            "command": spec.command,
            "env": env(spec),
            "volumeMounts": mounts,
            "securityContext": {
                "allowPrivilegeEscalation": false,
                "readOnlyRootFilesystem": true,
                "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            },
        }],
    });
    if let Some(policy) = &spec.job.pull_policy {
        pod_spec["containers"][0]["imagePullPolicy"] = json!(policy);
    }
    if let Some(affinity) = &spec.job.affinity {
        pod_spec["affinity"] = affinity.clone();
    }
    let mut pod_metadata = json!({"labels": names.labels()});
    if !spec.job.annotations.is_empty() {
        pod_metadata["annotations"] = json!(spec.job.annotations);
    }
    typed(json!({
        "metadata": {
            "name": names.object, "namespace": spec.namespace.name, "labels": names.labels(),
            "annotations": {"talosboot.dev/purpose": spec.purpose},
        },
        "spec": {
            "backoffLimit": 0,
            // The Job can never outlive the apply that started it.
            "activeDeadlineSeconds": spec.timeout.as_secs().max(1),
            "ttlSecondsAfterFinished": TTL_AFTER_FINISHED_SECONDS,
            "template": {"metadata": pod_metadata, "spec": pod_spec},
        },
    }))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cluster::endpoint::ApiEndpoint;
    use crate::cluster::engine::JobSettings;

    fn spec() -> RunSpec {
        RunSpec {
            purpose: "install Cilium".into(),
            target: "helm/kube-system/cilium".into(),
            namespace: BootstrapNamespace::named("kube-system"),
            job: JobSettings {
                env: BTreeMap::from([("EXTRA".into(), "1".into())]),
                ..JobSettings::talos("alpine/helm:3.18.4")
            },
            command: vec!["helm".into(), "version".into()],
            env: BTreeMap::from([("HELM_CACHE_HOME".into(), "/tmp/helm/cache".into())]),
            files: BTreeMap::from([("values.yaml".into(), "a: 1".into())]),
            binary_files: BTreeMap::new(),
            secret_files: BTreeMap::new(),
            timeout: Duration::from_secs(600),
            rbac: Rbac::ClusterAdmin,
            capture_output: false,
        }
    }

    fn names() -> RunNames {
        RunNames {
            object: "talosboot-cilium-abc".into(),
            run_id: "abc".into(),
            target_label: "t".into(),
        }
    }

    #[test]
    fn the_job_runs_once_on_the_host_network_against_kubeprism() {
        let job = serde_json::to_value(job(&spec(), &names())).expect("json");
        let s = &job["spec"];
        assert_eq!(s["backoffLimit"], 0);
        assert_eq!(s["activeDeadlineSeconds"], 600);
        let pod = &s["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Never");
        assert_eq!(pod["hostNetwork"], true);
        assert_eq!(pod["dnsPolicy"], "Default");
        let env = pod["containers"][0]["env"].as_array().expect("env");
        let get = |n: &str| {
            env.iter()
                .find(|e| e["name"] == n)
                .map(|e| e["value"].clone())
        };
        assert_eq!(get("KUBERNETES_SERVICE_HOST"), Some(json!("localhost")));
        assert_eq!(get("KUBERNETES_SERVICE_PORT"), Some(json!("7445")));
        assert_eq!(get("EXTRA"), Some(json!("1")));
        assert_eq!(get("HOME"), Some(json!("/tmp")));
        assert_eq!(
            get("HELM_CACHE_HOME"),
            Some(json!("/tmp/helm/cache")),
            "the program's own"
        );
        let tolerated: Vec<_> = pod["tolerations"]
            .as_array()
            .expect("tolerations")
            .iter()
            .map(|t| t["key"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert!(tolerated.contains(&"node.kubernetes.io/not-ready".to_owned()));
        assert!(tolerated.contains(&"node-role.kubernetes.io/control-plane".to_owned()));
        let sc = &pod["containers"][0]["securityContext"];
        assert_eq!(sc["allowPrivilegeEscalation"], false);
        assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert!(
            secret(&spec(), &names()).is_none(),
            "no Secret without sensitive inputs"
        );
    }

    #[test]
    fn a_created_namespace_is_privileged_only_for_host_network_pods() {
        let mut ns = BootstrapNamespace::named("flux-operator-bootstrap");
        ns.labels.insert("team".into(), "platform".into());
        let host = namespace(&ns, true);
        let labels = host.metadata.labels.expect("labels");
        assert_eq!(labels[PSA_ENFORCE], PSA_PRIVILEGED);
        assert_eq!(labels["team"], "platform");
        let plain = namespace(&ns, false);
        assert!(
            !plain
                .metadata
                .labels
                .expect("labels")
                .contains_key(PSA_ENFORCE)
        );
    }

    #[test]
    fn the_env_override_is_absent_without_an_endpoint() {
        let mut s = spec();
        s.job.api_endpoint = None;
        s.job.host_network = false;
        let job = serde_json::to_value(job(&s, &names())).expect("json");
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(pod["dnsPolicy"], "ClusterFirst");
        let env = pod["containers"][0]["env"].as_array().expect("env");
        assert!(!env.iter().any(|e| e["name"] == "KUBERNETES_SERVICE_HOST"));
        let _ = ApiEndpoint::parse("localhost:7445").expect("parses");
    }
}
