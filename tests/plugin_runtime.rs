//! The plugin runtime as Terraform sees it: the real binary, started like go-plugin
//! starts it.
//!
//! Index:
//! - handshake: line shape, stdout stays clean, cookie, protocol negotiation, ports;
//! - AutoMTLS: the right certificate is served, a wrong or missing one is refused and
//!   the listener survives;
//! - go-plugin services: health, stdio, broker, controller shutdown;
//! - signals: SIGINT is ignored under Terraform, ends debug mode; SIGTERM shuts down;
//! - debug mode: TF_REATTACH_PROVIDERS, plaintext;
//! - logging: stderr lines are hclog JSON.

mod support;

use std::time::Duration;

use futures::StreamExt as _;
use support::{ClientIdentity, Launch, ProviderProcess};
use talosboot::plugin::proto::{ConnInfo, Empty};
use tonic_health::pb::health_check_response::ServingStatus;

// ---------------------------------------------------------------------------
// Handshake
// ---------------------------------------------------------------------------

#[tokio::test]
async fn handshake_line_announces_protocol_6_over_tcp_grpc_with_a_cert() -> anyhow::Result<()> {
    let provider = ProviderProcess::start().await?;
    let handshake = provider.handshake.clone().expect("handshake");
    assert_eq!(handshake.core_version, 1);
    assert_eq!(handshake.protocol_version, 6);
    assert_eq!(handshake.network, "tcp");
    assert!(handshake.addr.ip().is_loopback(), "{handshake:?}");
    assert_eq!(handshake.protocol, "grpc");
    let cert = handshake.server_cert.clone().expect("AutoMTLS cert");
    assert!(!handshake.raw.ends_with('='), "base64 must be unpadded");
    // A different certificate from Terraform's own: the server generates its own.
    assert_ne!(Some(&cert), provider.identity.as_ref().map(|i| &i.cert_der));

    assert_eq!(provider.health().await?, ServingStatus::Serving);
    let stdout = provider.stdout_after_handshake();
    assert!(provider.shutdown().await?.success());
    assert!(stdout.is_empty(), "stdout after the handshake: {stdout:?}");
    Ok(())
}

#[tokio::test]
async fn stdout_carries_nothing_but_the_handshake_for_a_whole_run() -> anyhow::Result<()> {
    let mut provider = Launch::terraform()
        .env("TF_LOG_PROVIDER", "trace")
        .start()
        .await?;
    assert_eq!(provider.health().await?, ServingStatus::Serving);
    provider.controller_client().shutdown(Empty {}).await?;
    assert!(provider.wait_exit(support::EXIT_TIMEOUT).await?.success());
    assert_eq!(provider.stdout_after_handshake(), Vec::<String>::new());
    Ok(())
}

#[tokio::test]
async fn run_by_hand_explains_itself_and_fails() -> anyhow::Result<()> {
    let finished = Launch::by_hand().run_to_exit().await?;
    assert_eq!(finished.status.code(), Some(1));
    assert!(finished.stdout.is_empty(), "stdout: {:?}", finished.stdout);
    for needle in [
        "Terraform",
        "OpenTofu",
        "dev_overrides",
        "filesystem",
        "--debug",
    ] {
        assert!(
            finished.stderr.contains(needle),
            "{needle} missing from: {}",
            finished.stderr
        );
    }
    Ok(())
}

#[tokio::test]
async fn wrong_magic_cookie_is_treated_as_run_by_hand() -> anyhow::Result<()> {
    let finished = Launch::terraform()
        .env("TF_PLUGIN_MAGIC_COOKIE", "not-the-cookie")
        .run_to_exit()
        .await?;
    assert_eq!(finished.status.code(), Some(1));
    assert!(finished.stdout.is_empty());
    assert!(
        finished.stderr.contains("dev_overrides"),
        "{}",
        finished.stderr
    );
    Ok(())
}

#[tokio::test]
async fn protocol_versions_without_6_are_refused() -> anyhow::Result<()> {
    let finished = Launch::terraform()
        .env("PLUGIN_PROTOCOL_VERSIONS", "4,5")
        .run_to_exit()
        .await?;
    assert!(!finished.status.success());
    assert!(
        finished.stdout.is_empty(),
        "no handshake expected: {:?}",
        finished.stdout
    );
    assert!(
        finished.stderr.contains("failed to negotiate"),
        "{}",
        finished.stderr
    );
    assert!(
        finished.stderr.contains("protocol 6"),
        "{}",
        finished.stderr
    );
    Ok(())
}

