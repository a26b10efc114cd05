//! The real Flux Operator (v0.59.0) and Flux's source-controller and kustomize-controller
//! (v1.9.5) as their pods' programs: the flux-operator chart 0.59.0 installed by the real Helm,
//! a FluxInstance `flux` reconciled by the real operator from the distribution the project
//! writes at its `/data`, the controllers running as processes named like upstream's binaries.
//! Only the FluxInstance named `flux` in the operator's namespace is reconciled: another name is
//! refused by the API (the generated CRD's validation rule: "the only accepted name for a
//! FluxInstance is 'flux'"), `flux` in another namespace is ignored by the operator.
//!
//! Skipped (with a message) where `scripts/install-tools.sh` has not built the programs into
//! `.tools/flux/`.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, LogParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use talosboot::cluster::helm::install::ChartInstall;

use super::cilium::{cilium_chart, install};
use super::common::{self, eventually};

const NS: &str = "flux-system";
const PROGRAMS: [&str; 3] = ["flux-operator", "source-controller", "kustomize-controller"];

fn flux_tools() -> Option<std::path::PathBuf> {
    let dir = talos_sim::talos::tools::root().join("flux");
    let missing: Vec<&str> = PROGRAMS
        .iter()
        .copied()
        .filter(|p| !dir.join(p).is_file())
        .collect();
    if missing.is_empty() {
        Some(dir)
    } else {
        // Not a skip: scripts/install-tools.sh builds them, and a suite without them would pass
        // while proving nothing about the real programs.
        panic!(
            "{} not built in {}: run scripts/install-tools.sh",
            missing.join(", "),
            dir.display()
        );
    }
}

fn instances(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("fluxcd.controlplane.io", "v1", "FluxInstance");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "fluxinstances");
    Api::namespaced_with(client.clone(), ns, &resource)
}

fn instance(name: &str, ns: &str) -> DynamicObject {
    common::from_json(json!({
        "apiVersion": "fluxcd.controlplane.io/v1",
        "kind": "FluxInstance",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "distribution": {"version": "2.x", "registry": "ghcr.io/fluxcd"},
            "components": ["source-controller", "kustomize-controller"],
        },
    }))
}

fn ready(obj: &DynamicObject) -> Option<(String, String, String)> {
    let conditions = obj.data.pointer("/status/conditions")?.as_array()?;
    let c = conditions.iter().find(|c| c["type"] == "Ready")?;
    let s = |k: &str| c[k].as_str().unwrap_or("").to_owned();
    Some((s("status"), s("reason"), s("message")))
}

/// The processes of this machine whose program (argv\[0\]'s file name) is `name`: their RSS in
/// KiB.
fn processes(name: &str) -> Vec<(u32, u64)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
        let argv0 = String::from_utf8_lossy(argv0);
        if argv0.rsplit('/').next() != Some(name) {
            continue;
        }
        let rss = std::fs::read_to_string(entry.path().join("status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse().ok())
            })
            .unwrap_or(0);
        found.push((pid, rss));
    }
    found
}

