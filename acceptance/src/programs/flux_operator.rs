//! The Flux Operator (`ghcr.io/controlplaneio-fluxcd/flux-operator`). It runs in a normal pod
//! (no hostNetwork), so it only starts once the node's pod network exists, and connects through
//! the `kubernetes` Service. Once running it serves the Flux CRDs (`gitrepositories`,
//! `ocirepositories`, `helmrepositories`, `buckets`.source.toolkit.fluxcd.io,
//! `kustomizations.kustomize.toolkit.fluxcd.io`, `helmreleases.helm.toolkit.fluxcd.io`) and
//! reconciles every FluxInstance:
//! - Deployments for `spec.components` (default: source, kustomize, helm, notification
//!   controllers) in the instance's namespace, labelled `app.kubernetes.io/managed-by:
//!   flux-operator`;
//! - with `spec.sync`: the source (`GitRepository`/`OCIRepository`/`Bucket`) and the root
//!   `Kustomization`, both named after the namespace (or `spec.sync.name`);
//! - status: `Ready=Unknown` (`Progressing`) until the controllers are available, then
//!   `Ready=True` (`ReconciliationSucceeded`). The source's own status (normally
//!   source-controller's job) is set here too: a sync URL containing `unreachable`, or the
//!   annotation `talos-sim.dev/unreachable: "true"` on the FluxInstance, makes the fetch fail:
//!   source `Ready=False` (`GitOperationFailed`), FluxInstance `Ready=False` (`ArtifactFailed`).

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::{Exit, Program, ProgramContext, ProgramFuture};
use crate::cluster::obj;
use crate::store::{ApiError, GroupResource, ListOptions, Patch, Store, StoreEvent, WriteOptions};

/// Annotation on a FluxInstance making its sync source unreachable.
pub const UNREACHABLE_ANNOTATION: &str = "talos-sim.dev/unreachable";
const DISTRIBUTION: &str = "v2.7.3";

/// See the module docs.
pub struct FluxOperator;

impl Program for FluxOperator {
    fn run(&self, ctx: ProgramContext) -> ProgramFuture {
        Box::pin(async move {
            let url = format!("{}/version", ctx.endpoint().url());
            if let Err(e) = ctx.dial_api().await {
                ctx.out(&format!("{{\"level\":\"error\",\"msg\":\"unable to get kubernetes version\",\"error\":\"Get \\\"{url}\\\": {e}\"}}"));
                return Exit::code(1);
            }
            if let Err(e) = install_flux_crds(&ctx.store) {
                ctx.out(&format!(
                    "{{\"level\":\"error\",\"msg\":\"failed to install CRDs\",\"error\":\"{e}\"}}"
                ));
                return Exit::code(1);
            }
            ctx.set_ready(true);
            ctx.out("{\"level\":\"info\",\"msg\":\"Starting Controller\",\"controller\":\"fluxinstance\"}");
            let mut changes = ctx.store.subscribe();
            loop {
                reconcile_all(&ctx);
                next_change(&ctx, &mut changes).await;
            }
        })
    }
}

/// Waits for a change to a FluxInstance or a Deployment (what the reconcile reads), or the
/// operator's resync (10 s scaled), like a controller-runtime manager with watches.
async fn next_change(ctx: &ProgramContext, changes: &mut broadcast::Receiver<StoreEvent>) {
    let watched = [instances(), obj::deployments()];
    let changed = async {
        loop {
            match changes.recv().await {
                Ok(ev) if watched.contains(&ev.gr) => return,
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => return,
                Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
            }
        }
    };
    let _ = tokio::time::timeout(ctx.config.pace.scale(Duration::from_secs(10)), changed).await;
    // Debounce a burst (e.g. the status writes of a rollout).
    ctx.sleep(Duration::from_millis(100)).await;
    while changes.try_recv().is_ok() {}
}

fn crd(group: &str, plural: &str, kind: &str, versions: &[&str]) -> Value {
    let vs: Vec<Value> = versions.iter().enumerate().map(|(i, v)| json!({"name": v, "served": true, "storage": i == 0,
        "subresources": {"status": {}}, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})).collect();
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": format!("{plural}.{group}"),
        "labels": {"app.kubernetes.io/part-of": "flux", "app.kubernetes.io/managed-by": "flux-operator"}},
        "spec": {"group": group, "scope": "Namespaced", "versions": vs,
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")}}})
}

