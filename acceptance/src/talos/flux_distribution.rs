//! The Flux distribution the real Flux Operator reads from its `--storage-path` (`/data`), written
//! by the project at run time from documented facts.
//!
//! Upstream's operator image copies its `config/data/` to `/data` (`COPY config/data/ /data/` in
//! flux-operator v0.59.0's Dockerfile); with `spec.distribution.artifact` unset the operator needs
//! nothing else (field notes §10). What it reads there (flux-operator v0.59.0
//! `internal/controller/fluxinstance_controller.go`, `internal/builder/`, `internal/entitlement/`):
//! - `flux-images/VERSION`: the newest Flux version stored, checked `>= 2.2.0` in a pod;
//! - `flux/vX.Y.Z/`: one directory per Flux version, matched against `spec.distribution.version`;
//!   in it one `<component>.yaml` per controller (its CRDs, ServiceAccount, Service, Deployment),
//!   `rbac.yaml` (copied by the builder into `roles/`, every `flux-system` replaced by the
//!   instance's namespace) and `policies.yaml` (with `spec.cluster.networkPolicy`);
//! - `flux-images/vX.Y.Z/<variant>.yaml`: a kustomize `images:` list per distribution variant
//!   (`upstream-alpine` for the default registry `ghcr.io/fluxcd`); without it the builder falls
//!   back to the images of the manifests.
//!
//! The operator JSON-patches each controller's `args` **by position** (`args/0` =
//! `--events-addr`, `args/1` = `--watch-all-namespaces`, `args/2` = `--log-level`, and for
//! source-controller and source-watcher `args/6` = `--storage-adv-addr`; notification-controller
//! has no `--events-addr`, so there `args/0` and `args/1`), so the argument order below is Flux
//! 2.9.5's (`fluxcd/flux2` `manifests/bases/*` on each controller's `config/manager`).
//!
//! The CRDs are the generated ones in `.tools/flux/crds/` (controller-gen on the Flux API Go
//! types, so their schema defaults are the real ones: source-controller relies on
//! `GitRepository.spec.timeout`'s). A CRD missing there is written without a schema (any object,
//! no defaults) and named in a warning.

use std::path::Path;

use serde_json::{Value, json};

use super::charts::to_yaml;

/// The Flux version of the distribution (as flux-operator v0.59.0 ships it).
pub const FLUX_VERSION: &str = "2.9.5";

/// A controller of the distribution.
struct Controller {
    name: &'static str,
    /// `ghcr.io/fluxcd/<name>` tag in Flux 2.9.5.
    tag: &'static str,
    /// The container's `args`, in upstream order (see the module docs).
    args: &'static [&'static str],
    /// `(name, containerPort)`, upstream order.
    ports: &'static [(&'static str, u16)],
    /// The readiness probe's `(path, port name)`.
    readiness: (&'static str, &'static str),
    /// `emptyDir` volumes `(name, mountPath)`, upstream order.
    volumes: &'static [(&'static str, &'static str)],
    termination_grace: u32,
    recreate: bool,
    cluster_critical: bool,
    /// The ClusterIP Services `(name, target port name)`, port 80.
    services: &'static [(&'static str, &'static str)],
    extra_env: &'static [(&'static str, &'static str)],
    /// The CRDs it owns: `(plural, group, kind, storage version)`.
    crds: &'static [(&'static str, &'static str, &'static str, &'static str)],
}

const EVENTS: &str = "--events-addr=http://notification-controller.flux-system.svc.cluster.local./";
const COMMON: [&str; 4] = [
    "--watch-all-namespaces",
    "--log-level=info",
    "--log-encoding=json",
    "--enable-leader-election",
];
const SOURCE: &str = "source.toolkit.fluxcd.io";
const IMAGE: &str = "image.toolkit.fluxcd.io";
const NOTIFICATION: &str = "notification.toolkit.fluxcd.io";

