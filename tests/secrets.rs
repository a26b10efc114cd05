//! No secret in any diagnostic or log: marker secrets are fed through every error path the provider
//! has without a real cluster (provider-block validation and configuration, kubeconfig loading, API
//! rejections that echo values, unreachable endpoints with credentials in the URL, value decoding
//! of config, state and upgrade JSON, debug logging of values), and neither the diagnostics nor the
//! captured tracing output (every level, every crate) may contain any of them.
//!
//! The RPC handlers are called directly, in process, so that the provider's logs are captured.

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::schema::block_type;
use talosboot::protocol::ProviderService;
use talosboot::protocol::proto::{self as pb, provider_server::Provider as _};
use talosboot::values::{Type, Value, to_msgpack};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tonic::Request;

const MARKER: &str = "MARKER";

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(
            &self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
        .into_owned()
    }
}

/// An API server that rejects every request with a 422 echoing the marker, like kube-apiserver
/// echoes an invalid value. Counts the requests it answered.
async fn rejecting_api(requests: Arc<Mutex<usize>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("127.0.0.1:{}", listener.local_addr().expect("addr").port());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let requests = requests.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                *requests.lock().expect("lock") += 1;
                let body = serde_json::json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "reason": "Invalid", "code": 422,
                    "message": format!("Secret \"x\" is invalid: data[key]: Invalid value: \"{MARKER}-api-echo\\\"quoted\\\"\": a valid config key must consist of alphanumeric characters, metadata.labels: Invalid value: {MARKER}-unquoted: must be no more than 63 characters"),
                })
                .to_string();
                let reply = format!(
                    "HTTP/1.1 422 Unprocessable Entity\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    url
}

fn kubeconfig(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\nusers:\n- name: u\n  user:\n    token: {MARKER}-token\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
    )
}

fn provider_block(ty: &Type, pairs: &[(&str, Value)]) -> Option<pb::DynamicValue> {
    let Type::Object { attributes, .. } = ty else {
        panic!("provider type is an object");
    };
    let mut attrs: std::collections::BTreeMap<String, Value> = attributes
        .keys()
        .map(|k| (k.clone(), Value::Null))
        .collect();
    for (k, v) in pairs {
        attrs.insert((*k).to_owned(), v.clone());
    }
    Some(pb::DynamicValue {
        msgpack: to_msgpack(&Value::Object(attrs), ty).expect("encode"),
        json: Vec::new(),
    })
}

fn texts(diagnostics: &[pb::Diagnostic]) -> String {
    diagnostics
        .iter()
        .map(|d| format!("{} | {}\n", d.summary, d.detail))
        .collect()
}

