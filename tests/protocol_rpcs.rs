//! Protocol-level tests: a Terraform-like client (go-plugin handshake, P-521 AutoMTLS) drives every
//! tfplugin6 RPC of the real binary, with `talosboot_test_object` exercising the managed-resource
//! paths (plan/apply/read/import/upgrade/move) and the data source the provider-config paths.

mod support;

use std::collections::BTreeMap;

use talosboot::protocol::proto as pb;
use talosboot::values::{Type, Value, from_msgpack, to_msgpack};
use tonic::transport::Channel;

use support::schema::block_type;
use support::{Launch, ProviderProcess};

type Client = pb::provider_client::ProviderClient<Channel>;

const TEST_OBJECT: &str = "talosboot_test_object";

async fn start() -> (ProviderProcess, Client) {
    let provider = Launch::terraform()
        .env("TALOSBOOT_ENABLE_TEST_RESOURCES", "1")
        .start()
        .await
        .expect("provider starts");
    let client = provider.provider_client();
    (provider, client)
}

fn dv(value: &Value, ty: &Type) -> Option<pb::DynamicValue> {
    Some(pb::DynamicValue {
        msgpack: to_msgpack(value, ty).expect("encode"),
        json: Vec::new(),
    })
}

fn decode(value: &Option<pb::DynamicValue>, ty: &Type) -> Value {
    from_msgpack(&value.as_ref().expect("a value").msgpack, ty).expect("decode")
}

