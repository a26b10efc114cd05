//! The charts the simulated Helm knows, rendered from values into objects:
//! - `cilium` ([`cilium`], [`cilium_components`]): what the real chart renders for each version
//!   we accept (1.16 to 1.18 and on): the agent DaemonSet `cilium`, the `cilium-envoy` DaemonSet
//!   (by default from 1.16), Deployment `cilium-operator` (2 replicas, one per node), Hubble
//!   relay and UI with their Services when enabled, the cluster-mesh API server when enabled.
//! - `flux-operator`: CRDs `fluxinstances`/`fluxreports.fluxcd.controlplane.io`, Deployment
//!   `flux-operator` (not hostNetwork: it needs the pod network), ServiceAccount, Service.
//! - anything else: a marker ConfigMap `<release>-rendered` holding the values.

pub mod cilium;
pub mod cilium_components;

use serde_json::{Value, json};

pub use cilium::talos_cilium_values;

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
            "cilium" => cilium::render(self, namespace, vals),
            "flux-operator" => flux_operator(self, release, namespace, vals),
            _ => vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("{release}-rendered"), "namespace": namespace},
                "data": {"chart": self.name, "version": self.version, "values.json": vals.to_string()}})],
        }
    }
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