const CONTROLLERS: &[Controller] = &[
    Controller {
        name: "source-controller",
        tag: "v1.9.5",
        args: &[
            EVENTS,
            COMMON[0],
            COMMON[1],
            COMMON[2],
            COMMON[3],
            "--storage-path=/data",
            "--storage-adv-addr=source-controller.$(RUNTIME_NAMESPACE).svc.cluster.local.",
        ],
        ports: &[("http", 9090), ("http-prom", 8080), ("healthz", 9440)],
        readiness: ("/", "http"),
        volumes: &[("data", "/data"), ("tmp", "/tmp")],
        termination_grace: 10,
        recreate: true,
        cluster_critical: true,
        services: &[("source-controller", "http")],
        extra_env: &[("TUF_ROOT", "/tmp/.sigstore")],
        crds: &[
            ("buckets", SOURCE, "Bucket", "v1"),
            ("externalartifacts", SOURCE, "ExternalArtifact", "v1"),
            ("gitrepositories", SOURCE, "GitRepository", "v1"),
            ("helmcharts", SOURCE, "HelmChart", "v1"),
            ("helmrepositories", SOURCE, "HelmRepository", "v1"),
            ("ocirepositories", SOURCE, "OCIRepository", "v1"),
        ],
    },
    Controller {
        name: "kustomize-controller",
        tag: "v1.9.5",
        args: &[EVENTS, COMMON[0], COMMON[1], COMMON[2], COMMON[3]],
        ports: &[("http-prom", 8080), ("healthz", 9440)],
        readiness: ("/readyz", "healthz"),
        volumes: &[("temp", "/tmp")],
        termination_grace: 60,
        recreate: false,
        cluster_critical: true,
        services: &[],
        extra_env: &[],
        crds: &[(
            "kustomizations",
            "kustomize.toolkit.fluxcd.io",
            "Kustomization",
            "v1",
        )],
    },
    Controller {
        name: "helm-controller",
        tag: "v1.6.4",
        args: &[EVENTS, COMMON[0], COMMON[1], COMMON[2], COMMON[3]],
        ports: &[("http-prom", 8080), ("healthz", 9440)],
        readiness: ("/readyz", "healthz"),
        volumes: &[("temp", "/tmp")],
        termination_grace: 600,
        recreate: false,
        cluster_critical: true,
        services: &[],
        extra_env: &[],
        crds: &[(
            "helmreleases",
            "helm.toolkit.fluxcd.io",
            "HelmRelease",
            "v2",
        )],
    },
    Controller {
        name: "notification-controller",
        tag: "v1.9.4",
        args: &[COMMON[0], COMMON[1], COMMON[2], COMMON[3]],
        ports: &[
            ("http", 9090),
            ("http-webhook", 9292),
            ("http-prom", 8080),
            ("healthz", 9440),
        ],
        readiness: ("/readyz", "healthz"),
        volumes: &[("temp", "/tmp")],
        termination_grace: 10,
        recreate: false,
        cluster_critical: false,
        services: &[
            ("notification-controller", "http"),
            ("webhook-receiver", "http-webhook"),
        ],
        extra_env: &[],
        crds: &[
            ("alerts", NOTIFICATION, "Alert", "v1beta3"),
            ("providers", NOTIFICATION, "Provider", "v1beta3"),
            ("receivers", NOTIFICATION, "Receiver", "v1"),
        ],
    },
    Controller {
        name: "image-reflector-controller",
        tag: "v1.2.5",
        args: &[EVENTS, COMMON[0], COMMON[1], COMMON[2], COMMON[3]],
        ports: &[("http-prom", 8080), ("healthz", 9440)],
        readiness: ("/readyz", "healthz"),
        volumes: &[("temp", "/tmp"), ("data", "/data")],
        termination_grace: 10,
        recreate: false,
        cluster_critical: false,
        services: &[],
        extra_env: &[],
        crds: &[
            ("imagepolicies", IMAGE, "ImagePolicy", "v1"),
            ("imagerepositories", IMAGE, "ImageRepository", "v1"),
        ],
    },
    Controller {
        name: "image-automation-controller",
        tag: "v1.2.5",
        args: &[EVENTS, COMMON[0], COMMON[1], COMMON[2], COMMON[3]],
        ports: &[("http-prom", 8080), ("healthz", 9440)],
        readiness: ("/readyz", "healthz"),
        volumes: &[("temp", "/tmp")],
        termination_grace: 10,
        recreate: false,
        cluster_critical: false,
        services: &[],
        extra_env: &[],
        crds: &[(
            "imageupdateautomations",
            IMAGE,
            "ImageUpdateAutomation",
            "v1",
        )],
    },
    Controller {
        name: "source-watcher",
        tag: "v2.2.4",
        args: &[
            EVENTS,
            COMMON[0],
            COMMON[1],
            COMMON[2],
            COMMON[3],
            "--storage-path=/data",
            "--storage-adv-addr=source-watcher.$(RUNTIME_NAMESPACE).svc.cluster.local.",
        ],
        ports: &[("http", 9090), ("http-prom", 8080), ("healthz", 9440)],
        readiness: ("/", "http"),
        volumes: &[("data", "/data"), ("tmp", "/tmp")],
        termination_grace: 10,
        recreate: true,
        cluster_critical: true,
        services: &[("source-watcher", "http")],
        extra_env: &[],
        crds: &[(
            "artifactgenerators",
            "source.extensions.fluxcd.io",
            "ArtifactGenerator",
            "v1beta1",
        )],
    },
];