fn object(pairs: &[(&str, Value)]) -> Value {
    Value::Object(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn test_object(name: &str, value: Option<&str>, secret: Option<&str>) -> Value {
    object(&[
        ("id", Value::Null),
        ("name", name.into()),
        ("value", value.into()),
        ("secret", secret.into()),
        ("secret_sha256", Value::Null),
        ("note", Value::Null),
        ("revision", Value::Null),
    ])
}

fn errors(diags: &[pb::Diagnostic]) -> Vec<String> {
    diags
        .iter()
        .filter(|d| d.severity == pb::diagnostic::Severity::Error as i32)
        .map(|d| format!("{}: {}", d.summary, d.detail))
        .collect()
}

fn attr_path(diag: &pb::Diagnostic) -> Vec<String> {
    use pb::attribute_path::step::Selector;
    diag.attribute
        .iter()
        .flat_map(|p| &p.steps)
        .filter_map(|s| match &s.selector {
            Some(Selector::AttributeName(n)) => Some(n.clone()),
            _ => None,
        })
        .collect()
}

async fn schemas(client: &mut Client) -> pb::get_provider_schema::Response {
    client
        .get_provider_schema(pb::get_provider_schema::Request {})
        .await
        .expect("schema")
        .into_inner()
}

#[tokio::test]
async fn metadata_and_schema_describe_the_provider() {
    let (provider, mut client) = start().await;
    let meta = client
        .get_metadata(pb::get_metadata::Request {})
        .await
        .expect("metadata")
        .into_inner();
    assert!(meta.resources.iter().any(|r| r.type_name == TEST_OBJECT));
    assert!(
        meta.data_sources
            .iter()
            .any(|d| d.type_name == "talosboot_helm_release")
    );
    assert!(
        meta.server_capabilities
            .expect("capabilities")
            .move_resource_state
    );

    let schema = schemas(&mut client).await;
    let provider_block = schema
        .provider
        .and_then(|s| s.block)
        .expect("provider schema");
    let raw = provider_block
        .attributes
        .iter()
        .find(|a| a.name == "kubeconfig_raw")
        .expect("kubeconfig_raw");
    assert!(raw.sensitive && raw.optional);
    let test = &schema.resource_schemas[TEST_OBJECT];
    assert_eq!(test.version, 1);
    let secret = test
        .block
        .as_ref()
        .expect("block")
        .attributes
        .iter()
        .find(|a| a.name == "secret")
        .expect("secret");
    assert!(secret.write_only && secret.sensitive);
    assert!(provider.shutdown().await.expect("exit").success());
}

#[tokio::test]
async fn provider_config_is_validated_with_paths_and_unknowns_accepted() {
    let (provider, mut client) = start().await;
    let schema = schemas(&mut client).await;
    let ty = block_type(
        schema
            .provider
            .as_ref()
            .and_then(|s| s.block.as_ref())
            .expect("block"),
    );
    let nulls: Vec<(&str, Value)> = [
        "kubeconfig_raw",
        "config_path",
        "config_context",
        "host",
        "cluster_ca_certificate",
        "client_certificate",
        "client_key",
        "token",
    ]
    .into_iter()
    .map(|n| (n, Value::Null))
    .collect();
    let with = |overrides: &[(&str, Value)]| {
        let mut v = object(&nulls);
        for (k, x) in overrides {
            v.attrs_mut()
                .expect("object")
                .insert((*k).to_owned(), x.clone());
        }
        v
    };

    let conflicting = with(&[
        ("config_path", "/kc".into()),
        ("host", "https://10.5.0.2:6443".into()),
    ]);
    let resp = client
        .validate_provider_config(pb::validate_provider_config::Request {
            config: dv(&conflicting, &ty),
        })
        .await
        .expect("rpc")
        .into_inner();
    let diag = resp.diagnostics.first().expect("a diagnostic");
    assert_eq!(attr_path(diag), vec!["host"]);

    let unknown = with(&[("kubeconfig_raw", Value::unknown())]);
    let resp = client
        .configure_provider(pb::configure_provider::Request {
            config: dv(&unknown, &ty),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    assert!(resp.diagnostics.is_empty(), "{:?}", resp.diagnostics);

    // With the configuration unknown, a data source read is deferred when Terraform allows it …
    let ds_ty = block_type(
        schema.data_source_schemas["talosboot_helm_release"]
            .block
            .as_ref()
            .expect("block"),
    );
    let mut ds_config = BTreeMap::new();
    if let Type::Object { attributes, .. } = &ds_ty {
        for name in attributes.keys() {
            ds_config.insert(name.clone(), Value::Null);
        }
    }
    ds_config.insert("name".into(), "cilium".into());
    let ds_config = Value::Object(ds_config);
    let deferred = client
        .read_data_source(pb::read_data_source::Request {
            type_name: "talosboot_helm_release".into(),
            config: dv(&ds_config, &ds_ty),
            client_capabilities: Some(pb::ClientCapabilities {
                deferral_allowed: true,
                write_only_attributes_allowed: true,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    assert_eq!(
        deferred.deferred.map(|d| d.reason),
        Some(pb::deferred::Reason::ProviderConfigUnknown as i32)
    );
    // … and otherwise explained, without touching any network.
    let failed = client
        .read_data_source(pb::read_data_source::Request {
            type_name: "talosboot_helm_release".into(),
            config: dv(&ds_config, &ds_ty),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    assert!(
        errors(&failed.diagnostics)
            .iter()
            .any(|e| e.contains("not known yet")),
        "{:?}",
        failed.diagnostics
    );
    assert!(provider.shutdown().await.expect("exit").success());
}

#[tokio::test]
async fn managed_resource_lifecycle() {
    let (provider, mut client) = start().await;
    let schema = schemas(&mut client).await;
    let ty = block_type(
        schema.resource_schemas[TEST_OBJECT]
            .block
            .as_ref()
            .expect("block"),
    );
    let plan = |prior: Value, proposed: Value, config: Value, private: Vec<u8>| {
        pb::plan_resource_change::Request {
            type_name: TEST_OBJECT.into(),
            prior_state: dv(&prior, &ty),
            proposed_new_state: dv(&proposed, &ty),
            config: dv(&config, &ty),
            prior_private: private,
            ..Default::default()
        }
    };

    // validate: bad input is reported on its attribute
    let invalid = client
        .validate_resource_config(pb::validate_resource_config::Request {
            type_name: TEST_OBJECT.into(),
            config: dv(&test_object("", None, None), &ty),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    assert_eq!(
        attr_path(invalid.diagnostics.first().expect("diagnostic")),
        vec!["name"]
    );

    // create
    let config = test_object("a", Some("one"), Some("s3cret"));
    let planned = client
        .plan_resource_change(plan(Value::Null, config.clone(), config.clone(), vec![]))
        .await
        .expect("plan")
        .into_inner();
    assert!(
        errors(&planned.diagnostics).is_empty(),
        "{:?}",
        planned.diagnostics
    );
    let planned_state = decode(&planned.planned_state, &ty);
    assert!(planned_state.attr("id").is_some_and(Value::is_unknown));
    assert_eq!(
        planned_state.attr("secret"),
        Some(&Value::Null),
        "write-only values never leave in a plan"
    );
    let hash = planned_state
        .attr("secret_sha256")
        .and_then(Value::as_str)
        .expect("hash")
        .to_owned();
    assert_eq!(hash.len(), 64);
    assert_eq!(planned.planned_private, b"planned");

    let applied = client
        .apply_resource_change(pb::apply_resource_change::Request {
            type_name: TEST_OBJECT.into(),
            prior_state: dv(&Value::Null, &ty),
            planned_state: planned.planned_state.clone(),
            config: dv(&config, &ty),
            planned_private: planned.planned_private.clone(),
            ..Default::default()
        })
        .await
        .expect("apply")
        .into_inner();
    assert!(errors(&applied.diagnostics).is_empty());
    let state = decode(&applied.new_state, &ty);
    assert_eq!(state.attr("id"), Some(&Value::from("a")));
    assert_eq!(state.attr("revision").and_then(Value::as_i64), Some(1));
    assert_eq!(
        state.attr("secret"),
        Some(&Value::Null),
        "write-only values are never stored"
    );

    // read keeps state and private state
    let read = client
        .read_resource(pb::read_resource::Request {
            type_name: TEST_OBJECT.into(),
            current_state: applied.new_state.clone(),
            private: applied.private.clone(),
            ..Default::default()
        })
        .await
        .expect("read")
        .into_inner();
    assert_eq!(decode(&read.new_state, &ty), state);
    assert_eq!(read.private, b"applied");

    // update in place bumps the revision; renaming requires replacement
    let changed = test_object("a", Some("two"), Some("s3cret"));
    let mut proposed = changed.clone();
    for keep in ["id", "secret_sha256", "revision"] {
        proposed
            .attrs_mut()
            .expect("object")
            .insert(keep.into(), state.attr(keep).cloned().expect("attr"));
    }
    let update = client
        .plan_resource_change(plan(
            state.clone(),
            proposed.clone(),
            changed.clone(),
            read.private.clone(),
        ))
        .await
        .expect("plan")
        .into_inner();
    assert!(
        decode(&update.planned_state, &ty)
            .attr("revision")
            .is_some_and(Value::is_unknown)
    );
    assert!(update.requires_replace.is_empty());
    let mut renamed = proposed.clone();
    renamed
        .attrs_mut()
        .expect("object")
        .insert("name".into(), "b".into());
    let replace = client
        .plan_resource_change(plan(
            state.clone(),
            renamed.clone(),
            renamed,
            read.private.clone(),
        ))
        .await
        .expect("plan")
        .into_inner();
    assert_eq!(
        replace
            .requires_replace
            .iter()
            .map(|p| p.steps.len())
            .collect::<Vec<_>>(),
        vec![1]
    );

    // destroy
    let destroy = client
        .plan_resource_change(plan(
            state.clone(),
            Value::Null,
            Value::Null,
            read.private.clone(),
        ))
        .await
        .expect("plan")
        .into_inner();
    assert_eq!(decode(&destroy.planned_state, &ty), Value::Null);
    let destroyed = client
        .apply_resource_change(pb::apply_resource_change::Request {
            type_name: TEST_OBJECT.into(),
            prior_state: dv(&state, &ty),
            planned_state: dv(&Value::Null, &ty),
            config: dv(&Value::Null, &ty),
            ..Default::default()
        })
        .await
        .expect("apply")
        .into_inner();
    assert_eq!(decode(&destroyed.new_state, &ty), Value::Null);
    assert!(provider.shutdown().await.expect("exit").success());
}

#[tokio::test]
async fn failed_create_keeps_the_object_in_state() {
    let (provider, mut client) = start().await;
    let ty = block_type(
        schemas(&mut client).await.resource_schemas[TEST_OBJECT]
            .block
            .as_ref()
            .expect("block"),
    );
    let config = test_object("t", Some("fail-after-create"), None);
    let planned = client
        .plan_resource_change(pb::plan_resource_change::Request {
            type_name: TEST_OBJECT.into(),
            prior_state: dv(&Value::Null, &ty),
            proposed_new_state: dv(&config, &ty),
            config: dv(&config, &ty),
            ..Default::default()
        })
        .await
        .expect("plan")
        .into_inner();
    let applied = client
        .apply_resource_change(pb::apply_resource_change::Request {
            type_name: TEST_OBJECT.into(),
            prior_state: dv(&Value::Null, &ty),
            planned_state: planned.planned_state,
            config: dv(&config, &ty),
            ..Default::default()
        })
        .await
        .expect("apply")
        .into_inner();
    assert_eq!(errors(&applied.diagnostics).len(), 1);
    let state = decode(&applied.new_state, &ty);
    assert_eq!(
        state.attr("id"),
        Some(&Value::from("t")),
        "state must tell the truth: the object exists (tainted)"
    );
    assert!(provider.shutdown().await.expect("exit").success());
}

#[tokio::test]
async fn import_upgrade_and_move() {
    let (provider, mut client) = start().await;
    let ty = block_type(
        schemas(&mut client).await.resource_schemas[TEST_OBJECT]
            .block
            .as_ref()
            .expect("block"),
    );

    let imported = client
        .import_resource_state(pb::import_resource_state::Request {
            type_name: TEST_OBJECT.into(),
            id: "imp".into(),
            ..Default::default()
        })
        .await
        .expect("import")
        .into_inner();
    let first = imported.imported_resources.first().expect("imported");
    assert_eq!(first.type_name, TEST_OBJECT);
    assert_eq!(
        decode(&first.state, &ty).attr("name"),
        Some(&Value::from("imp"))
    );

    let upgrade = |version: i64, json: &str| pb::upgrade_resource_state::Request {
        type_name: TEST_OBJECT.into(),
        version,
        raw_state: Some(pb::RawState {
            json: json.as_bytes().to_vec(),
            flatmap: Default::default(),
        }),
    };
    let v0 = client
        .upgrade_resource_state(upgrade(0, r#"{"id":"a","name":"a","text":"old"}"#))
        .await
        .expect("upgrade")
        .into_inner();
    assert!(errors(&v0.diagnostics).is_empty(), "{:?}", v0.diagnostics);
    assert_eq!(
        decode(&v0.upgraded_state, &ty).attr("value"),
        Some(&Value::from("old"))
    );
    let current = client
        .upgrade_resource_state(upgrade(
            1,
            r#"{"id":"a","name":"a","value":"v","secret":null,"secret_sha256":null,"revision":3}"#,
        ))
        .await
        .expect("upgrade")
        .into_inner();
    assert_eq!(
        decode(&current.upgraded_state, &ty)
            .attr("revision")
            .and_then(Value::as_i64),
        Some(3)
    );
    let newer = client
        .upgrade_resource_state(upgrade(7, "{}"))
        .await
        .expect("upgrade")
        .into_inner();
    assert!(errors(&newer.diagnostics)[0].contains("newer provider"));

    let moved = client
        .move_resource_state(pb::move_resource_state::Request {
            source_provider_address: "registry.terraform.io/hashicorp/helm".into(),
            source_type_name: "helm_release".into(),
            target_type_name: TEST_OBJECT.into(),
            ..Default::default()
        })
        .await
        .expect("move")
        .into_inner();
    assert!(errors(&moved.diagnostics)[0].contains("helm_release"));
    assert!(provider.shutdown().await.expect("exit").success());
}

#[tokio::test]
async fn unsupported_and_malformed_requests_answer_with_diagnostics() {
    let (provider, mut client) = start().await;
    let unknown = client
        .plan_resource_change(pb::plan_resource_change::Request {
            type_name: "talosboot_nope".into(),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    assert!(errors(&unknown.diagnostics)[0].contains("Unknown resource type"));

    let garbage = client
        .validate_resource_config(pb::validate_resource_config::Request {
            type_name: TEST_OBJECT.into(),
            config: Some(pb::DynamicValue {
                msgpack: vec![0xc1, 0xff, 0x00, 0x93],
                json: vec![],
            }),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    assert!(errors(&garbage.diagnostics)[0].contains("Failed to decode"));

    let functions = client
        .get_functions(pb::get_functions::Request {})
        .await
        .expect("rpc")
        .into_inner();
    // (functions themselves: tests/protocol_functions.rs)
    assert!(functions.functions.contains_key("cilium_talos_values"));
    let call = client
        .call_function(pb::call_function::Request {
            name: "x".into(),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    let error = call.error.expect("an unknown function is an error");
    assert!(error.text.contains("\"x\""), "{}", error.text);
    let eph = client
        .validate_ephemeral_resource_config(pb::validate_ephemeral_resource_config::Request {
            type_name: "talosboot_x".into(),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    assert_eq!(errors(&eph.diagnostics).len(), 1);
    let open = client
        .open_ephemeral_resource(pb::open_ephemeral_resource::Request {
            type_name: "talosboot_x".into(),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    assert_eq!(errors(&open.diagnostics).len(), 1);
    let renew = client
        .renew_ephemeral_resource(pb::renew_ephemeral_resource::Request {
            type_name: "talosboot_x".into(),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    assert_eq!(errors(&renew.diagnostics).len(), 1);
    let close = client
        .close_ephemeral_resource(pb::close_ephemeral_resource::Request {
            type_name: "talosboot_x".into(),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    assert_eq!(errors(&close.diagnostics).len(), 1);
    let ids = client
        .get_resource_identity_schemas(pb::get_resource_identity_schemas::Request {})
        .await
        .expect("rpc")
        .into_inner();
    // (identity itself: tests/protocol_identity.rs)
    assert!(ids.identity_schemas.contains_key("talosboot_helm_release"));
    let upgrade_id = client
        .upgrade_resource_identity(pb::upgrade_resource_identity::Request {
            type_name: "talosboot_nope".into(),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    assert_eq!(errors(&upgrade_id.diagnostics).len(), 1);

    // StopProvider cancels in-flight work but keeps serving.
    let stop = client
        .stop_provider(pb::stop_provider::Request {})
        .await
        .expect("rpc")
        .into_inner();
    assert!(stop.error.is_empty());
    client
        .get_metadata(pb::get_metadata::Request {})
        .await
        .expect("still serving after StopProvider");
    assert!(provider.shutdown().await.expect("exit").success());
}

#[tokio::test]
async fn stop_provider_cancels_a_read_in_flight() {
    // An endpoint that accepts connections and hands them to the test, which decides when (if
    // ever) they end: held open, a read hangs; dropped, the read fails with its real cause.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (accepted_tx, mut accepted) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            if accepted_tx.send(socket).is_err() {
                break;
            }
        }
    });
    let bound = std::time::Duration::from_secs(60);
    let (provider, mut client) = start().await;
    let schema = schemas(&mut client).await;
    let provider_ty = block_type(
        schema
            .provider
            .as_ref()
            .and_then(|s| s.block.as_ref())
            .expect("block"),
    );
    let mut config = BTreeMap::new();
    for name in [
        "kubeconfig_raw",
        "config_path",
        "config_context",
        "cluster_ca_certificate",
        "client_certificate",
        "client_key",
    ] {
        config.insert(name.to_owned(), Value::Null);
    }
    config.insert("host".into(), format!("https://{addr}").into());
    config.insert("token".into(), "t0k3n".into());
    let configured = client
        .configure_provider(pb::configure_provider::Request {
            config: dv(&Value::Object(config), &provider_ty),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    assert!(configured.diagnostics.is_empty());

    let ds_ty = block_type(
        schema.data_source_schemas["talosboot_helm_release"]
            .block
            .as_ref()
            .expect("block"),
    );
    let mut ds = BTreeMap::new();
    if let Type::Object { attributes, .. } = &ds_ty {
        for name in attributes.keys() {
            ds.insert(name.clone(), Value::Null);
        }
    }
    ds.insert("name".into(), "cilium".into());
    let request = pb::read_data_source::Request {
        type_name: "talosboot_helm_release".into(),
        config: dv(&Value::Object(ds), &ds_ty),
        ..Default::default()
    };
    let request_again = request.clone();
    let mut reader = client.clone();
    let started = std::time::Instant::now();
    let read = tokio::spawn(async move { reader.read_data_source(request).await });
    let _held = tokio::time::timeout(bound, accepted.recv())
        .await
        .expect("the read reaches the endpoint")
        .expect("a connection");
    assert!(
        !read.is_finished(),
        "the read should be hanging on the silent endpoint"
    );
    client
        .stop_provider(pb::stop_provider::Request {})
        .await
        .expect("stop");
    let resp = read.await.expect("join").expect("rpc").into_inner();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        errors(&resp.diagnostics)
            .iter()
            .any(|e| e.contains("cancelled")),
        "{:?}",
        resp.diagnostics
    );
    // Operations started after StopProvider run normally: this one reaches the endpoint, which
    // then closes the connection, and the read ends with that cause, not as cancelled.
    let mut later = client.clone();
    let again = tokio::spawn(async move { later.read_data_source(request_again).await });
    let second = tokio::time::timeout(bound, accepted.recv())
        .await
        .expect("a read started after StopProvider reaches the endpoint")
        .expect("a connection");
    drop(second);
    let resp = tokio::time::timeout(bound, again)
        .await
        .expect("the read ends once the endpoint closes the connection")
        .expect("join")
        .expect("rpc")
        .into_inner();
    let errors = errors(&resp.diagnostics);
    assert!(
        !errors.iter().any(|e| e.contains("cancelled")),
        "a read started after StopProvider must not be cancelled: {errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("cannot reach")),
        "the read failed on the closed connection: {errors:?}"
    );
    assert!(provider.shutdown().await.expect("exit").success());
}

#[tokio::test]
async fn write_only_values_need_a_client_that_supports_them() {
    let (provider, mut client) = start().await;
    let ty = block_type(
        schemas(&mut client).await.resource_schemas[TEST_OBJECT]
            .block
            .as_ref()
            .expect("block"),
    );
    let config = test_object("a", None, Some("s3cret"));
    let validate = |caps: Option<pb::ClientCapabilities>| pb::validate_resource_config::Request {
        type_name: TEST_OBJECT.into(),
        config: dv(&config, &ty),
        client_capabilities: caps,
    };
    // Terraform before 1.11 does not know write-only: it would keep the value in state.
    let old = client
        .validate_resource_config(validate(None))
        .await
        .expect("rpc")
        .into_inner();
    let diag = old.diagnostics.first().expect("a diagnostic");
    assert_eq!(attr_path(diag), vec!["secret"]);
    assert!(diag.detail.contains("1.11"), "{}", diag.detail);
    assert!(!diag.detail.contains("s3cret"));
    let new = client
        .validate_resource_config(validate(Some(pb::ClientCapabilities {
            deferral_allowed: false,
            write_only_attributes_allowed: true,
            ..Default::default()
        })))
        .await
        .expect("rpc")
        .into_inner();
    assert!(new.diagnostics.is_empty(), "{:?}", new.diagnostics);
    assert!(provider.shutdown().await.expect("exit").success());
}

/// The dispatcher keeps state that tells the truth when a resource misbehaves.
#[tokio::test]
async fn failed_destroy_and_missing_update_state_keep_the_prior_state() {
    let (provider, mut client) = start().await;
    let ty = block_type(
        schemas(&mut client).await.resource_schemas[TEST_OBJECT]
            .block
            .as_ref()
            .expect("block"),
    );
    let mut state = test_object("k", Some("fail-destroy"), None);
    for (k, v) in [("id", Value::from("k")), ("revision", Value::int(1))] {
        state.attrs_mut().expect("object").insert(k.into(), v);
    }
    let apply =
        |prior: &Value, planned: &Value, private: &[u8]| pb::apply_resource_change::Request {
            type_name: TEST_OBJECT.into(),
            prior_state: dv(prior, &ty),
            planned_state: dv(planned, &ty),
            config: dv(planned, &ty),
            planned_private: private.to_vec(),
            ..Default::default()
        };
    let destroyed = client
        .apply_resource_change(apply(&state, &Value::Null, b"p"))
        .await
        .expect("rpc")
        .into_inner();
    assert_eq!(errors(&destroyed.diagnostics).len(), 1);
    assert_eq!(
        decode(&destroyed.new_state, &ty),
        state,
        "a failed destroy keeps the object in state"
    );
    assert_eq!(destroyed.private, b"p");

    let mut updated = state.clone();
    updated
        .attrs_mut()
        .expect("object")
        .insert("value".into(), "no-state-after-update".into());
    let resp = client
        .apply_resource_change(apply(&state, &updated, b"p"))
        .await
        .expect("rpc")
        .into_inner();
    assert!(errors(&resp.diagnostics)[0].contains("bug in the provider"));
    assert_eq!(
        decode(&resp.new_state, &ty),
        state,
        "the prior state is kept"
    );
    assert!(provider.shutdown().await.expect("exit").success());
}

#[tokio::test]
async fn setting_a_deprecated_attribute_warns_on_its_path() {
    let (provider, mut client) = start().await;
    let ty = block_type(
        schemas(&mut client).await.resource_schemas[TEST_OBJECT]
            .block
            .as_ref()
            .expect("block"),
    );
    let mut config = test_object("a", None, None);
    config
        .attrs_mut()
        .expect("object")
        .insert("note".into(), "old".into());
    let resp = client
        .validate_resource_config(pb::validate_resource_config::Request {
            type_name: TEST_OBJECT.into(),
            config: dv(&config, &ty),
            client_capabilities: None,
        })
        .await
        .expect("rpc")
        .into_inner();
    let warning = resp.diagnostics.first().expect("a warning");
    assert_eq!(warning.severity, pb::diagnostic::Severity::Warning as i32);
    assert_eq!(attr_path(warning), vec!["note"]);
    assert!(warning.detail.contains("use `value` instead"));
    let unset = client
        .validate_resource_config(pb::validate_resource_config::Request {
            type_name: TEST_OBJECT.into(),
            config: dv(&test_object("a", None, None), &ty),
            client_capabilities: None,
        })
        .await
        .expect("rpc")
        .into_inner();
    assert!(
        unset.diagnostics.is_empty(),
        "no warning when the attribute is not set"
    );
    assert!(provider.shutdown().await.expect("exit").success());
}
