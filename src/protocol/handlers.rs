//! One function per tfplugin6 RPC, from the decoded request to the response: look the type up,
//! decode the values against it, call the dispatcher, encode what it returns. A handler that can
//! end before the dispatcher is reached returns the diagnostics that end it as `Err`; the
//! service (`server.rs`) turns them into that RPC's response.

use super::convert::{
    capabilities_of, decode, diagnostic, diagnostics, encode, identity_data, identity_schema,
    path_to_proto, schema,
};
use super::functions;
use super::proto as pb;
use crate::framework::dispatcher::unknown_type;
use crate::framework::{
    ApplyRequest, Diagnostic, Diagnostics, Dispatcher, ImportRequest, ListRequest, MoveRequest,
    PlanRequest, ReadRequest, UpgradeRequest,
};
use crate::values::{Type, Value};

/// The diagnostics that end an RPC before the dispatcher is reached.
pub(super) type EndedEarly = Vec<pb::Diagnostic>;

fn one(d: Diagnostic) -> EndedEarly {
    vec![diagnostic(d)]
}

fn resource_type<'d>(dispatcher: &'d Dispatcher, type_name: &str) -> Result<&'d Type, EndedEarly> {
    dispatcher.resource_type(type_name).map_err(diagnostics)
}

fn data_source_type<'d>(
    dispatcher: &'d Dispatcher,
    type_name: &str,
) -> Result<&'d Type, EndedEarly> {
    dispatcher.data_source_type(type_name).map_err(diagnostics)
}

fn decode_as(value: Option<&pb::DynamicValue>, ty: &Type, what: &str) -> Result<Value, EndedEarly> {
    decode(value, ty, what).map_err(one)
}

/// Encodes `value`, or adds to `diags` why it cannot be encoded.
fn encode_or_push(
    value: &Value,
    ty: &Type,
    what: &str,
    diags: &mut Diagnostics,
) -> Option<pb::DynamicValue> {
    match encode(value, ty, what) {
        Ok(v) => Some(v),
        Err(d) => {
            diags.push(d);
            None
        }
    }
}

/// As [`encode_or_push`], but nothing when the operation failed: a failed plan, upgrade, move or
/// data-source read has no value to send (read and apply send theirs anyway, to keep state).
fn encode_unless_failed(
    value: &Value,
    ty: &Type,
    what: &str,
    diags: &mut Diagnostics,
) -> Option<pb::DynamicValue> {
    if diags.has_errors() {
        None
    } else {
        encode_or_push(value, ty, what, diags)
    }
}

fn no_ephemeral_resource(type_name: &str) -> Vec<pb::Diagnostic> {
    diagnostics(unknown_type("ephemeral resource", type_name))
}

/// talosboot declares no state store and no action: a client asks only for declared ones, so
/// these answers (the unknown-type diagnostic) are for a confused or hostile client.
fn no_state_store(type_name: &str) -> Vec<pb::Diagnostic> {
    diagnostics(unknown_type("state store", type_name))
}

fn no_action(type_name: &str) -> Vec<pb::Diagnostic> {
    diagnostics(unknown_type("action", type_name))
}

/// The identity Terraform sent for `type_name` (null when it sent none, or the type has none).
fn decode_identity(
    dispatcher: &Dispatcher,
    type_name: &str,
    identity: Option<&pb::ResourceIdentityData>,
) -> Result<Value, EndedEarly> {
    let (Some(ty), Some(data)) = (dispatcher.identity_type(type_name), identity) else {
        return Ok(Value::Null);
    };
    decode_as(data.identity_data.as_ref(), ty, "identity")
}

/// Encodes `identity` for `type_name` (nothing for none), or adds to `diags` why it cannot be.
fn encode_identity(
    dispatcher: &Dispatcher,
    type_name: &str,
    identity: Option<Value>,
    diags: &mut Diagnostics,
) -> Option<pb::ResourceIdentityData> {
    let (identity, ty) = (identity?, dispatcher.identity_type(type_name)?);
    match identity_data(&identity, ty) {
        Ok(data) => Some(data),
        Err(d) => {
            diags.push(d);
            None
        }
    }
}

fn capabilities() -> pb::ServerCapabilities {
    pb::ServerCapabilities {
        plan_destroy: true,
        get_provider_schema_optional: false,
        move_resource_state: true,
        // The chart resources generate configuration from a release's record (query and import
        // with `-generate-config-out`); the others answer with their state's settable attributes.
        generate_resource_config: true,
    }
}

