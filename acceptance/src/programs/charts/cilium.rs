//! The simulated `cilium` chart: its defaults, ConfigMap `cilium-config`, the agent DaemonSet
//! `cilium` (hostNetwork, tolerates everything, init containers as in the real chart), Deployment
//! `cilium-operator`, their accounts and RBAC, and (from [`super::cilium_components`]) the
//! components that depend on the values: `cilium-envoy`, Hubble's peer Service, relay and UI, the
//! cluster-mesh API server.
//!
//! Chart defaults are the real ones (1.16 to 1.18), where they matter here: `SYS_MODULE` in both
//! capability lists, `cgroup.autoMount.enabled: true`, `kubeProxyReplacement: false`, no
//! `k8sServiceHost`; `operator.replicas: 2` with a required pod anti-affinity on
//! `kubernetes.io/hostname` (one operator per node) and `tolerations: [{operator: Exists}]`;
//! `envoy.enabled` unset, which the chart reads as on from 1.16 (`upgradeCompatibility` below 1.16
//! or `l7Proxy: false` turn it off); Hubble on, its relay and UI off. Images follow
//! `<component>.image.repository`/`tag` (`useDigest` appends `@digest`), so a test can point one
//! component at an image the node layer does not know.

use serde_json::{Value, json};

use super::Chart;
use super::cilium_components as components;
use crate::programs::values::{self, get};

/// The Helm values Talos needs for Cilium (ipam `kubernetes`, kube-proxy replacement over
/// KubePrism `localhost:7445`, cgroup auto-mount off with `hostRoot=/sys/fs/cgroup`, the
/// capability lists without `SYS_MODULE`), as the Talos docs' inline-manifest
/// (`helm template`) method uses them.
pub fn talos_cilium_values() -> Value {
    json!({
        "ipam": {"mode": "kubernetes"},
        "kubeProxyReplacement": true,
        "k8sServiceHost": "localhost",
        "k8sServicePort": 7445,
        "cgroup": {"autoMount": {"enabled": false}, "hostRoot": "/sys/fs/cgroup"},
        "securityContext": {"capabilities": {
            "ciliumAgent": ["CHOWN", "KILL", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "SYS_ADMIN", "SYS_RESOURCE", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID"],
            "cleanCiliumState": ["NET_ADMIN", "SYS_ADMIN", "SYS_RESOURCE"],
        }},
    })
}

/// `(major, minor)` of a chart version (`1.18.4` → `(1, 18)`); unparsable parts are 0.
pub fn minor_version(version: &str) -> (u64, u64) {
    let mut parts = version
        .trim_start_matches('v')
        .split(['.', '-', '+'])
        .map(|p| p.parse::<u64>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// The image tags a chart version ships for the components that are not versioned with Cilium
/// (Envoy, Hubble UI). Representative tags of each minor's line: the node layer matches images
/// by repository, so only the repository decides whether an image "exists".
fn bundled_tags(chart: &Chart) -> (&'static str, &'static str) {
    match minor_version(&chart.version) {
        (1, m) if m <= 16 => ("v1.29.9", "v0.13.1"),
        (1, 17) => ("v1.31.5", "v0.13.1"),
        _ => ("v1.34.10", "v0.13.2"),
    }
}

fn defaults(chart: &Chart) -> Value {
    let version = format!("v{}", chart.version);
    let (envoy_tag, ui_tag) = bundled_tags(chart);
    let linux = json!({"kubernetes.io/os": "linux"});
    json!({
        "kubeProxyReplacement": false, "k8sServiceHost": "", "k8sServicePort": "",
        "ipam": {"mode": "cluster-pool"}, "cluster": {"name": "default", "id": 0},
        "cgroup": {"autoMount": {"enabled": true}, "hostRoot": "/run/cilium/cgroupv2"},
        "l7Proxy": true,
        "image": {"repository": "quay.io/cilium/cilium", "tag": version, "useDigest": false},
        "operator": {
            "replicas": 2,
            "image": {"repository": "quay.io/cilium/operator", "tag": version, "suffix": "", "useDigest": false},
            "tolerations": [{"operator": "Exists"}],
            "nodeSelector": linux,
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"io.cilium/app": "operator"}}},
            ]}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "50%"}},
        },
        "envoy": {
            "image": {"repository": "quay.io/cilium/cilium-envoy", "tag": envoy_tag, "useDigest": false},
            "tolerations": [{"operator": "Exists"}],
            "securityContext": {"capabilities": {"envoy": ["NET_ADMIN", "SYS_ADMIN"]}},
        },
        "hubble": {
            "enabled": true,
            "relay": {
                "enabled": false, "replicas": 1, "tolerations": [], "nodeSelector": linux,
                "image": {"repository": "quay.io/cilium/hubble-relay", "tag": version, "useDigest": false},
            },
            "ui": {
                "enabled": false, "replicas": 1, "tolerations": [], "nodeSelector": linux,
                "frontend": {"image": {"repository": "quay.io/cilium/hubble-ui", "tag": ui_tag, "useDigest": false}},
                "backend": {"image": {"repository": "quay.io/cilium/hubble-ui-backend", "tag": ui_tag, "useDigest": false}},
            },
        },
        "clustermesh": {
            "useAPIServer": false,
            "apiserver": {
                "replicas": 1, "tolerations": [], "nodeSelector": linux,
                "image": {"repository": "quay.io/cilium/clustermesh-apiserver", "tag": version, "useDigest": false},
            },
        },
        "securityContext": {"capabilities": {
            "ciliumAgent": ["CHOWN", "KILL", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "SYS_MODULE", "SYS_ADMIN", "SYS_RESOURCE", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID"],
            "mountCgroup": ["SYS_ADMIN", "SYS_CHROOT", "SYS_PTRACE"],
            "applySysctlOverwrites": ["SYS_ADMIN", "SYS_CHROOT", "SYS_PTRACE"],
            "cleanCiliumState": ["NET_ADMIN", "SYS_MODULE", "SYS_ADMIN", "SYS_RESOURCE"],
        }},
    })
}