/// The API groups of every controller, in the order of the `crd-controller` ClusterRole.
const GROUPS: &[&str] = &[
    SOURCE,
    "kustomize.toolkit.fluxcd.io",
    "helm.toolkit.fluxcd.io",
    NOTIFICATION,
    IMAGE,
    "source.extensions.fluxcd.io",
];

/// The names of the controllers the distribution has (the FluxInstance's `components`).
pub fn components() -> impl Iterator<Item = &'static str> {
    CONTROLLERS.iter().map(|c| c.name)
}

/// The image a controller runs, `ghcr.io/fluxcd/<name>:<tag>`.
pub fn image(component: &str) -> Option<String> {
    CONTROLLERS
        .iter()
        .find(|c| c.name == component)
        .map(|c| format!("ghcr.io/fluxcd/{}:{}", c.name, c.tag))
}

fn component_labels(name: &str) -> Value {
    json!({"app.kubernetes.io/component": name, "app.kubernetes.io/part-of": "flux"})
}

fn service_account(c: &Controller) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"labels": component_labels(c.name), "name": c.name},
    })
}

fn services(c: &Controller) -> Vec<Value> {
    c.services
        .iter()
        .map(|(name, target)| {
            let mut labels = component_labels(c.name);
            labels["control-plane"] = json!("controller");
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"labels": labels, "name": name},
                "spec": {
                    "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": target}],
                    "selector": {"app": c.name},
                    "type": "ClusterIP",
                },
            })
        })
        .collect()
}