pub(super) async fn get_metadata(
    dispatcher: &Dispatcher,
    _: pb::get_metadata::Request,
) -> pb::get_metadata::Response {
    use pb::get_metadata as m;
    m::Response {
        server_capabilities: Some(capabilities()),
        resources: dispatcher
            .resource_schemas()
            .map(|(n, _)| m::ResourceMetadata {
                type_name: n.to_owned(),
            })
            .collect(),
        data_sources: dispatcher
            .data_source_schemas()
            .map(|(n, _)| m::DataSourceMetadata {
                type_name: n.to_owned(),
            })
            .collect(),
        functions: functions::metadata(dispatcher),
        list_resources: dispatcher
            .list_resource_schemas()
            .map(|(n, _)| m::ListResourceMetadata {
                type_name: n.to_owned(),
            })
            .collect(),
        ..Default::default()
    }
}

pub(super) async fn get_provider_schema(
    dispatcher: &Dispatcher,
    _: pb::get_provider_schema::Request,
) -> pb::get_provider_schema::Response {
    let by_name = |(n, s)| (String::from(n), schema(s));
    pb::get_provider_schema::Response {
        provider: Some(schema(dispatcher.provider_schema())),
        resource_schemas: dispatcher.resource_schemas().map(by_name).collect(),
        data_source_schemas: dispatcher.data_source_schemas().map(by_name).collect(),
        server_capabilities: Some(capabilities()),
        functions: functions::definitions(dispatcher),
        list_resource_schemas: dispatcher.list_resource_schemas().map(by_name).collect(),
        ..Default::default()
    }
}

pub(super) async fn get_resource_identity_schemas(
    dispatcher: &Dispatcher,
    _: pb::get_resource_identity_schemas::Request,
) -> pb::get_resource_identity_schemas::Response {
    pb::get_resource_identity_schemas::Response {
        identity_schemas: dispatcher
            .identity_schemas()
            .map(|(n, s)| (n.to_owned(), identity_schema(s)))
            .collect(),
        diagnostics: Vec::new(),
    }
}

pub(super) async fn upgrade_resource_identity(
    dispatcher: &Dispatcher,
    req: pb::upgrade_resource_identity::Request,
) -> pb::upgrade_resource_identity::Response {
    let json = req.raw_identity.map(|r| r.json).unwrap_or_default();
    let mut diags = Diagnostics::new();
    let upgraded = match dispatcher.upgrade_identity(&req.type_name, req.version, &json) {
        Ok(identity) => Some(identity),
        Err(d) => {
            diags.extend(d);
            None
        }
    };
    let upgraded_identity = encode_identity(dispatcher, &req.type_name, upgraded, &mut diags);
    pb::upgrade_resource_identity::Response {
        upgraded_identity,
        diagnostics: diagnostics(diags),
    }
}

pub(super) async fn validate_provider_config(
    dispatcher: &Dispatcher,
    req: pb::validate_provider_config::Request,
) -> Result<pb::validate_provider_config::Response, EndedEarly> {
    let ty = dispatcher.provider_type();
    let config = decode_as(req.config.as_ref(), ty, "provider configuration")?;
    Ok(pb::validate_provider_config::Response {
        diagnostics: diagnostics(dispatcher.validate_provider_config(&config)),
    })
}

pub(super) async fn validate_resource_config(
    dispatcher: &Dispatcher,
    req: pb::validate_resource_config::Request,
) -> Result<pb::validate_resource_config::Response, EndedEarly> {
    let ty = resource_type(dispatcher, &req.type_name)?;
    let config = decode_as(req.config.as_ref(), ty, "configuration")?;
    let write_only_allowed = capabilities_of(req.client_capabilities).write_only_attributes_allowed;
    let diags = dispatcher.validate_resource(&req.type_name, &config, write_only_allowed);
    Ok(pb::validate_resource_config::Response {
        diagnostics: diagnostics(diags),
    })
}

pub(super) async fn validate_data_resource_config(
    dispatcher: &Dispatcher,
    req: pb::validate_data_resource_config::Request,
) -> Result<pb::validate_data_resource_config::Response, EndedEarly> {
    let ty = data_source_type(dispatcher, &req.type_name)?;
    let config = decode_as(req.config.as_ref(), ty, "configuration")?;
    Ok(pb::validate_data_resource_config::Response {
        diagnostics: diagnostics(dispatcher.validate_data_source(&req.type_name, &config)),
    })
}

