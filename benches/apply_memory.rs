//! The provider's memory during real OpenTofu commands, against a baseline in the same run:
//! `tofu apply`, `tofu plan` and `tofu destroy` of `examples/quickstart` (Cilium, then the Flux
//! bootstrap, the release data source and the check) against a Talos cluster on the real control
//! plane (`talos_sim::talos`), and the same three commands of a root of a few `null_resource`s served by the Go
//! `hashicorp/null` 2.1.2 provider from `.tools/mirror`.
//!
//! Run: `scripts/install-tools.sh && cargo bench --bench apply_memory`
//! (`TALOSBOOT_BENCH_PROVIDER=<path>` measures another build of the provider instead).
//!
//! What it measures: while each command runs, every ~10 ms, the `VmHWM` (peak resident set) and
//! `VmRSS` in `/proc/<pid>/status` of each provider process OpenTofu starts (a child of `tofu`
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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 3;
const POLL_EVERY: Duration = Duration::from_millis(10);
const PROVIDER_VERSION: &str = "0.2.0";
const NULL_VERSION: &str = "2.1.2";
const REGISTRY_HOSTS: [&str; 2] = ["registry.opentofu.org", "registry.terraform.io"];

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

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The CLI and the null provider, where `scripts/install-tools.sh` puts them.
struct Tools {
    tofu: PathBuf,
    null_dir: PathBuf,
}

fn tools() -> Tools {
    let dir = repo_root().join(".tools");
    let tools = Tools {
        tofu: std::env::var_os("TALOSBOOT_TOFU")
            .map(PathBuf::from)
            .unwrap_or_else(|| dir.join("tofu/tofu")),
        null_dir: dir.join("mirror/registry.terraform.io/hashicorp/null"),
    };
    let null_binary = tools.null_dir.join(format!(
        "{NULL_VERSION}/linux_amd64/terraform-provider-null_v{NULL_VERSION}_x4"
    ));
    for needed in [&tools.tofu, &null_binary] {
        assert!(
            needed.exists(),
            "{} is missing: run scripts/install-tools.sh first",
            needed.display()
        );
    }
    tools
}

/// The provider binary Cargo built for this bench, or `TALOSBOOT_BENCH_PROVIDER` to measure
/// another build (e.g. main's, for before/after figures).
fn provider_binary() -> PathBuf {
    std::env::var_os("TALOSBOOT_BENCH_PROVIDER").map_or_else(
        || env!("CARGO_BIN_EXE_terraform-provider-talosboot").into(),
        PathBuf::from,
    )
}

fn link_or_copy(from: &Path, to: &Path) {
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), to.display()));
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mirror dir");
    for entry in std::fs::read_dir(from).expect("read mirror dir") {
        let entry = entry.expect("dir entry");
        let dest = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            link_or_copy(&entry.path(), &dest);
        }
    }
}

/// A root module in its own directory, with a CLI configuration whose filesystem mirror holds
/// talosboot and hashicorp/null under both registry hosts (as the acceptance harness sets it up).
struct Root {
    dir: tempfile::TempDir,
    tofu: PathBuf,
    /// The start of the provider's executable name, to tell its processes from other children.
    provider_executable: &'static str,
    env: Vec<(String, String)>,
}

