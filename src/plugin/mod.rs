//! The plugin runtime: everything between "the process starts" and "the provider's
//! gRPC service is reachable by Terraform/OpenTofu", compatible with HashiCorp's
//! go-plugin.
//!
//! [`run`] does, in order:
//! 1. logging to stderr as hclog JSON ([`logging`]) and a panic hook;
//! 2. the magic-cookie check (a human running the binary gets an explanation,
//!    exit 1) and protocol negotiation (`PLUGIN_PROTOCOL_VERSIONS` must offer 6);
//! 3. a TCP listener on 127.0.0.1 within `PLUGIN_MIN_PORT..=PLUGIN_MAX_PORT`;
//! 4. AutoMTLS when `PLUGIN_CLIENT_CERT` is set ([`tls`]), plaintext otherwise;
//! 5. the provider's routes plus the go-plugin services ([`services`]);
//! 6. the handshake line on stdout — the only thing ever written there;
//! 7. serving until `GRPCController.Shutdown`, SIGTERM, or the parent process
//!    disappearing (Terraform killed), then exit 0.
//!
//! `--debug` skips the cookie and TLS and prints a `TF_REATTACH_PROVIDERS` value
//! instead of the handshake ([`debug`]).
//!
//! # Signals
//! SIGTERM shuts down. SIGINT is *ignored* when started by Terraform, as go-plugin
//! plugins do: Ctrl-C reaches the whole process group, and Terraform answers it by
//! calling `StopProvider` and waiting for in-flight applies, so a provider that died
//! on SIGINT would lose the state of half-applied resources. In `--debug` mode
//! SIGINT (Ctrl-C) shuts down.

mod clock;
mod conn;
mod debug;
mod error;
mod handshake;
mod logging;
mod services;
mod tls;

#[doc(hidden)]
pub mod proto;

use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::service::Routes;
use tonic::transport::Server;

pub use error::Error;
use handshake::Env;

/// Largest gRPC message, either direction, as Terraform allows (256 MiB). Apply it
/// to the provider service with `max_decoding_message_size`/`max_encoding_message_size`.
pub const MAX_MESSAGE_SIZE: usize = 256 * 1024 * 1024;

/// How long in-flight RPCs get to finish after shutdown is requested before the
/// process exits anyway (Terraform kills the plugin 2 s after `Shutdown`).
const SHUTDOWN_GRACE: Duration = Duration::from_millis(1500);

/// How long the process waits at shutdown for applies still running (a CLI killed mid-apply:
/// its apply is cancelled and ends through its failure path, which reads and marks what it left).
const APPLY_GRACE: Duration = Duration::from_secs(20);

/// How often to check that the parent process is still there.
const PARENT_POLL: Duration = Duration::from_secs(2);

/// What the runtime gives the provider while building its routes.
#[derive(Debug, Clone, Default)]
pub struct ServeContext {
    /// Cancelled when Terraform calls `GRPCController.Shutdown`, on SIGTERM, and (in
    /// `--debug` mode only) on SIGINT. Long-running work should stop when it fires.
    pub shutdown: CancellationToken,
    /// Work that runs to its end even when its caller is gone (the applies): the process waits
    /// for it at shutdown, up to [`APPLY_GRACE`].
    pub applies: TaskTracker,
}

impl ServeContext {
    /// A context with a fresh, uncancelled shutdown token (for tests and embedding).
    pub fn new() -> Self {
        Self::default()
    }
}

/// How the binary was asked to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Plugin,
    Debug,
    Help,
    Version,
}

impl Mode {
    fn from_args(args: &[String]) -> Self {
        let has = |flags: &[&str]| args.iter().any(|a| flags.contains(&a.as_str()));
        if has(&["-h", "--help"]) {
            Mode::Help
        } else if has(&["-V", "--version"]) {
            Mode::Version
        } else if has(&["--debug", "-debug"]) {
            Mode::Debug
        } else {
            Mode::Plugin
        }
    }
}