pub(super) async fn upgrade_resource_state(
    dispatcher: &Dispatcher,
    req: pb::upgrade_resource_state::Request,
) -> Result<pb::upgrade_resource_state::Response, EndedEarly> {
    let ty = resource_type(dispatcher, &req.type_name)?;
    let raw = req.raw_state.unwrap_or_default();
    if raw.json.is_empty() && !raw.flatmap.is_empty() {
        return Err(one(Diagnostic::error(
            "Unsupported legacy state",
            "This state was written in the flatmap format of Terraform 0.11 or older, which talosboot never used. Remove it from state (`tofu state rm` or `terraform state rm`) and import the resource.",
        )));
    }
    let upgrade = UpgradeRequest {
        version: req.version,
        raw_json: raw.json,
    };
    let resp = dispatcher.upgrade(&req.type_name, upgrade).await;
    let mut diags = resp.diagnostics;
    let upgraded_state =
        encode_unless_failed(&resp.upgraded_state, ty, "upgraded state", &mut diags);
    Ok(pb::upgrade_resource_state::Response {
        upgraded_state,
        diagnostics: diagnostics(diags),
    })
}

pub(super) async fn configure_provider(
    dispatcher: &Dispatcher,
    req: pb::configure_provider::Request,
) -> Result<pb::configure_provider::Response, EndedEarly> {
    let ty = dispatcher.provider_type();
    let config = decode_as(req.config.as_ref(), ty, "provider configuration")?;
    Ok(pb::configure_provider::Response {
        diagnostics: diagnostics(dispatcher.configure(&config)),
    })
}

pub(super) async fn read_resource(
    dispatcher: &Dispatcher,
    req: pb::read_resource::Request,
) -> Result<pb::read_resource::Response, EndedEarly> {
    let ty = resource_type(dispatcher, &req.type_name)?;
    let current_identity =
        decode_identity(dispatcher, &req.type_name, req.current_identity.as_ref())?;
    let read = ReadRequest {
        current_state: decode_as(req.current_state.as_ref(), ty, "current state")?,
        private: req.private,
        client_capabilities: capabilities_of(req.client_capabilities),
    };
    let mut resp = dispatcher.read(&req.type_name, read).await;
    let identity = dispatcher.read_identity(&req.type_name, &current_identity, &mut resp);
    let mut diags = resp.diagnostics;
    let new_state = encode_or_push(&resp.new_state, ty, "new state", &mut diags);
    let new_identity = encode_identity(dispatcher, &req.type_name, identity, &mut diags);
    Ok(pb::read_resource::Response {
        new_state,
        private: resp.private.unwrap_or_default(),
        diagnostics: diagnostics(diags),
        new_identity,
        ..Default::default()
    })
}

pub(super) async fn plan_resource_change(
    dispatcher: &Dispatcher,
    req: pb::plan_resource_change::Request,
) -> Result<pb::plan_resource_change::Response, EndedEarly> {
    let ty = resource_type(dispatcher, &req.type_name)?;
    let prior_identity = decode_identity(dispatcher, &req.type_name, req.prior_identity.as_ref())?;
    let prior_state = decode_as(req.prior_state.as_ref(), ty, "prior state")?;
    let plan = PlanRequest {
        prior_state: prior_state.clone(),
        proposed_new_state: decode_as(req.proposed_new_state.as_ref(), ty, "proposed new state")?,
        config: decode_as(req.config.as_ref(), ty, "configuration")?,
        prior_private: req.prior_private,
        client_capabilities: capabilities_of(req.client_capabilities),
    };
    let mut resp = dispatcher.plan(&req.type_name, plan).await;
    let identity =
        dispatcher.plan_identity(&req.type_name, &prior_state, &prior_identity, &mut resp);
    let mut diags = resp.diagnostics;
    let planned_state = encode_unless_failed(&resp.planned_state, ty, "planned state", &mut diags);
    let planned_identity = match diags.has_errors() {
        true => None,
        false => encode_identity(dispatcher, &req.type_name, identity, &mut diags),
    };
    Ok(pb::plan_resource_change::Response {
        planned_state,
        requires_replace: resp.requires_replace.iter().map(path_to_proto).collect(),
        planned_private: resp.private.unwrap_or_default(),
        diagnostics: diagnostics(diags),
        planned_identity,
        ..Default::default()
    })
}