#[tokio::test]
async fn protocol_6_is_picked_from_a_list() -> anyhow::Result<()> {
    let provider = Launch::terraform()
        .env("PLUGIN_PROTOCOL_VERSIONS", "5,6")
        .start()
        .await?;
    assert_eq!(
        provider.handshake.as_ref().map(|h| h.protocol_version),
        Some(6)
    );
    assert!(provider.shutdown().await?.success());
    Ok(())
}

#[tokio::test]
async fn listens_within_plugin_min_and_max_port() -> anyhow::Result<()> {
    // Find a free port, then ask for a range starting at it.
    let probe = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = probe.local_addr()?.port();
    drop(probe);
    let max = port.saturating_add(50);
    let provider = Launch::terraform()
        .env("PLUGIN_MIN_PORT", &port.to_string())
        .env("PLUGIN_MAX_PORT", &max.to_string())
        .start()
        .await?;
    let got = provider.addr.port();
    assert!((port..=max).contains(&got), "{got} not in {port}..={max}");
    assert!(provider.shutdown().await?.success());
    Ok(())
}

#[tokio::test]
async fn invalid_port_range_is_refused() -> anyhow::Result<()> {
    let finished = Launch::terraform()
        .env("PLUGIN_MIN_PORT", "not-a-port")
        .run_to_exit()
        .await?;
    assert!(!finished.status.success());
    assert!(finished.stdout.is_empty());
    assert!(
        finished.stderr.contains("failed to read PLUGIN_MIN_PORT"),
        "{}",
        finished.stderr
    );
    Ok(())
}

#[tokio::test]
async fn without_client_cert_serves_plaintext() -> anyhow::Result<()> {
    let provider = Launch::terraform().plaintext().start().await?;
    let handshake = provider.handshake.clone().expect("handshake");
    assert!(handshake.server_cert.is_none());
    assert!(handshake.raw.ends_with("|grpc|"), "{}", handshake.raw);
    assert_eq!(provider.health().await?, ServingStatus::Serving);
    assert!(provider.shutdown().await?.success());
    Ok(())
}

// ---------------------------------------------------------------------------
// AutoMTLS
// ---------------------------------------------------------------------------

#[tokio::test]
async fn mtls_with_terraforms_cert_is_served() -> anyhow::Result<()> {
    let provider = ProviderProcess::start().await?;
    // A second, independent connection with the same certificate also works.
    let channel = provider.connect_as(provider.identity.as_ref()).await?;
    assert_eq!(
        ProviderProcess::health_of(channel, "plugin").await?,
        ServingStatus::Serving
    );
    assert!(provider.shutdown().await?.success());
    Ok(())
}

/// With TLS 1.3 the client finishes its handshake before the server has checked the
/// client certificate, so refusal shows on the first exchange, not necessarily on
/// connect. Either way, no RPC may succeed.
async fn refused(provider: &ProviderProcess, identity: Option<&ClientIdentity>) -> bool {
    match provider.connect_as(identity).await {
        Err(_) => true,
        Ok(channel) => ProviderProcess::health_of(channel, "plugin").await.is_err(),
    }
}

#[tokio::test]
async fn mtls_with_another_cert_is_refused() -> anyhow::Result<()> {
    let provider = ProviderProcess::start().await?;
    let stranger = ClientIdentity::generate()?;
    assert!(
        refused(&provider, Some(&stranger)).await,
        "a stranger's certificate was accepted"
    );
    // The listener survives refused handshakes.
    assert_eq!(provider.health().await?, ServingStatus::Serving);
    let fresh = provider.connect_as(provider.identity.as_ref()).await?;
    assert_eq!(
        ProviderProcess::health_of(fresh, "plugin").await?,
        ServingStatus::Serving
    );
    assert!(provider.shutdown().await?.success());
    Ok(())
}

#[tokio::test]
async fn mtls_without_a_cert_is_refused() -> anyhow::Result<()> {
    let provider = ProviderProcess::start().await?;
    assert!(
        refused(&provider, None).await,
        "a client without certificate was accepted"
    );
    assert_eq!(provider.health().await?, ServingStatus::Serving);
    assert!(provider.shutdown().await?.success());
    Ok(())
}

#[tokio::test]
async fn plaintext_client_is_refused_when_tls_is_on() -> anyhow::Result<()> {
    let provider = ProviderProcess::start().await?;
    let plaintext = support::connect::connect_plaintext(provider.addr).await;
    let served = match plaintext {
        Err(_) => false,
        Ok(channel) => ProviderProcess::health_of(channel, "plugin").await.is_ok(),
    };
    assert!(!served, "a plaintext client was served");
    assert_eq!(provider.health().await?, ServingStatus::Serving);
    assert!(provider.shutdown().await?.success());
    Ok(())
}

// ---------------------------------------------------------------------------
// go-plugin services
// ---------------------------------------------------------------------------

