//! `talos-sim serve --kubeconfig PATH [--workers N] [--control-planes N] [--no-kubeprism]
//! [--kube-proxy] [--no-pod-security]`: runs a Talos cluster on the real control plane (the
//! binaries `scripts/install-tools.sh` builds) until SIGINT/SIGTERM, after writing an admin
//! kubeconfig to PATH. `--simulated` runs the older in-process API server instead, which also
//! takes `--pace fast|human`, `--listen ADDR`, `--inline-cilium VERSION` and `--no-rbac`.

use std::path::PathBuf;

use talos_sim::talos::{TalosCluster, TalosConfig};
use talos_sim::{Pace, SimCluster, SimConfig};

const USAGE: &str = "usage: talos-sim serve --kubeconfig PATH [--workers N] [--control-planes N] [--no-kubeprism] [--kube-proxy] [--no-pod-security]\n       talos-sim serve --simulated --kubeconfig PATH [the flags above] [--pace fast|human] [--listen ADDR] [--inline-cilium VERSION] [--no-rbac]";

/// What `serve` runs.
#[derive(Debug)]
enum Serve {
    Real(TalosConfig),
    Simulated(SimConfig),
}

/// The real cluster's settings from the flags both kinds share.
fn real_config(sim: &SimConfig) -> TalosConfig {
    TalosConfig {
        control_planes: sim.control_planes,
        workers: sim.workers,
        kubeprism: sim.kubeprism_port,
        kube_proxy: sim.kube_proxy,
        pod_security: sim.pod_security,
        ..TalosConfig::default()
    }
}

fn parse(args: &[String]) -> anyhow::Result<(Serve, PathBuf)> {
    let (config, kubeconfig, simulated, only_simulated) = parse_flags(args)?;
    if simulated {
        return Ok((Serve::Simulated(config), kubeconfig));
    }
    if let Some(flag) = only_simulated {
        anyhow::bail!(
            "{flag} needs --simulated (the real control plane has no such setting)\n{USAGE}"
        );
    }
    Ok((Serve::Real(real_config(&config)), kubeconfig))
}

fn parse_flags(args: &[String]) -> anyhow::Result<(SimConfig, PathBuf, bool, Option<String>)> {
    let mut simulated = false;
    let mut only_simulated = None;
    let mut config = SimConfig {
        pace: Pace::Human,
        ..SimConfig::default()
    };
    let mut kubeconfig = None;
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("serve") => {}
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            std::process::exit(0);
        }
        _ => anyhow::bail!("{USAGE}"),
    }
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("{a} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--kubeconfig" => kubeconfig = Some(PathBuf::from(value()?)),
            "--simulated" => simulated = true,
            "--workers" => config.workers = value()?.parse()?,
            "--control-planes" => config.control_planes = value()?.parse()?,
            "--no-kubeprism" => config.kubeprism_port = None,
            "--kube-proxy" => config.kube_proxy = true,
            "--pace" => {
                config.pace = value()?.parse().map_err(|e: String| anyhow::anyhow!(e))?;
                only_simulated = Some(a.clone());
            }
            "--listen" => {
                config.listen = Some(value()?.parse()?);
                only_simulated = Some(a.clone());
            }
            "--inline-cilium" => {
                config.inline_cilium = Some(value()?);
                only_simulated = Some(a.clone());
            }
            "--no-pod-security" => config.pod_security = false,
            "--no-rbac" => {
                config.rbac = false;
                only_simulated = Some(a.clone());
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
    Ok((config, kubeconfig, simulated, only_simulated))
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
    let (config, path) = match parse(&args) {
        Ok(parsed) => parsed,
        // A usage mistake is not a crash: the message, no backtrace, exit 2.
        Err(e) => {
            eprintln!("talos-sim: {e}");
            std::process::exit(2);
        }
    };
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    match config {
        Serve::Simulated(config) => {
            let sim = SimCluster::start(config).await?;
            sim.write_kubeconfig(&path)?;
            tracing::info!(url = %sim.server_url(), kubeconfig = %path.display(), "ready (simulated API server)");
            until_signal().await?;
            tracing::info!("shutting down");
            sim.shutdown().await;
        }
        Serve::Real(config) => {
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
        }
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
            "serve --kubeconfig /tmp/k --simulated --inline-cilium 1.16.3 --no-pod-security"
                .split_whitespace()
                .map(String::from)
                .collect();
        let (Serve::Simulated(config), path) = parse(&args).unwrap() else {
            panic!("--simulated runs the simulated server");
        };
        assert_eq!(config.inline_cilium.as_deref(), Some("1.16.3"));
        assert!(!config.pod_security);
        assert_eq!(path, PathBuf::from("/tmp/k"));
        let (Serve::Real(config), _) = parse(&args[..3]).unwrap() else {
            panic!("the real control plane is the default");
        };
        assert!(config.pod_security && config.kubeprism.is_some());
        let only_simulated: Vec<String> = ["serve", "--kubeconfig", "/k", "--pace", "human"]
            .map(String::from)
            .to_vec();
        assert!(
            parse(&only_simulated)
                .unwrap_err()
                .to_string()
                .contains("--pace needs --simulated")
        );
    }
}