/// The chart's objects for `namespace` with the user's `user` values over the defaults, in
/// Helm's install order (accounts, configuration, RBAC, Services, DaemonSets, Deployments).
pub fn render(chart: &Chart, ns: &str, user: &Value) -> Vec<Value> {
    let mut v = defaults(chart);
    values::merge(&mut v, user);
    let mut sas = vec![sa(ns, "cilium"), sa(ns, "cilium-operator")];
    let mut configs = vec![config(chart, ns, &v)];
    let mut rbac = cilium_rbac(ns);
    let mut services = Vec::new();
    let mut daemonsets = vec![agent(ns, &v)];
    let mut deployments = vec![operator(ns, &v)];
    for c in components::render(chart, ns, &v) {
        let bucket = match text(c.get("kind")).as_str() {
            "ServiceAccount" => &mut sas,
            "ConfigMap" => &mut configs,
            "Service" => &mut services,
            "DaemonSet" => &mut daemonsets,
            "Deployment" => &mut deployments,
            _ => &mut rbac,
        };
        bucket.push(c);
    }
    [sas, configs, rbac, services, daemonsets, deployments].concat()
}

pub(super) fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Whether a value is on (`true` or `"true"`).
pub(super) fn on(v: &Value, path: &str) -> bool {
    matches!(get(v, path), Some(Value::Bool(true))) || text(get(v, path)) == "true"
}

/// The chart's `cilium.image` helper: `repository[suffix]:tag`, `@digest` with `useDigest`.
pub(super) fn image(v: &Value, path: &str, suffix: &str) -> String {
    let at = |key: &str| text(get(v, &format!("{path}.{key}")));
    let mut out = format!("{}{suffix}{}", at("repository"), at("suffix"));
    let tag = at("tag");
    if !tag.is_empty() {
        out.push_str(&format!(":{tag}"));
    }
    let digest = at("digest");
    if on(v, &format!("{path}.useDigest")) && !digest.is_empty() {
        out.push_str(&format!("@{digest}"));
    }
    out
}

pub(super) fn sa(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns}})
}

