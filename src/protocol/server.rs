//! The tfplugin6 `Provider` service: every RPC decodes, delegates to the dispatcher, encodes.
//! A gRPC `Status` is returned only for a broken protocol invariant; user problems are diagnostics.

use std::collections::HashMap;
use std::sync::Arc;

use tonic::{Request, Response, Status};

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
use crate::values::Type;

pub struct ProviderService {
    dispatcher: Arc<Dispatcher>,
}

impl ProviderService {
    pub fn new(dispatcher: Arc<Dispatcher>) -> Self {
        Self { dispatcher }
    }

    fn resource_type(&self, type_name: &str) -> Result<&Type, Vec<pb::Diagnostic>> {
        self.dispatcher
            .resource_type(type_name)
            .map_err(diagnostics)
    }

    fn data_source_type(&self, type_name: &str) -> Result<&Type, Vec<pb::Diagnostic>> {
        self.dispatcher
            .data_source_type(type_name)
            .map_err(diagnostics)
    }
}

fn unknown(kind: &str, type_name: &str) -> Vec<pb::Diagnostic> {
    diagnostics(unknown_type(kind, type_name))
}

fn not_supported(what: &str) -> Vec<pb::Diagnostic> {
    vec![diagnostic(Diagnostic::error(
        format!("{what} is not supported"),
        format!("The talosboot provider does not offer {what}."),
    ))]
}

/// Runs `$body`, turning an early `Err(diags)` into a response with only those diagnostics.
macro_rules! try_diags {
    ($resp:ty, $expr:expr) => {
        match $expr {
            Ok(v) => v,
            Err(diags) => {
                return Ok(Response::new(<$resp>::from_diagnostics(diags)));
            }
        }
    };
}

trait FromDiagnostics {
    fn from_diagnostics(diags: Vec<pb::Diagnostic>) -> Self;
}

macro_rules! from_diagnostics {
    ($($t:ty),* $(,)?) => {$(
        impl FromDiagnostics for $t {
            #[allow(clippy::needless_update)] // some responses carry only diagnostics
            fn from_diagnostics(diagnostics: Vec<pb::Diagnostic>) -> Self {
                Self { diagnostics, ..Default::default() }
            }
        }
    )*};
}

from_diagnostics!(
    pb::validate_resource_config::Response,
    pb::validate_data_resource_config::Response,
    pb::validate_provider_config::Response,
    pb::configure_provider::Response,
    pb::upgrade_resource_state::Response,
    pb::read_resource::Response,
    pb::plan_resource_change::Response,
    pb::apply_resource_change::Response,
    pb::import_resource_state::Response,
    pb::move_resource_state::Response,
    pb::read_data_source::Response,
);

fn one(d: Diagnostic) -> Vec<pb::Diagnostic> {
    vec![diagnostic(d)]
}

#[tonic::async_trait]
impl pb::provider_server::Provider for ProviderService {
    async fn get_metadata(
        &self,
        _: Request<pb::get_metadata::Request>,
    ) -> Result<Response<pb::get_metadata::Response>, Status> {
        use pb::get_metadata as m;
        Ok(Response::new(m::Response {
            server_capabilities: Some(capabilities()),
            resources: self
                .dispatcher
                .resource_schemas()
                .map(|(n, _)| m::ResourceMetadata {
                    type_name: n.to_owned(),
                })
                .collect(),
            data_sources: self
                .dispatcher
                .data_source_schemas()
                .map(|(n, _)| m::DataSourceMetadata {
                    type_name: n.to_owned(),
                })
                .collect(),
            functions: functions::metadata(&self.dispatcher),
            ..Default::default()
        }))
    }

    async fn get_provider_schema(
        &self,
        _: Request<pb::get_provider_schema::Request>,
    ) -> Result<Response<pb::get_provider_schema::Response>, Status> {
        let d = &self.dispatcher;
        Ok(Response::new(pb::get_provider_schema::Response {
            provider: Some(schema(d.provider_schema())),
            resource_schemas: d
                .resource_schemas()
                .map(|(n, s)| (n.to_owned(), schema(s)))
                .collect(),
            data_source_schemas: d
                .data_source_schemas()
                .map(|(n, s)| (n.to_owned(), schema(s)))
                .collect(),
            server_capabilities: Some(capabilities()),
            functions: functions::definitions(d),
            ..Default::default()
        }))
    }