impl Root {
    fn new(tools: &Tools, main_tf: &str, provider_executable: &'static str) -> Root {
        let dir = tempfile::Builder::new()
            .prefix("talosboot-apply-memory-")
            .tempdir()
            .expect("tempdir");
        let mirror = dir.path().join("mirror");
        let mut include = Vec::new();
        for host in REGISTRY_HOSTS {
            let talosboot = mirror.join(format!(
                "{host}/talosboot/talosboot/{PROVIDER_VERSION}/linux_amd64"
            ));
            std::fs::create_dir_all(&talosboot).expect("mirror dir");
            link_or_copy(
                &provider_binary(),
                &talosboot.join(format!("terraform-provider-talosboot_v{PROVIDER_VERSION}")),
            );
            copy_dir(
                &tools.null_dir,
                &mirror.join(format!("{host}/hashicorp/null")),
            );
            include.push(format!("\"{host}/talosboot/talosboot\""));
            include.push(format!("\"{host}/hashicorp/null\""));
        }
        let cli_config = format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path    = \"{}\"\n    include = [{}]\n  }}\n}}\n",
            mirror.display(),
            include.join(", ")
        );
        std::fs::write(dir.path().join("cli.tfrc"), cli_config).expect("cli config");
        std::fs::write(dir.path().join("main.tf"), main_tf).expect("main.tf");
        Root {
            dir,
            tofu: tools.tofu.clone(),
            provider_executable,
            env: Vec::new(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.tofu);
        cmd.args(args)
            .current_dir(self.path())
            .env("TF_CLI_CONFIG_FILE", self.path().join("cli.tfrc"))
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .env_remove("KUBE_CONFIG_PATH")
            .env_remove("TF_PLUGIN_CACHE_DIR")
            .env_remove("TF_LOG")
            .env_remove("TF_LOG_PATH")
            .env_remove("TF_LOG_CORE")
            .env_remove("TF_LOG_PROVIDER")
            .env_remove("TOFU_CLI_CONFIG_FILE");
        for (key, value) in &self.env {
            cmd.env(key, value);
        }
        cmd
    }

    fn init(&self) {
        let out = self
            .command(&["init", "-no-color", "-input=false"])
            .output()
            .expect("run tofu init");
        assert!(
            out.status.success(),
            "tofu init failed in {}:\n{}\n{}",
            self.path().display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs `tofu args`, polling the memory of the provider processes it starts, and fails
    /// unless it exits with one of `accepted` and at least one provider process was seen.
    fn measure(&self, args: &[&str], accepted: &[i32]) -> Sample {
        let log = self.path().join("tofu.log");
        let log_file = std::fs::File::create(&log).expect("log file");
        let started = Instant::now();
        let mut tofu = self
            .command(args)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("log file"))
            .stderr(log_file)
            .spawn()
            .expect("run tofu");
        let tofu_pid = tofu.id();
        let mut providers: BTreeMap<u32, Memory> = BTreeMap::new();
        let mut tofu_memory = Memory::default();
        let status = loop {
            // Read before checking for exit, so the last sample is taken while tofu still runs.
            for pid in children_running(tofu_pid, self.provider_executable) {
                providers.entry(pid).or_default().sample(pid);
            }
            tofu_memory.sample(tofu_pid);
            if let Some(status) = tofu.try_wait().expect("wait for tofu") {
                break status;
            }
            std::thread::sleep(POLL_EVERY);
        };
        let wall = started.elapsed();
        let command = format!("tofu {}", args.join(" "));
        let output = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            status.code().is_some_and(|code| accepted.contains(&code)),
            "`{command}` exited with {status} in {}:\n{output}",
            self.path().display()
        );
        let peak_kib = providers.values().map(|m| m.peak_kib).max().unwrap_or(0);
        let sampled_rss_kib = providers
            .values()
            .map(|m| m.sampled_rss_kib)
            .max()
            .unwrap_or(0);
        assert!(
            peak_kib > 0,
            "`{command}` ran for {wall:?} but no `{}*` process was found among the children of \
             tofu (pid {tofu_pid}) with a readable VmHWM in /proc/<pid>/status: cannot measure \
             the provider (is /proc mounted, and does tofu still start providers as its \
             children?)\n{output}",
            self.provider_executable
        );
        let mut process_peaks_kib: Vec<u64> = providers.values().map(|m| m.peak_kib).collect();
        process_peaks_kib.sort_unstable();
        Sample {
            peak_kib,
            sampled_rss_kib,
            processes: providers.len(),
            process_peaks_kib,
            tofu_peak_kib: tofu_memory.peak_kib,
            wall,
            exit_code: status.code().unwrap_or(-1),
        }
    }
}