/// Every pod in [`NS`] with its phase and its containers' waiting or terminated reasons.
async fn pod_summary(client: &kube::Client) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let Ok(list) = pods.list(&ListParams::default()).await else {
        return "(no pod list)".into();
    };
    list.items
        .iter()
        .map(|p| {
            let status = p.status.clone().unwrap_or_default();
            let containers = status
                .container_statuses
                .unwrap_or_default()
                .iter()
                .map(|c| format!("{}={:?}", c.name, c.state))
                .collect::<Vec<_>>()
                .join(",");
            format!(
                "{} {} {containers}",
                p.metadata.name.clone().unwrap_or_default(),
                status.phase.unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn operator_log(client: &kube::Client) -> String {
    pod_logs(client, "app.kubernetes.io/name=flux-operator").await
}

/// The logs of the pods `selector` selects in [`NS`].
async fn pod_logs(client: &kube::Client, selector: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let list = pods
        .list(&ListParams::default().labels(selector))
        .await
        .expect("pods");
    let mut log = String::new();
    for pod in list.items {
        let name = pod.metadata.name.unwrap_or_default();
        log.push_str(
            &pods
                .logs(&name, &LogParams::default())
                .await
                .unwrap_or_else(|e| format!("(no log: {e})")),
        );
    }
    log
}

#[tokio::test(flavor = "multi_thread")]
async fn the_real_flux_operator_reconciles_the_flux_instance_named_flux_with_real_controllers() {
    if flux_tools().is_none() {
        return;
    }
    let (_cluster, client) = common::start().await;
    install(&client, &cilium_chart("1.18.4")).await;
    let started = Instant::now();
    install(
        &client,
        &ChartInstall {
            release: "flux-operator".into(),
            namespace: NS.into(),
            repository: Some("oci://ghcr.io/controlplaneio-fluxcd/charts".into()),
            chart: "flux-operator".into(),
            version: "0.59.0".into(),
            create_namespace: true,
            ..Default::default()
        },
    )
    .await;
    // The chart's CRDs are the generated ones: the schema defaults the operator relies on.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let crd = crds
        .get("fluxinstances.fluxcd.controlplane.io")
        .await
        .expect("the FluxInstance CRD");
    let schema = serde_json::to_value(&crd.spec.versions[0].schema).expect("schema");
    assert_eq!(
        schema.pointer(
            "/openAPIV3Schema/properties/spec/properties/sync/properties/interval/default"
        ),
        Some(&json!("1m")),
        "the chart's CRD has the generated schema with its defaults"
    );
    let api = instances(&client, NS);
    // Another name is refused by the generated CRD's validation rule, before any operator.
    let refused = api
        .create(&PostParams::default(), &instance("other", NS))
        .await
        .expect_err("FluxInstance other is refused");
    assert!(
        refused
            .to_string()
            .contains("the only accepted name for a FluxInstance is 'flux'"),
        "{refused}"
    );
    // `flux` in another namespace is accepted by the API, and the operator never reconciles it.
    common::privileged_namespace(&client, "elsewhere").await;
    let elsewhere = instances(&client, "elsewhere");
    elsewhere
        .create(&PostParams::default(), &instance("flux", "elsewhere"))
        .await
        .expect("FluxInstance elsewhere/flux");
    api.create(&PostParams::default(), &instance("flux", NS))
        .await
        .expect("FluxInstance flux");
    let created = Instant::now();
    let status = eventually(300, "FluxInstance flux Ready=True", || async {
        let obj = api.get("flux").await.ok()?;
        if created.elapsed() > Duration::from_secs(290) {
            panic!(
                "FluxInstance flux not Ready within 290s: {}\npods: {}\n{}",
                obj.data.get("status").cloned().unwrap_or_default(),
                pod_summary(&client).await,
                operator_log(&client).await
            )
        }
        match ready(&obj) {
            Some((s, reason, message)) if s == "False" && reason != "Progressing" => {
                panic!(
                    "the operator failed: {reason}: {message}\n{}",
                    operator_log(&client).await
                )
            }
            Some(r) if r.0 == "True" => Some((r, obj)),
            _ => None,
        }
    })
    .await;
    let to_ready = created.elapsed();
    let ((_, reason, message), flux) = status;
    assert_eq!(reason, "ReconciliationSucceeded", "{message}");
    assert!(
        flux.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == "fluxcd.controlplane.io/finalizer"),
        "the operator adds its finalizer: {:?}",
        flux.metadata.finalizers
    );
    // The controllers the operator applied run as the real programs.
    let mut figures = Vec::new();
    for program in PROGRAMS {
        let found = eventually(30, &format!("a process {program}"), || async {
            let p = processes(program);
            (!p.is_empty()).then_some(p)
        })
        .await;
        figures.push(format!("{program} RSS {} MiB", found[0].1 / 1024));
    }
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), NS);
    for name in ["source-controller", "kustomize-controller"] {
        let d = deployments.get(name).await.expect(name);
        let labels = d.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels
                .get("app.kubernetes.io/managed-by")
                .map(String::as_str),
            Some("flux-operator"),
            "{name}"
        );
    }
    eprintln!(
        "chart install to Ready: {:.1} s; FluxInstance created to Ready=True: {:.1} s; {}",
        started.elapsed().as_secs_f64(),
        to_ready.as_secs_f64(),
        figures.join(", ")
    );
    // The controllers reconcile: a GitRepository gets its CRD default (`timeout: 60s`) and a
    // status from source-controller (no Git host is served here yet: a fetch failure), a
    // Kustomization on it a status from kustomize-controller.
    let gvk = |g: &str, v: &str, k: &str| GroupVersionKind::gvk(g, v, k);
    let git = ApiResource::from_gvk_with_plural(
        &gvk("source.toolkit.fluxcd.io", "v1", "GitRepository"),
        "gitrepositories",
    );
    let ks = ApiResource::from_gvk_with_plural(
        &gvk("kustomize.toolkit.fluxcd.io", "v1", "Kustomization"),
        "kustomizations",
    );
    let gits: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &git);
    let kss: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ks);
    gits.create(
        &PostParams::default(),
        &common::from_json(json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "probe", "namespace": NS},
            "spec": {"interval": "1m", "url": "https://github.com/example/infra.git", "ref": {"branch": "main"}},
        })),
    )
    .await
    .expect("GitRepository");
    kss.create(
        &PostParams::default(),
        &common::from_json(json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "probe", "namespace": NS},
            "spec": {"interval": "1m", "path": "./", "prune": false,
                     "sourceRef": {"kind": "GitRepository", "name": "probe"}},
        })),
    )
    .await
    .expect("Kustomization");
    let created = gits.get("probe").await.expect("probe");
    assert_eq!(
        created.data.pointer("/spec/timeout"),
        Some(&json!("60s")),
        "the generated CRD's default"
    );
    for (what, api) in [("GitRepository", &gits), ("Kustomization", &kss)] {
        let (s, reason, message) = eventually(
            60,
            &format!("{what} probe has a Ready condition"),
            || async { ready(&api.get("probe").await.ok()?) },
        )
        .await;
        eprintln!("{what} probe: Ready={s} {reason}: {message}");
    }
    // What the real programs complain about (for the record; not asserted).
    for selector in [
        "app.kubernetes.io/name=flux-operator",
        "app=source-controller",
        "app=kustomize-controller",
    ] {
        let log = pod_logs(&client, selector).await;
        let errors: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("\"level\":\"error\"") || l.contains("panic"))
            .take(5)
            .collect();
        eprintln!(
            "{selector}: {} log lines, errors: {errors:#?}",
            log.lines().count()
        );
    }
    // The operator's cache holds only `flux` in its runtime namespace: elsewhere/flux is never
    // reconciled (no status, no finalizer), and the operator says nothing about it.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let other = elsewhere.get("flux").await.expect("elsewhere/flux");
    assert_eq!(
        other.data.get("status"),
        None::<&Value>,
        "FluxInstance elsewhere/flux has no status: {:?}",
        other.data
    );
    assert!(
        other.metadata.finalizers.unwrap_or_default().is_empty(),
        "no finalizer on elsewhere/flux"
    );
    let log = operator_log(&client).await;
    let about_other: Vec<&str> = log.lines().filter(|l| l.contains("elsewhere")).collect();
    eprintln!(
        "the operator's log lines naming namespace elsewhere: {} {:?}",
        about_other.len(),
        about_other
    );
    assert!(about_other.is_empty(), "{about_other:?}");
    // Deleting the FluxInstance: the operator's finalizer removes what it applied (the
    // controllers, the Flux CRDs) and keeps the namespace.
    kss.delete("probe", &Default::default())
        .await
        .expect("delete Kustomization");
    gits.delete("probe", &Default::default())
        .await
        .expect("delete GitRepository");
    api.delete("flux", &Default::default())
        .await
        .expect("delete");
    let deleted = Instant::now();
    eventually(120, "FluxInstance flux gone", || async {
        matches!(api.get_opt("flux").await, Ok(None)).then_some(())
    })
    .await;
    for name in ["source-controller", "kustomize-controller"] {
        eventually(60, &format!("Deployment {name} gone"), || async {
            matches!(deployments.get_opt(name).await, Ok(None)).then_some(())
        })
        .await;
    }
    assert!(
        matches!(
            crds.get_opt("gitrepositories.source.toolkit.fluxcd.io")
                .await,
            Ok(None)
        ),
        "the Flux CRDs are removed"
    );
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    assert!(namespaces.get(NS).await.is_ok(), "the namespace stays");
    eprintln!(
        "FluxInstance deleted, controllers and CRDs removed in {:.1} s",
        deleted.elapsed().as_secs_f64()
    );
}
