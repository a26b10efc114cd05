//! `talos-sim serve --kubeconfig PATH [--workers N] [--control-planes N] [--no-kubeprism]
//! [--kube-proxy] [--pace fast|human] [--listen ADDR] [--inline-cilium VERSION] [--no-pod-security] [--no-rbac]`: runs a simulated cluster until
//! SIGINT/SIGTERM, after writing an admin kubeconfig to PATH.

use std::path::PathBuf;

use talos_sim::{Pace, SimCluster, SimConfig};

const USAGE: &str = "usage: talos-sim serve --kubeconfig PATH [--workers N] [--control-planes N] [--no-kubeprism] [--kube-proxy] [--pace fast|human] [--listen ADDR] [--inline-cilium VERSION] [--no-pod-security] [--no-rbac]";

fn parse(args: &[String]) -> anyhow::Result<(SimConfig, PathBuf)> {
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
            "--workers" => config.workers = value()?.parse()?,
            "--control-planes" => config.control_planes = value()?.parse()?,
            "--no-kubeprism" => config.kubeprism_port = None,
            "--kube-proxy" => config.kube_proxy = true,
            "--pace" => config.pace = value()?.parse().map_err(|e: String| anyhow::anyhow!(e))?,
            "--listen" => config.listen = Some(value()?.parse()?),
            "--inline-cilium" => config.inline_cilium = Some(value()?),
            "--no-pod-security" => config.pod_security = false,
            "--no-rbac" => config.rbac = false,
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
    let (config, path) = match parse(&args) {
        Ok(parsed) => parsed,
        // A usage mistake is not a crash: the message, no backtrace, exit 2.
        Err(e) => {
            eprintln!("talos-sim: {e}");
            std::process::exit(2);
        }
    };
    let sim = SimCluster::start(config).await?;
    sim.write_kubeconfig(&path)?;
    tracing::info!(url = %sim.server_url(), kubeconfig = %path.display(), "ready");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
    sim.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_serve_flags() {
        let args: Vec<String> =
            "serve --kubeconfig /tmp/k --inline-cilium 1.16.3 --no-pod-security"
                .split_whitespace()
                .map(String::from)
                .collect();
        let (config, path) = parse(&args).unwrap();
        assert_eq!(config.inline_cilium.as_deref(), Some("1.16.3"));
        assert!(!config.pod_security);
        assert_eq!(path, PathBuf::from("/tmp/k"));
        let (config, _) = parse(&args[..3]).unwrap();
        assert!(config.pod_security && config.inline_cilium.is_none());
    }
}
