//! Protocol-level tests of resource identity (6.9), list resources and generated configuration
//! (6.10) and the RPCs 6.11 added, against the real binary as Terraform 1.16 calls them:
//! `talosboot_test_object` (identity: its `name`) runs the managed-resource paths without a
//! cluster; the chart resources' declared identities and list schemas are checked as Terraform
//! reads them.

mod support;

use std::collections::BTreeMap;

use talosboot::protocol::proto as pb;
use talosboot::values::{Type, Value, from_msgpack, to_msgpack};
use tonic::transport::Channel;

use support::schema::attribute_type;
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

/// The object type of a schema, built from what the provider told us (as Terraform does).
fn schema_type(schema: &pb::Schema) -> Type {
    let block = schema.block.as_ref().expect("block");
    assert!(block.block_types.is_empty(), "no nested blocks expected");
    Type::object(
        block
            .attributes
            .iter()
            .map(|a| (a.name.clone(), attribute_type(a))),
    )
}

fn identity_type(schema: &pb::ResourceIdentitySchema) -> Type {
    Type::object(schema.identity_attributes.iter().map(|a| {
        (
            a.name.clone(),
            Type::from_json_bytes(&a.r#type).expect("identity type"),
        )
    }))
}

fn dv(value: &Value, ty: &Type) -> Option<pb::DynamicValue> {
    Some(pb::DynamicValue {
        msgpack: to_msgpack(value, ty).expect("encode"),
        json: Vec::new(),
    })
}

fn identity_data(value: &Value, ty: &Type) -> Option<pb::ResourceIdentityData> {
    Some(pb::ResourceIdentityData {
        identity_data: dv(value, ty),
    })
}

fn decode(value: &Option<pb::DynamicValue>, ty: &Type) -> Value {
    from_msgpack(&value.as_ref().expect("a value").msgpack, ty).expect("decode")
}

fn decode_identity(identity: &Option<pb::ResourceIdentityData>, ty: &Type) -> Value {
    decode(&identity.as_ref().expect("an identity").identity_data, ty)
}

fn object(pairs: &[(&str, Value)]) -> Value {
    Value::Object(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn test_object(name: &str, value: Option<&str>) -> Value {
    object(&[
        ("id", Value::Null),
        ("name", name.into()),
        ("value", value.into()),
        ("secret", Value::Null),
        ("secret_sha256", Value::Null),
        ("note", Value::Null),
        ("revision", Value::Null),
    ])
}

fn named(name: &str) -> Value {
    object(&[("name", name.into())])
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

struct Types {
    state: Type,
    identity: Type,
}

async fn test_object_types(client: &mut Client) -> Types {
    let schema = client
        .get_provider_schema(pb::get_provider_schema::Request {})
        .await
        .expect("schema")
        .into_inner();
    let ids = client
        .get_resource_identity_schemas(pb::get_resource_identity_schemas::Request {})
        .await
        .expect("identity schemas")
        .into_inner();
    Types {
        state: schema_type(&schema.resource_schemas[TEST_OBJECT]),
        identity: identity_type(&ids.identity_schemas[TEST_OBJECT]),
    }
}

#[tokio::test]
async fn identity_schemas_name_each_release_and_the_flux_instance() {
    let (provider, mut client) = start().await;
    let ids = client
        .get_resource_identity_schemas(pb::get_resource_identity_schemas::Request {})
        .await
        .expect("rpc")
        .into_inner();
    assert!(ids.diagnostics.is_empty());
    let attributes = |type_name: &str| -> Vec<(String, bool, bool)> {
        let schema = &ids.identity_schemas[type_name];
        assert_eq!(schema.version, 0);
        schema
            .identity_attributes
            .iter()
            .map(|a| {
                assert_eq!(
                    Type::from_json_bytes(&a.r#type).expect("type"),
                    Type::String
                );
                assert!(!a.description.is_empty());
                (a.name.clone(), a.required_for_import, a.optional_for_import)
            })
            .collect()
    };
    let release = vec![
        ("namespace".to_owned(), true, false),
        ("name".to_owned(), true, false),
    ];
    assert_eq!(attributes("talosboot_helm_release"), release);
    assert_eq!(attributes("talosboot_cilium"), release);
    assert_eq!(
        attributes("talosboot_flux_bootstrap"),
        vec![
            ("namespace".to_owned(), true, false),
            ("name".to_owned(), false, true),
        ]
    );

    // 6.10: the list resources, their `config` schema, and GenerateResourceConfig announced.
    let schema = client
        .get_provider_schema(pb::get_provider_schema::Request {})
        .await
        .expect("schema")
        .into_inner();
    let mut lists: Vec<&String> = schema.list_resource_schemas.keys().collect();
    lists.sort();
    assert_eq!(lists, ["talosboot_cilium", "talosboot_helm_release"]);
    let list_config = schema.list_resource_schemas["talosboot_helm_release"]
        .block
        .as_ref()
        .expect("block");
    let namespace = &list_config.attributes[0];
    assert_eq!(namespace.name, "namespace");
    assert!(namespace.optional && !namespace.required);
    assert!(
        schema
            .server_capabilities
            .expect("capabilities")
            .generate_resource_config
    );
    let meta = client
        .get_metadata(pb::get_metadata::Request {})
        .await
        .expect("metadata")
        .into_inner();
    assert_eq!(meta.list_resources.len(), 2);
    assert!(provider.shutdown().await.expect("exit").success());
}

#[tokio::test]
async fn identity_travels_through_plan_apply_read_and_stays_the_same() {
    let (provider, mut client) = start().await;
    let ty = test_object_types(&mut client).await;
    let config = test_object("obj", Some("v1"));

    let plan = |prior: &Value, config: &Value, prior_identity: Option<&Value>| {
        pb::plan_resource_change::Request {
            type_name: TEST_OBJECT.into(),
            prior_state: dv(prior, &ty.state),
            proposed_new_state: dv(config, &ty.state),
            config: dv(config, &ty.state),
            prior_identity: prior_identity.and_then(|i| identity_data(i, &ty.identity)),
            ..Default::default()
        }
    };
    let created = client
        .plan_resource_change(plan(&Value::Null, &config, None))
        .await
        .expect("plan")
        .into_inner();
    assert!(errors(&created.diagnostics).is_empty());
    assert_eq!(
        decode_identity(&created.planned_identity, &ty.identity),
        named("obj")
    );
    let applied = client
        .apply_resource_change(pb::apply_resource_change::Request {
            type_name: TEST_OBJECT.into(),
            prior_state: dv(&Value::Null, &ty.state),
            planned_state: created.planned_state.clone(),
            config: dv(&config, &ty.state),
            planned_identity: created.planned_identity.clone(),
            ..Default::default()
        })
        .await
        .expect("apply")
        .into_inner();
    assert!(errors(&applied.diagnostics).is_empty());
    let identity = decode_identity(&applied.new_identity, &ty.identity);
    assert_eq!(identity, named("obj"));
    let state = decode(&applied.new_state, &ty.state);

    // Refresh, then a plan with nothing to change and one that updates in place: the identity
    // Terraform stored comes back unchanged each time.
    let read = client
        .read_resource(pb::read_resource::Request {
            type_name: TEST_OBJECT.into(),
            current_state: applied.new_state.clone(),
            current_identity: applied.new_identity.clone(),
            ..Default::default()
        })
        .await
        .expect("read")
        .into_inner();
    assert!(errors(&read.diagnostics).is_empty());
    assert_eq!(decode_identity(&read.new_identity, &ty.identity), identity);
    for value in ["v1", "v2"] {
        let mut proposed = state.clone();
        if let Value::Object(attrs) = &mut proposed {
            attrs.insert("value".into(), value.into());
        }
        let planned = client
            .plan_resource_change(plan(&state, &proposed, Some(&identity)))
            .await
            .expect("plan")
            .into_inner();
        assert!(errors(&planned.diagnostics).is_empty(), "{value}");
        assert_eq!(
            decode_identity(&planned.planned_identity, &ty.identity),
            identity,
            "{value}"
        );
    }

    // A state from before identity (none stored): the identity is filled in from the state.
    let read_without = client
        .read_resource(pb::read_resource::Request {
            type_name: TEST_OBJECT.into(),
            current_state: applied.new_state.clone(),
            ..Default::default()
        })
        .await
        .expect("read")
        .into_inner();
    assert_eq!(
        decode_identity(&read_without.new_identity, &ty.identity),
        identity
    );

    // A new name replaces the object: its planned identity is the new one.
    let mut renamed = state.clone();
    if let Value::Object(attrs) = &mut renamed {
        attrs.insert("name".into(), "other".into());
    }
    let replace = client
        .plan_resource_change(plan(&state, &renamed, Some(&identity)))
        .await
        .expect("plan")
        .into_inner();
    assert!(errors(&replace.diagnostics).is_empty());
    assert!(!replace.requires_replace.is_empty());
    assert_eq!(
        decode_identity(&replace.planned_identity, &ty.identity),
        named("other")
    );
    assert!(provider.shutdown().await.expect("exit").success());
}

#[tokio::test]
async fn a_changed_identity_is_reported_as_a_provider_bug() {
    let (provider, mut client) = start().await;
    let ty = test_object_types(&mut client).await;
    let mut state = test_object("obj", Some("rename"));
    if let Value::Object(attrs) = &mut state {
        attrs.insert("id".into(), "obj".into());
        attrs.insert("revision".into(), Value::int(1));
    }
    let read = client
        .read_resource(pb::read_resource::Request {
            type_name: TEST_OBJECT.into(),
            current_state: dv(&state, &ty.state),
            current_identity: identity_data(&named("obj"), &ty.identity),
            ..Default::default()
        })
        .await
        .expect("read")
        .into_inner();
    let errs = errors(&read.diagnostics);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("Unexpected Identity Change"),
        "{}",
        errs[0]
    );
    assert!(
        errs[0].contains("name = \"obj\"") && errs[0].contains("name = \"obj-renamed\""),
        "{}",
        errs[0]
    );

    // An update that comes back under another name contradicts the planned identity.
    let mut planned = state.clone();
    if let Value::Object(attrs) = &mut planned {
        attrs.insert("revision".into(), Value::unknown());
    }
    let applied = client
        .apply_resource_change(pb::apply_resource_change::Request {
            type_name: TEST_OBJECT.into(),
            prior_state: dv(&state, &ty.state),
            planned_state: dv(&planned, &ty.state),
            config: dv(&test_object("obj", Some("rename")), &ty.state),
            planned_identity: identity_data(&named("obj"), &ty.identity),
            ..Default::default()
        })
        .await
        .expect("apply")
        .into_inner();
    let errs = errors(&applied.diagnostics);
    assert!(
        errs.iter()
            .any(|e| e.starts_with("Unexpected Identity Change")),
        "{errs:?}"
    );
    assert!(provider.shutdown().await.expect("exit").success());
}

#[tokio::test]
async fn import_by_identity_works_like_the_import_id() {
    let (provider, mut client) = start().await;
    let ty = test_object_types(&mut client).await;
    let by_id = client
        .import_resource_state(pb::import_resource_state::Request {
            type_name: TEST_OBJECT.into(),
            id: "imp".into(),
            ..Default::default()
        })
        .await
        .expect("import")
        .into_inner();
    let by_identity = client
        .import_resource_state(pb::import_resource_state::Request {
            type_name: TEST_OBJECT.into(),
            identity: identity_data(&named("imp"), &ty.identity),
            ..Default::default()
        })
        .await
        .expect("import")
        .into_inner();
    assert!(errors(&by_identity.diagnostics).is_empty());
    let (a, b) = (
        &by_id.imported_resources[0],
        &by_identity.imported_resources[0],
    );
    assert_eq!(decode(&a.state, &ty.state), decode(&b.state, &ty.state));
    assert_eq!(decode_identity(&a.identity, &ty.identity), named("imp"));
    assert_eq!(decode_identity(&b.identity, &ty.identity), named("imp"));

    let missing = client
        .import_resource_state(pb::import_resource_state::Request {
            type_name: TEST_OBJECT.into(),
            identity: identity_data(&object(&[("name", Value::Null)]), &ty.identity),
            ..Default::default()
        })
        .await
        .expect("import")
        .into_inner();
    assert!(missing.imported_resources.is_empty());
    assert_eq!(errors(&missing.diagnostics).len(), 1);
    assert_eq!(attr_path(&missing.diagnostics[0]), ["identity", "name"]);
    assert!(provider.shutdown().await.expect("exit").success());
}

#[tokio::test]
async fn stored_identities_upgrade_and_moved_releases_get_one() {
    let (provider, mut client) = start().await;
    let ty = test_object_types(&mut client).await;
    let upgrade = |version| pb::upgrade_resource_identity::Request {
        type_name: TEST_OBJECT.into(),
        version,
        raw_identity: Some(pb::RawState {
            json: br#"{"name":"obj"}"#.to_vec(),
            flatmap: Default::default(),
        }),
    };
    let current = client
        .upgrade_resource_identity(upgrade(0))
        .await
        .expect("rpc")
        .into_inner();
    assert!(errors(&current.diagnostics).is_empty());
    assert_eq!(
        decode_identity(&current.upgraded_identity, &ty.identity),
        named("obj")
    );
    let newer = client
        .upgrade_resource_identity(upgrade(3))
        .await
        .expect("rpc")
        .into_inner();
    assert!(errors(&newer.diagnostics)[0].contains("Upgrade the provider"));

    // hashicorp/helm's helm_release moved to talosboot_helm_release: the moved state's release.
    let ids = client
        .get_resource_identity_schemas(pb::get_resource_identity_schemas::Request {})
        .await
        .expect("rpc")
        .into_inner();
    let release_identity = identity_type(&ids.identity_schemas["talosboot_helm_release"]);
    let source = serde_json::json!({
        "id": "podinfo", "name": "podinfo", "namespace": "apps", "chart": "podinfo",
        "repository": "https://stefanprodan.github.io/podinfo", "version": "6.7.0",
        "values": [], "set": [], "status": "deployed",
    });
    let moved = client
        .move_resource_state(pb::move_resource_state::Request {
            source_provider_address: "registry.terraform.io/hashicorp/helm".into(),
            source_type_name: "helm_release".into(),
            source_schema_version: 1,
            source_state: Some(pb::RawState {
                json: serde_json::to_vec(&source).expect("json"),
                flatmap: Default::default(),
            }),
            target_type_name: "talosboot_helm_release".into(),
            // hashicorp/helm 3.x stores {namespace, name, ...}: ours comes from the moved state.
            source_identity: Some(pb::RawState {
                json: br#"{"namespace":"apps","release_name":"podinfo"}"#.to_vec(),
                flatmap: Default::default(),
            }),
            source_identity_schema_version: 0,
            ..Default::default()
        })
        .await
        .expect("move")
        .into_inner();
    assert!(
        errors(&moved.diagnostics).is_empty(),
        "{:?}",
        moved.diagnostics
    );
    assert_eq!(
        decode_identity(&moved.target_identity, &release_identity),
        object(&[("namespace", "apps".into()), ("name", "podinfo".into())])
    );
    assert!(provider.shutdown().await.expect("exit").success());
}

#[tokio::test]
async fn list_config_is_validated_and_generated_config_leaves_out_computed_values() {
    let (provider, mut client) = start().await;
    let ty = test_object_types(&mut client).await;
    let list_ty = Type::object([("namespace", Type::String)]);
    let invalid = client
        .validate_list_resource_config(pb::validate_list_resource_config::Request {
            type_name: "talosboot_helm_release".into(),
            config: dv(
                &object(&[("namespace", "Not_A_Namespace".into())]),
                &list_ty,
            ),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    assert_eq!(errors(&invalid.diagnostics).len(), 1);
    assert_eq!(attr_path(&invalid.diagnostics[0]), ["namespace"]);
    let unset = client
        .validate_list_resource_config(pb::validate_list_resource_config::Request {
            type_name: "talosboot_helm_release".into(),
            config: dv(&object(&[("namespace", Value::Null)]), &list_ty),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    assert!(unset.diagnostics.is_empty());

    // A list of an unknown type answers with one event of diagnostics.
    let mut stream = client
        .list_resource(pb::list_resource::Request {
            type_name: "talosboot_nope".into(),
            limit: 10,
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    let event = stream.message().await.expect("stream").expect("an event");
    assert!(errors(&event.diagnostic)[0].contains("Unknown list resource type"));
    assert!(stream.message().await.expect("stream").is_none());

    // Generated configuration: what the configuration sets, nothing computed.
    let mut state = test_object("obj", Some("v"));
    if let Value::Object(attrs) = &mut state {
        attrs.insert("id".into(), "obj".into());
        attrs.insert("revision".into(), Value::int(4));
        attrs.insert("secret_sha256".into(), "abc".into());
    }
    let generated = client
        .generate_resource_config(pb::generate_resource_config::Request {
            type_name: TEST_OBJECT.into(),
            state: dv(&state, &ty.state),
        })
        .await
        .expect("rpc")
        .into_inner();
    assert!(generated.diagnostics.is_empty());
    assert_eq!(
        decode(&generated.config, &ty.state),
        test_object("obj", Some("v"))
    );
    assert!(provider.shutdown().await.expect("exit").success());
}

#[tokio::test]
async fn state_store_and_action_rpcs_answer_that_there_are_none() {
    let (provider, mut client) = start().await;
    let store = client
        .validate_state_store_config(pb::validate_state_store::Request {
            type_name: "talosboot_store".into(),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    assert!(errors(&store.diagnostics)[0].contains("Unknown state store type"));
    let lock = client
        .lock_state(pb::lock_state::Request {
            type_name: "talosboot_store".into(),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    assert_eq!(errors(&lock.diagnostics).len(), 1);
    let mut read = client
        .read_state_bytes(pb::read_state_bytes::Request {
            type_name: "talosboot_store".into(),
            state_id: "default".into(),
        })
        .await
        .expect("rpc")
        .into_inner();
    let chunk = read.message().await.expect("stream").expect("a chunk");
    assert_eq!(errors(&chunk.diagnostics).len(), 1);
    let chunks = futures::stream::iter(vec![pb::write_state_bytes::RequestChunk {
        meta: Some(pb::RequestChunkMeta {
            type_name: "talosboot_store".into(),
            state_id: "default".into(),
        }),
        bytes: b"{}".to_vec(),
        total_length: 2,
        range: Some(pb::StateRange { start: 0, end: 2 }),
    }]);
    let written = client
        .write_state_bytes(chunks)
        .await
        .expect("rpc")
        .into_inner();
    assert!(errors(&written.diagnostics)[0].contains("talosboot_store"));
    let plan = client
        .plan_action(pb::plan_action::Request {
            action_type: "talosboot_act".into(),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    assert!(errors(&plan.diagnostics)[0].contains("Unknown action type"));
    let mut invoked = client
        .invoke_action(pb::invoke_action::Request {
            action_type: "talosboot_act".into(),
            ..Default::default()
        })
        .await
        .expect("rpc")
        .into_inner();
    let event = invoked.message().await.expect("stream").expect("an event");
    match event.r#type {
        Some(pb::invoke_action::event::Type::Completed(c)) => {
            assert_eq!(errors(&c.diagnostics).len(), 1)
        }
        other => panic!("expected a completed event, got {other:?}"),
    }
    assert!(provider.shutdown().await.expect("exit").success());
}
