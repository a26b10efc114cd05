//! A fleet in one root, at scale: `tofu apply` of one `talosboot_cilium` with `for_each` over
//! N = 1, 3 and 5 Talos clusters on the real control plane (`talos_sim::talos`), each instance
//! reaching its own cluster through its write-only `cluster` attribute (the kubeconfigs come in
//! as one ephemeral map variable, as `ephemeral "talos_cluster_kubeconfig"` would give them). One
//! provider process serves every cluster: the figures are its peak resident memory and the
//! apply's wall time for each N, in the same run, so N = 1 is the baseline of the others.
//!
//! Run: `scripts/install-tools.sh && cargo bench --bench fleet`
//! (`TALOSBOOT_BENCH_RUNS=K` repeats each N K times, default 2; `TALOSBOOT_BENCH_PROVIDER=<path>`
//! measures another build of the provider; `TALOSBOOT_BENCH_SHOW_INSTANCES=1` prints the CLI's
//! `Creating...` and `Creation complete after` lines of each apply, to see the instances overlap;
//! `TALOSBOOT_BENCH_SHOW_EVENTS=1` prints each cluster's `kube-system` events and pod conditions
//! after the apply, and `TALOSBOOT_BENCH_PROVIDER_LOG=<path>` writes the provider's debug log of
//! each N to `<path>.<N>`: together they say what an instance that finished late waited for).
//!
//! Goals (issue 37): the wall time for N = 5 under 2x that of N = 1 (the clusters converge in
//! parallel, up to the CLI's `-parallelism`, 10 by default), and the provider's resident memory
//! growing by under 2 MiB per extra cluster.
//!
//! What it does not separate: each N starts N fresh clusters (no CNI, as a fleet's first apply
//! meets them), whose control planes and node layer (the bootstrap Jobs' real Helm, the emulated
//! agents) share the 2 cores with the provider, so the wall time of N = 5 includes five
//! apiservers' work on one machine, which a real fleet does on its own machines. The next plan is
//! checked to be empty, so that every cluster really converged.

mod common;

use std::collections::BTreeMap;

use common::{Root, Sample, median, mib, tools};

const SIZES: [usize; 3] = [1, 3, 5];
const CILIUM: &str = "1.20.2";

fn root(names: &[String]) -> String {
    format!(
        r#"
terraform {{
  required_providers {{
    talosboot = {{
      source  = "talosboot/talosboot"
      version = "{version}"
    }}
  }}
}}

variable "kubeconfigs" {{
  type      = map(string)
  sensitive = true
  ephemeral = true
}}

# Connects nowhere itself: every instance names its own cluster.
provider "talosboot" {{}}

resource "talosboot_cilium" "this" {{
  for_each = toset({names:?})
  version  = "{CILIUM}"
  values   = [yamlencode({{ hubble = {{ relay = {{ enabled = false }} }} }})]
  cluster = {{
    kubeconfig_raw = var.kubeconfigs[each.key]
  }}
}}
"#,
        version = common::PROVIDER_VERSION,
    )
}

