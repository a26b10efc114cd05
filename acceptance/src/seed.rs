//! The objects a fresh Talos cluster has before anyone applies anything: system namespaces, the
//! `kubernetes` Service (ClusterIP 10.96.0.1) and its Endpoints, the Node objects (NotReady, with
//! the `not-ready` taint: no CNI yet), the `default` ServiceAccount per
//! namespace, and the bootstrap ClusterRoles `cluster-admin`, `admin`, `edit`, `view` with the
//! `cluster-admin` ClusterRoleBinding (group `system:masters`).
//! With [`SimConfig::kube_proxy`], kube-proxy as Talos deploys it (ServiceAccount and DaemonSet
//! `kube-system/kube-proxy`); without it there is none (`cluster.proxy.disabled: true`).
//! With [`SimConfig::inline_cilium`], Cilium's objects as Talos' inline manifests create them.
//! The cluster model may take the nodes over (readiness, conditions).

use std::net::SocketAddr;

use serde_json::{Value, json};

use crate::config::SimConfig;
use crate::programs::charts;
use crate::store::{ApiError, GroupResource, Store, WriteOptions};

/// Node names: `talos-cp-1..`, `talos-worker-1..`.
pub fn node_names(config: &SimConfig) -> Vec<(String, bool)> {
    let cps = (1..=config.control_planes.max(1)).map(|i| (format!("talos-cp-{i}"), true));
    let workers = (1..=config.workers).map(|i| (format!("talos-worker-{i}"), false));
    cps.chain(workers).collect()
}

fn node(name: &str, control_plane: bool, ip: &str) -> Value {
    let mut labels = json!({
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
    });
    let mut taints = vec![json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})];
    if control_plane {
        labels["node-role.kubernetes.io/control-plane"] = json!("");
        taints
            .push(json!({"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}));
    }
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints, "podCIDR": "", "providerID": format!("talos://sim/{name}")},
        "status": {
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                "message": "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"}],
            "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Talos (v1.10.0)", "containerRuntimeVersion": "containerd://2.0.5",
                "operatingSystem": "linux", "architecture": "amd64", "kernelVersion": "6.12.0-talos"},
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        }
    })
}

/// Creates the initial objects.
pub fn seed(store: &Store, config: &SimConfig, api_addr: SocketAddr) -> Result<(), ApiError> {
    let opts = WriteOptions::manager("kube-apiserver");
    let ns = GroupResource::core("namespaces");
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        // Creating a namespace also creates its `default` ServiceAccount (see `Store::create`).
        store.create(&ns, "", json!({"metadata": {"name": name}}), &opts)?;
    }
    seed_rbac(store, &opts)?;
    store.create(
        &GroupResource::core("services"),
        "default",
        json!({"metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
               "spec": {"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"], "type": "ClusterIP",
                        "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]}}),
        &opts,
    )?;
    store.create(
        &GroupResource::core("endpoints"),
        "default",
        json!({"metadata": {"name": "kubernetes"},
               "subsets": [{"addresses": [{"ip": api_addr.ip().to_string()}],
                            "ports": [{"name": "https", "port": api_addr.port(), "protocol": "TCP"}]}]}),
        &opts,
    )?;
    if config.kube_proxy {
        seed_kube_proxy(store)?;
    }
    if let Some(version) = &config.inline_cilium {
        seed_inline_cilium(store, version)?;
    }
    for (i, (name, cp)) in node_names(config).into_iter().enumerate() {
        let ip = format!("10.5.0.{}", i + 2);
        store.create(
            &GroupResource::core("nodes"),
            "",
            node(&name, cp, &ip),
            &WriteOptions::manager("kubelet"),
        )?;
    }
    Ok(())
}

/// kube-proxy as Talos deploys it when `cluster.proxy.disabled` is not set: ServiceAccount and
/// DaemonSet `kube-system/kube-proxy` (host network, every node, iptables mode), created by Talos
/// (field manager `talos`). Its pods route Service IPs on their node once Ready
/// ([`crate::cluster::network`]).
pub fn seed_kube_proxy(store: &Store) -> Result<(), ApiError> {
    let opts = WriteOptions::manager("talos");
    store.create(
        &GroupResource::core("serviceaccounts"),
        "kube-system",
        json!({"metadata": {"name": "kube-proxy"}}),
        &opts,
    )?;
    let labels = json!({"k8s-app": "kube-proxy", "tier": "node"});
    let container = json!({"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy:v1.33.0",
        "command": ["/usr/local/bin/kube-proxy", "--cluster-cidr=10.244.0.0/16", "--hostname-override=$(NODE_NAME)",
            "--kubeconfig=/etc/kubernetes/kubeconfig", "--proxy-mode=iptables", "--conntrack-max-per-core=0"],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}],
        "securityContext": {"privileged": true}});
    store.create(
        &GroupResource::new("apps", "daemonsets"),
        "kube-system",
        json!({"metadata": {"name": "kube-proxy", "labels": labels},
            "spec": {"selector": {"matchLabels": {"k8s-app": "kube-proxy"}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
                "template": {"metadata": {"labels": labels},
                    "spec": {"hostNetwork": true, "priorityClassName": "system-node-critical",
                        "serviceAccountName": "kube-proxy", "tolerations": [{"operator": "Exists"}],
                        "containers": [container]}}}}),
        &opts,
    )?;
    Ok(())
}