#[tokio::test]
async fn health_reports_unknown_services_as_not_found() -> anyhow::Result<()> {
    let provider = ProviderProcess::start().await?;
    let err = ProviderProcess::health_of(provider.channel.clone(), "no.such.Service")
        .await
        .expect_err("an unknown service has no health");
    let status = err
        .downcast_ref::<tonic::Status>()
        .unwrap_or_else(|| panic!("a gRPC status, not a transport failure: {err:#}"));
    assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
    // The channel still works: the failure was the answer, not a broken connection.
    assert_eq!(provider.health().await?, ServingStatus::Serving);
    assert!(provider.shutdown().await?.success());
    Ok(())
}

#[tokio::test]
async fn stdio_and_broker_streams_are_accepted_and_end_on_shutdown() -> anyhow::Result<()> {
    let provider = ProviderProcess::start().await?;

    // Terraform opens the stdio stream right after connecting; it stays open and silent. A server
    // that ended it or wrote to it would have done so before answering the health check sent
    // afterwards on the same connection (HTTP/2 frames arrive in the order they are written).
    let mut stdio = provider.stdio_client().stream_stdio(()).await?.into_inner();
    provider
        .wait_for_stderr("stdio stream opened", Duration::from_secs(30))
        .await?;
    assert_eq!(provider.health().await?, ServingStatus::Serving);
    let early = futures::FutureExt::now_or_never(stdio.next());
    assert!(early.is_none(), "stdio stream ended or yielded: {early:?}");

    // The broker accepts and drains whatever is sent.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let mut broker = provider
        .broker_client()
        .start_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await?
        .into_inner();
    // Far more than HTTP/2 flow control lets through unread (64 KiB windows): the sends complete
    // only if the provider drains the stream.
    let filler = "x".repeat(4096);
    let sent = tokio::time::timeout(Duration::from_secs(60), async {
        for service_id in 0..1024 {
            tx.send(ConnInfo {
                service_id,
                network: "tcp".into(),
                address: filler.clone(),
                knock: None,
            })
            .await?;
        }
        anyhow::Ok(())
    })
    .await;
    assert!(
        matches!(sent, Ok(Ok(()))),
        "4 MiB of broker messages were not drained: {sent:?}"
    );
    provider
        .wait_for_stderr("ignoring broker message", Duration::from_secs(30))
        .await?;
    assert_eq!(provider.health().await?, ServingStatus::Serving);
    let early = futures::FutureExt::now_or_never(broker.next());
    assert!(early.is_none(), "broker stream ended or yielded: {early:?}");

    // Shutdown does not wait on the open streams.
    let started = std::time::Instant::now();
    let status = provider.shutdown().await?;
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );

    // Both streams end (cleanly or with a transport error), never with data.
    let end = tokio::time::timeout(Duration::from_secs(5), stdio.next()).await?;
    assert!(!matches!(end, Some(Ok(_))), "stdio yielded data: {end:?}");
    let end = tokio::time::timeout(Duration::from_secs(5), broker.next()).await?;
    assert!(!matches!(end, Some(Ok(_))), "broker yielded data: {end:?}");
    drop(tx);
    Ok(())
}