pub(super) async fn apply_resource_change(
    dispatcher: &Dispatcher,
    req: pb::apply_resource_change::Request,
) -> Result<pb::apply_resource_change::Response, EndedEarly> {
    let ty = resource_type(dispatcher, &req.type_name)?;
    let planned_identity =
        decode_identity(dispatcher, &req.type_name, req.planned_identity.as_ref())?;
    let apply = ApplyRequest {
        prior_state: decode_as(req.prior_state.as_ref(), ty, "prior state")?,
        planned_state: decode_as(req.planned_state.as_ref(), ty, "planned state")?,
        config: decode_as(req.config.as_ref(), ty, "configuration")?,
        planned_private: req.planned_private,
    };
    let mut resp = dispatcher.apply(&req.type_name, apply).await;
    let identity = dispatcher.apply_identity(&req.type_name, &planned_identity, &mut resp);
    let mut diags = resp.diagnostics;
    // Sent even when the apply failed: the dispatcher keeps the state of an object that exists.
    let new_state = encode_or_push(&resp.new_state, ty, "new state", &mut diags);
    let new_identity = encode_identity(dispatcher, &req.type_name, identity, &mut diags);
    Ok(pb::apply_resource_change::Response {
        new_state,
        private: resp.private.unwrap_or_default(),
        diagnostics: diagnostics(diags),
        new_identity,
        ..Default::default()
    })
}

pub(super) async fn import_resource_state(
    dispatcher: &Dispatcher,
    req: pb::import_resource_state::Request,
) -> Result<pb::import_resource_state::Response, EndedEarly> {
    let ty = resource_type(dispatcher, &req.type_name)?;
    // `import { identity = {...} }` (Terraform 1.12+) arrives without an ID: the identity names
    // the object exactly as the ID would.
    let given = decode_identity(dispatcher, &req.type_name, req.identity.as_ref())?;
    let id = match req.id.is_empty() && !given.is_null() {
        true => dispatcher
            .import_id(&req.type_name, &given)
            .map_err(diagnostics)?,
        false => req.id,
    };
    let import = ImportRequest {
        id,
        client_capabilities: capabilities_of(req.client_capabilities),
    };
    let mut resp = dispatcher.import(&req.type_name, import).await;
    let identities = dispatcher.imported_identity(&req.type_name, &given, &mut resp);
    let mut diags = resp.diagnostics;
    let mut imported_resources = Vec::new();
    if !diags.has_errors() {
        for (imported, identity) in resp.imported.into_iter().zip(identities) {
            if let Some(state) = encode_or_push(&imported.state, ty, "imported state", &mut diags) {
                let identity = encode_identity(dispatcher, &req.type_name, identity, &mut diags);
                imported_resources.push(pb::import_resource_state::ImportedResource {
                    type_name: req.type_name.clone(),
                    state: Some(state),
                    private: imported.private,
                    identity,
                });
            }
        }
    }
    Ok(pb::import_resource_state::Response {
        imported_resources,
        diagnostics: diagnostics(diags),
        deferred: None,
    })
}

pub(super) async fn move_resource_state(
    dispatcher: &Dispatcher,
    req: pb::move_resource_state::Request,
) -> Result<pb::move_resource_state::Response, EndedEarly> {
    let ty = resource_type(dispatcher, &req.target_type_name)?;
    let moved = MoveRequest {
        source_provider_address: req.source_provider_address,
        source_type_name: req.source_type_name,
        source_schema_version: req.source_schema_version,
        source_state_json: req.source_state.map(|s| s.json).unwrap_or_default(),
        source_private: req.source_private,
    };
    let resp = dispatcher.move_state(&req.target_type_name, moved).await;
    let mut diags = resp.diagnostics;
    let target_state = encode_unless_failed(&resp.target_state, ty, "moved state", &mut diags);
    // The source's identity (another provider's) says nothing about ours: the moved state does.
    let identity = match diags.has_errors() {
        true => None,
        false => dispatcher.identity_of(&req.target_type_name, &resp.target_state),
    };
    let target_identity = encode_identity(dispatcher, &req.target_type_name, identity, &mut diags);
    Ok(pb::move_resource_state::Response {
        target_state,
        target_private: resp.target_private,
        diagnostics: diagnostics(diags),
        target_identity,
    })
}

