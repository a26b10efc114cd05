//! `talos-sim serve --kubeconfig PATH [--workers N] [--control-planes N] [--no-kubeprism]
//! [--kube-proxy] [--service-cidr CIDR] [--no-pod-security] [--inline-cilium VERSION] [--talos-version 1.12|1.13|1.14]
//! [--git-repository URL=DIR]... [--git-authorized-key FILE]... [--git-known-hosts-out FILE] [--git-read-only-host HOST]...
//! [--image-pull-failure PATTERN[@NODES]]... [--crash-loop PATTERN[@NODES]]...`:
//! runs a Talos cluster on the real control plane (the binaries `scripts/install-tools.sh` builds)
//! until SIGINT/SIGTERM, after writing an admin kubeconfig to PATH (through the fault proxy, as
//! tests get it). The Git flags serve each DIR's files as the `main` branch of the SSH
//! repository URL names, its host resolved inside pods only (`talos::git`).
//! `--image-pull-failure PATTERN[@NODE,NODE]` and `--crash-loop PATTERN[@NODE,NODE]`
//! (repeatable) start the cluster with those kubelet faults (`talos::kubelet_faults`); at run
//! time the ConfigMap `kube-system/talos-sim-kubelet-faults` (keys `image-pull-failure`,
//! `crash-loop`, one rule a line) sets and clears them.
//!
//! `talos-sim upgrade-k8s --kubeconfig PATH --inline-manifests NAMES [--manifests-no-prune]
//! [--manifests-inventory-policy POLICY]`: the manifest sync of `talosctl upgrade-k8s` against a
//! running talos-sim cluster, NAMES (comma-separated, empty for none) being the inline manifests
//! the machine config still lists (see `talos::manifests`).

use std::path::PathBuf;

use talos_sim::talos::git::GitConfig;
use talos_sim::talos::kubelet_faults::{self, FaultKind};
use talos_sim::talos::manifests::{self, InventoryPolicy, UpgradeOptions};
use talos_sim::talos::{TalosCluster, TalosConfig, TalosVersion};

const USAGE: &str = "usage: talos-sim serve --kubeconfig PATH [--workers N] [--control-planes N] [--no-kubeprism] [--kube-proxy] [--service-cidr CIDR] [--no-pod-security] [--inline-cilium VERSION] [--talos-version 1.12|1.13|1.14] [--git-repository URL=DIR]... [--git-authorized-key FILE]... [--git-known-hosts-out FILE] [--git-read-only-host HOST]... [--image-pull-failure PATTERN[@NODE,NODE]]... [--crash-loop PATTERN[@NODE,NODE]]...
       talos-sim upgrade-k8s --kubeconfig PATH --inline-manifests NAMES [--manifests-no-prune] [--manifests-inventory-policy MustMatch|AdoptIfNoInventory|AdoptAll]";

/// What the command line asks for.
#[derive(Debug)]
enum Command {
    /// Boxed: a whole cluster's settings beside the other command's few.
    Serve(Box<TalosConfig>, PathBuf),
    UpgradeK8s {
        kubeconfig: PathBuf,
        listed: Vec<String>,
        options: UpgradeOptions,
    },
}

fn parse(args: &[String]) -> anyhow::Result<Command> {
    match args.first().map(String::as_str) {
        Some("serve") => {
            let (config, kubeconfig) = parse_serve(&args[1..])?;
            Ok(Command::Serve(Box::new(config), kubeconfig))
        }
        Some("upgrade-k8s") => parse_upgrade(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            std::process::exit(0);
        }
        _ => anyhow::bail!("{USAGE}"),
    }
}