/// The agent's API endpoint env: `K8S_NODE_NAME`, the namespace, and `k8sServiceHost`/`Port`
/// as `KUBERNETES_SERVICE_HOST`/`PORT` when set (else the kubelet's Service address applies).
pub(super) fn api_env(v: &Value) -> Vec<Value> {
    let host = text(get(v, "k8sServiceHost"));
    let mut env = vec![
        json!({"name": "K8S_NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}),
        json!({"name": "CILIUM_K8S_NAMESPACE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}}),
    ];
    if !host.is_empty() {
        env.push(json!({"name": "KUBERNETES_SERVICE_HOST", "value": host}));
        env.push(
            json!({"name": "KUBERNETES_SERVICE_PORT", "value": text(get(v, "k8sServicePort"))}),
        );
    }
    env
}

pub(super) fn caps(v: &Value, key: &str) -> Value {
    json!({"capabilities": {"add": get(v, &format!("securityContext.capabilities.{key}")).cloned().unwrap_or(json!([])), "drop": ["ALL"]}, "seLinuxOptions": {"level": "s0", "type": "spc_t"}})
}

/// Values of `path`, or `fallback` when unset or null.
pub(super) fn or(v: &Value, path: &str, fallback: Value) -> Value {
    get(v, path)
        .filter(|x| !x.is_null())
        .cloned()
        .unwrap_or(fallback)
}

fn config(chart: &Chart, ns: &str, v: &Value) -> Value {
    let kpr = on(v, "kubeProxyReplacement");
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cilium-config", "namespace": ns},
    "data": {
        "kube-proxy-replacement": kpr.to_string(), "k8s-service-host": text(get(v, "k8sServiceHost")),
        "k8s-service-port": text(get(v, "k8sServicePort")), "ipam": text(get(v, "ipam.mode")),
        "cluster-name": text(get(v, "cluster.name")), "cgroup-root": text(get(v, "cgroup.hostRoot")),
        "enable-ipv4": "true", "routing-mode": "tunnel", "tunnel-protocol": "vxlan",
        "enable-hubble": on(v, "hubble.enabled").to_string(),
        "external-envoy-proxy": components::envoy_enabled(chart, v).to_string(),
    }})
}

fn agent(ns: &str, v: &Value) -> Value {
    let image = image(v, "image", "");
    let init = |name: &str, command: Value, sc: Value| json!({"name": name, "image": image, "command": command, "securityContext": sc, "env": api_env(v)});
    let mut inits = vec![init(
        "config",
        json!(["cilium-dbg", "build-config"]),
        json!({}),
    )];
    if get(v, "cgroup.autoMount.enabled") != Some(&json!(false)) {
        let mut c = init(
            "mount-cgroup",
            json!([
                "sh",
                "-ec",
                "cp /usr/bin/cilium-mount /hostbin/cilium-mount; nsenter --cgroup=/hostproc/1/ns/cgroup --mount=/hostproc/1/ns/mnt \"${BIN_PATH}/cilium-mount\" $CGROUP_ROOT; rm /hostbin/cilium-mount"
            ]),
            caps(v, "mountCgroup"),
        );
        c["env"] = json!([{"name": "CGROUP_ROOT", "value": text(get(v, "cgroup.hostRoot"))}, {"name": "BIN_PATH", "value": "/opt/cni/bin"}]);
        inits.push(c);
    }
    inits.push(init("apply-sysctl-overwrites", json!(["sh", "-ec", "cp /usr/bin/cilium-sysctlfix /hostbin/cilium-sysctlfix; nsenter --mount=/hostproc/1/ns/mnt \"${BIN_PATH}/cilium-sysctlfix\"; rm /hostbin/cilium-sysctlfix"]), caps(v, "applySysctlOverwrites")));
    inits.push(init(
        "mount-bpf-fs",
        json!([
            "/bin/bash",
            "-c",
            "--",
            "mount | grep \"/sys/fs/bpf type bpf\" || mount -t bpf bpf /sys/fs/bpf"
        ]),
        json!({"privileged": true}),
    ));
    inits.push(init(
        "clean-cilium-state",
        json!(["/init-container.sh"]),
        caps(v, "cleanCiliumState"),
    ));
    inits.push(init(
        "install-cni-binaries",
        json!(["/install-plugin.sh"]),
        json!({"capabilities": {"drop": ["ALL"]}}),
    ));
    let probe = |path: &str| json!({"httpGet": {"host": "127.0.0.1", "path": path, "port": 9879, "scheme": "HTTP"}, "periodSeconds": 30});
    let agent = json!({"name": "cilium-agent", "image": image, "command": ["cilium-agent"], "args": ["--config-dir=/tmp/cilium/config-map"],
        "env": api_env(v), "securityContext": caps(v, "ciliumAgent"), "readinessProbe": probe("/healthz"), "livenessProbe": probe("/healthz")});
    let labels = json!({"k8s-app": "cilium", "app.kubernetes.io/name": "cilium-agent", "app.kubernetes.io/part-of": "cilium"});
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "cilium", "namespace": ns, "labels": labels},
        "spec": {"selector": {"matchLabels": {"k8s-app": "cilium"}},
            "template": {"metadata": {"labels": labels},
                "spec": {"hostNetwork": true, "serviceAccountName": "cilium", "priorityClassName": "system-node-critical",
                    "restartPolicy": "Always", "tolerations": [{"operator": "Exists"}], "initContainers": inits, "containers": [agent]}}}})
}