/// The memory of one process, from its samples.
#[derive(Default)]
struct Memory {
    /// `VmHWM`: monotonic while the process lives, so the last value read is the best known.
    peak_kib: u64,
    /// The largest `VmRSS` sampled: what polling alone would have found, a check on `VmHWM`.
    sampled_rss_kib: u64,
}

impl Memory {
    fn sample(&mut self, pid: u32) {
        // A process that has just exited (or is a zombie) has no Vm* lines: keep what was read.
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        if let Some(hwm) = status_kib(&status, "VmHWM:") {
            self.peak_kib = self.peak_kib.max(hwm);
        }
        if let Some(rss) = status_kib(&status, "VmRSS:") {
            self.sampled_rss_kib = self.sampled_rss_kib.max(rss);
        }
    }
}

fn status_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The processes whose parent is `parent` and whose executable's file name starts with
/// `executable`.
fn children_running(parent: u32, executable: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| parent_of(*pid) == Some(parent))
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| {
                exe.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(executable))
            })
        })
        .collect()
}

/// The ppid from `/proc/<pid>/stat` (`pid (comm) state ppid ...`; comm may hold spaces and
/// parentheses, so the fields are counted from the last `)`).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 1..];
    after_comm.split_whitespace().nth(1)?.parse().ok()
}

struct Sample {
    peak_kib: u64,
    sampled_rss_kib: u64,
    processes: usize,
    /// Each provider process's own peak, smallest first (schema loading vs the graph walk).
    process_peaks_kib: Vec<u64>,
    tofu_peak_kib: u64,
    wall: Duration,
    exit_code: i32,
}

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

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn median<T: Copy + PartialOrd>(mut xs: Vec<T>) -> T {
    xs.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
    xs[xs.len() / 2]
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
    // The quickstart's deploy key has no default; the emulated Flux Operator clones nothing.
    talosboot.env.push((
        "TF_VAR_deploy_key".into(),
        "-----BEGIN OPENSSH PRIVATE KEY-----\nbench-only\n-----END OPENSSH PRIVATE KEY-----\n"
            .into(),
    ));
    talosboot.init();
    let null = Root::new(&tools, NULL_ROOT, "terraform-provider-null");
    null.init();

    // samples[provider][step]: one Sample per run.
    let mut samples: [[Vec<Sample>; 3]; 2] = Default::default();
    for run in 1..=RUNS {
        // A fresh cluster per run: each apply starts from a cluster with no CNI.
        let sim = runtime
            .block_on(talos_sim::talos::TalosCluster::start(
                talos_sim::talos::TalosConfig::default(),
            ))
            .expect("a Talos cluster on the real control plane");
        sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        for (provider, root) in [&talosboot, &null].into_iter().enumerate() {
            for (i, step) in Step::ALL.into_iter().enumerate() {
                let sample = root.measure(step.args(), step.accepted());
                println!(
                    "run {run} {:<9} {:<7} peak {:>5.1} MiB (largest RSS sampled {:>5.1} MiB; {} process{}: {} MiB), tofu {:>5.1} MiB, {:>5.2} s{}",
                    ["talosboot", "null"][provider],
                    step.name(),
                    mib(sample.peak_kib),
                    mib(sample.sampled_rss_kib),
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
        "  {:<8} {:>15} {:>12} {:>7} {:>16} {:>11} {:>12} {:>10}",
        "command",
        "talosboot peak",
        "null peak",
        "ratio",
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
        println!(
            "  {:<8} {:>11.1} MiB {:>8.1} MiB {:>7.2} {:>14.2} s {:>9.2} s {:>5} / {:<4}  {:>3.0} / {:.0} MiB",
            step.name(),
            peak(ours),
            peak(theirs),
            peak(ours) / peak(theirs),
            wall(ours),
            wall(theirs),
            processes(ours),
            processes(theirs),
            tofu_peak(ours),
            tofu_peak(theirs),
        );
    }
    println!("  target: apply ratio <= 0.50");
}
