//! A Terraform-like client for integration tests: starts the real provider binary
//! the way go-plugin does, parses its handshake line, connects over AutoMTLS, and
//! offers the go-plugin and tfplugin6 clients on the resulting channel.
//!
//! Index:
//! - [`certs`]: client certificates (P-521 self-signed CA, like Terraform's) and the
//!   pinned-server rustls client configuration;
//! - [`connect`]: tonic channels over mTLS or plaintext;
//! - [`schema`]: value types from a schema as the provider describes it;
//! - this file: [`Launch`] (how to start the binary), [`Handshake`] (the stdout
//!   line), [`ProviderProcess`] (the running provider and its clients).
//!
//! Typical use:
//! ```ignore
//! let provider = ProviderProcess::start().await?;
//! let mut client = provider.provider_client();
//! // ... tfplugin6 calls ...
//! let status = provider.shutdown().await?;
//! assert!(status.success());
//! ```
#![allow(dead_code)]

pub mod certs;
pub mod connect;
pub mod schema;

use std::net::SocketAddr;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use base64::Engine as _;
use rustls::pki_types::CertificateDer;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tonic::transport::Channel;

use talosboot::plugin::MAX_MESSAGE_SIZE;
use talosboot::plugin::proto::grpc_broker_client::GrpcBrokerClient;
use talosboot::plugin::proto::grpc_controller_client::GrpcControllerClient;
use talosboot::plugin::proto::grpc_stdio_client::GrpcStdioClient;
use talosboot::protocol::proto::provider_client::ProviderClient;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

pub use certs::ClientIdentity;

/// The provider binary built by cargo for this test run.
pub const BINARY: &str = env!("CARGO_BIN_EXE_terraform-provider-talosboot");
/// go-plugin magic cookie shared by all Terraform providers.
pub const MAGIC_COOKIE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";
/// How long the binary gets to print its handshake.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the process gets to exit after `Shutdown` (Terraform waits 2 s).
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(5);

/// Variables inherited from the test environment that would change the binary's
/// behaviour; they are removed unless a test sets them explicitly.
const SCRUBBED_ENV: &[&str] = &[
    "TF_PLUGIN_MAGIC_COOKIE",
    "PLUGIN_PROTOCOL_VERSIONS",
    "PLUGIN_MIN_PORT",
    "PLUGIN_MAX_PORT",
    "PLUGIN_CLIENT_CERT",
    "TF_LOG",
    "TF_LOG_PROVIDER",
    "TF_REATTACH_PROVIDERS",
];

/// Lines captured from a child's pipe, shared with the reading task.
/// Lines read from a pipe so far, and whether the pipe reached its end.
#[derive(Clone, Default)]
pub struct Captured {
    lines: Arc<Mutex<Vec<String>>>,
    closed: Arc<tokio::sync::Notify>,
    at_end: Arc<std::sync::atomic::AtomicBool>,
}

impl Captured {
    /// Waits until the pipe is at its end (the process closed it, e.g. by exiting).
    async fn until_closed(&self) {
        let closed = self.closed.notified();
        if !self.at_end.load(std::sync::atomic::Ordering::SeqCst) {
            closed.await;
        }
    }
}

/// How to start the provider binary.
#[derive(Debug, Clone)]
pub struct Launch {
    args: Vec<String>,
    env: Vec<(String, String)>,
    auto_mtls: bool,
}

impl Launch {
    /// As Terraform starts it: magic cookie, `PLUGIN_PROTOCOL_VERSIONS=6`, a fresh
    /// client certificate in `PLUGIN_CLIENT_CERT` (AutoMTLS), `TF_LOG_PROVIDER=debug`.
    pub fn terraform() -> Self {
        Self {
            args: Vec::new(),
            env: vec![
                ("TF_PLUGIN_MAGIC_COOKIE".into(), MAGIC_COOKIE.into()),
                ("PLUGIN_PROTOCOL_VERSIONS".into(), "6".into()),
                ("TF_LOG_PROVIDER".into(), "debug".into()),
            ],
            auto_mtls: true,
        }
    }

