//! The parts of the simulated `cilium` chart that depend on the values, as the real chart
//! renders them:
//! - `cilium-envoy` (chart 1.16+ by default; `envoy.enabled`, `l7Proxy`, `upgradeCompatibility`):
//!   ServiceAccount, ConfigMap `cilium-envoy-config`, DaemonSet `cilium-envoy` (hostNetwork,
//!   `envoy.tolerations` default everything, capabilities `NET_ADMIN`, `SYS_ADMIN`);
//! - Hubble (`hubble.enabled`, on by default): Service `hubble-peer`; with `hubble.relay.enabled`
//!   ServiceAccount, ConfigMap, Service and Deployment `hubble-relay`; with `hubble.ui.enabled`
//!   ServiceAccount, ConfigMap `hubble-ui-nginx`, ClusterRole and binding, Service and
//!   Deployment `hubble-ui` (containers `frontend` and `backend`). Both are on the pod network;
//! - `clustermesh.useAPIServer`: ServiceAccount, Service (NodePort) and Deployment
//!   `clustermesh-apiserver` (containers `etcd` and `apiserver`).
//!
//! Not rendered: the TLS Secrets the real chart generates for Hubble and cluster mesh (the
//! simulated components do not read them).

use serde_json::{Value, json};

use super::Chart;
use super::cilium::{
    api_env, cluster_role, cluster_role_binding, image, minor_version, on, or, rule, sa, text,
};
use crate::programs::values::get;

/// The chart's `envoyDaemonSetEnabled` helper: off without `l7Proxy`; `envoy.enabled` when set;
/// otherwise on from chart 1.16 unless `upgradeCompatibility` is below 1.16.
pub fn envoy_enabled(chart: &Chart, v: &Value) -> bool {
    if !on(v, "l7Proxy") {
        return false;
    }
    match get(v, "envoy.enabled") {
        Some(Value::Null) | None => {}
        Some(_) => return on(v, "envoy.enabled"),
    }
    if minor_version(&chart.version) < (1, 16) {
        return false;
    }
    let compat = text(get(v, "upgradeCompatibility"));
    compat.is_empty() || minor_version(&compat) >= (1, 16)
}

/// The value-dependent objects (see the module docs).
pub fn render(chart: &Chart, ns: &str, v: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    if envoy_enabled(chart, v) {
        out.extend(envoy(ns, v));
    }
    if on(v, "hubble.enabled") {
        out.push(service(ns, "hubble-peer", "cilium", 443, json!(4244)));
        if on(v, "hubble.relay.enabled") {
            out.extend(relay(ns, v));
        }
        if on(v, "hubble.ui.enabled") {
            out.extend(ui(ns, v));
        }
    }
    if on(v, "clustermesh.useAPIServer") {
        out.extend(clustermesh(ns, v));
    }
    out
}

fn labels(app: &str) -> Value {
    json!({"k8s-app": app, "app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "cilium"})
}

/// A ClusterIP Service for the pods labelled `k8s-app: app`.
fn service(ns: &str, name: &str, app: &str, port: u16, target: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns, "labels": labels(name)},
        "spec": {"type": "ClusterIP", "selector": {"k8s-app": app},
            "ports": [{"name": name, "protocol": "TCP", "port": port, "targetPort": target}]}})
}

fn config_map(ns: &str, name: &str, key: &str, data: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": {key: data}})
}

/// A Deployment of `app` on the pod network, placed by `<values>.tolerations`/`nodeSelector`.
fn deployment(ns: &str, app: &str, v: &Value, values: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["tolerations"] = or(v, &format!("{values}.tolerations"), json!([]));
    spec["nodeSelector"] = or(v, &format!("{values}.nodeSelector"), json!({}));
    spec["serviceAccountName"] = json!(app);
    spec["restartPolicy"] = json!("Always");
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": app, "namespace": ns, "labels": labels(app)},
        "spec": {"replicas": or(v, &format!("{values}.replicas"), json!(1)),
            "selector": {"matchLabels": {"k8s-app": app}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {"metadata": {"labels": labels(app)}, "spec": spec}}})
}

fn envoy(ns: &str, v: &Value) -> Vec<Value> {
    let caps = get(v, "envoy.securityContext.capabilities.envoy")
        .cloned()
        .unwrap_or(json!([]));
    let probe = json!({"httpGet": {"host": "localhost", "path": "/healthz", "port": 9878, "scheme": "HTTP"}, "periodSeconds": 30});
    let mut pod_labels = labels("cilium-envoy");
    pod_labels["name"] = json!("cilium-envoy");
    let container = json!({"name": "cilium-envoy", "image": image(v, "envoy.image", ""),
        "command": ["/usr/bin/cilium-envoy-starter"],
        "args": ["--", "-c /var/run/cilium/envoy/bootstrap-config.json", "--base-id 0", "--log-level info"],
        "env": api_env(v), "readinessProbe": probe.clone(), "livenessProbe": probe,
        "securityContext": {"capabilities": {"add": caps, "drop": ["ALL"]}, "seLinuxOptions": {"level": "s0", "type": "spc_t"}},
        "volumeMounts": [{"name": "envoy-config", "mountPath": "/var/run/cilium/envoy/", "readOnly": true}]});
    let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "cilium-envoy", "namespace": ns, "labels": pod_labels},
        "spec": {"selector": {"matchLabels": {"k8s-app": "cilium-envoy"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}},
            "template": {"metadata": {"labels": pod_labels},
                "spec": {"hostNetwork": true, "serviceAccountName": "cilium-envoy", "priorityClassName": "system-node-critical",
                    "restartPolicy": "Always", "tolerations": or(v, "envoy.tolerations", json!([])),
                    "containers": [container],
                    "volumes": [{"name": "envoy-config", "configMap": {"name": "cilium-envoy-config",
                        "items": [{"key": "bootstrap-config.json", "path": "bootstrap-config.json"}]}}]}}}});
    vec![
        sa(ns, "cilium-envoy"),
        config_map(
            ns,
            "cilium-envoy-config",
            "bootstrap-config.json",
            "{\"node\":{\"id\":\"host~127.0.0.1~no-id~localdomain\",\"cluster\":\"ingress-cluster\"}}",
        ),
        ds,
    ]
}