fn install_flux_crds(store: &Store) -> Result<(), ApiError> {
    let gr = GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions");
    for c in [
        crd(
            "source.toolkit.fluxcd.io",
            "gitrepositories",
            "GitRepository",
            &["v1"],
        ),
        crd(
            "source.toolkit.fluxcd.io",
            "ocirepositories",
            "OCIRepository",
            &["v1", "v1beta2"],
        ),
        crd(
            "source.toolkit.fluxcd.io",
            "helmrepositories",
            "HelmRepository",
            &["v1"],
        ),
        crd("source.toolkit.fluxcd.io", "buckets", "Bucket", &["v1"]),
        crd(
            "kustomize.toolkit.fluxcd.io",
            "kustomizations",
            "Kustomization",
            &["v1"],
        ),
        crd(
            "helm.toolkit.fluxcd.io",
            "helmreleases",
            "HelmRelease",
            &["v2"],
        ),
    ] {
        match store.create(&gr, "", c, &obj::manager("flux-operator")) {
            Err(e) if e.code != 409 => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

fn instances() -> GroupResource {
    GroupResource::new("fluxcd.controlplane.io", "fluxinstances")
}

fn reconcile_all(ctx: &ProgramContext) {
    let Ok(list) = ctx.store.list(&instances(), None, &ListOptions::default()) else {
        return;
    };
    for fi in list.items.iter().filter(|f| !obj::is_deleting(f)) {
        if let Err(e) = reconcile(&ctx.store, fi) {
            ctx.out(&format!("{{\"level\":\"error\",\"msg\":\"Reconciler error\",\"name\":\"{}\",\"error\":\"{e}\"}}", obj::name(fi)));
        }
    }
}

fn apply(store: &Store, gr: &GroupResource, ns: &str, o: Value) -> Result<Value, ApiError> {
    let opts = WriteOptions {
        field_manager: Some("flux-operator".into()),
        force: true,
        dry_run: false,
    };
    store.patch(
        gr,
        ns,
        obj::name(&o).to_string().as_str(),
        Patch::Apply(o),
        &opts,
    )
}

fn component_deployment(fi: &Value, component: &str) -> Value {
    let ns = obj::namespace(fi);
    let registry = match obj::s(fi, "/spec/distribution/registry") {
        "" => "ghcr.io/fluxcd",
        r => r,
    };
    let labels = json!({"app": component, "app.kubernetes.io/component": component, "app.kubernetes.io/instance": ns,
        "app.kubernetes.io/managed-by": "flux-operator", "app.kubernetes.io/part-of": "flux",
        "fluxcd.controlplane.io/name": obj::name(fi), "fluxcd.controlplane.io/namespace": ns});
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": component, "namespace": ns, "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": component}},
            "template": {"metadata": {"labels": {"app": component}},
                "spec": {"serviceAccountName": component, "containers": [{"name": "manager", "image": format!("{registry}/{component}:v1.7.0"),
                    "args": ["--events-addr=", "--watch-all-namespaces=true", "--log-level=info"],
                    "readinessProbe": {"httpGet": {"path": "/readyz", "port": "healthz"}}}]}}}})
}

fn components(fi: &Value) -> Vec<String> {
    let listed: Vec<String> = obj::arr(fi, "/spec/components")
        .iter()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect();
    if listed.is_empty() {
        [
            "source-controller",
            "kustomize-controller",
            "helm-controller",
            "notification-controller",
        ]
        .map(String::from)
        .to_vec()
    } else {
        listed
    }
}

fn reconcile(store: &Store, fi: &Value) -> Result<(), ApiError> {
    let ns = obj::namespace(fi);
    let comps = components(fi);
    let mut all_ready = true;
    for c in &comps {
        // Each controller runs as its own ServiceAccount, installed with it (as in Flux's
        // manifests); the pods' admission needs it to exist.
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": c, "namespace": ns, "labels": {"app.kubernetes.io/component": c,
                "app.kubernetes.io/instance": ns, "app.kubernetes.io/part-of": "flux"}}});
        apply(store, &GroupResource::core("serviceaccounts"), ns, sa)?;
        let live = apply(store, &obj::deployments(), ns, component_deployment(fi, c))?;
        all_ready &=
            super::manifests::workload_ready(&live, "/status/availableReplicas", "/spec/replicas");
    }
    let mut conds = obj::arr(fi, "/status/conditions").to_vec();
    let sync_failure = if all_ready { sync(store, fi)? } else { None };
    match (all_ready, sync_failure) {
        (false, _) => obj::set_condition(
            &mut conds,
            "Ready",
            "Unknown",
            "Progressing",
            "Reconciliation in progress",
        ),
        (true, Some(msg)) => {
            obj::set_condition(&mut conds, "Ready", "False", "ArtifactFailed", &msg)
        }
        (true, None) => obj::set_condition(
            &mut conds,
            "Ready",
            "True",
            "ReconciliationSucceeded",
            "Reconciliation finished",
        ),
    }
    for c in conds.iter_mut().filter_map(Value::as_object_mut) {
        c.remove("lastProbeTime");
        c.insert(
            "observedGeneration".into(),
            json!(obj::i64_at(fi, "/metadata/generation")),
        );
    }
    let registry = match obj::s(fi, "/spec/distribution/registry") {
        "" => "ghcr.io/fluxcd",
        r => r,
    };
    let status = json!({"status": {"conditions": conds, "observedGeneration": obj::i64_at(fi, "/metadata/generation"),
        "lastAttemptedRevision": format!("{DISTRIBUTION}@sha256:{}", "0".repeat(64)),
        "lastAppliedRevision": format!("{DISTRIBUTION}@sha256:{}", "0".repeat(64)),
        "components": comps.iter().map(|c| json!({"name": c, "repository": format!("{registry}/{c}"), "tag": "v1.7.0"})).collect::<Vec<_>>()}});
    store.patch_status(
        &instances(),
        ns,
        obj::name(fi),
        Patch::Merge(status),
        &obj::manager("flux-operator"),
    )?;
    Ok(())
}

