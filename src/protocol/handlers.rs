//! One function per tfplugin6 RPC, from the decoded request to the response: look the type up,
//! decode the values against it, call the dispatcher, encode what it returns. A handler that can
//! end before the dispatcher is reached returns the diagnostics that end it as `Err`; the
//! service (`server.rs`) turns them into that RPC's response.

use std::collections::HashMap;

use super::convert::{
    capabilities_of, decode, diagnostic, diagnostics, encode, path_to_proto, schema,
};
use super::functions;
use super::proto as pb;
use crate::framework::dispatcher::unknown_type;
use crate::framework::{
    ApplyRequest, Diagnostic, Diagnostics, Dispatcher, ImportRequest, MoveRequest, PlanRequest,
    ReadRequest, UpgradeRequest,
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

fn not_supported(what: &str) -> Vec<pb::Diagnostic> {
    one(Diagnostic::error(
        format!("{what} is not supported"),
        format!("The talosboot provider does not offer {what}."),
    ))
}

fn no_ephemeral_resource(type_name: &str) -> Vec<pb::Diagnostic> {
    diagnostics(unknown_type("ephemeral resource", type_name))
}

fn capabilities() -> pb::ServerCapabilities {
    pb::ServerCapabilities {
        plan_destroy: true,
        get_provider_schema_optional: false,
        move_resource_state: true,
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
        ..Default::default()
    }
}

pub(super) async fn get_resource_identity_schemas(
    _: &Dispatcher,
    _: pb::get_resource_identity_schemas::Request,
) -> pb::get_resource_identity_schemas::Response {
    pb::get_resource_identity_schemas::Response {
        identity_schemas: HashMap::new(),
        diagnostics: Vec::new(),
    }
}

pub(super) async fn upgrade_resource_identity(
    _: &Dispatcher,
    _: pb::upgrade_resource_identity::Request,
) -> pb::upgrade_resource_identity::Response {
    pb::upgrade_resource_identity::Response {
        upgraded_identity: None,
        diagnostics: not_supported("resource identity"),
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
            "This state was written in the flatmap format of Terraform 0.11 or older, which talosboot never used. Remove it from state (`terraform state rm`) and import the resource.",
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
    let read = ReadRequest {
        current_state: decode_as(req.current_state.as_ref(), ty, "current state")?,
        private: req.private,
        client_capabilities: capabilities_of(req.client_capabilities),
    };
    let resp = dispatcher.read(&req.type_name, read).await;
    let mut diags = resp.diagnostics;
    let new_state = encode_or_push(&resp.new_state, ty, "new state", &mut diags);
    Ok(pb::read_resource::Response {
        new_state,
        private: resp.private.unwrap_or_default(),
        diagnostics: diagnostics(diags),
        ..Default::default()
    })
}

pub(super) async fn plan_resource_change(
    dispatcher: &Dispatcher,
    req: pb::plan_resource_change::Request,
) -> Result<pb::plan_resource_change::Response, EndedEarly> {
    let ty = resource_type(dispatcher, &req.type_name)?;
    let plan = PlanRequest {
        prior_state: decode_as(req.prior_state.as_ref(), ty, "prior state")?,
        proposed_new_state: decode_as(req.proposed_new_state.as_ref(), ty, "proposed new state")?,
        config: decode_as(req.config.as_ref(), ty, "configuration")?,
        prior_private: req.prior_private,
        client_capabilities: capabilities_of(req.client_capabilities),
    };
    let resp = dispatcher.plan(&req.type_name, plan).await;
    let mut diags = resp.diagnostics;
    let planned_state = encode_unless_failed(&resp.planned_state, ty, "planned state", &mut diags);
    Ok(pb::plan_resource_change::Response {
        planned_state,
        requires_replace: resp.requires_replace.iter().map(path_to_proto).collect(),
        planned_private: resp.private.unwrap_or_default(),
        diagnostics: diagnostics(diags),
        ..Default::default()
    })
}

pub(super) async fn apply_resource_change(
    dispatcher: &Dispatcher,
    req: pb::apply_resource_change::Request,
) -> Result<pb::apply_resource_change::Response, EndedEarly> {
    let ty = resource_type(dispatcher, &req.type_name)?;
    let apply = ApplyRequest {
        prior_state: decode_as(req.prior_state.as_ref(), ty, "prior state")?,
        planned_state: decode_as(req.planned_state.as_ref(), ty, "planned state")?,
        config: decode_as(req.config.as_ref(), ty, "configuration")?,
        planned_private: req.planned_private,
    };
    let resp = dispatcher.apply(&req.type_name, apply).await;
    let mut diags = resp.diagnostics;
    // Sent even when the apply failed: the dispatcher keeps the state of an object that exists.
    let new_state = encode_or_push(&resp.new_state, ty, "new state", &mut diags);
    Ok(pb::apply_resource_change::Response {
        new_state,
        private: resp.private.unwrap_or_default(),
        diagnostics: diagnostics(diags),
        ..Default::default()
    })
}

pub(super) async fn import_resource_state(
    dispatcher: &Dispatcher,
    req: pb::import_resource_state::Request,
) -> Result<pb::import_resource_state::Response, EndedEarly> {
    let ty = resource_type(dispatcher, &req.type_name)?;
    let import = ImportRequest {
        id: req.id,
        client_capabilities: capabilities_of(req.client_capabilities),
    };
    let resp = dispatcher.import(&req.type_name, import).await;
    let mut diags = resp.diagnostics;
    let mut imported_resources = Vec::new();
    for imported in resp.imported {
        if let Some(state) = encode_or_push(&imported.state, ty, "imported state", &mut diags) {
            imported_resources.push(pb::import_resource_state::ImportedResource {
                type_name: req.type_name.clone(),
                state: Some(state),
                private: imported.private,
                identity: None,
            });
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
    Ok(pb::move_resource_state::Response {
        target_state,
        target_private: resp.target_private,
        diagnostics: diagnostics(diags),
        target_identity: None,
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