fn relay(ns: &str, v: &Value) -> Vec<Value> {
    let spec = json!({"automountServiceAccountToken": false,
        "containers": [{"name": "hubble-relay", "image": image(v, "hubble.relay.image", ""),
            "command": ["hubble-relay"], "args": ["serve"],
            "ports": [{"name": "grpc", "containerPort": 4245}],
            "readinessProbe": {"grpc": {"port": 4222}, "timeoutSeconds": 3},
            "volumeMounts": [{"name": "config", "mountPath": "/etc/hubble-relay", "readOnly": true}]}],
        "volumes": [{"name": "config", "configMap": {"name": "hubble-relay-config",
            "items": [{"key": "config.yaml", "path": "config.yaml"}]}}]});
    vec![
        sa(ns, "hubble-relay"),
        config_map(
            ns,
            "hubble-relay-config",
            "config.yaml",
            "cluster-name: default\npeer-service: \"hubble-peer.kube-system.svc.cluster.local.:443\"\nlisten-address: :4245\n",
        ),
        service(ns, "hubble-relay", "hubble-relay", 80, json!("grpc")),
        deployment(ns, "hubble-relay", v, "hubble.relay", spec),
    ]
}

fn ui(ns: &str, v: &Value) -> Vec<Value> {
    let spec = json!({"containers": [
        {"name": "frontend", "image": image(v, "hubble.ui.frontend.image", ""),
            "ports": [{"name": "http", "containerPort": 8081}],
            "readinessProbe": {"httpGet": {"path": "/", "port": 8081}},
            "volumeMounts": [{"name": "hubble-ui-nginx-conf", "mountPath": "/etc/nginx/conf.d/default.conf", "subPath": "nginx.conf"}]},
        {"name": "backend", "image": image(v, "hubble.ui.backend.image", ""),
            "env": [{"name": "EVENTS_SERVER_PORT", "value": "8090"}, {"name": "FLOWS_API_ADDR", "value": "hubble-relay:80"}],
            "ports": [{"name": "grpc", "containerPort": 8090}]}],
        "volumes": [{"name": "hubble-ui-nginx-conf", "configMap": {"name": "hubble-ui-nginx", "defaultMode": 420}}]});
    vec![
        sa(ns, "hubble-ui"),
        config_map(
            ns,
            "hubble-ui-nginx",
            "nginx.conf",
            "server {\n    listen 8081;\n    location / { root /app; }\n}\n",
        ),
        cluster_role(
            "hubble-ui",
            vec![
                rule(
                    &["networking.k8s.io"],
                    &["networkpolicies"],
                    &["get", "list", "watch"],
                ),
                rule(
                    &[""],
                    &[
                        "componentstatuses",
                        "endpoints",
                        "namespaces",
                        "nodes",
                        "pods",
                        "services",
                    ],
                    &["get", "list", "watch"],
                ),
                rule(&["cilium.io"], &["*"], &["get", "list", "watch"]),
            ],
        ),
        cluster_role_binding("hubble-ui", ns, "hubble-ui"),
        service(ns, "hubble-ui", "hubble-ui", 80, json!(8081)),
        deployment(ns, "hubble-ui", v, "hubble.ui", spec),
    ]
}

fn clustermesh(ns: &str, v: &Value) -> Vec<Value> {
    let image = image(v, "clustermesh.apiserver.image", "");
    let spec = json!({
        "initContainers": [{"name": "etcd-init", "image": image, "command": ["/usr/bin/clustermesh-apiserver", "etcdinit"]}],
        "containers": [
            {"name": "etcd", "image": image, "command": ["/usr/bin/etcd"],
                "args": ["--data-dir=/var/run/etcd", "--name=clustermesh-apiserver", "--listen-client-urls=https://127.0.0.1:2379"],
                "ports": [{"name": "etcd", "containerPort": 2379}]},
            {"name": "apiserver", "image": image, "command": ["/usr/bin/clustermesh-apiserver"],
                "args": ["clustermesh", format!("--cluster-name={}", text(get(v, "cluster.name"))),
                    format!("--cluster-id={}", text(get(v, "cluster.id")))],
                "env": api_env(v)}]});
    let mut svc = service(
        ns,
        "clustermesh-apiserver",
        "clustermesh-apiserver",
        2379,
        json!(2379),
    );
    svc["spec"]["type"] = json!("NodePort");
    vec![
        sa(ns, "clustermesh-apiserver"),
        cluster_role(
            "clustermesh-apiserver",
            vec![
                rule(
                    &["cilium.io"],
                    &["ciliumnodes", "ciliumendpoints", "ciliumidentities"],
                    &["get", "list", "watch"],
                ),
                rule(
                    &[""],
                    &["namespaces", "services", "endpoints"],
                    &["get", "list", "watch"],
                ),
            ],
        ),
        cluster_role_binding("clustermesh-apiserver", ns, "clustermesh-apiserver"),
        svc,
        deployment(
            ns,
            "clustermesh-apiserver",
            v,
            "clustermesh.apiserver",
            spec,
        ),
    ]
}
