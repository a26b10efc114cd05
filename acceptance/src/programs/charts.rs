//! The charts the simulated Helm knows, rendered from values into objects:
//! - `cilium`: ConfigMap `cilium-config`, DaemonSet `cilium` (agent, hostNetwork, tolerates
//!   everything, init containers as in the real chart), Deployment `cilium-operator`, accounts.
//!   Chart defaults that matter on Talos are the real ones: `SYS_MODULE` in both capability lists,
//!   `cgroup.autoMount.enabled: true`, `kubeProxyReplacement: false`, no `k8sServiceHost`.
//! - `flux-operator`: CRDs `fluxinstances`/`fluxreports.fluxcd.controlplane.io`, Deployment
//!   `flux-operator` (not hostNetwork: it needs the pod network), ServiceAccount, Service.
//! - anything else: a marker ConfigMap `<release>-rendered` holding the values.

use serde_json::{Value, json};

use super::values::{self, get};

/// A chart to render.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// `cilium`, `flux-operator`, or another chart's name.
    pub name: String,
    pub version: String,
    pub app_version: String,
}

impl Chart {
    /// The chart named by a reference (`oci://ghcr.io/.../flux-operator`, `cilium/cilium`, a path),
    /// at `version` (`None`: the simulated "latest").
    pub fn from_reference(reference: &str, version: Option<&str>) -> Chart {
        let name = reference
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or(reference);
        let name = name
            .split(':')
            .next()
            .unwrap_or(name)
            .trim_end_matches(".tgz")
            .to_string();
        let default = match name.as_str() {
            "cilium" => "1.18.4",
            "flux-operator" => "0.33.0",
            _ => "0.1.0",
        };
        // `--version ""` is no constraint to Helm: the latest.
        let version = version
            .filter(|v| !v.trim().is_empty())
            .unwrap_or(default)
            .trim_start_matches('v')
            .to_string();
        let app_version = match name.as_str() {
            "flux-operator" => format!("v{version}"),
            _ => version.clone(),
        };
        Chart {
            name,
            version,
            app_version,
        }
    }

    /// Renders the chart's objects for `release` in `namespace` with user `vals`.
    pub fn render(&self, release: &str, namespace: &str, vals: &Value) -> Vec<Value> {
        match self.name.as_str() {
            "cilium" => cilium(self, namespace, &with_defaults(cilium_defaults(), vals)),
            "flux-operator" => flux_operator(self, release, namespace, vals),
            _ => vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("{release}-rendered"), "namespace": namespace},
                "data": {"chart": self.name, "version": self.version, "values.json": vals.to_string()}})],
        }
    }
}

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

fn with_defaults(mut defaults: Value, user: &Value) -> Value {
    values::merge(&mut defaults, user);
    defaults
}

fn cilium_defaults() -> Value {
    json!({
        "kubeProxyReplacement": false, "k8sServiceHost": "", "k8sServicePort": "",
        "ipam": {"mode": "cluster-pool"}, "cluster": {"name": "default"},
        "cgroup": {"autoMount": {"enabled": true}, "hostRoot": "/run/cilium/cgroupv2"},
        "operator": {"replicas": 2},
        "securityContext": {"capabilities": {
            "ciliumAgent": ["CHOWN", "KILL", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "SYS_MODULE", "SYS_ADMIN", "SYS_RESOURCE", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID"],
            "mountCgroup": ["SYS_ADMIN", "SYS_CHROOT", "SYS_PTRACE"],
            "applySysctlOverwrites": ["SYS_ADMIN", "SYS_CHROOT", "SYS_PTRACE"],
            "cleanCiliumState": ["NET_ADMIN", "SYS_MODULE", "SYS_ADMIN", "SYS_RESOURCE"],
        }},
    })
}

fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn api_env(v: &Value) -> Vec<Value> {
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

fn caps(v: &Value, key: &str) -> Value {
    json!({"capabilities": {"add": get(v, &format!("securityContext.capabilities.{key}")).cloned().unwrap_or(json!([])), "drop": ["ALL"]}, "seLinuxOptions": {"level": "s0", "type": "spc_t"}})
}

fn cilium(chart: &Chart, ns: &str, v: &Value) -> Vec<Value> {
    let image = format!("quay.io/cilium/cilium:v{}", chart.version);
    let kpr = matches!(get(v, "kubeProxyReplacement"), Some(Value::Bool(true)))
        || text(get(v, "kubeProxyReplacement")) == "true";
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cilium-config", "namespace": ns},
    "data": {
        "kube-proxy-replacement": kpr.to_string(), "k8s-service-host": text(get(v, "k8sServiceHost")),
        "k8s-service-port": text(get(v, "k8sServicePort")), "ipam": text(get(v, "ipam.mode")),
        "cluster-name": text(get(v, "cluster.name")), "cgroup-root": text(get(v, "cgroup.hostRoot")),
        "enable-ipv4": "true", "routing-mode": "tunnel", "tunnel-protocol": "vxlan",
    }});
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
    let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "cilium", "namespace": ns, "labels": labels},
        "spec": {"selector": {"matchLabels": {"k8s-app": "cilium"}},
            "template": {"metadata": {"labels": labels},
                "spec": {"hostNetwork": true, "serviceAccountName": "cilium", "priorityClassName": "system-node-critical",
                    "restartPolicy": "Always", "tolerations": [{"operator": "Exists"}], "initContainers": inits, "containers": [agent]}}}});
    let op_labels = json!({"io.cilium/app": "operator", "name": "cilium-operator", "app.kubernetes.io/name": "cilium-operator", "app.kubernetes.io/part-of": "cilium"});
    let operator = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "cilium-operator", "namespace": ns, "labels": op_labels},
        "spec": {"replicas": get(v, "operator.replicas").cloned().unwrap_or(json!(2)), "selector": {"matchLabels": {"io.cilium/app": "operator", "name": "cilium-operator"}},
            "template": {"metadata": {"labels": op_labels},
                "spec": {"hostNetwork": true, "serviceAccountName": "cilium-operator", "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "cilium-operator", "image": format!("quay.io/cilium/operator-generic:v{}", chart.version),
                        "command": ["cilium-operator-generic"], "args": ["--config-dir=/tmp/cilium/config-map"], "env": api_env(v),
                        "readinessProbe": probe("/healthz")}]}}}});
    let sa = |name: &str| json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns}});
    let mut objects = vec![sa("cilium"), sa("cilium-operator"), config];
    objects.extend(cilium_rbac(ns));
    objects.extend([ds, operator]);
    objects
}