/// Parses args/env, checks the cookie, negotiates, initialises logging, serves until
/// shutdown. Returns the process exit code: 0 after a requested shutdown, 1 when run
/// by hand without `--debug` or when anything fails (the reason is on stderr).
///
/// `make_routes` builds the provider's own services (typically the tfplugin6
/// `Provider` server); it is called once, inside the async runtime.
pub fn run(make_routes: impl FnOnce(&ServeContext) -> Routes) -> ExitCode {
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let binary = args
        .first()
        .and_then(|p| std::path::Path::new(p).file_name())
        .map_or_else(
            || "terraform-provider-talosboot".to_owned(),
            |n| n.to_string_lossy().into_owned(),
        );
    let mode = Mode::from_args(args.get(1..).unwrap_or_default());

    logging::init(logging::level_from_env());
    logging::install_panic_hook();
    // kube and friends pick the process-wide provider; make it the P-521 capable one.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();

    let env = Env::from_process();
    match mode {
        Mode::Help => {
            eprintln!("{}", handshake::not_a_plugin_message(&binary));
            return ExitCode::SUCCESS;
        }
        Mode::Version => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{binary} {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Mode::Plugin if !env.has_magic_cookie() => {
            eprintln!("{}", handshake::not_a_plugin_message(&binary));
            return ExitCode::FAILURE;
        }
        Mode::Plugin | Mode::Debug => {}
    }

    // One thread serves everything: the provider's work is waiting on the cluster and on
    // Terraform, and one thread serves Terraform's concurrent operations as well as many. A
    // multi-thread runtime starts a worker per core before the handshake, each with its own
    // stack and, once it allocates, its own malloc arena: more threads and memory the bigger
    // the machine (benches/README.md). Nothing here blocks a thread (no `block_in_place`, no
    // blocking I/O in handlers; `tokio::fs` and DNS use the blocking pool on demand).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("Error: {}", Error::Runtime(e));
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        let ready = prepare(mode == Mode::Debug, &env, make_routes)
            .await
            .map_err(|e| (e, false))?;
        ready.serve().await.map_err(|e| (e, true))
    });
    runtime.shutdown_timeout(Duration::from_millis(500));

    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        // Before the handshake a human (or Terraform's error report) reads stderr
        // verbatim; afterwards it is a log stream.
        Err((error, false)) => {
            eprintln!("Error: {error}");
            ExitCode::FAILURE
        }
        Err((error, true)) => {
            tracing::error!(%error, "plugin stopped");
            ExitCode::FAILURE
        }
    }
}

/// A bound, announced server, ready to serve.
struct Ready {
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    routes: Routes,
    shutdown: CancellationToken,
    applies: TaskTracker,
}

/// Everything up to and including the stdout announcement.
async fn prepare(
    debug_mode: bool,
    env: &Env,
    make_routes: impl FnOnce(&ServeContext) -> Routes,
) -> Result<Ready, Error> {
    let shutdown = CancellationToken::new();
    watch_signals(shutdown.clone(), debug_mode)?;
    if !debug_mode {
        watch_parent(shutdown.clone());
    }

    let (protocol, ports, client_certs) = if debug_mode {
        (handshake::APP_PROTOCOL_VERSION, (0, 0), None)
    } else {
        let certs = env
            .client_cert
            .as_deref()
            .map(tls::parse_client_certs)
            .transpose()?;
        (env.negotiate_protocol()?, env.port_range()?, certs)
    };
    let listener = bind(ports).await?;
    let addr = listener.local_addr().map_err(|source| Error::Bind {
        min: ports.0,
        max: ports.1,
        source,
    })?;

    let (tls, server_cert) = match client_certs {
        Some(certs) => {
            let identity = tls::generate_server_identity()?;
            let config = tls::server_config(&identity, certs)?;
            (Some(TlsAcceptor::from(config)), Some(identity.cert))
        }
        None => (None, None),
    };

    let context = ServeContext {
        shutdown: shutdown.clone(),
        applies: TaskTracker::new(),
    };
    let applies = context.applies.clone();
    let routes = services::add_to(make_routes(&context), &shutdown).await;

    let announcement = if debug_mode {
        debug::banner(addr, std::process::id())
    } else {
        let line = handshake::handshake_line(protocol, addr, server_cert.as_deref());
        format!("{line}\n")
    };
    write_stdout(&announcement)?;
    tracing::info!(%addr, tls = tls.is_some(), debug_mode, protocol, "serving");

    Ok(Ready {
        listener,
        tls,
        routes,
        shutdown,
        applies,
    })
}