fn parse_upgrade(args: &[String]) -> anyhow::Result<Command> {
    let mut kubeconfig = None;
    let mut listed = None;
    let mut options = UpgradeOptions::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("{a} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--kubeconfig" => kubeconfig = Some(PathBuf::from(value()?)),
            "--inline-manifests" => {
                listed = Some(
                    value()?
                        .split(',')
                        .map(str::trim)
                        .filter(|n| !n.is_empty())
                        .map(String::from)
                        .collect(),
                )
            }
            "--manifests-no-prune" => options.no_prune = true,
            "--manifests-inventory-policy" => options.policy = InventoryPolicy::parse(&value()?)?,
            other => anyhow::bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    Ok(Command::UpgradeK8s {
        kubeconfig: kubeconfig
            .ok_or_else(|| anyhow::anyhow!("--kubeconfig is required\n{USAGE}"))?,
        // Required: an omitted list must not prune everything by accident.
        listed: listed.ok_or_else(|| {
            anyhow::anyhow!("--inline-manifests is required (\"\" for none)\n{USAGE}")
        })?,
        options,
    })
}

fn parse_serve(args: &[String]) -> anyhow::Result<(TalosConfig, PathBuf)> {
    let mut config = TalosConfig::default();
    let mut kubeconfig = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("{a} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--kubeconfig" => kubeconfig = Some(PathBuf::from(value()?)),
            "--workers" => config.workers = value()?.parse()?,
            "--control-planes" => config.control_planes = value()?.parse()?,
            "--no-kubeprism" => config.kubeprism = None,
            "--kube-proxy" => config.kube_proxy = true,
            "--service-cidr" => config.service_cidr = value()?,
            "--no-pod-security" => config.pod_security = false,
            "--inline-cilium" => config.inline_cilium = Some(value()?),
            "--talos-version" => config.talos_version = TalosVersion::parse(&value()?)?,
            "--git-repository" => config
                .git
                .repositories
                .push(GitConfig::parse_repository(&value()?)?),
            "--git-authorized-key" => config.git.authorized_keys.push(PathBuf::from(value()?)),
            "--git-known-hosts-out" => config.git.known_hosts_out = Some(PathBuf::from(value()?)),
            "--git-read-only-host" => config.git.read_only_hosts.push(value()?),
            "--image-pull-failure" | "--crash-loop" => {
                let kind = if a == "--crash-loop" {
                    FaultKind::CrashLoop
                } else {
                    FaultKind::ImagePull
                };
                let (pattern, nodes) = kubelet_faults::parse_rule(&value()?)
                    .ok_or_else(|| anyhow::anyhow!("{a} needs an image pattern\n{USAGE}"))?;
                config.kubelet_faults.push((kind, pattern, nodes));
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => anyhow::bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    let kubeconfig =
        kubeconfig.ok_or_else(|| anyhow::anyhow!("--kubeconfig is required\n{USAGE}"))?;
    Ok((config, kubeconfig))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match parse(&args) {
        Ok(parsed) => parsed,
        // A usage mistake is not a crash: the message, no backtrace, exit 2.
        Err(e) => {
            eprintln!("talos-sim: {e}");
            std::process::exit(2);
        }
    };
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let (config, path) = match command {
        Command::Serve(config, path) => (*config, path),
        Command::UpgradeK8s {
            kubeconfig,
            listed,
            options,
        } => return upgrade_k8s(&kubeconfig, &listed, options).await,
    };
    let cluster = TalosCluster::start(config).await?;
    cluster.write_kubeconfig(&path)?;
    tracing::info!(
        url = %cluster.server_url(),
        kubeconfig = %path.display(),
        started_in = ?cluster.started_in,
        "ready (real kube-apiserver v1.37, Talos node layer)"
    );
    until_signal().await?;
    tracing::info!("shutting down");
    drop(cluster);
    Ok(())
}

/// Runs the manifest sync and prints what it applied and pruned, one object a line.
async fn upgrade_k8s(
    kubeconfig: &std::path::Path,
    listed: &[String],
    options: UpgradeOptions,
) -> anyhow::Result<()> {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let client = kube::Client::try_from(config)?;
    let report = manifests::upgrade_k8s(&client, listed, options).await?;
    let version = report.version.map(|v| v.to_string()).unwrap_or_default();
    println!("updating manifests (Talos {version})");
    for applied in &report.applied {
        println!(" < apply {applied}");
    }
    for pruned in &report.pruned {
        println!(" < deleted {pruned}");
    }
    Ok(())
}

async fn until_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_serve_flags() {
        let args: Vec<String> =
            "serve --kubeconfig /tmp/k --inline-cilium 1.16.3 --no-pod-security --workers 2"
                .split_whitespace()
                .map(String::from)
                .collect();
        let serve = |args: &[String]| match parse(args).unwrap() {
            Command::Serve(config, path) => (*config, path),
            other => panic!("{other:?}"),
        };
        let (config, path) = serve(&args);
        assert_eq!(config.inline_cilium.as_deref(), Some("1.16.3"));
        assert!(!config.pod_security);
        assert_eq!(config.workers, 2);
        assert_eq!(path, PathBuf::from("/tmp/k"));
        let (config, _) = serve(&args[..3]);
        assert!(config.pod_security && config.kubeprism.is_some());
        assert_eq!(
            config.talos_version,
            TalosVersion::V1_14,
            "the newest by default"
        );
        let old: Vec<String> = ["serve", "--kubeconfig", "/k", "--talos-version", "1.12"]
            .map(String::from)
            .to_vec();
        assert_eq!(serve(&old).0.talos_version, TalosVersion::V1_12);
        let bad: Vec<String> = ["serve", "--kubeconfig", "/k", "--talos-version", "1.9"]
            .map(String::from)
            .to_vec();
        assert!(
            parse(&bad)
                .unwrap_err()
                .to_string()
                .contains("1.12, 1.13, 1.14")
        );
        let retired: Vec<String> = ["serve", "--kubeconfig", "/k", "--simulated"]
            .map(String::from)
            .to_vec();
        assert!(
            parse(&retired)
                .unwrap_err()
                .to_string()
                .contains("unknown argument \"--simulated\"")
        );
    }

    #[test]
    fn parses_kubelet_fault_flags() {
        let args: Vec<String> = "serve --kubeconfig /k --image-pull-failure quay.io/cilium/cilium:v1.20.2@talos-worker-1,talos-worker-2 --crash-loop *:v9"
            .split_whitespace()
            .map(String::from)
            .collect();
        let Command::Serve(config, _) = parse(&args).unwrap() else {
            panic!("serve");
        };
        assert_eq!(
            config.kubelet_faults,
            vec![
                (
                    FaultKind::ImagePull,
                    "quay.io/cilium/cilium:v1.20.2".to_owned(),
                    Some(vec![
                        "talos-worker-1".to_owned(),
                        "talos-worker-2".to_owned()
                    ])
                ),
                (FaultKind::CrashLoop, "*:v9".to_owned(), None),
            ]
        );
        let empty: Vec<String> = ["serve", "--kubeconfig", "/k", "--crash-loop", " "]
            .map(String::from)
            .to_vec();
        assert!(
            parse(&empty)
                .unwrap_err()
                .to_string()
                .contains("--crash-loop needs an image pattern")
        );
    }

    #[test]
    fn parses_git_flags() {
        let args: Vec<String> = "serve --kubeconfig /k --git-repository ssh://git@github.com/acme/fleet.git=/src/fleet --git-repository ssh://git@gitea.example.internal:2222/infra/fleet=/src/old --git-authorized-key /keys/a.pub --git-authorized-key /keys/b.pub --git-known-hosts-out /tmp/known_hosts --git-read-only-host backup.example.internal"
            .split_whitespace()
            .map(String::from)
            .collect();
        let Command::Serve(config, _) = parse(&args).unwrap() else {
            panic!("serve");
        };
        assert_eq!(
            config.git.repositories,
            vec![
                (
                    "ssh://git@github.com/acme/fleet.git".to_owned(),
                    PathBuf::from("/src/fleet")
                ),
                (
                    "ssh://git@gitea.example.internal:2222/infra/fleet".to_owned(),
                    PathBuf::from("/src/old")
                ),
            ]
        );
        assert_eq!(config.git.authorized_keys.len(), 2);
        assert_eq!(config.git.read_only_hosts, vec!["backup.example.internal"]);
        assert_eq!(
            config.git.known_hosts_out,
            Some(PathBuf::from("/tmp/known_hosts"))
        );
        let https: Vec<String> = [
            "serve",
            "--kubeconfig",
            "/k",
            "--git-repository",
            "https://github.com/a/b=/d",
        ]
        .map(String::from)
        .to_vec();
        assert!(
            parse(&https)
                .unwrap_err()
                .to_string()
                .contains("only SSH Git URLs")
        );
    }

    #[test]
    fn parses_upgrade_k8s_flags() {
        let args = |line: &str| -> Vec<String> { line.split(' ').map(String::from).collect() };
        let parsed = parse(&args(
            "upgrade-k8s --kubeconfig /k --inline-manifests cilium,extra --manifests-no-prune",
        ))
        .unwrap();
        let Command::UpgradeK8s {
            kubeconfig,
            listed,
            options,
        } = parsed
        else {
            panic!("{parsed:?}");
        };
        assert_eq!(kubeconfig, PathBuf::from("/k"));
        assert_eq!(listed, ["cilium", "extra"]);
        assert!(options.no_prune);
        assert_eq!(options.policy, InventoryPolicy::AdoptIfNoInventory);
        let mut none = args("upgrade-k8s --kubeconfig /k --inline-manifests X");
        none[4] = String::new();
        match parse(&none).unwrap() {
            Command::UpgradeK8s {
                listed, options, ..
            } => {
                assert!(listed.is_empty());
                assert!(!options.no_prune, "pruning is Talos' default");
            }
            other => panic!("{other:?}"),
        }
        let missing = parse(&args("upgrade-k8s --kubeconfig /k")).unwrap_err();
        assert!(
            missing
                .to_string()
                .contains("--inline-manifests is required")
        );
        let policy = parse(&args(
            "upgrade-k8s --kubeconfig /k --inline-manifests a --manifests-inventory-policy AdoptAll",
        ))
        .unwrap();
        assert!(matches!(
            policy,
            Command::UpgradeK8s {
                options: UpgradeOptions {
                    policy: InventoryPolicy::AdoptAll,
                    ..
                },
                ..
            }
        ));
    }
}