fn deployment(c: &Controller) -> Value {
    let mut labels = component_labels(c.name);
    labels["control-plane"] = json!("controller");
    let mut pod_labels = component_labels(c.name);
    pod_labels["app"] = json!(c.name);
    let mut env = vec![json!({
        "name": "RUNTIME_NAMESPACE",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
    })];
    env.extend(
        c.extra_env
            .iter()
            .map(|(k, v)| json!({"name": k, "value": v})),
    );
    env.push(json!({
        "name": "GOMEMLIMIT",
        "valueFrom": {"resourceFieldRef": {"containerName": "manager", "resource": "limits.memory"}},
    }));
    let (cpu_request, memory_request) = match c.name {
        "source-controller" => ("50m", "64Mi"),
        _ => ("100m", "64Mi"),
    };
    let mut spec = json!({
        "containers": [{
            "args": c.args,
            "env": env,
            "image": format!("fluxcd/{}:{}", c.name, c.tag),
            "imagePullPolicy": "IfNotPresent",
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": "healthz"}},
            "name": "manager",
            "ports": c.ports.iter().map(|(name, port)| json!({"containerPort": port, "name": name, "protocol": "TCP"})).collect::<Vec<_>>(),
            "readinessProbe": {"httpGet": {"path": c.readiness.0, "port": c.readiness.1}},
            "resources": {
                "limits": {"cpu": "1000m", "memory": "1Gi"},
                "requests": {"cpu": cpu_request, "memory": memory_request},
            },
            "securityContext": {
                "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"]},
                "readOnlyRootFilesystem": true,
                "runAsNonRoot": true,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "volumeMounts": c.volumes.iter().map(|(name, path)| json!({"mountPath": path, "name": name})).collect::<Vec<_>>(),
        }],
        "securityContext": {"fsGroup": 1337},
        "serviceAccountName": c.name,
        "terminationGracePeriodSeconds": c.termination_grace,
        "volumes": c.volumes.iter().map(|(name, _)| json!({"emptyDir": {}, "name": name})).collect::<Vec<_>>(),
    });
    if c.cluster_critical {
        spec["priorityClassName"] = json!("system-cluster-critical");
    }
    let mut deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"labels": labels, "name": c.name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": c.name}},
            "template": {
                "metadata": {
                    "annotations": {"prometheus.io/port": "8080", "prometheus.io/scrape": "true"},
                    "labels": pod_labels,
                },
                "spec": spec,
            },
        },
    });
    if c.recreate {
        deployment["spec"]["strategy"] = json!({"type": "Recreate"});
    }
    deployment
}

/// A CRD without a schema, for one the generated set lacks.
fn schemaless_crd(controller: &str, plural: &str, group: &str, kind: &str, version: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"labels": component_labels(controller), "name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "names": {
                "kind": kind,
                "listKind": format!("{kind}List"),
                "plural": plural,
                "singular": kind.to_lowercase(),
            },
            "scope": "Namespaced",
            "versions": [{
                "name": version,
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}},
            }],
        },
    })
}

/// The generated CRDs in `dir` (every document of every `*.yaml`), by name.
pub fn read_crds(dir: &Path) -> std::collections::BTreeMap<String, Value> {
    let mut crds = std::collections::BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return crds;
    };
    let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        for doc in text.split("\n---") {
            let doc = doc.trim_start_matches("---");
            if doc.trim().is_empty() {
                continue;
            }
            match serde_saphyr::from_str::<Value>(doc) {
                Ok(v) if v["kind"] == "CustomResourceDefinition" => {
                    if let Some(name) = v["metadata"]["name"].as_str() {
                        crds.insert(name.to_owned(), v);
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(file = %path.display(), error = %e, "unreadable CRD file"),
            }
        }
    }
    crds
}

fn documents(docs: &[Value]) -> String {
    docs.iter()
        .map(|d| format!("---\n{}", to_yaml(d)))
        .collect()
}

fn component_file(c: &Controller, generated: &std::collections::BTreeMap<String, Value>) -> String {
    let mut docs = Vec::new();
    for (plural, group, kind, version) in c.crds {
        let name = format!("{plural}.{group}");
        match generated.get(&name) {
            Some(crd) => {
                let mut crd = crd.clone();
                let labels = &mut crd["metadata"]["labels"];
                if !labels.is_object() {
                    *labels = json!({});
                }
                labels["app.kubernetes.io/component"] = json!(c.name);
                labels["app.kubernetes.io/part-of"] = json!("flux");
                docs.push(crd);
            }
            None => {
                tracing::warn!(crd = %name, "no generated CRD: writing one without a schema (no defaults)");
                docs.push(schemaless_crd(c.name, plural, group, kind, version));
            }
        }
    }
    docs.push(service_account(c));
    docs.extend(services(c));
    docs.push(deployment(c));
    documents(&docs)
}