    /// As a developer starts it under a debugger: `--debug`, no cookie.
    pub fn debug() -> Self {
        Self {
            args: vec!["--debug".into()],
            env: vec![("TF_LOG_PROVIDER".into(), "debug".into())],
            auto_mtls: false,
        }
    }

    /// As a human runs it by hand: no arguments, no cookie.
    pub fn by_hand() -> Self {
        Self {
            args: Vec::new(),
            env: Vec::new(),
            auto_mtls: false,
        }
    }

    /// Sets (or replaces) an environment variable.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Removes an environment variable this launch would set.
    pub fn without_env(mut self, key: &str) -> Self {
        self.env.retain(|(k, _)| k != key);
        self
    }

    /// Adds a command-line argument.
    pub fn arg(mut self, arg: &str) -> Self {
        self.args.push(arg.to_owned());
        self
    }

    /// No `PLUGIN_CLIENT_CERT`: the provider then serves plaintext.
    pub fn plaintext(mut self) -> Self {
        self.auto_mtls = false;
        self
    }

    fn command(&self, identity: Option<&ClientIdentity>) -> Command {
        let mut command = Command::new(BINARY);
        command.args(&self.args);
        for key in SCRUBBED_ENV {
            command.env_remove(key);
        }
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(identity) = identity {
            command.env("PLUGIN_CLIENT_CERT", &identity.cert_pem);
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    /// Runs the binary to completion (for launches expected to fail fast).
    pub async fn run_to_exit(&self) -> anyhow::Result<Finished> {
        let identity = self.auto_mtls.then(ClientIdentity::generate).transpose()?;
        let child = self
            .command(identity.as_ref())
            .spawn()
            .context("spawn provider")?;
        let output = tokio::time::timeout(STARTUP_TIMEOUT, child.wait_with_output())
            .await
            .context("provider did not exit")??;
        Ok(Finished {
            status: output.status,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }

    /// Starts the binary, reads its handshake (or debug banner) and connects.
    pub async fn start(self) -> anyhow::Result<ProviderProcess> {
        let identity = self.auto_mtls.then(ClientIdentity::generate).transpose()?;
        let debug = self.args.iter().any(|a| a == "--debug");
        let mut child = self
            .command(identity.as_ref())
            .spawn()
            .context("spawn provider")?;
        let stderr = capture(child.stderr.take().context("stderr pipe")?);
        let mut stdout = BufReader::new(child.stdout.take().context("stdout pipe")?).lines();

        let mut banner = Vec::new();
        let first = tokio::time::timeout(STARTUP_TIMEOUT, async {
            loop {
                let Some(line) = stdout.next_line().await? else {
                    bail!("provider closed stdout before its handshake");
                };
                if !debug || line.contains("TF_REATTACH_PROVIDERS=") {
                    return Ok(line);
                }
                banner.push(line);
            }
        })
        .await;
        let first = match first {
            Ok(Ok(line)) => line,
            Ok(Err(e)) => bail!("{e}; stderr:\n{}", lines(&stderr).join("\n")),
            Err(_) => bail!(
                "no handshake within {STARTUP_TIMEOUT:?}; stderr:\n{}",
                lines(&stderr).join("\n")
            ),
        };

        let (handshake, reattach, addr) = if debug {
            let reattach = parse_reattach(&first)?;
            let addr = reattach_addr(&reattach)?;
            (None, Some(reattach), addr)
        } else {
            let handshake = Handshake::parse(&first)?;
            let addr = handshake.addr;
            (Some(handshake), None, addr)
        };
        let stdout_rest = capture_lines(stdout);

        let channel = match (&handshake, &identity) {
            (
                Some(Handshake {
                    server_cert: Some(cert),
                    ..
                }),
                Some(identity),
            ) => {
                let config = certs::client_config(cert.clone(), Some(identity))?;
                connect::connect_tls(addr, config).await?
            }
            (
                Some(Handshake {
                    server_cert: Some(_),
                    ..
                }),
                None,
            ) => {
                bail!("provider announced a certificate although no PLUGIN_CLIENT_CERT was given")
            }
            (
                Some(Handshake {
                    server_cert: None, ..
                }),
                Some(_),
            ) => {
                bail!("provider announced no certificate although PLUGIN_CLIENT_CERT was given")
            }
            _ => connect::connect_plaintext(addr).await?,
        };

        Ok(ProviderProcess {
            handshake,
            reattach,
            banner,
            addr,
            identity,
            channel,
            child,
            stdout_rest,
            stderr,
        })
    }
}

/// A process that ran to completion.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// The parsed go-plugin handshake line `CORE|APP|NETWORK|ADDR|PROTOCOL|CERT`.
#[derive(Debug, Clone)]
pub struct Handshake {
    pub raw: String,
    pub core_version: u32,
    pub protocol_version: u32,
    pub network: String,
    pub addr: SocketAddr,
    pub protocol: String,
    /// DER of the server certificate (AutoMTLS), decoded from unpadded base64.
    pub server_cert: Option<CertificateDer<'static>>,
}

impl Handshake {
    /// Parses a handshake line strictly (the shape go-plugin's client accepts).
    pub fn parse(line: &str) -> anyhow::Result<Self> {
        let parts: Vec<&str> = line.split('|').collect();
        if parts.len() != 6 {
            bail!("handshake line {line:?} has {} fields, want 6", parts.len());
        }
        let server_cert = match parts[5] {
            "" => None,
            b64 => Some(CertificateDer::from(
                base64::engine::general_purpose::STANDARD_NO_PAD
                    .decode(b64)
                    .with_context(|| {
                        format!("certificate field of {line:?} is not unpadded base64")
                    })?,
            )),
        };
        Ok(Self {
            raw: line.to_owned(),
            core_version: parts[0].parse().context("core protocol version")?,
            protocol_version: parts[1].parse().context("app protocol version")?,
            network: parts[2].to_owned(),
            addr: parts[3].parse().context("address")?,
            protocol: parts[4].to_owned(),
            server_cert,
        })
    }
}

/// Extracts and parses the JSON of a `TF_REATTACH_PROVIDERS='...'` line.
pub fn parse_reattach(line: &str) -> anyhow::Result<serde_json::Value> {
    let start = line
        .find("TF_REATTACH_PROVIDERS='")
        .context("no TF_REATTACH_PROVIDERS")?
        + "TF_REATTACH_PROVIDERS='".len();
    let end = line
        .rfind('\'')
        .filter(|&end| end > start)
        .context("unterminated quote")?;
    serde_json::from_str(&line[start..end]).context("TF_REATTACH_PROVIDERS is not JSON")
}

fn reattach_addr(reattach: &serde_json::Value) -> anyhow::Result<SocketAddr> {
    let entry = reattach
        .get("registry.terraform.io/talosboot/talosboot")
        .context("no entry for registry.terraform.io/talosboot/talosboot")?;
    entry["Addr"]["String"]
        .as_str()
        .context("Addr.String missing")?
        .parse()
        .context("Addr.String is not a socket address")
}

/// A running provider and a connected channel to it. Killed on drop.
pub struct ProviderProcess {
    /// `None` in debug mode.
    pub handshake: Option<Handshake>,
    /// The `TF_REATTACH_PROVIDERS` value, in debug mode.
    pub reattach: Option<serde_json::Value>,
    /// Debug-mode stdout lines before the reattach line.
    pub banner: Vec<String>,
    pub addr: SocketAddr,
    /// The client certificate given in `PLUGIN_CLIENT_CERT`, if any.
    pub identity: Option<ClientIdentity>,
    pub channel: Channel,
    child: Child,
    stdout_rest: Captured,
    stderr: Captured,
}

impl ProviderProcess {
    /// `Launch::terraform().start()`.
    pub async fn start() -> anyhow::Result<Self> {
        Launch::terraform().start().await
    }

    /// The tfplugin6 client, with Terraform's 256 MiB message limits.
    pub fn provider_client(&self) -> ProviderClient<Channel> {
        ProviderClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE)
    }

    pub fn controller_client(&self) -> GrpcControllerClient<Channel> {
        GrpcControllerClient::new(self.channel.clone())
    }

    pub fn stdio_client(&self) -> GrpcStdioClient<Channel> {
        GrpcStdioClient::new(self.channel.clone())
    }

    pub fn broker_client(&self) -> GrpcBrokerClient<Channel> {
        GrpcBrokerClient::new(self.channel.clone())
    }

    /// The health status of `service` on `channel` (go-plugin checks `plugin`).
    pub async fn health_of(channel: Channel, service: &str) -> anyhow::Result<ServingStatus> {
        let response = HealthClient::new(channel)
            .check(HealthCheckRequest {
                service: service.to_owned(),
            })
            .await?;
        ServingStatus::try_from(response.into_inner().status).context("unknown serving status")
    }

    /// The health status of `plugin` on the main channel.
    pub async fn health(&self) -> anyhow::Result<ServingStatus> {
        Self::health_of(self.channel.clone(), "plugin").await
    }

    /// A new mTLS channel presenting `identity` (or no certificate), pinning the
    /// server certificate from the handshake line.
    pub async fn connect_as(&self, identity: Option<&ClientIdentity>) -> anyhow::Result<Channel> {
        let cert = self
            .handshake
            .as_ref()
            .and_then(|h| h.server_cert.clone())
            .context("provider serves no TLS")?;
        connect::connect_tls(self.addr, certs::client_config(cert, identity)?).await
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Calls `GRPCController.Shutdown` and waits for the process to exit.
    pub async fn shutdown(mut self) -> anyhow::Result<ExitStatus> {
        self.controller_client()
            .shutdown(talosboot::plugin::proto::Empty {})
            .await
            .context("GRPCController.Shutdown")?;
        self.wait_exit(EXIT_TIMEOUT).await
    }

    /// Waits up to `timeout` for the process to exit.
    pub async fn wait_exit(&mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        let status = tokio::time::timeout(timeout, self.child.wait())
            .await
            .with_context(|| format!("provider still running {timeout:?} after shutdown"))??;
        // Let the pipe readers collect what is left: they end when the pipes close.
        for pipe in [&self.stderr, &self.stdout_rest] {
            tokio::time::timeout(timeout, pipe.until_closed())
                .await
                .context("a pipe of the exited provider stays open")?;
        }
        Ok(status)
    }

    /// Sends a signal with `kill(1)` (no libc binding needed).
    pub fn signal(&self, name: &str) -> anyhow::Result<()> {
        let pid = self.pid().context("process already reaped")?;
        let status = std::process::Command::new("kill")
            .args([format!("-{name}"), pid.to_string()])
            .status()?;
        anyhow::ensure!(status.success(), "kill -{name} {pid} failed");
        Ok(())
    }

    /// Stderr lines so far.
    pub fn stderr_lines(&self) -> Vec<String> {
        lines(&self.stderr)
    }

    /// Waits until a stderr line contains `needle` (the provider logged an event), up to `timeout`.
    pub async fn wait_for_stderr(&self, needle: &str, timeout: Duration) -> anyhow::Result<String> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(line) = self.stderr_lines().into_iter().find(|l| l.contains(needle)) {
                return Ok(line);
            }
            if tokio::time::Instant::now() >= deadline {
                anyhow::bail!(
                    "no stderr line with {needle:?} within {timeout:?}: {:?}",
                    self.stderr_lines()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stdout lines after the handshake (go-plugin requires there be none).
    pub fn stdout_after_handshake(&self) -> Vec<String> {
        lines(&self.stdout_rest)
    }
}

impl Drop for ProviderProcess {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

fn lines(captured: &Captured) -> Vec<String> {
    captured.lines.lock().map(|l| l.clone()).unwrap_or_default()
}

fn capture(pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> Captured {
    capture_lines(BufReader::new(pipe).lines())
}

fn capture_lines<R>(mut reader: tokio::io::Lines<R>) -> Captured
where
    R: tokio::io::AsyncBufRead + Unpin + Send + 'static,
{
    let captured = Captured::default();
    let sink = captured.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = reader.next_line().await {
            if let Ok(mut lines) = sink.lines.lock() {
                lines.push(line);
            }
        }
        sink.at_end.store(true, std::sync::atomic::Ordering::SeqCst);
        sink.closed.notify_waiters();
    });
    captured
}
