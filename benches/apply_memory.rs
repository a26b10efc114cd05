//! The provider's memory during real OpenTofu commands, against a baseline in the same run:
//! `tofu apply`, `tofu plan` and `tofu destroy` of `examples/quickstart` (Cilium, then the Flux
//! bootstrap, the release data source and the check) against a Talos cluster on the real control
//! plane (`talos_sim::talos`), and the same three commands of a root of a few `null_resource`s served by the Go
//! `hashicorp/null` 2.1.2 provider from `.tools/mirror`.
//!
//! Run: `scripts/install-tools.sh && cargo bench --bench apply_memory`
//! (`TALOSBOOT_BENCH_PROVIDER=<path>` measures another build of the provider instead).
//!
//! What it measures: while each command runs, every ~10 ms, the `VmHWM` (peak resident set),
//! `VmRSS` and `RssAnon` (the process's own memory, without the mapped pages of its binary and
//! shared libraries) in `/proc/<pid>/status` of each provider process OpenTofu starts (a child of `tofu`
//! whose executable is the provider). A command may start the provider more than once (schema
//! loading, then the graph walk); a command's peak is the largest `VmHWM` among them. It also
//! times each command, wall clock, `tofu` start to exit. Each measurement is repeated
//! ([`RUNS`]), talosboot and null interleaved so both see the same machine load; the summary
//! prints medians.
//!
//! What it does not measure: the cluster (the real control plane's processes, and the node layer
//! that runs the bootstrap Jobs' pods, in this bench process) is not counted, only the provider. The Go provider's peak
//! is for a trivial root, so the ratio compares a real bootstrap with the floor of a Go
//! provider, not equal work. Growth in the last ~10 ms before a provider exits can be missed
//! (the last `VmHWM` read is kept), and resident memory counts the mapped pages of each binary.
//! `tofu`'s own memory is printed for scale only.
//!
//! The provider is the binary Cargo builds for this bench (`CARGO_BIN_EXE_...`: the `bench`
//! profile, which inherits `release`: thin LTO, stripped), installed the way users install it,
//! through a `filesystem_mirror` in a CLI configuration file.

mod common;

use std::process::Command;

use common::{Root, Sample, median, mib, repo_root, tools};

const RUNS: usize = 3;

const NULL_ROOT: &str = r#"
terraform {
  required_providers {
    null = {
      source  = "hashicorp/null"
      version = "2.1.2"
    }
  }
}

resource "null_resource" "item" {
  count    = 5
  triggers = { index = count.index }
}
"#;

#[derive(Clone, Copy)]
enum Step {
    Apply,
    Plan,
    Destroy,
}

impl Step {
    const ALL: [Step; 3] = [Step::Apply, Step::Plan, Step::Destroy];

    fn name(self) -> &'static str {
        match self {
            Step::Apply => "apply",
            Step::Plan => "plan",
            Step::Destroy => "destroy",
        }
    }

    fn args(self) -> &'static [&'static str] {
        match self {
            Step::Apply => &["apply", "-auto-approve", "-no-color", "-input=false"],
            // A refresh of everything in state; exit 2 (changes) is reported, not fatal.
            Step::Plan => &["plan", "-no-color", "-input=false", "-detailed-exitcode"],
            Step::Destroy => &["destroy", "-auto-approve", "-no-color", "-input=false"],
        }
    }

    fn accepted(self) -> &'static [i32] {
        match self {
            Step::Plan => &[0, 2],
            Step::Apply | Step::Destroy => &[0],
        }
    }
}