fn rbac_file() -> String {
    let all = |group: &str| json!({"apiGroups": [group], "resources": ["*"], "verbs": ["*"]});
    let mut rules: Vec<Value> = GROUPS.iter().map(|g| all(g)).collect();
    rules.extend([
        json!({"apiGroups": [""], "resources": ["namespaces", "secrets", "configmaps", "serviceaccounts"], "verbs": ["get", "list", "watch"]}),
        json!({"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}),
        json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}),
        json!({"apiGroups": [""], "resources": ["configmaps/status"], "verbs": ["get", "update", "patch"]}),
        json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}),
        json!({"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}),
        json!({"nonResourceURLs": ["/livez/ping"], "verbs": ["head"]}),
    ]);
    let aggregate = |view: bool| {
        let mut labels = json!({
            "rbac.authorization.k8s.io/aggregate-to-admin": "true",
            "rbac.authorization.k8s.io/aggregate-to-edit": "true",
        });
        if view {
            labels["rbac.authorization.k8s.io/aggregate-to-view"] = json!("true");
        }
        let verbs: &[&str] = if view {
            &["get", "list", "watch"]
        } else {
            &["create", "delete", "deletecollection", "patch", "update"]
        };
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"labels": labels, "name": if view { "flux-view" } else { "flux-edit" }},
            "rules": [{
                "apiGroups": [NOTIFICATION, SOURCE, "source.extensions.fluxcd.io", "helm.toolkit.fluxcd.io", IMAGE, "kustomize.toolkit.fluxcd.io"],
                "resources": ["*"],
                "verbs": verbs,
            }],
        })
    };
    let subject =
        |name: &str| json!({"kind": "ServiceAccount", "name": name, "namespace": "flux-system"});
    let docs = [
        json!({
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "critical-pods"},
            "spec": {
                "hard": {"pods": "1000"},
                "scopeSelector": {"matchExpressions": [{
                    "operator": "In",
                    "scopeName": "PriorityClass",
                    "values": ["system-node-critical", "system-cluster-critical"],
                }]},
            },
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "crd-controller"},
            "rules": rules,
        }),
        aggregate(false),
        aggregate(true),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "cluster-reconciler"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [subject("kustomize-controller"), subject("helm-controller")],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "crd-controller"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "crd-controller"},
            "subjects": CONTROLLERS.iter().map(|c| subject(c.name)).collect::<Vec<_>>(),
        }),
    ];
    documents(&docs)
}

fn policies_file() -> String {
    let policy = |name: &str, spec: Value| {
        json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": name},
            "spec": spec,
        })
    };
    documents(&[
        policy(
            "allow-egress",
            json!({
                "egress": [{}],
                "ingress": [{"from": [{"podSelector": {}}]}],
                "podSelector": {},
                "policyTypes": ["Ingress", "Egress"],
            }),
        ),
        policy(
            "allow-scraping",
            json!({
                "ingress": [{"from": [{"namespaceSelector": {}}], "ports": [{"port": 8080, "protocol": "TCP"}]}],
                "podSelector": {},
                "policyTypes": ["Ingress"],
            }),
        ),
        policy(
            "allow-webhooks",
            json!({
                "ingress": [{"from": [{"namespaceSelector": {}}], "ports": [{"port": 9292, "protocol": "TCP"}]}],
                "podSelector": {"matchLabels": {"app": "notification-controller"}},
                "policyTypes": ["Ingress"],
            }),
        ),
    ])
}

fn images_file() -> String {
    let images: Vec<Value> = CONTROLLERS
        .iter()
        .map(|c| json!({"name": format!("ghcr.io/fluxcd/{}", c.name), "newTag": c.tag}))
        .collect();
    to_yaml(&json!({ "images": images }))
}