pub(super) async fn read_data_source(
    dispatcher: &Dispatcher,
    req: pb::read_data_source::Request,
) -> Result<pb::read_data_source::Response, EndedEarly> {
    let ty = data_source_type(dispatcher, &req.type_name)?;
    let config = decode_as(req.config.as_ref(), ty, "configuration")?;
    let deferral_allowed = capabilities_of(req.client_capabilities).deferral_allowed;
    if deferral_allowed && dispatcher.provider_config_unknown() {
        return Ok(pb::read_data_source::Response {
            deferred: Some(pb::Deferred {
                reason: pb::deferred::Reason::ProviderConfigUnknown as i32,
            }),
            ..Default::default()
        });
    }
    let resp = dispatcher.read_data_source(&req.type_name, config).await;
    let mut diags = resp.diagnostics;
    let state = encode_unless_failed(&resp.state, ty, "data source state", &mut diags);
    Ok(pb::read_data_source::Response {
        state,
        diagnostics: diagnostics(diags),
        deferred: None,
    })
}

pub(super) async fn validate_ephemeral_resource_config(
    _: &Dispatcher,
    req: pb::validate_ephemeral_resource_config::Request,
) -> pb::validate_ephemeral_resource_config::Response {
    pb::validate_ephemeral_resource_config::Response {
        diagnostics: no_ephemeral_resource(&req.type_name),
    }
}

pub(super) async fn open_ephemeral_resource(
    _: &Dispatcher,
    req: pb::open_ephemeral_resource::Request,
) -> pb::open_ephemeral_resource::Response {
    pb::open_ephemeral_resource::Response {
        diagnostics: no_ephemeral_resource(&req.type_name),
        ..Default::default()
    }
}

pub(super) async fn renew_ephemeral_resource(
    _: &Dispatcher,
    req: pb::renew_ephemeral_resource::Request,
) -> pb::renew_ephemeral_resource::Response {
    pb::renew_ephemeral_resource::Response {
        diagnostics: no_ephemeral_resource(&req.type_name),
        ..Default::default()
    }
}

pub(super) async fn close_ephemeral_resource(
    _: &Dispatcher,
    req: pb::close_ephemeral_resource::Request,
) -> pb::close_ephemeral_resource::Response {
    pb::close_ephemeral_resource::Response {
        diagnostics: no_ephemeral_resource(&req.type_name),
    }
}

pub(super) async fn get_functions(
    dispatcher: &Dispatcher,
    _: pb::get_functions::Request,
) -> pb::get_functions::Response {
    pb::get_functions::Response {
        functions: functions::definitions(dispatcher),
        diagnostics: Vec::new(),
    }
}

pub(super) async fn call_function(
    dispatcher: &Dispatcher,
    req: pb::call_function::Request,
) -> pb::call_function::Response {
    functions::call(dispatcher, req)
}

pub(super) async fn stop_provider(
    dispatcher: &Dispatcher,
    _: pb::stop_provider::Request,
) -> pb::stop_provider::Response {
    tracing::info!("StopProvider: cancelling operations in flight");
    dispatcher.stop();
    pb::stop_provider::Response {
        error: String::new(),
    }
}

pub(super) async fn generate_resource_config(
    dispatcher: &Dispatcher,
    req: pb::generate_resource_config::Request,
) -> Result<pb::generate_resource_config::Response, EndedEarly> {
    let ty = resource_type(dispatcher, &req.type_name)?;
    let state = decode_as(req.state.as_ref(), ty, "state")?;
    let generated = dispatcher.generate_config(&req.type_name, &state);
    let mut diags = generated.diagnostics;
    let config = encode_unless_failed(&generated.config, ty, "generated configuration", &mut diags);
    Ok(pb::generate_resource_config::Response {
        config,
        diagnostics: diagnostics(diags),
    })
}

pub(super) async fn validate_list_resource_config(
    dispatcher: &Dispatcher,
    req: pb::validate_list_resource_config::Request,
) -> Result<pb::validate_list_resource_config::Response, EndedEarly> {
    let ty = dispatcher
        .list_resource_type(&req.type_name)
        .map_err(diagnostics)?;
    let config = decode_as(req.config.as_ref(), ty, "list configuration")?;
    Ok(pb::validate_list_resource_config::Response {
        diagnostics: diagnostics(dispatcher.validate_list(&req.type_name, &config)),
    })
}