impl Ready {
    /// Serves until shutdown; in-flight RPCs get [`SHUTDOWN_GRACE`] to finish, applies
    /// [`APPLY_GRACE`].
    async fn serve(self) -> Result<(), Error> {
        let Ready {
            listener,
            tls,
            routes,
            shutdown,
            applies,
        } = self;
        let incoming = conn::incoming(listener, tls, shutdown.clone());
        let server = Server::builder()
            .http2_keepalive_interval(Some(Duration::from_secs(30)))
            .http2_keepalive_timeout(Some(Duration::from_secs(20)))
            .add_routes(routes)
            .serve_with_incoming_shutdown(incoming, shutdown.clone().cancelled_owned());
        let grace_over = async {
            shutdown.cancelled().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        };
        tokio::select! {
            served = server => served.map_err(Error::Serve)?,
            () = grace_over => tracing::warn!("connections still open after the shutdown grace period; exiting anyway"),
        }
        applies.close();
        if !applies.is_empty() {
            tracing::info!(
                applies = applies.len(),
                "waiting for the applies still running"
            );
            if tokio::time::timeout(APPLY_GRACE, applies.wait())
                .await
                .is_err()
            {
                tracing::warn!("applies still running after the grace period; exiting anyway");
            }
        }
        tracing::info!("plugin stopped");
        Ok(())
    }
}

/// Binds 127.0.0.1 on the first free port of the inclusive range (`(0, 0)`: any).
async fn bind((min, max): (u16, u16)) -> Result<TcpListener, Error> {
    let mut last_error = None;
    for port in min..=max {
        match TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await {
            Ok(listener) => return Ok(listener),
            Err(e) => last_error = Some(e),
        }
    }
    Err(Error::Bind {
        min,
        max,
        source: last_error.unwrap_or_else(|| std::io::Error::other("empty port range")),
    })
}

fn write_stdout(text: &str) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).map_err(Error::Stdout)?;
    out.flush().map_err(Error::Stdout)
}

/// SIGTERM cancels `shutdown`; SIGINT does too in debug mode and is logged and
/// ignored otherwise (see the module docs).
fn watch_signals(shutdown: CancellationToken, debug: bool) -> Result<(), Error> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).map_err(Error::Signal)?;
        let mut int = signal(SignalKind::interrupt()).map_err(Error::Signal)?;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = term.recv() => {
                        tracing::info!("SIGTERM received, shutting down");
                        shutdown.cancel();
                        break;
                    }
                    _ = int.recv() => {
                        if debug {
                            tracing::info!("interrupt received, shutting down");
                            shutdown.cancel();
                            break;
                        }
                        tracing::debug!("interrupt received and ignored: Terraform stops providers via StopProvider and Shutdown");
                    }
                }
            }
        });
    }
    #[cfg(not(unix))]
    if debug {
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                shutdown.cancel();
            }
        });
    }
    Ok(())
}

/// Shuts down if the process that started us (Terraform) goes away without calling
/// `Shutdown` (e.g. it was killed): an orphaned provider would otherwise keep its
/// port and cluster connections forever.
fn watch_parent(shutdown: CancellationToken) {
    #[cfg(unix)]
    {
        let parent = std::os::unix::process::parent_id();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(PARENT_POLL);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    _ = tick.tick() => {}
                }
                if std::os::unix::process::parent_id() != parent {
                    tracing::warn!(parent, "the parent process is gone, shutting down");
                    shutdown.cancel();
                    break;
                }
            }
        });
    }
    #[cfg(not(unix))]
    let _ = shutdown;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn modes_from_args() {
        assert_eq!(Mode::from_args(&args(&[])), Mode::Plugin);
        assert_eq!(Mode::from_args(&args(&["--debug"])), Mode::Debug);
        assert_eq!(Mode::from_args(&args(&["--help"])), Mode::Help);
        assert_eq!(Mode::from_args(&args(&["--version"])), Mode::Version);
    }

    #[tokio::test]
    async fn binds_within_a_range() {
        let listener = bind((0, 0)).await.expect("any port");
        let taken = listener.local_addr().expect("addr").port();
        // The taken port is skipped in favour of the next free one.
        let next = bind((taken, taken.saturating_add(20)))
            .await
            .expect("range");
        assert_ne!(next.local_addr().expect("addr").port(), taken);
        assert!(bind((taken, taken)).await.is_err());
    }
}