/// Creates the sync source and root Kustomization; the fetch failure message, if any.
fn sync(store: &Store, fi: &Value) -> Result<Option<String>, ApiError> {
    let Some(spec) = fi.pointer("/spec/sync").filter(|s| s.is_object()) else {
        return Ok(None);
    };
    let ns = obj::namespace(fi);
    let name = match obj::s(spec, "/name") {
        "" => ns.to_string(),
        n => n.to_string(),
    };
    let kind = match obj::s(spec, "/kind") {
        "" => "GitRepository",
        k => k,
    };
    let url = obj::s(spec, "/url");
    let reference = obj::s(spec, "/ref");
    let (gr, api_version) = match kind {
        "OCIRepository" => (
            GroupResource::new("source.toolkit.fluxcd.io", "ocirepositories"),
            "source.toolkit.fluxcd.io/v1",
        ),
        "Bucket" => (
            GroupResource::new("source.toolkit.fluxcd.io", "buckets"),
            "source.toolkit.fluxcd.io/v1",
        ),
        _ => (
            GroupResource::new("source.toolkit.fluxcd.io", "gitrepositories"),
            "source.toolkit.fluxcd.io/v1",
        ),
    };
    let interval = match obj::s(spec, "/interval") {
        "" => "1m",
        i => i,
    };
    let mut source_spec = json!({"interval": interval, "url": url, "ref": {"name": reference}});
    if let Some(secret) = spec.get("pullSecret").and_then(Value::as_str) {
        source_spec["secretRef"] = json!({"name": secret});
    }
    let labels = json!({"app.kubernetes.io/managed-by": "flux-operator", "fluxcd.controlplane.io/name": obj::name(fi), "fluxcd.controlplane.io/namespace": ns});
    let source = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": source_spec});
    let live_source = apply(store, &gr, ns, source)?;
    let ks = json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"interval": "10m", "path": obj::s(spec, "/path"), "prune": true, "sourceRef": {"kind": kind, "name": name}}});
    let ks_gr = GroupResource::new("kustomize.toolkit.fluxcd.io", "kustomizations");
    let live_ks = apply(store, &ks_gr, ns, ks)?;
    let unreachable = url.contains("unreachable")
        || obj::s(fi, "/metadata/annotations/talos-sim.dev~1unreachable") == "true";
    let revision = format!(
        "{}@sha1:{}",
        if reference.is_empty() {
            "refs/heads/main"
        } else {
            reference
        },
        "5d4a0c7e".repeat(5)
    );
    let (ready, reason, message) = if unreachable {
        let host = url
            .split("://")
            .nth(1)
            .unwrap_or(url)
            .split(['/', ':', '@'])
            .next()
            .unwrap_or("");
        (
            "False",
            "GitOperationFailed",
            format!(
                "failed to checkout and determine revision: unable to clone '{url}': dial tcp: lookup {host} on 10.96.0.10:53: read udp: i/o timeout"
            ),
        )
    } else {
        (
            "True",
            "Succeeded",
            format!("stored artifact for revision '{revision}'"),
        )
    };
    let mut conds = obj::arr(&live_source, "/status/conditions").to_vec();
    obj::set_condition(&mut conds, "Ready", ready, reason, &message);
    let _ = store.patch_status(
        &gr,
        ns,
        &name,
        Patch::Merge(json!({"status": {"conditions": conds}})),
        &obj::manager("source-controller"),
    );
    let mut ks_conds = obj::arr(&live_ks, "/status/conditions").to_vec();
    match unreachable {
        true => obj::set_condition(
            &mut ks_conds,
            "Ready",
            "False",
            "ArtifactFailed",
            "Source artifact not found, retrying in 30s",
        ),
        false => obj::set_condition(
            &mut ks_conds,
            "Ready",
            "True",
            "ReconciliationSucceeded",
            &format!("Applied revision: {revision}"),
        ),
    }
    let _ = store.patch_status(
        &ks_gr,
        ns,
        &name,
        Patch::Merge(json!({"status": {"conditions": ks_conds}})),
        &obj::manager("kustomize-controller"),
    );
    Ok(unreachable.then(|| format!("{kind}/{ns}/{name} failed: {message}")))
}