fn runs() -> usize {
    std::env::var("TALOSBOOT_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(2)
}

fn main() {
    let tools = tools();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let runs = runs();
    let events_wanted = std::env::var_os("TALOSBOOT_BENCH_SHOW_EVENTS").is_some();
    // samples[size]: one apply per run.
    let mut samples: BTreeMap<usize, Vec<Sample>> = BTreeMap::new();
    for run in 1..=runs {
        for n in SIZES {
            let clusters: Vec<_> = (0..n)
                .map(|_| {
                    runtime
                        .block_on(talos_sim::talos::TalosCluster::start(
                            talos_sim::talos::TalosConfig::default(),
                        ))
                        .expect("a Talos cluster on the real control plane")
                })
                .collect();
            let kubeconfigs: BTreeMap<String, String> = clusters
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("cluster-{i}"), c.kubeconfig_yaml()))
                .collect();
            let names: Vec<String> = kubeconfigs.keys().cloned().collect();
            let mut fleet = Root::new(&tools, &root(&names), "terraform-provider-talosboot");
            fleet.env.push((
                "TF_VAR_kubeconfigs".into(),
                serde_json::to_string(&kubeconfigs).expect("json"),
            ));
            if let Some(log) = std::env::var_os("TALOSBOOT_BENCH_PROVIDER_LOG") {
                fleet.env.push(("TF_LOG_PROVIDER".into(), "debug".into()));
                fleet.env.push((
                    "TF_LOG_PATH".into(),
                    format!("{}.{n}", log.to_string_lossy()),
                ));
            }
            fleet.init();
            if events_wanted {
                println!(
                    "    apply starts {}",
                    k8s_openapi::jiff::Timestamp::now().strftime("%H:%M:%S%.3f")
                );
            }
            let apply = fleet.measure(
                &["apply", "-auto-approve", "-no-color", "-input=false"],
                &[0],
            );
            // When each instance started and how long it took, as the CLI reports it.
            if std::env::var_os("TALOSBOOT_BENCH_SHOW_INSTANCES").is_some() {
                let log =
                    std::fs::read_to_string(fleet.path().join("tofu.log")).unwrap_or_default();
                for line in log
                    .lines()
                    .filter(|l| l.contains("Creation complete") || l.contains("Creating..."))
                {
                    println!("    {line}");
                }
            }
            if events_wanted {
                for (i, c) in clusters.iter().enumerate() {
                    runtime.block_on(show_events(i, c));
                }
            }
            // Every cluster converged: the next plan (which reads each cluster) is empty.
            let plan = fleet.measure(
                &["plan", "-no-color", "-input=false", "-detailed-exitcode"],
                &[0],
            );
            println!(
                "run {run} N={n}: apply {:>6.2} s, provider peak {:>5.1} MiB ({} process{}), CPU: provider {:>4.2} s, machine {:>5.1} s ({:>3.0} % of {} cores); plan {:>5.2} s, {:>5.1} MiB",
                apply.wall.as_secs_f64(),
                mib(apply.peak_kib),
                apply.processes,
                if apply.processes == 1 { "" } else { "es" },
                apply.provider_cpu,
                apply.machine_cpu,
                busy_percent(&apply),
                common::cores(),
                plan.wall.as_secs_f64(),
                mib(plan.peak_kib),
            );
            samples.entry(n).or_default().push(apply);
            drop(fleet);
            drop(clusters);
        }
    }

    let wall = |n: usize| median(samples[&n].iter().map(|s| s.wall.as_secs_f64()).collect());
    let peak = |n: usize| median(samples[&n].iter().map(|s| mib(s.peak_kib)).collect());
    let busy = |n: usize| median(samples[&n].iter().map(busy_percent).collect());
    let provider_cpu = |n: usize| median(samples[&n].iter().map(|s| s.provider_cpu).collect());
    println!(
        "\nfleet summary ({runs} run{}, medians; one talosboot_cilium, for_each over N clusters, each through its write-only cluster)",
        if runs == 1 { "" } else { "s" }
    );
    println!(
        "  {:>3} {:>10} {:>10} {:>14} {:>18} {:>13} {:>13}",
        "N",
        "apply",
        "vs N=1",
        "provider peak",
        "growth per cluster",
        "provider CPU",
        "machine busy"
    );
    for n in SIZES {
        let growth = if n == 1 {
            "-".to_owned()
        } else {
            format!("{:.2} MiB", (peak(n) - peak(1)) / (n - 1) as f64)
        };
        println!(
            "  {n:>3} {:>8.2} s {:>9.2}x {:>10.1} MiB {:>18} {:>11.2} s {:>11.0} %",
            wall(n),
            wall(n) / wall(1),
            peak(n),
            growth,
            provider_cpu(n),
            busy(n),
        );
    }
    println!("  goals: apply N=5 under 2.00x of N=1; growth under 2 MiB per cluster");
    println!(
        "  machine busy: the share of the {} cores' time used during the apply, by every process (the clusters' control planes and node layer included)",
        common::cores()
    );
}

/// How busy the machine's cores were during a command, in percent of all of them.
fn busy_percent(s: &Sample) -> f64 {
    100.0 * s.machine_cpu / (s.wall.as_secs_f64() * common::cores() as f64)
}

/// The cluster's kube-system events and pod phases, in time order: what each instance waited for.
async fn show_events(index: usize, cluster: &talos_sim::talos::TalosCluster) {
    use k8s_openapi::api::core::v1::{Event, Pod};
    let client = cluster.client().await.expect("client");
    let events: kube::Api<Event> = kube::Api::namespaced(client.clone(), "kube-system");
    let mut lines = Vec::new();
    for e in events
        .list(&Default::default())
        .await
        .expect("events")
        .items
    {
        let at = e
            .event_time
            .map(|t| t.0)
            .or(e.first_timestamp.map(|t| t.0))
            .or(e.metadata.creation_timestamp.map(|t| t.0));
        lines.push((
            at,
            format!(
                "{} {}/{} x{} {}",
                e.reason.unwrap_or_default(),
                e.involved_object.kind.unwrap_or_default(),
                e.involved_object.name.unwrap_or_default(),
                e.count.unwrap_or(1),
                e.message.unwrap_or_default()
            ),
        ));
    }
    let pods: kube::Api<Pod> = kube::Api::namespaced(client, "kube-system");
    for p in pods.list(&Default::default()).await.expect("pods").items {
        let name = p.metadata.name.clone().unwrap_or_default();
        lines.push((
            p.metadata.creation_timestamp.map(|t| t.0),
            format!("pod created {name}"),
        ));
        for c in p.status.and_then(|s| s.conditions).unwrap_or_default() {
            lines.push((
                c.last_transition_time.map(|t| t.0),
                format!("pod {name} {}={}", c.type_, c.status),
            ));
        }
    }
    lines.sort_by_key(|(t, _)| *t);
    let start = lines.iter().find_map(|(t, _)| *t);
    for (t, l) in lines {
        let rel = match (t, start) {
            (Some(t), Some(s)) => format!("{:>6.1}", t.duration_since(s).as_secs_f64()),
            _ => "     ?".into(),
        };
        let at = t
            .map(|t| t.strftime("%H:%M:%S").to_string())
            .unwrap_or_default();
        println!("    c{index} {at} {rel} {l}");
    }
}
