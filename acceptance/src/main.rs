//! `talos-sim serve --kubeconfig PATH [--workers N] [--control-planes N] [--no-kubeprism]
//! [--kube-proxy] [--no-pod-security] [--inline-cilium VERSION]`: runs a Talos cluster on the
//! real control plane (the binaries `scripts/install-tools.sh` builds) until SIGINT/SIGTERM,
//! after writing an admin kubeconfig to PATH (through the fault proxy, as tests get it).

use std::path::PathBuf;

use talos_sim::talos::{TalosCluster, TalosConfig};

const USAGE: &str = "usage: talos-sim serve --kubeconfig PATH [--workers N] [--control-planes N] [--no-kubeprism] [--kube-proxy] [--no-pod-security] [--inline-cilium VERSION]";

fn parse(args: &[String]) -> anyhow::Result<(TalosConfig, PathBuf)> {
    let mut config = TalosConfig::default();
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
            "--no-kubeprism" => config.kubeprism = None,
            "--kube-proxy" => config.kube_proxy = true,
            "--no-pod-security" => config.pod_security = false,
            "--inline-cilium" => config.inline_cilium = Some(value()?),
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
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
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
        let (config, path) = parse(&args).unwrap();
        assert_eq!(config.inline_cilium.as_deref(), Some("1.16.3"));
        assert!(!config.pod_security);
        assert_eq!(config.workers, 2);
        assert_eq!(path, PathBuf::from("/tmp/k"));
        let (config, _) = parse(&args[..3]).unwrap();
        assert!(config.pod_security && config.kubeprism.is_some());
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
}