/// Writes the distribution into `dir` (the operator's `--storage-path`), its CRDs from
/// `crds_dir`. Idempotent: an existing, complete directory is kept.
///
/// # Errors
/// A file that cannot be written.
pub fn write(dir: &Path, crds_dir: &Path) -> std::io::Result<()> {
    let version_file = dir.join("flux-images/VERSION");
    if version_file.is_file() {
        return Ok(());
    }
    let version = format!("v{FLUX_VERSION}");
    let generated = read_crds(crds_dir);
    let manifests = dir.join("flux").join(&version);
    std::fs::create_dir_all(&manifests)?;
    for c in CONTROLLERS {
        std::fs::write(
            manifests.join(format!("{}.yaml", c.name)),
            component_file(c, &generated),
        )?;
    }
    std::fs::write(manifests.join("rbac.yaml"), rbac_file())?;
    std::fs::write(manifests.join("policies.yaml"), policies_file())?;
    let images = dir.join("flux-images").join(&version);
    std::fs::create_dir_all(&images)?;
    std::fs::write(images.join("upstream-alpine.yaml"), images_file())?;
    // Last: its presence says the directory is complete.
    std::fs::write(version_file, format!("{version}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(text: &str) -> Vec<Value> {
        text.split("---\n")
            .filter(|d| !d.trim().is_empty())
            .map(|d| serde_saphyr::from_str::<Value>(d).expect("yaml"))
            .collect()
    }

    #[test]
    fn the_operator_patches_controller_args_by_position() {
        for c in CONTROLLERS {
            let d = deployment(c);
            let args = d["spec"]["template"]["spec"]["containers"][0]["args"]
                .as_array()
                .expect("args");
            let at = |i: usize| args[i].as_str().unwrap_or("");
            if c.name == "notification-controller" {
                assert!(at(0).starts_with("--watch-all-namespaces"));
                assert!(at(1).starts_with("--log-level="));
                continue;
            }
            assert!(at(0).starts_with("--events-addr="), "{}", c.name);
            assert!(at(1).starts_with("--watch-all-namespaces"), "{}", c.name);
            assert!(at(2).starts_with("--log-level="), "{}", c.name);
            if matches!(c.name, "source-controller" | "source-watcher") {
                assert!(at(6).starts_with("--storage-adv-addr="), "{}", c.name);
            }
        }
    }

    #[test]
    fn the_distribution_is_written_with_its_version_and_schemaless_fallbacks() {
        let dir = tempfile::tempdir().expect("tmp");
        let crds = tempfile::tempdir().expect("tmp");
        std::fs::write(
            crds.path().join("x.yaml"),
            "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gitrepositories.source.toolkit.fluxcd.io\nspec:\n  group: source.toolkit.fluxcd.io\n  versions:\n  - name: v1\n    schema:\n      openAPIV3Schema:\n        properties:\n          spec:\n            properties:\n              timeout:\n                default: 60s\n                type: string\n",
        )
        .expect("write");
        write(dir.path(), crds.path()).expect("write");
        let version = std::fs::read_to_string(dir.path().join("flux-images/VERSION")).expect("v");
        assert_eq!(version.trim(), "v2.9.5");
        let source = std::fs::read_to_string(dir.path().join("flux/v2.9.5/source-controller.yaml"))
            .expect("source");
        let source = docs(&source);
        let git = source
            .iter()
            .find(|d| d["metadata"]["name"] == "gitrepositories.source.toolkit.fluxcd.io")
            .expect("git CRD");
        assert_eq!(
            git.pointer(
                "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/timeout/default"
            ),
            Some(&json!("60s"))
        );
        assert_eq!(
            git["metadata"]["labels"]["app.kubernetes.io/component"],
            "source-controller"
        );
        let service = source
            .iter()
            .find(|d| d["kind"] == "Service")
            .expect("service");
        assert_eq!(service["spec"]["ports"][0]["port"], 80);
        assert_eq!(service["spec"]["ports"][0]["targetPort"], "http");
        let buckets = source
            .iter()
            .find(|d| d["metadata"]["name"] == "buckets.source.toolkit.fluxcd.io")
            .expect("fallback CRD");
        assert_eq!(buckets["spec"]["names"]["kind"], "Bucket");
        let rbac =
            docs(&std::fs::read_to_string(dir.path().join("flux/v2.9.5/rbac.yaml")).expect("rbac"));
        assert!(
            rbac.iter()
                .any(|d| d["metadata"]["name"] == "cluster-reconciler")
        );
        let images =
            std::fs::read_to_string(dir.path().join("flux-images/v2.9.5/upstream-alpine.yaml"))
                .expect("images");
        assert!(images.contains("ghcr.io/fluxcd/kustomize-controller"));
    }
}