/// Cilium as Talos installs it from `cluster.inlineManifests` (the `helm template` output of
/// the `cilium` chart with the Talos values, [`charts::talos_cilium_values`]): the chart's
/// objects in `kube-system`, created by Talos (field manager `talos`) without Helm's ownership
/// label/annotations and without a release record. The DaemonSet controller and kubelet then
/// run the agents as for a Helm install.
pub fn seed_inline_cilium(store: &Store, version: &str) -> Result<(), ApiError> {
    let chart = charts::Chart::from_reference("cilium", Some(version));
    let opts = WriteOptions::manager("talos");
    for o in chart.render("cilium", "kube-system", &charts::talos_cilium_values()) {
        let kind = o.get("kind").and_then(Value::as_str).unwrap_or("");
        let api_version = o.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let gr = match kind {
            "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding" => store
                .find_type(api_version, kind)
                .map(|t| t.group_resource())
                .ok_or_else(|| ApiError::bad_request(format!("no type for {kind}")))?,
            "ServiceAccount" => GroupResource::core("serviceaccounts"),
            "ConfigMap" => GroupResource::core("configmaps"),
            "Service" => GroupResource::core("services"),
            "DaemonSet" => GroupResource::new("apps", "daemonsets"),
            "Deployment" => GroupResource::new("apps", "deployments"),
            other => {
                return Err(ApiError::bad_request(format!(
                    "inline Cilium manifest: unexpected kind {other}"
                )));
            }
        };
        store.create(&gr, "kube-system", o, &opts)?;
    }
    Ok(())
}

/// The bootstrap RBAC policy's user-facing roles, as a real cluster has them (the aggregated
/// `admin`/`edit`/`view` roles with a representative subset of their aggregated rules).
fn seed_rbac(store: &Store, opts: &WriteOptions) -> Result<(), ApiError> {
    let roles = GroupResource::new("rbac.authorization.k8s.io", "clusterroles");
    let bindings = GroupResource::new("rbac.authorization.k8s.io", "clusterrolebindings");
    let meta = |name: &str| {
        json!({"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
               "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}})
    };
    let read = ["get", "list", "watch"];
    let write = ["create", "delete", "deletecollection", "patch", "update"];
    let all: Vec<&str> = read.iter().chain(write.iter()).copied().collect();
    let view_rules = json!([
        {"apiGroups": [""], "resources": ["configmaps", "endpoints", "persistentvolumeclaims",
            "persistentvolumeclaims/status", "pods", "replicationcontrollers", "replicationcontrollers/scale",
            "serviceaccounts", "services", "services/status", "bindings", "events", "limitranges",
            "namespaces/status", "pods/log", "pods/status", "replicationcontrollers/status",
            "resourcequotas", "resourcequotas/status", "namespaces"], "verbs": read},
        {"apiGroups": ["apps"], "resources": ["controllerrevisions", "daemonsets", "daemonsets/status",
            "deployments", "deployments/scale", "deployments/status", "replicasets", "replicasets/scale",
            "replicasets/status", "statefulsets", "statefulsets/scale", "statefulsets/status"], "verbs": read},
        {"apiGroups": ["batch"], "resources": ["cronjobs", "cronjobs/status", "jobs", "jobs/status"], "verbs": read},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": read},
    ]);
    let edit_rules = json!([
        {"apiGroups": [""], "resources": ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"], "verbs": all},
        {"apiGroups": [""], "resources": ["configmaps", "endpoints", "persistentvolumeclaims",
            "replicationcontrollers", "replicationcontrollers/scale", "secrets", "serviceaccounts",
            "services", "services/proxy"], "verbs": all},
        {"apiGroups": ["apps"], "resources": ["daemonsets", "deployments", "deployments/rollback",
            "deployments/scale", "replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale"], "verbs": all},
        {"apiGroups": ["batch"], "resources": ["cronjobs", "jobs"], "verbs": all},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": all},
    ]);
    let admin_rules = json!([
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings", "roles"], "verbs": all},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["localsubjectaccessreviews"], "verbs": ["create"]},
    ]);
    let concat = |sets: &[&serde_json::Value]| -> serde_json::Value {
        serde_json::Value::Array(
            sets.iter()
                .flat_map(|s| s.as_array().cloned().unwrap_or_default())
                .collect(),
        )
    };
    let aggregated = |name: &str, rules: serde_json::Value| {
        json!({"metadata": meta(name),
               "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {
                   format!("rbac.authorization.k8s.io/aggregate-to-{name}"): "true"}}]},
               "rules": rules})
    };
    let mut objects = vec![json!({"metadata": meta("cluster-admin"), "rules": [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
        {"nonResourceURLs": ["*"], "verbs": ["*"]},
    ]})];
    objects.push(aggregated(
        "admin",
        concat(&[&admin_rules, &edit_rules, &view_rules]),
    ));
    objects.push(aggregated("edit", concat(&[&edit_rules, &view_rules])));
    objects.push(aggregated("view", view_rules.clone()));
    for role in objects {
        store.create(&roles, "", role, opts)?;
    }
    store.create(
        &bindings,
        "",
        json!({"metadata": meta("cluster-admin"),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"}]}),
        opts,
    )?;
    Ok(())
}