/// ListResource: the events of one list, each result with its identity (and its state when
/// asked); diagnostics travel in an event of their own, first, so a warning never hides a
/// result and an error ends the stream as Terraform reads it.
pub(super) async fn list_resource(
    dispatcher: &Dispatcher,
    req: pb::list_resource::Request,
) -> Vec<pb::list_resource::Event> {
    use pb::list_resource::Event;
    let diagnostics_event = |d: Vec<pb::Diagnostic>| Event {
        diagnostic: d,
        ..Default::default()
    };
    let ty = match dispatcher.list_resource_type(&req.type_name) {
        Ok(ty) => ty,
        Err(d) => return vec![diagnostics_event(diagnostics(d))],
    };
    let config = match decode_as(req.config.as_ref(), ty, "list configuration") {
        Ok(c) => c,
        Err(d) => return vec![diagnostics_event(d)],
    };
    let listed = dispatcher
        .list(
            &req.type_name,
            ListRequest {
                config,
                include_resource_object: req.include_resource_object,
                limit: req.limit,
            },
        )
        .await;
    let mut diags = listed.diagnostics;
    let mut events = Vec::new();
    let (Some(identity_ty), Ok(state_ty)) = (
        dispatcher.identity_type(&req.type_name),
        dispatcher.resource_type(&req.type_name),
    ) else {
        return vec![diagnostics_event(diagnostics(diags))];
    };
    for result in listed.results {
        let Some(identity) = encode_or_push(&result.identity, identity_ty, "identity", &mut diags)
        else {
            continue;
        };
        let resource_object = match &result.state {
            Some(state) => match encode_or_push(state, state_ty, "listed object", &mut diags) {
                Some(v) => Some(v),
                None => continue,
            },
            None => None,
        };
        events.push(Event {
            identity: Some(pb::ResourceIdentityData {
                identity_data: Some(identity),
            }),
            display_name: result.display_name,
            resource_object,
            diagnostic: Vec::new(),
        });
    }
    if !diags.is_empty() {
        events.insert(0, diagnostics_event(diagnostics(diags)));
    }
    events
}

pub(super) async fn validate_state_store_config(
    _: &Dispatcher,
    req: pb::validate_state_store::Request,
) -> pb::validate_state_store::Response {
    pb::validate_state_store::Response {
        diagnostics: no_state_store(&req.type_name),
    }
}

pub(super) async fn configure_state_store(
    _: &Dispatcher,
    req: pb::configure_state_store::Request,
) -> pb::configure_state_store::Response {
    pb::configure_state_store::Response {
        diagnostics: no_state_store(&req.type_name),
        capabilities: None,
    }
}

pub(super) async fn lock_state(
    _: &Dispatcher,
    req: pb::lock_state::Request,
) -> pb::lock_state::Response {
    pb::lock_state::Response {
        lock_id: String::new(),
        diagnostics: no_state_store(&req.type_name),
    }
}

pub(super) async fn unlock_state(
    _: &Dispatcher,
    req: pb::unlock_state::Request,
) -> pb::unlock_state::Response {
    pb::unlock_state::Response {
        diagnostics: no_state_store(&req.type_name),
    }
}

pub(super) async fn get_states(
    _: &Dispatcher,
    req: pb::get_states::Request,
) -> pb::get_states::Response {
    pb::get_states::Response {
        state_id: Vec::new(),
        diagnostics: no_state_store(&req.type_name),
    }
}

pub(super) async fn delete_state(
    _: &Dispatcher,
    req: pb::delete_state::Request,
) -> pb::delete_state::Response {
    pb::delete_state::Response {
        diagnostics: no_state_store(&req.type_name),
    }
}

/// ReadStateBytes: one chunk of diagnostics alone.
pub(super) fn read_state_bytes(
    req: &pb::read_state_bytes::Request,
) -> pb::read_state_bytes::Response {
    pb::read_state_bytes::Response {
        diagnostics: no_state_store(&req.type_name),
        ..Default::default()
    }
}

/// WriteStateBytes: the type name arrives on the first chunk only.
pub(super) fn write_state_bytes(type_name: &str) -> pb::write_state_bytes::Response {
    pb::write_state_bytes::Response {
        diagnostics: no_state_store(type_name),
    }
}

pub(super) async fn plan_action(
    _: &Dispatcher,
    req: pb::plan_action::Request,
) -> pb::plan_action::Response {
    pb::plan_action::Response {
        diagnostics: no_action(&req.action_type),
        deferred: None,
    }
}

pub(super) async fn validate_action_config(
    _: &Dispatcher,
    req: pb::validate_action_config::Request,
) -> pb::validate_action_config::Response {
    pb::validate_action_config::Response {
        diagnostics: no_action(&req.type_name),
    }
}

/// InvokeAction: a single completed event with the diagnostic.
pub(super) fn invoke_action(req: &pb::invoke_action::Request) -> pb::invoke_action::Event {
    use pb::invoke_action::event::{Completed, Type};
    pb::invoke_action::Event {
        r#type: Some(Type::Completed(Completed {
            diagnostics: no_action(&req.action_type),
        })),
    }
}