fn operator(ns: &str, v: &Value) -> Value {
    let probe = json!({"httpGet": {"host": "127.0.0.1", "path": "/healthz", "port": 9234, "scheme": "HTTP"}, "periodSeconds": 30});
    let labels = json!({"io.cilium/app": "operator", "name": "cilium-operator", "app.kubernetes.io/name": "cilium-operator", "app.kubernetes.io/part-of": "cilium"});
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "cilium-operator", "namespace": ns, "labels": labels},
        "spec": {"replicas": or(v, "operator.replicas", json!(2)), "selector": {"matchLabels": {"io.cilium/app": "operator", "name": "cilium-operator"}},
            "strategy": or(v, "operator.updateStrategy", json!({"type": "RollingUpdate"})),
            "template": {"metadata": {"labels": labels},
                "spec": {"hostNetwork": true, "serviceAccountName": "cilium-operator", "priorityClassName": "system-cluster-critical",
                    "tolerations": or(v, "operator.tolerations", json!([])), "nodeSelector": or(v, "operator.nodeSelector", json!({})),
                    "affinity": or(v, "operator.affinity", json!({})),
                    "containers": [{"name": "cilium-operator", "image": image(v, "operator.image", "-generic"),
                        "command": ["cilium-operator-generic"], "args": ["--config-dir=/tmp/cilium/config-map"], "env": api_env(v),
                        "readinessProbe": probe}]}}}})
}

/// The chart's RBAC (a representative subset of the real rules): ClusterRoles and
/// ClusterRoleBindings `cilium` and `cilium-operator`, Role and RoleBinding `cilium-config-agent`
/// in the release namespace. Installing them needs `escalate`/`bind` on RBAC objects (or every
/// permission they grant), as on a real cluster.
fn cilium_rbac(ns: &str) -> Vec<Value> {
    let agent = vec![
        rule(
            &["networking.k8s.io"],
            &["networkpolicies"],
            &["get", "list", "watch"],
        ),
        rule(
            &["discovery.k8s.io"],
            &["endpointslices"],
            &["get", "list", "watch"],
        ),
        rule(
            &[""],
            &["namespaces", "services", "pods", "endpoints", "nodes"],
            &["get", "list", "watch"],
        ),
        rule(
            &["apiextensions.k8s.io"],
            &["customresourcedefinitions"],
            &["list", "watch", "get"],
        ),
        rule(
            &["cilium.io"],
            &[
                "ciliumnodes",
                "ciliumendpoints",
                "ciliumidentities",
                "ciliumnetworkpolicies",
            ],
            &["*"],
        ),
    ];
    let operator = vec![
        rule(&[""], &["pods"], &["get", "list", "watch", "delete"]),
        rule(
            &[""],
            &["nodes", "services", "endpoints", "namespaces"],
            &["get", "list", "watch"],
        ),
        rule(
            &["coordination.k8s.io"],
            &["leases"],
            &["create", "get", "update"],
        ),
        rule(
            &["apiextensions.k8s.io"],
            &["customresourcedefinitions"],
            &["create", "get", "list", "update", "watch"],
        ),
        rule(
            &["cilium.io"],
            &["ciliumnodes", "ciliumendpoints", "ciliumidentities"],
            &["*"],
        ),
    ];
    vec![
        cluster_role("cilium", agent),
        cluster_role("cilium-operator", operator),
        cluster_role_binding("cilium", ns, "cilium"),
        cluster_role_binding("cilium-operator", ns, "cilium-operator"),
        json!({"apiVersion": RBAC, "kind": "Role", "metadata": {"name": "cilium-config-agent", "namespace": ns},
            "rules": [rule(&[""], &["configmaps"], &["get", "list", "watch"])]}),
        json!({"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": "cilium-config-agent", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cilium-config-agent"},
            "subjects": [{"kind": "ServiceAccount", "name": "cilium", "namespace": ns}]}),
    ]
}

const RBAC: &str = "rbac.authorization.k8s.io/v1";

pub(super) fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

pub(super) fn cluster_role(name: &str, rules: Vec<Value>) -> Value {
    json!({"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules})
}

/// ClusterRoleBinding `name` of ClusterRole `name` to ServiceAccount `ns/sa`.
pub(super) fn cluster_role_binding(name: &str, ns: &str, sa: &str) -> Value {
    json!({"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]})
}
