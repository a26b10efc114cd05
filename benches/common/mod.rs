//! What the benchmarks that drive a real OpenTofu share: the tools `scripts/install-tools.sh`
//! installs, a root module whose CLI configuration installs the provider from a filesystem mirror
//! (as users install it), and the sampling of the provider processes' resident memory while a
//! command runs.

#![allow(dead_code)] // each bench uses its own part

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const POLL_EVERY: Duration = Duration::from_millis(10);
pub const PROVIDER_VERSION: &str = "0.2.0";
pub const NULL_VERSION: &str = "2.1.2";
pub const REGISTRY_HOSTS: [&str; 2] = ["registry.opentofu.org", "registry.terraform.io"];

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The CLI and the null provider, where `scripts/install-tools.sh` puts them.
pub struct Tools {
    pub tofu: PathBuf,
    pub null_dir: PathBuf,
}

pub fn tools() -> Tools {
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
pub fn provider_binary() -> PathBuf {
    std::env::var_os("TALOSBOOT_BENCH_PROVIDER").map_or_else(
        || env!("CARGO_BIN_EXE_terraform-provider-talosboot").into(),
        PathBuf::from,
    )
}

pub fn link_or_copy(from: &Path, to: &Path) {
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), to.display()));
    }
}

pub fn copy_dir(from: &Path, to: &Path) {
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
pub struct Root {
    pub dir: tempfile::TempDir,
    pub tofu: PathBuf,
    /// The start of the provider's executable name, to tell its processes from other children.
    pub provider_executable: &'static str,
    pub env: Vec<(String, String)>,
}

impl Root {
    pub fn new(tools: &Tools, main_tf: &str, provider_executable: &'static str) -> Root {
        let dir = tempfile::Builder::new()
            .prefix("talosboot-bench-")
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

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn command(&self, args: &[&str]) -> Command {
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

    pub fn init(&self) {
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
    pub fn measure(&self, args: &[&str], accepted: &[i32]) -> Sample {
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
        let busy_before = machine_busy_ticks();
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
        let machine_cpu = ticks_to_seconds(machine_busy_ticks().saturating_sub(busy_before));
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
        let anon_kib = providers.values().map(|m| m.anon_kib).max().unwrap_or(0);
        let mut process_peaks_kib: Vec<u64> = providers.values().map(|m| m.peak_kib).collect();
        process_peaks_kib.sort_unstable();
        Sample {
            peak_kib,
            sampled_rss_kib,
            anon_kib,
            processes: providers.len(),
            process_peaks_kib,
            tofu_peak_kib: tofu_memory.peak_kib,
            provider_cpu: ticks_to_seconds(providers.values().map(|m| m.cpu_ticks).sum()),
            machine_cpu,
            wall,
            exit_code: status.code().unwrap_or(-1),
        }
    }
}

/// The memory of one process, from its samples.
#[derive(Default)]
pub struct Memory {
    /// `VmHWM`: monotonic while the process lives, so the last value read is the best known.
    pub peak_kib: u64,
    /// The largest `VmRSS` sampled: what polling alone would have found, a check on `VmHWM`.
    pub sampled_rss_kib: u64,
    /// The largest `RssAnon` sampled: the process's own memory (heap, stacks, relocated data),
    /// without the pages of its binary and shared libraries, which the page cache holds anyway.
    pub anon_kib: u64,
    /// User and system CPU time, in clock ticks, at the last sample (`/proc/<pid>/stat`).
    pub cpu_ticks: u64,
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
        if let Some(anon) = status_kib(&status, "RssAnon:") {
            self.anon_kib = self.anon_kib.max(anon);
        }
        if let Some(ticks) = cpu_ticks_of(pid) {
            self.cpu_ticks = self.cpu_ticks.max(ticks);
        }
    }
}

/// Linux reports `/proc` CPU times in USER_HZ, which is 100 on every architecture.
const TICKS_PER_SECOND: f64 = 100.0;

fn ticks_to_seconds(ticks: u64) -> f64 {
    ticks as f64 / TICKS_PER_SECOND
}

/// `utime + stime` of a process (fields 14 and 15 of `/proc/<pid>/stat`).
fn cpu_ticks_of(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    // After the comm: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// The machine's busy CPU time so far, every core summed (`/proc/stat`'s `cpu` line, less idle
/// and iowait): whether a run was bound by the machine's cores rather than by waiting.
pub fn machine_busy_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return 0;
    };
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is within user).
    v.iter().take(8).sum::<u64>() - v.get(3).copied().unwrap_or(0) - v.get(4).copied().unwrap_or(0)
}

/// The machine's cores, as the kernel counts them.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

pub fn status_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The processes whose parent is `parent` and whose executable's file name starts with
/// `executable`.
pub fn children_running(parent: u32, executable: &str) -> Vec<u32> {
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
pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 1..];
    after_comm.split_whitespace().nth(1)?.parse().ok()
}

pub struct Sample {
    pub peak_kib: u64,
    pub sampled_rss_kib: u64,
    /// The largest `RssAnon` sampled among the provider processes ([`Memory::anon_kib`]).
    pub anon_kib: u64,
    pub processes: usize,
    /// Each provider process's own peak, smallest first (schema loading vs the graph walk).
    pub process_peaks_kib: Vec<u64>,
    pub tofu_peak_kib: u64,
    /// CPU time of the provider processes, and of the whole machine, while the command ran.
    pub provider_cpu: f64,
    pub machine_cpu: f64,
    pub wall: Duration,
    pub exit_code: i32,
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

pub fn median<T: Copy + PartialOrd>(mut xs: Vec<T>) -> T {
    xs.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
    xs[xs.len() / 2]
}