fn main() {
    let tools = tools();
    // The node layer runs on these workers while the main thread waits on tofu and polls.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");

    let quickstart = std::fs::read_to_string(repo_root().join("examples/quickstart/main.tf"))
        .expect("examples/quickstart/main.tf");
    let mut talosboot = Root::new(&tools, &quickstart, "terraform-provider-talosboot");
    let kubeconfig = talosboot.path().join("kubeconfig");
    talosboot.env.push((
        "TF_VAR_kubeconfig_path".into(),
        kubeconfig.display().to_string(),
    ));
    // The repository the quickstart's FluxInstance syncs, served on loopback by each run's
    // cluster (as scripts/demo serves it), and a deploy key that server accepts: the real Flux
    // Operator and controllers clone it, so the apply is the quickstart's whole bootstrap.
    let repository = talosboot.path().join("infra");
    let synced = repository.join("kubernetes/clusters/demo");
    std::fs::create_dir_all(&synced).expect("repository dir");
    std::fs::write(
        synced.join("synced.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: synced, namespace: default}\n",
    )
    .expect("repository file");
    let deploy_key = talosboot.path().join("deploy_key");
    let keygen = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "bench", "-f"])
        .arg(&deploy_key)
        .status()
        .expect("ssh-keygen (acceptance/scripts/install-git.sh installs it)");
    assert!(keygen.success(), "ssh-keygen failed");
    talosboot.env.push((
        "TF_VAR_deploy_key".into(),
        std::fs::read_to_string(&deploy_key).expect("deploy key"),
    ));
    talosboot.init();
    let null = Root::new(&tools, NULL_ROOT, "terraform-provider-null");
    null.init();

    // samples[provider][step]: one Sample per run.
    let mut samples: [[Vec<Sample>; 3]; 2] = Default::default();
    for run in 1..=RUNS {
        // A fresh cluster per run: each apply starts from a cluster with no CNI.
        let mut config = talos_sim::talos::TalosConfig::default();
        config.git.repositories.push((
            "ssh://git@github.com/example/infra.git".into(),
            repository.clone(),
        ));
        let sim = runtime
            .block_on(talos_sim::talos::TalosCluster::start(config))
            .expect("a Talos cluster on the real control plane");
        sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        let git = sim
            .git()
            .expect("the cluster serves the quickstart's repository");
        let public_key =
            std::fs::read_to_string(deploy_key.with_extension("pub")).expect("public key");
        git.authorize(&public_key)
            .expect("authorize the deploy key");
        let known_hosts = git
            .known_hosts()
            .lines()
            .find(|l| l.starts_with("github.com "))
            .expect("a github.com known_hosts line")
            .to_owned();
        talosboot.env.retain(|(k, _)| k != "TF_VAR_known_hosts");
        talosboot
            .env
            .push(("TF_VAR_known_hosts".into(), known_hosts));
        for (provider, root) in [&talosboot, &null].into_iter().enumerate() {
            for (i, step) in Step::ALL.into_iter().enumerate() {
                let sample = root.measure(step.args(), step.accepted());
                println!(
                    "run {run} {:<9} {:<7} peak {:>5.1} MiB (largest RSS sampled {:>5.1} MiB, anonymous {:>4.1} MiB; {} process{}: {} MiB), tofu {:>5.1} MiB, {:>5.2} s{}",
                    ["talosboot", "null"][provider],
                    step.name(),
                    mib(sample.peak_kib),
                    mib(sample.sampled_rss_kib),
                    mib(sample.anon_kib),
                    sample.processes,
                    if sample.processes == 1 { "" } else { "es" },
                    sample
                        .process_peaks_kib
                        .iter()
                        .map(|kib| format!("{:.1}", mib(*kib)))
                        .collect::<Vec<_>>()
                        .join(", "),
                    mib(sample.tofu_peak_kib),
                    sample.wall.as_secs_f64(),
                    if sample.exit_code == 2 {
                        " (plan had changes)"
                    } else {
                        ""
                    }
                );
                samples[provider][i].push(sample);
            }
        }
        drop(sim);
    }

    println!(
        "\napply_memory summary ({RUNS} runs, medians; peak RSS = the largest VmHWM among the provider processes of one command)"
    );
    println!(
        "  {:<8} {:>15} {:>12} {:>7} {:>14} {:>11} {:>12} {:>16} {:>11} {:>12} {:>10}",
        "command",
        "talosboot peak",
        "null peak",
        "ratio",
        "talosboot anon",
        "null anon",
        "ratio (anon)",
        "talosboot wall",
        "null wall",
        "processes",
        "tofu peak"
    );
    for (i, step) in Step::ALL.into_iter().enumerate() {
        let ours = &samples[0][i];
        let theirs = &samples[1][i];
        let peak = |s: &[Sample]| median(s.iter().map(|x| mib(x.peak_kib)).collect());
        let wall = |s: &[Sample]| median(s.iter().map(|x| x.wall.as_secs_f64()).collect());
        let processes = |s: &[Sample]| median(s.iter().map(|x| x.processes).collect());
        let tofu_peak = |s: &[Sample]| median(s.iter().map(|x| mib(x.tofu_peak_kib)).collect());
        let anon = |s: &[Sample]| median(s.iter().map(|x| mib(x.anon_kib)).collect());
        println!(
            "  {:<8} {:>11.1} MiB {:>8.1} MiB {:>7.2} {:>10.1} MiB {:>7.1} MiB {:>12.2} {:>14.2} s {:>9.2} s {:>5} / {:<4}  {:>3.0} / {:.0} MiB",
            step.name(),
            peak(ours),
            peak(theirs),
            peak(ours) / peak(theirs),
            anon(ours),
            anon(theirs),
            anon(ours) / anon(theirs),
            wall(ours),
            wall(theirs),
            processes(ours),
            processes(theirs),
            tofu_peak(ours),
            tofu_peak(theirs),
        );
    }
    println!(
        "  target: apply ratio <= 0.50 (anonymous: the largest RssAnon sampled, every ~10 ms: heap, stacks and relocated data, without the mapped pages of the binaries)"
    );
}
