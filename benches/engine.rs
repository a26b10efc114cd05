//! The bootstrap engine's cost on a Talos cluster on the real control plane, against a baseline in the
//! same run:
//! - **Run overhead**: one bootstrap run of a trivial program (`helm version`) through the engine
//!   (namespace check, Lease, objects, Job, watches, report, cleanup, Lease release) against the
//!   bare in-cluster work done by hand with the same client (ServiceAccount, binding, ConfigMap,
//!   Job, wait for Complete, delete): the difference is what the engine adds.
//! - **A Cilium apply**: `talosboot_cilium`'s install (engine run, readiness wait, reads).
//! - **Requests per refresh** of one `talosboot_cilium`, counted at the fault proxy in front of
//!   the API server, and how many of
//!   them run concurrently.
//! - **What `rbac = "minimal"` costs**: a Cilium chart upgrade with `cluster-admin` against the
//!   same upgrade with `minimal` (discovery, the render run, the run's own roles).
//!
//! Run: `cargo bench --bench engine`. Criterion reports the distributions; the summary prints the
//! medians, the overhead and the request count.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::Criterion;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;
use talosboot::cluster::engine::rbac::RbacPolicy;
use talosboot::cluster::engine::{self, BootstrapNamespace, JobSettings, Rbac, RunSpec};
use talosboot::cluster::helm;
use talosboot::cluster::{ClusterHandle, ConfigSource, ProviderConfig};
use talosboot::resources::cilium::model::Cilium;
use talosboot::resources::private::Private;
use talosboot::resources::release::{self, ChartResource};
use tokio_util::sync::CancellationToken;

/// Counts the requests the apiserver answered, from the fault proxy's per-request events
/// (target `talos_sim::talos::fault_proxy`, field `status`): every client of the kubeconfig
/// goes through it.
#[derive(Default)]
struct RequestCounter {
    count: AtomicUsize,
    paths: Mutex<Vec<String>>,
}

struct PathVisitor(String, bool);
impl tracing::field::Visit for PathVisitor {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "path" | "method" => self.0.push_str(&format!("{value:?} ")),
            "status" => self.1 = true,
            _ => {}
        }
    }
}