fn raw(msgpack: Vec<u8>) -> Option<pb::DynamicValue> {
    Some(pb::DynamicValue {
        msgpack,
        json: Vec::new(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn marker_secrets_reach_no_diagnostic_and_no_log() {
    let captured = Captured::default();
    let writer = captured.clone();
    // The plugin's filter at its most verbose (TF_LOG=trace, `src/plugin/logging.rs`): talosboot at
    // every level, other crates at most `info`, transport crates at `warn` — here all transport
    // crates at `trace` too, which is stricter. (kube-client's own `debug` line for a failed request
    // prints the API's unscrubbed Status, which is why the plugin caps other crates at `info`.)
    use tracing_subscriber::prelude::*;
    let targets = tracing_subscriber::filter::Targets::new()
        .with_default(tracing::Level::INFO)
        .with_target("talosboot", tracing::Level::TRACE)
        .with_target("secrets", tracing::Level::TRACE)
        .with_target("hyper", tracing::Level::TRACE)
        .with_target("hyper_util", tracing::Level::TRACE)
        .with_target("tower", tracing::Level::TRACE)
        .with_target("h2", tracing::Level::TRACE)
        .with_target("rustls", tracing::Level::TRACE);
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_writer(move || writer.clone())
                .with_ansi(false)
                .with_filter(targets),
        ),
    )
    .expect("the only subscriber of this test binary");

    let dispatcher = Arc::new(talosboot::provider::dispatcher(Default::default(), true));
    let provider_type = dispatcher.provider_type().clone();
    let service = ProviderService::new(dispatcher);
    let mut diagnostics = String::new();
    // Each path must produce a diagnostic, or the test would prove nothing about it.
    fn record(all: &mut String, what: &str, diags: &[pb::Diagnostic]) {
        assert!(
            !diags.is_empty(),
            "{what}: no diagnostic, the error path was not reached"
        );
        all.push_str(&format!("--- {what}\n{}", texts(diags)));
    }

    // The provider block: a broken kubeconfig, a host with a password, key material that is not PEM.
    let broken_yaml =
        format!("apiVersion: v1\nusers:\n- name: a\n  user:\n    token: {MARKER}-yaml\n  : [\n");
    let blocks = [
        (
            "broken kubeconfig",
            vec![("kubeconfig_raw", Value::from(broken_yaml.as_str()))],
        ),
        (
            "host with user info",
            vec![(
                "host",
                Value::from(format!("https://admin:{MARKER}-pw@10.0.0.1:6443")),
            )],
        ),
        (
            "host without scheme, with user info",
            vec![(
                "host",
                Value::from(format!("admin:{MARKER}-pw@10.0.0.1:6443")),
            )],
        ),
        (
            "key that is not PEM",
            vec![
                ("host", Value::from("https://10.0.0.1:6443")),
                ("client_certificate", Value::from(format!("{MARKER}-cert"))),
                ("client_key", Value::from(format!("{MARKER}-key"))),
            ],
        ),
        (
            "token and kubeconfig together",
            vec![
                ("kubeconfig_raw", Value::from(broken_yaml.as_str())),
                ("token", Value::from(format!("{MARKER}-token"))),
            ],
        ),
    ];
    for (what, pairs) in &blocks {
        let config = provider_block(&provider_type, pairs);
        let validated = service
            .validate_provider_config(Request::new(pb::validate_provider_config::Request {
                config: config.clone(),
            }))
            .await
            .expect("rpc");
        record(&mut diagnostics, what, &validated.get_ref().diagnostics);
        let configured = service
            .configure_provider(Request::new(pb::configure_provider::Request {
                config,
                ..Default::default()
            }))
            .await
            .expect("rpc");
        record(&mut diagnostics, what, &configured.get_ref().diagnostics);
    }

    // A kubeconfig file that cannot be parsed.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, &broken_yaml).expect("write kubeconfig");
    let data_source_config = |ty: &Type| {
        raw(to_msgpack(
            &Value::Object(
                [
                    ("name".to_owned(), Value::from("cilium")),
                    ("namespace".to_owned(), Value::from("kube-system")),
                ]
                .into_iter()
                .chain(
                    [
                        "id",
                        "exists",
                        "status",
                        "revision",
                        "chart",
                        "chart_version",
                        "app_version",
                        "last_deployed",
                        "description",
                        "values_sha256",
                    ]
                    .map(|k| (k.to_owned(), Value::Null)),
                )
                .collect(),
            ),
            ty,
        )
        .expect("encode"))
    };
    let schema = service
        .get_provider_schema(Request::new(pb::get_provider_schema::Request {}))
        .await
        .expect("rpc")
        .into_inner();
    let helm_type = block_type(
        schema.data_source_schemas["talosboot_helm_release"]
            .block
            .as_ref()
            .expect("block"),
    );

    // Cluster paths: a kubeconfig file that does not parse, an API that echoes values, an endpoint
    // with credentials in its URL that refuses connections.
    let requests = Arc::new(Mutex::new(0));
    let api = rejecting_api(requests.clone()).await;
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let raw_api = kubeconfig(&format!("http://admin:{MARKER}-url-pw@{api}"));
    let raw_closed = kubeconfig(&format!("http://admin:{MARKER}-url-pw@127.0.0.1:{closed}"));
    let cluster_paths = [
        (
            "kubeconfig file that does not parse",
            ("config_path", Value::from(path.display().to_string())),
        ),
        (
            "API echoing an invalid value",
            ("kubeconfig_raw", Value::from(raw_api.as_str())),
        ),
        (
            "unreachable endpoint with user info",
            ("kubeconfig_raw", Value::from(raw_closed.as_str())),
        ),
    ];
    for (what, pair) in cluster_paths {
        let configured = service
            .configure_provider(Request::new(pb::configure_provider::Request {
                config: provider_block(&provider_type, &[pair]),
                ..Default::default()
            }))
            .await
            .expect("rpc");
        assert!(
            configured.get_ref().diagnostics.is_empty(),
            "{what}: configure only stores the settings: {:?}",
            texts(&configured.get_ref().diagnostics)
        );
        let read = tokio::time::timeout(
            Duration::from_secs(60),
            service.read_data_source(Request::new(pb::read_data_source::Request {
                type_name: "talosboot_helm_release".into(),
                config: data_source_config(&helm_type),
                ..Default::default()
            })),
        )
        .await
        .expect("the read ends")
        .expect("rpc");
        record(&mut diagnostics, what, &read.get_ref().diagnostics);
    }
    assert!(
        *requests.lock().expect("lock") > 0,
        "the rejecting API was reached"
    );
    assert!(
        diagnostics.contains("Invalid value: <redacted>"),
        "{diagnostics}"
    );

    // Decoding: a secret where an object, a bool or a number belongs, in config, state and JSON.
    let secret_string =
        to_msgpack(&Value::from(format!("{MARKER}-as-config")), &Type::String).expect("encode");
    let planned = service
        .plan_resource_change(Request::new(pb::plan_resource_change::Request {
            type_name: "talosboot_test_object".into(),
            config: raw(secret_string.clone()),
            proposed_new_state: raw(secret_string.clone()),
            ..Default::default()
        }))
        .await
        .expect("rpc");
    record(
        &mut diagnostics,
        "config that is a secret string",
        &planned.get_ref().diagnostics,
    );
    let validated = service
        .validate_resource_config(Request::new(pb::validate_resource_config::Request {
            type_name: "talosboot_test_object".into(),
            config: raw(secret_string),
            ..Default::default()
        }))
        .await
        .expect("rpc");
    record(
        &mut diagnostics,
        "validate a secret string",
        &validated.get_ref().diagnostics,
    );
    for json in [
        format!(r#"{{"id":"a","name":"a","value":{{"x":"{MARKER}-nested"}}}}"#),
        format!(r#"{{"id":"a","name":"a","revision":"{MARKER}-not-a-number"}}"#),
        format!(r#"{{"id":"a","name":"a","value":"{MARKER}-unterminated"#),
    ] {
        let upgraded = service
            .upgrade_resource_state(Request::new(pb::upgrade_resource_state::Request {
                type_name: "talosboot_test_object".into(),
                version: 1,
                raw_state: Some(pb::RawState {
                    json: json.into_bytes(),
                    flatmap: Default::default(),
                }),
            }))
            .await
            .expect("rpc");
        record(
            &mut diagnostics,
            "state JSON",
            &upgraded.get_ref().diagnostics,
        );
    }

    // Values logged for debugging show their structure only.
    let config =
        Value::Object([("kubeconfig_raw".to_owned(), Value::from(raw_api.as_str()))].into());
    tracing::debug!(?config, "a resource logging its config");

    let logs = captured.text();
    assert!(
        logs.contains("a resource logging its config"),
        "logs were captured: {logs}"
    );
    assert!(
        logs.contains("hyper_util") && logs.contains("talosboot::framework::dispatcher"),
        "transport and provider logs were captured: {logs}"
    );
    assert!(
        !diagnostics.contains(MARKER),
        "a secret reached a diagnostic:\n{diagnostics}"
    );
    assert!(!logs.contains(MARKER), "a secret reached the logs:\n{logs}");
}