    async fn get_resource_identity_schemas(
        &self,
        _: Request<pb::get_resource_identity_schemas::Request>,
    ) -> Result<Response<pb::get_resource_identity_schemas::Response>, Status> {
        Ok(Response::new(pb::get_resource_identity_schemas::Response {
            identity_schemas: HashMap::new(),
            diagnostics: Vec::new(),
        }))
    }

    async fn upgrade_resource_identity(
        &self,
        _: Request<pb::upgrade_resource_identity::Request>,
    ) -> Result<Response<pb::upgrade_resource_identity::Response>, Status> {
        Ok(Response::new(pb::upgrade_resource_identity::Response {
            upgraded_identity: None,
            diagnostics: not_supported("resource identity"),
        }))
    }

    async fn validate_provider_config(
        &self,
        request: Request<pb::validate_provider_config::Request>,
    ) -> Result<Response<pb::validate_provider_config::Response>, Status> {
        type R = pb::validate_provider_config::Response;
        let ty = self.dispatcher.provider_type();
        let config = try_diags!(
            R,
            decode(
                request.get_ref().config.as_ref(),
                ty,
                "provider configuration"
            )
            .map_err(one)
        );
        let diags = self.dispatcher.validate_provider_config(&config);
        Ok(Response::new(R {
            diagnostics: diagnostics(diags),
        }))
    }

    async fn validate_resource_config(
        &self,
        request: Request<pb::validate_resource_config::Request>,
    ) -> Result<Response<pb::validate_resource_config::Response>, Status> {
        type R = pb::validate_resource_config::Response;
        let req = request.into_inner();
        let ty = try_diags!(R, self.resource_type(&req.type_name));
        let config = try_diags!(
            R,
            decode(req.config.as_ref(), ty, "configuration").map_err(one)
        );
        let write_only_allowed =
            capabilities_of(req.client_capabilities).write_only_attributes_allowed;
        let diags = self
            .dispatcher
            .validate_resource(&req.type_name, &config, write_only_allowed);
        Ok(Response::new(R {
            diagnostics: diagnostics(diags),
        }))
    }

    async fn validate_data_resource_config(
        &self,
        request: Request<pb::validate_data_resource_config::Request>,
    ) -> Result<Response<pb::validate_data_resource_config::Response>, Status> {
        type R = pb::validate_data_resource_config::Response;
        let req = request.into_inner();
        let ty = try_diags!(R, self.data_source_type(&req.type_name));
        let config = try_diags!(
            R,
            decode(req.config.as_ref(), ty, "configuration").map_err(one)
        );
        let diags = self
            .dispatcher
            .validate_data_source(&req.type_name, &config);
        Ok(Response::new(R {
            diagnostics: diagnostics(diags),
        }))
    }

    async fn upgrade_resource_state(
        &self,
        request: Request<pb::upgrade_resource_state::Request>,
    ) -> Result<Response<pb::upgrade_resource_state::Response>, Status> {
        type R = pb::upgrade_resource_state::Response;
        let req = request.into_inner();
        let ty = try_diags!(R, self.resource_type(&req.type_name));
        let raw = req.raw_state.unwrap_or_default();
        if raw.json.is_empty() && !raw.flatmap.is_empty() {
            return Ok(Response::new(R::from_diagnostics(one(Diagnostic::error(
                "Unsupported legacy state",
                "This state was written in the flatmap format of Terraform 0.11 or older, which talosboot never used. Remove it from state (`terraform state rm`) and import the resource.",
            )))));
        }
        let resp = self
            .dispatcher
            .upgrade(
                &req.type_name,
                UpgradeRequest {
                    version: req.version,
                    raw_json: raw.json,
                },
            )
            .await;
        let mut diags = resp.diagnostics;
        let upgraded_state = if diags.has_errors() {
            None
        } else {
            encode_or_push(&resp.upgraded_state, ty, "upgraded state", &mut diags)
        };
        Ok(Response::new(R {
            upgraded_state,
            diagnostics: diagnostics(diags),
        }))
    }

    async fn configure_provider(
        &self,
        request: Request<pb::configure_provider::Request>,
    ) -> Result<Response<pb::configure_provider::Response>, Status> {
        type R = pb::configure_provider::Response;
        let ty = self.dispatcher.provider_type();
        let config = try_diags!(
            R,
            decode(
                request.get_ref().config.as_ref(),
                ty,
                "provider configuration"
            )
            .map_err(one)
        );
        let diags = self.dispatcher.configure(&config);
        Ok(Response::new(R {
            diagnostics: diagnostics(diags),
        }))
    }