/// The chart's RBAC (a representative subset of the real rules): ClusterRoles and
/// ClusterRoleBindings `cilium` and `cilium-operator`, Role and RoleBinding `cilium-config-agent`
/// in the release namespace. Installing them needs `escalate`/`bind` on RBAC objects (or every
/// permission they grant), as on a real cluster.
fn cilium_rbac(ns: &str) -> Vec<Value> {
    let rbac = "rbac.authorization.k8s.io/v1";
    let rule = |groups: &[&str], resources: &[&str], verbs: &[&str]| json!({"apiGroups": groups, "resources": resources, "verbs": verbs});
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
    let role = |kind: &str, name: &str, rules: Vec<Value>| {
        let mut meta = json!({"name": name});
        if kind == "Role" {
            meta["namespace"] = json!(ns);
        }
        json!({"apiVersion": rbac, "kind": kind, "metadata": meta, "rules": rules})
    };
    let binding = |kind: &str, role_kind: &str, name: &str| {
        let mut meta = json!({"name": name});
        if kind == "RoleBinding" {
            meta["namespace"] = json!(ns);
        }
        let sa = if name == "cilium-config-agent" {
            "cilium"
        } else {
            name
        };
        json!({"apiVersion": rbac, "kind": kind, "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]})
    };
    vec![
        role("ClusterRole", "cilium", agent),
        role("ClusterRole", "cilium-operator", operator),
        binding("ClusterRoleBinding", "ClusterRole", "cilium"),
        binding("ClusterRoleBinding", "ClusterRole", "cilium-operator"),
        role(
            "Role",
            "cilium-config-agent",
            vec![rule(&[""], &["configmaps"], &["get", "list", "watch"])],
        ),
        binding("RoleBinding", "Role", "cilium-config-agent"),
    ]
}

fn crd(plural: &str, kind: &str, short: &[&str]) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.fluxcd.controlplane.io")},
        "spec": {"group": "fluxcd.controlplane.io", "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List"), "shortNames": short},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

fn flux_operator(chart: &Chart, release: &str, ns: &str, v: &Value) -> Vec<Value> {
    let labels =
        json!({"app.kubernetes.io/name": "flux-operator", "app.kubernetes.io/instance": release});
    let image = format!(
        "ghcr.io/controlplaneio-fluxcd/flux-operator:{}",
        chart.app_version
    );
    let mut spec = json!({"serviceAccountName": "flux-operator",
        "containers": [{"name": "manager", "image": image, "args": ["--log-level=info"],
            "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8081}},
            "env": [{"name": "RUNTIME_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]}]});
    for key in ["tolerations", "affinity", "nodeSelector", "hostNetwork"] {
        if let Some(x) = v.get(key) {
            spec[key] = x.clone();
        }
    }
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "flux-operator", "namespace": ns, "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": spec}}});
    vec![
        crd("fluxinstances", "FluxInstance", &["fi"]),
        crd("fluxreports", "FluxReport", &["frep"]),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "flux-operator", "namespace": ns}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": format!("{release}-cluster-admin")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "flux-operator", "namespace": ns}]}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "flux-operator", "namespace": ns, "labels": labels},
            "spec": {"type": "ClusterIP", "selector": labels, "ports": [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}]}}),
        deploy,
    ]
}