#[tokio::test]
async fn controller_shutdown_exits_zero_promptly() -> anyhow::Result<()> {
    let provider = ProviderProcess::start().await?;
    let started = std::time::Instant::now();
    let status = provider.shutdown().await?;
    assert_eq!(status.code(), Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Signals
// ---------------------------------------------------------------------------

#[tokio::test]
async fn sigint_under_terraform_is_ignored() -> anyhow::Result<()> {
    // Ctrl-C reaches the whole process group; Terraform stops providers itself.
    let provider = ProviderProcess::start().await?;
    provider.signal("INT")?;
    // Wait for the provider to have handled the signal, then check it still serves.
    provider
        .wait_for_stderr("interrupt received and ignored", Duration::from_secs(30))
        .await?;
    assert_eq!(provider.health().await?, ServingStatus::Serving);
    assert!(provider.shutdown().await?.success());
    Ok(())
}

#[tokio::test]
async fn sigterm_shuts_down_cleanly() -> anyhow::Result<()> {
    let mut provider = ProviderProcess::start().await?;
    provider.signal("TERM")?;
    let status = provider.wait_exit(support::EXIT_TIMEOUT).await?;
    assert_eq!(status.code(), Some(0));
    Ok(())
}

// ---------------------------------------------------------------------------
// Debug mode
// ---------------------------------------------------------------------------

#[tokio::test]
async fn debug_mode_prints_reattach_and_serves_plaintext() -> anyhow::Result<()> {
    let provider = Launch::debug().start().await?;
    let reattach = provider.reattach.clone().expect("reattach");
    let entry = &reattach["registry.terraform.io/talosboot/talosboot"];
    assert_eq!(entry["Protocol"], "grpc");
    assert_eq!(entry["ProtocolVersion"], 6);
    assert_eq!(entry["Test"], true);
    assert_eq!(entry["Addr"]["Network"], "tcp");
    assert_eq!(entry["Pid"].as_u64(), provider.pid().map(u64::from));
    assert!(
        provider.banner.iter().any(|l| l.contains("debug mode")),
        "banner: {:?}",
        provider.banner
    );
    // Connected over plaintext by the harness.
    assert_eq!(provider.health().await?, ServingStatus::Serving);
    assert!(provider.shutdown().await?.success());
    Ok(())
}

#[tokio::test]
async fn debug_mode_stops_on_ctrl_c() -> anyhow::Result<()> {
    let mut provider = Launch::debug().start().await?;
    provider.signal("INT")?;
    let status = provider.wait_exit(support::EXIT_TIMEOUT).await?;
    assert_eq!(status.code(), Some(0));
    Ok(())
}

// ---------------------------------------------------------------------------
// Logging
// ---------------------------------------------------------------------------

#[tokio::test]
async fn stderr_lines_are_hclog_json() -> anyhow::Result<()> {
    let mut provider = ProviderProcess::start().await?;
    assert_eq!(provider.health().await?, ServingStatus::Serving);
    provider.controller_client().shutdown(Empty {}).await?;
    assert!(provider.wait_exit(support::EXIT_TIMEOUT).await?.success());

    let lines = provider.stderr_lines();
    assert!(!lines.is_empty(), "no log lines at debug level");
    for line in &lines {
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| anyhow::anyhow!("not JSON ({e}): {line}"))?;
        for key in ["@level", "@message", "@module", "@timestamp"] {
            assert!(
                value[key].is_string(),
                "{key} missing or not a string: {line}"
            );
        }
        let level = value["@level"].as_str().unwrap_or_default();
        assert!(
            ["trace", "debug", "info", "warn", "error"].contains(&level),
            "{line}"
        );
        // go-plugin parses exactly this layout: 2006-01-02T15:04:05.000000Z07:00
        let ts = value["@timestamp"].as_str().unwrap_or_default();
        assert_eq!(ts.len(), 27, "{ts}");
        assert!(ts.ends_with('Z') && ts.as_bytes()[19] == b'.', "{ts}");
    }
    assert!(
        lines.iter().any(|l| l.contains("\"serving\"")),
        "no 'serving' line in {lines:#?}"
    );
    Ok(())
}

#[tokio::test]
async fn tf_log_off_silences_stderr() -> anyhow::Result<()> {
    let mut provider = Launch::terraform()
        .env("TF_LOG_PROVIDER", "off")
        .start()
        .await?;
    provider.controller_client().shutdown(Empty {}).await?;
    assert!(provider.wait_exit(support::EXIT_TIMEOUT).await?.success());
    assert_eq!(provider.stderr_lines(), Vec::<String>::new());
    Ok(())
}

// ---------------------------------------------------------------------------
// Orphan protection
// ---------------------------------------------------------------------------

/// True once `pid` has exited (gone, or a zombie nobody reaps yet).
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

#[tokio::test]
async fn provider_exits_when_terraform_is_killed() -> anyhow::Result<()> {
    use tokio::io::AsyncBufReadExt as _;

    // `sh` plays Terraform: it starts the provider and is then killed outright.
    // The pid goes to stderr: on stdout it would race the provider's handshake.
    let mut terraform = tokio::process::Command::new("sh")
        .arg("-c")
        .arg("\"$0\" 2>/dev/null & echo $! >&2; wait")
        .arg(support::BINARY)
        .env("TF_PLUGIN_MAGIC_COOKIE", support::MAGIC_COOKIE)
        .env("PLUGIN_PROTOCOL_VERSIONS", "6")
        .env_remove("PLUGIN_CLIENT_CERT")
        .env_remove("PLUGIN_MIN_PORT")
        .env_remove("PLUGIN_MAX_PORT")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = terraform.stdout.take().expect("stdout");
    let stderr = terraform.stderr.take().expect("stderr");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let pid: u32 = tokio::time::timeout(
        support::STARTUP_TIMEOUT,
        tokio::io::BufReader::new(stderr).lines().next_line(),
    )
    .await??
    .expect("pid line")
    .trim()
    .parse()?;
    let handshake = tokio::time::timeout(support::STARTUP_TIMEOUT, lines.next_line())
        .await??
        .expect("handshake line");
    support::Handshake::parse(&handshake)?;
    assert!(!exited(pid));

    terraform.kill().await?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !exited(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "orphaned provider {pid} still running"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}