struct Counting(Arc<RequestCounter>);
impl tracing::Subscriber for Counting {
    fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
        m.target().starts_with("talos_sim::talos::fault_proxy")
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, e: &tracing::Event<'_>) {
        let mut v = PathVisitor(String::new(), false);
        e.record(&mut v);
        if v.1 {
            self.0.count.fetch_add(1, Ordering::SeqCst);
            self.0.paths.lock().expect("lock").push(v.0);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

fn spec() -> RunSpec {
    RunSpec {
        purpose: "benchmark".into(),
        target: "bench/helm-version".into(),
        namespace: BootstrapNamespace::named("kube-system"),
        job: JobSettings::talos("alpine/helm:3.18.4"),
        command: vec!["helm".into(), "version".into()],
        env: helm::install::helm_env(),
        files: BTreeMap::from([("values.yaml".into(), "{}".into())]),
        binary_files: BTreeMap::new(),
        secret_files: BTreeMap::new(),
        timeout: Duration::from_secs(120),
        rbac: Rbac::ClusterAdmin,
        capture_output: false,
    }
}

/// The bare in-cluster work of one run, done by hand.
async fn by_hand(client: &kube::Client, n: usize) {
    let ns = "kube-system";
    let name = format!("by-hand-{n}");
    let pp = PostParams::default();
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("sa");
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(&pp, &sa)
        .await
        .expect("sa");
    let crb: ClusterRoleBinding = serde_json::from_value(json!({"metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]})).expect("crb");
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&pp, &crb)
        .await
        .expect("crb");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": name}, "data": {"values.yaml": "{}"}}))
            .expect("cm");
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&pp, &cm)
        .await
        .expect("cm");
    let job: Job = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"backoffLimit": 0, "template": {"spec": {
        "serviceAccountName": name, "restartPolicy": "Never", "hostNetwork": true, "dnsPolicy": "Default",
        "tolerations": [{"operator": "Exists"}],
        "containers": [{"name": "c", "image": "alpine/helm:3.18.4", "command": ["helm", "version"],
            "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": "localhost"}, {"name": "KUBERNETES_SERVICE_PORT", "value": "7445"}]}]}}}}))
    .expect("job");
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    jobs.create(&pp, &job).await.expect("job");
    loop {
        let j = jobs.get(&name).await.expect("get");
        let done = j.status.and_then(|s| s.conditions).unwrap_or_default();
        if done
            .iter()
            .any(|c| c.type_ == "Complete" && c.status == "True")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = jobs.delete(&name, &DeleteParams::background()).await;
    let _ = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .delete(&name, &DeleteParams::default())
        .await;
    let _ = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .delete(&name, &DeleteParams::default())
        .await;
    let _ = Api::<ClusterRoleBinding>::all(client.clone())
        .delete(&name, &DeleteParams::default())
        .await;
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let counter = Arc::new(RequestCounter::default());
    tracing::subscriber::set_global_default(Counting(counter.clone())).expect("subscriber");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kubeconfig");
    let sim = rt
        .block_on(talos_sim::talos::TalosCluster::start(
            talos_sim::talos::TalosConfig::default(),
        ))
        .expect("a Talos cluster on the real control plane");
    sim.write_kubeconfig(&path).expect("kubeconfig");
    let handle = ClusterHandle::new(ProviderConfig::Known(ConfigSource::KubeconfigFile {
        path: path.display().to_string(),
        context: None,
    }));
    let clients = rt.block_on(handle.connect()).expect("connected");
    let cancel = CancellationToken::new();

    // A Cilium apply (once: it installs Cilium), timed.
    let cilium = Cilium {
        common: release::ReleaseCommon {
            version: Some("1.18.4".into()),
            ..Default::default()
        },
        ..Default::default()
    }
    .with_defaults();
    let mut private = Private::fresh();
    let started = Instant::now();
    let applied = rt.block_on(release::install(
        &clients,
        cilium.clone(),
        None,
        &mut private,
        &talosboot::resources::job::JobDefaults::default(),
        &cancel,
    ));
    let cilium_apply = started.elapsed();
    assert!(!applied.diagnostics.has_errors(), "cilium installs");

    // Requests per refresh, from the state the install returned (it knows the revision).
    let state = applied.state.clone().expect("state after install");
    counter.count.store(0, Ordering::SeqCst);
    counter.paths.lock().expect("lock").clear();
    rt.block_on(release::observe(&clients, &state))
        .expect("observe");
    let refresh_requests = counter.count.load(Ordering::SeqCst);
    let refresh_paths = counter.paths.lock().expect("lock").clone();

    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(8));
    let engine_times = Arc::new(Mutex::new(Vec::new()));
    let hand_times = Arc::new(Mutex::new(Vec::new()));
    let mut group = c.benchmark_group("bootstrap run (helm version)");
    group.bench_function("engine", |b| {
        b.iter(|| {
            let t = Instant::now();
            rt.block_on(engine::run(&clients, &spec(), &cancel))
                .expect("run");
            engine_times.lock().expect("lock").push(t.elapsed());
        })
    });
    let n = AtomicUsize::new(0);
    group.bench_function("by hand (baseline)", |b| {
        b.iter(|| {
            let t = Instant::now();
            rt.block_on(by_hand(&clients.client, n.fetch_add(1, Ordering::SeqCst)));
            hand_times.lock().expect("lock").push(t.elapsed());
        })
    });
    group.finish();

    // The same Cilium upgrade under both policies (each iteration is a new revision).
    let chart = cilium.chart_install().expect("chart");
    let upgrade_times = |policy: RbacPolicy| {
        let times = Arc::new(Mutex::new(Vec::new()));
        let job = JobSettings {
            rbac: policy,
            ..cilium
                .common
                .job_settings(&talosboot::resources::job::JobDefaults::default())
        };
        (times, job)
    };
    let (admin_times, admin_job) = upgrade_times(RbacPolicy::ClusterAdmin);
    let (minimal_times, minimal_job) = upgrade_times(RbacPolicy::Minimal);
    let ns = BootstrapNamespace::named("kube-system");
    let mut group = c.benchmark_group("cilium chart upgrade");
    for (name, job, times) in [
        ("rbac = cluster-admin (baseline)", &admin_job, &admin_times),
        ("rbac = minimal", &minimal_job, &minimal_times),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let t = Instant::now();
                rt.block_on(helm::install::install_or_upgrade(
                    &clients,
                    &ns,
                    job,
                    &chart,
                    Duration::from_secs(60),
                    &cancel,
                ))
                .expect("upgrade");
                times.lock().expect("lock").push(t.elapsed());
            })
        });
    }
    group.finish();
    let admin = median(admin_times.lock().expect("lock").clone());
    let minimal = median(minimal_times.lock().expect("lock").clone());

    let engine = median(engine_times.lock().expect("lock").clone());
    let hand = median(hand_times.lock().expect("lock").clone());
    println!("\nsummary (Talos cluster on the real control plane, medians):");
    println!(
        "  bootstrap run through the engine   {:>8.1} ms",
        engine.as_secs_f64() * 1e3
    );
    println!(
        "  the same in-cluster work by hand   {:>8.1} ms",
        hand.as_secs_f64() * 1e3
    );
    println!(
        "  engine overhead                    {:>8.1} ms  (ratio {:.2})",
        (engine.as_secs_f64() - hand.as_secs_f64()) * 1e3,
        engine.as_secs_f64() / hand.as_secs_f64()
    );
    println!(
        "  talosboot_cilium install (once)    {:>8.1} ms",
        cilium_apply.as_secs_f64() * 1e3
    );
    println!(
        "  Cilium upgrade, rbac = cluster-admin {:>6.1} ms",
        admin.as_secs_f64() * 1e3
    );
    println!(
        "  Cilium upgrade, rbac = minimal     {:>8.1} ms  (ratio {:.2})",
        minimal.as_secs_f64() * 1e3,
        minimal.as_secs_f64() / admin.as_secs_f64()
    );
    println!("  API requests per Cilium refresh    {refresh_requests:>8}");
    for p in refresh_paths {
        println!("    {p}");
    }
    drop(sim);
}