    async fn read_resource(
        &self,
        request: Request<pb::read_resource::Request>,
    ) -> Result<Response<pb::read_resource::Response>, Status> {
        type R = pb::read_resource::Response;
        let req = request.into_inner();
        let ty = try_diags!(R, self.resource_type(&req.type_name));
        let current_state = try_diags!(
            R,
            decode(req.current_state.as_ref(), ty, "current state").map_err(one)
        );
        let resp = self
            .dispatcher
            .read(
                &req.type_name,
                ReadRequest {
                    current_state,
                    private: req.private,
                    client_capabilities: capabilities_of(req.client_capabilities),
                },
            )
            .await;
        let mut diags = resp.diagnostics;
        let new_state = encode_or_push(&resp.new_state, ty, "new state", &mut diags);
        Ok(Response::new(R {
            new_state,
            private: resp.private.unwrap_or_default(),
            diagnostics: diagnostics(diags),
            ..Default::default()
        }))
    }

    async fn plan_resource_change(
        &self,
        request: Request<pb::plan_resource_change::Request>,
    ) -> Result<Response<pb::plan_resource_change::Response>, Status> {
        type R = pb::plan_resource_change::Response;
        let req = request.into_inner();
        let ty = try_diags!(R, self.resource_type(&req.type_name));
        let decoded = (|| {
            Ok::<_, Diagnostic>(PlanRequest {
                prior_state: decode(req.prior_state.as_ref(), ty, "prior state")?,
                proposed_new_state: decode(
                    req.proposed_new_state.as_ref(),
                    ty,
                    "proposed new state",
                )?,
                config: decode(req.config.as_ref(), ty, "configuration")?,
                prior_private: req.prior_private,
                client_capabilities: capabilities_of(req.client_capabilities),
            })
        })();
        let plan = try_diags!(R, decoded.map_err(one));
        let resp = self.dispatcher.plan(&req.type_name, plan).await;
        let mut diags = resp.diagnostics;
        let planned_state = if diags.has_errors() {
            None
        } else {
            encode_or_push(&resp.planned_state, ty, "planned state", &mut diags)
        };
        Ok(Response::new(R {
            planned_state,
            requires_replace: resp.requires_replace.iter().map(path_to_proto).collect(),
            planned_private: resp.private.unwrap_or_default(),
            diagnostics: diagnostics(diags),
            ..Default::default()
        }))
    }

    async fn apply_resource_change(
        &self,
        request: Request<pb::apply_resource_change::Request>,
    ) -> Result<Response<pb::apply_resource_change::Response>, Status> {
        type R = pb::apply_resource_change::Response;
        let req = request.into_inner();
        let ty = try_diags!(R, self.resource_type(&req.type_name));
        let decoded = (|| {
            Ok::<_, Diagnostic>(ApplyRequest {
                prior_state: decode(req.prior_state.as_ref(), ty, "prior state")?,
                planned_state: decode(req.planned_state.as_ref(), ty, "planned state")?,
                config: decode(req.config.as_ref(), ty, "configuration")?,
                planned_private: req.planned_private,
            })
        })();
        let apply = try_diags!(R, decoded.map_err(one));
        let resp = self.dispatcher.apply(&req.type_name, apply).await;
        let mut diags = resp.diagnostics;
        let new_state = encode_or_push(&resp.new_state, ty, "new state", &mut diags);
        Ok(Response::new(R {
            new_state,
            private: resp.private.unwrap_or_default(),
            diagnostics: diagnostics(diags),
            ..Default::default()
        }))
    }

    async fn import_resource_state(
        &self,
        request: Request<pb::import_resource_state::Request>,
    ) -> Result<Response<pb::import_resource_state::Response>, Status> {
        type R = pb::import_resource_state::Response;
        let req = request.into_inner();
        let ty = try_diags!(R, self.resource_type(&req.type_name));
        let resp = self
            .dispatcher
            .import(
                &req.type_name,
                ImportRequest {
                    id: req.id,
                    client_capabilities: capabilities_of(req.client_capabilities),
                },
            )
            .await;
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
        Ok(Response::new(R {
            imported_resources,
            diagnostics: diagnostics(diags),
            deferred: None,
        }))
    }

    async fn move_resource_state(
        &self,
        request: Request<pb::move_resource_state::Request>,
    ) -> Result<Response<pb::move_resource_state::Response>, Status> {
        type R = pb::move_resource_state::Response;
        let req = request.into_inner();
        let ty = try_diags!(R, self.resource_type(&req.target_type_name));
        let resp = self
            .dispatcher
            .move_state(
                &req.target_type_name,
                MoveRequest {
                    source_provider_address: req.source_provider_address,
                    source_type_name: req.source_type_name,
                    source_schema_version: req.source_schema_version,
                    source_state_json: req.source_state.map(|s| s.json).unwrap_or_default(),
                    source_private: req.source_private,
                },
            )
            .await;
        let mut diags = resp.diagnostics;
        let target_state = if diags.has_errors() {
            None
        } else {
            encode_or_push(&resp.target_state, ty, "moved state", &mut diags)
        };
        Ok(Response::new(R {
            target_state,
            target_private: resp.target_private,
            diagnostics: diagnostics(diags),
            target_identity: None,
        }))
    }

    async fn read_data_source(
        &self,
        request: Request<pb::read_data_source::Request>,
    ) -> Result<Response<pb::read_data_source::Response>, Status> {
        type R = pb::read_data_source::Response;
        let req = request.into_inner();
        let ty = try_diags!(R, self.data_source_type(&req.type_name));
        let config = try_diags!(
            R,
            decode(req.config.as_ref(), ty, "configuration").map_err(one)
        );
        let deferral_allowed = capabilities_of(req.client_capabilities).deferral_allowed;
        if deferral_allowed && self.dispatcher.provider_config_unknown() {
            return Ok(Response::new(R {
                deferred: Some(pb::Deferred {
                    reason: pb::deferred::Reason::ProviderConfigUnknown as i32,
                }),
                ..Default::default()
            }));
        }
        let resp = self
            .dispatcher
            .read_data_source(&req.type_name, config)
            .await;
        let mut diags = resp.diagnostics;
        let state = if diags.has_errors() {
            None
        } else {
            encode_or_push(&resp.state, ty, "data source state", &mut diags)
        };
        Ok(Response::new(R {
            state,
            diagnostics: diagnostics(diags),
            deferred: None,
        }))
    }

    async fn validate_ephemeral_resource_config(
        &self,
        request: Request<pb::validate_ephemeral_resource_config::Request>,
    ) -> Result<Response<pb::validate_ephemeral_resource_config::Response>, Status> {
        Ok(Response::new(
            pb::validate_ephemeral_resource_config::Response {
                diagnostics: unknown("ephemeral resource", &request.get_ref().type_name),
            },
        ))
    }

    async fn open_ephemeral_resource(
        &self,
        request: Request<pb::open_ephemeral_resource::Request>,
    ) -> Result<Response<pb::open_ephemeral_resource::Response>, Status> {
        Ok(Response::new(pb::open_ephemeral_resource::Response {
            diagnostics: unknown("ephemeral resource", &request.get_ref().type_name),
            ..Default::default()
        }))
    }

    async fn renew_ephemeral_resource(
        &self,
        request: Request<pb::renew_ephemeral_resource::Request>,
    ) -> Result<Response<pb::renew_ephemeral_resource::Response>, Status> {
        Ok(Response::new(pb::renew_ephemeral_resource::Response {
            diagnostics: unknown("ephemeral resource", &request.get_ref().type_name),
            ..Default::default()
        }))
    }

    async fn close_ephemeral_resource(
        &self,
        request: Request<pb::close_ephemeral_resource::Request>,
    ) -> Result<Response<pb::close_ephemeral_resource::Response>, Status> {
        Ok(Response::new(pb::close_ephemeral_resource::Response {
            diagnostics: unknown("ephemeral resource", &request.get_ref().type_name),
        }))
    }

    async fn get_functions(
        &self,
        _: Request<pb::get_functions::Request>,
    ) -> Result<Response<pb::get_functions::Response>, Status> {
        Ok(Response::new(pb::get_functions::Response {
            functions: functions::definitions(&self.dispatcher),
            diagnostics: Vec::new(),
        }))
    }

    async fn call_function(
        &self,
        request: Request<pb::call_function::Request>,
    ) -> Result<Response<pb::call_function::Response>, Status> {
        Ok(Response::new(functions::call(
            &self.dispatcher,
            request.into_inner(),
        )))
    }

    async fn stop_provider(
        &self,
        _: Request<pb::stop_provider::Request>,
    ) -> Result<Response<pb::stop_provider::Response>, Status> {
        tracing::info!("StopProvider: cancelling operations in flight");
        self.dispatcher.stop();
        Ok(Response::new(pb::stop_provider::Response {
            error: String::new(),
        }))
    }
}

fn capabilities() -> pb::ServerCapabilities {
    pb::ServerCapabilities {
        plan_destroy: true,
        get_provider_schema_optional: false,
        move_resource_state: true,
    }
}

fn encode_or_push(
    value: &crate::values::Value,
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
