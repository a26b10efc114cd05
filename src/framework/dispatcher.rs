//! The dispatcher: routes every operation to its resource or data source, and holds the safety nets
//! so that resources need not:
//! - validation runs before every plan, so bad input never reaches apply;
//! - requires-replace is derived from the schema, on top of what the resource asks for;
//! - write-only values are nulled before any plan or state leaves the provider;
//! - a create that "succeeds" without state is reported as a provider bug, and a failed destroy keeps
//!   the prior state (state tells the truth: tainted or kept, never silently lost).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

use super::resource::*;
use super::schema::{null_write_only, write_only_set};
use super::{Diagnostics, Schema};
use crate::cluster::{ClusterHandle, ProviderConfig};
use crate::values::{AttributePath, JsonDecodeOptions, Value, from_json_with};

struct Registered<T: ?Sized> {
    implementation: Arc<T>,
    schema: Schema,
}

/// All resources and data sources of the provider, plus the provider-level state that operations
/// share (cluster handle from ConfigureProvider, the StopProvider token).
pub struct Dispatcher {
    provider_schema: Schema,
    resources: BTreeMap<String, Registered<dyn Resource>>,
    data_sources: BTreeMap<String, Registered<dyn DataSource>>,
    cluster: Mutex<ClusterHandle>,
    stop: Mutex<CancellationToken>,
    shutdown: CancellationToken,
}

impl Dispatcher {
    pub fn new(
        provider_schema: Schema,
        resources: Vec<Arc<dyn Resource>>,
        data_sources: Vec<Arc<dyn DataSource>>,
        shutdown: CancellationToken,
    ) -> Self {
        let resources = resources
            .into_iter()
            .map(|r| {
                let schema = r.schema();
                (
                    r.type_name().to_owned(),
                    Registered {
                        implementation: r,
                        schema,
                    },
                )
            })
            .collect();
        let data_sources = data_sources
            .into_iter()
            .map(|d| {
                let schema = d.schema();
                (
                    d.type_name().to_owned(),
                    Registered {
                        implementation: d,
                        schema,
                    },
                )
            })
            .collect();
        Self {
            provider_schema,
            resources,
            data_sources,
            cluster: Mutex::new(ClusterHandle::unconfigured()),
            stop: Mutex::new(shutdown.child_token()),
            shutdown,
        }
    }

    pub fn provider_schema(&self) -> &Schema {
        &self.provider_schema
    }
    pub fn resource_schemas(&self) -> impl Iterator<Item = (&str, &Schema)> {
        self.resources.iter().map(|(k, r)| (k.as_str(), &r.schema))
    }
    pub fn data_source_schemas(&self) -> impl Iterator<Item = (&str, &Schema)> {
        self.data_sources
            .iter()
            .map(|(k, r)| (k.as_str(), &r.schema))
    }
    pub fn resource_schema(&self, type_name: &str) -> Option<&Schema> {
        self.resources.get(type_name).map(|r| &r.schema)
    }
    pub fn data_source_schema(&self, type_name: &str) -> Option<&Schema> {
        self.data_sources.get(type_name).map(|r| &r.schema)
    }

    fn ctx(&self) -> Ctx {
        Ctx {
            cluster: self
                .cluster
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            cancel: self
                .stop
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .child_token(),
        }
    }

    /// StopProvider: cancel what is in flight, keep serving new requests.
    pub fn stop(&self) {
        let mut stop = self.stop.lock().unwrap_or_else(PoisonError::into_inner);
        stop.cancel();
        *stop = self.shutdown.child_token();
    }

    /// True when ConfigureProvider received unknown connection settings (plan before the cluster exists).
    pub fn provider_config_unknown(&self) -> bool {
        matches!(
            self.cluster
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .config(),
            ProviderConfig::Unknown
        )
    }

    pub fn validate_provider_config(&self, config: &Value) -> Diagnostics {
        ProviderConfig::from_value(config).1
    }

    /// ConfigureProvider: remembers the configuration; the cluster is contacted only when an
    /// operation needs it, so unknown values (a kubeconfig not yet created) are fine here.
    pub fn configure(&self, config: &Value) -> Diagnostics {
        let (config, diagnostics) = ProviderConfig::from_value(config);
        if !diagnostics.has_errors() {
            *self.cluster.lock().unwrap_or_else(PoisonError::into_inner) =
                ClusterHandle::new(config);
        }
        diagnostics
    }

    fn resource(&self, type_name: &str) -> Result<&Registered<dyn Resource>, Diagnostics> {
        self.resources
            .get(type_name)
            .ok_or_else(|| unknown_type("resource", type_name))
    }

    /// `write_only_allowed`: the client announced write-only support (ClientCapabilities).
    pub fn validate_resource(
        &self,
        type_name: &str,
        config: &Value,
        write_only_allowed: bool,
    ) -> Diagnostics {
        match self.resource(type_name) {
            Ok(r) => {
                let mut diagnostics = Diagnostics::new();
                if !write_only_allowed {
                    for a in write_only_set(&r.schema.block.attributes, config) {
                        diagnostics.error_at(
                            AttributePath::attr(&a.name),
                            "Write-only attribute needs a newer Terraform",
                            format!("`{}` is write-only: it is never stored in state, which needs Terraform 1.11+ or OpenTofu 1.11+. Upgrade, or leave it unset.", a.name),
                        );
                    }
                }
                r.implementation.validate(config, &mut diagnostics);
                diagnostics
            }
            Err(d) => d,
        }
    }

    pub fn validate_data_source(&self, type_name: &str, config: &Value) -> Diagnostics {
        match self.data_sources.get(type_name) {
            Some(d) => {
                let mut diagnostics = Diagnostics::new();
                d.implementation.validate(config, &mut diagnostics);
                diagnostics
            }
            None => unknown_type("data source", type_name),
        }
    }

    pub async fn plan(&self, type_name: &str, req: PlanRequest) -> PlanResponse {
        tracing::debug!(type_name, "plan");
        let r = match self.resource(type_name) {
            Ok(r) => r,
            Err(diagnostics) => return failed(diagnostics),
        };
        if req.proposed_new_state.is_null() {
            // Destroy: nothing to plan beyond the null.
            return PlanResponse {
                planned_state: Value::Null,
                private: req.prior_private,
                ..Default::default()
            };
        }
        let mut diagnostics = Diagnostics::new();
        r.implementation.validate(&req.config, &mut diagnostics);
        if diagnostics.has_errors() {
            return failed(diagnostics);
        }
        let prior = req.prior_state.clone();
        let mut resp = r.implementation.plan(&self.ctx(), req).await;
        if !prior.is_null() && !resp.planned_state.is_null() {
            for a in &r.schema.block.attributes {
                if a.requires_replace && prior.attr(&a.name) != resp.planned_state.attr(&a.name) {
                    let path = AttributePath::attr(&a.name);
                    if !resp.requires_replace.contains(&path) {
                        resp.requires_replace.push(path);
                    }
                }
            }
        }
        null_write_only(&r.schema.block.attributes, &mut resp.planned_state);
        diagnostics.extend(std::mem::take(&mut resp.diagnostics));
        resp.diagnostics = diagnostics;
        resp
    }

    pub async fn apply(&self, type_name: &str, req: ApplyRequest) -> ApplyResponse {
        tracing::debug!(type_name, "apply");
        let r = match self.resource(type_name) {
            Ok(r) => r,
            Err(diagnostics) => {
                return ApplyResponse {
                    new_state: req.prior_state,
                    diagnostics,
                    ..Default::default()
                };
            }
        };
        let creating = req.prior_state.is_null();
        let destroying = req.planned_state.is_null();
        let prior_state = req.prior_state.clone();
        let prior_private = req.planned_private.clone();
        let mut resp = r.implementation.apply(&self.ctx(), req).await;
        let failed = resp.diagnostics.has_errors();
        if destroying {
            if failed && resp.new_state.is_null() {
                // The object may still exist: keep it in state rather than forget it.
                resp.new_state = prior_state;
                resp.private = prior_private;
            } else if !failed {
                resp.new_state = Value::Null;
            }
        } else if !failed && resp.new_state.is_null() {
            resp.diagnostics.error(
                "Provider produced no state",
                format!(
                    "{type_name} reported success but returned no state after {}. This is a bug in the provider; please report it.",
                    if creating { "create" } else { "update" }
                ),
            );
            if !creating {
                resp.new_state = prior_state;
            }
        }
        null_write_only(&r.schema.block.attributes, &mut resp.new_state);
        resp
    }

    pub async fn read(&self, type_name: &str, req: ReadRequest) -> ReadResponse {
        tracing::debug!(type_name, "read");
        let r = match self.resource(type_name) {
            Ok(r) => r,
            Err(diagnostics) => {
                return ReadResponse {
                    new_state: req.current_state,
                    diagnostics,
                    ..Default::default()
                };
            }
        };
        let current = req.current_state.clone();
        let ctx = self.ctx();
        let mut resp = tokio::select! {
            resp = r.implementation.read(&ctx, req) => resp,
            _ = ctx.cancel.cancelled() => ReadResponse {
                diagnostics: cancelled(type_name),
                ..Default::default()
            },
        };
        if resp.diagnostics.has_errors() && resp.new_state.is_null() {
            // A failed refresh must not drop the resource from state (the helm_release trap).
            resp.new_state = current;
        }
        null_write_only(&r.schema.block.attributes, &mut resp.new_state);
        resp
    }

    pub async fn import(&self, type_name: &str, req: ImportRequest) -> ImportResponse {
        tracing::debug!(type_name, "import");
        let r = match self.resource(type_name) {
            Ok(r) => r,
            Err(diagnostics) => {
                return ImportResponse {
                    imported: Vec::new(),
                    diagnostics,
                };
            }
        };
        let mut resp = r.implementation.import(&self.ctx(), req).await;
        for imported in &mut resp.imported {
            null_write_only(&r.schema.block.attributes, &mut imported.state);
        }
        resp
    }

    pub async fn upgrade(&self, type_name: &str, req: UpgradeRequest) -> UpgradeResponse {
        tracing::debug!(type_name, "upgrade state");
        match self.resource(type_name) {
            Ok(r) => r.implementation.upgrade_state(&self.ctx(), req).await,
            Err(diagnostics) => UpgradeResponse {
                diagnostics,
                ..Default::default()
            },
        }
    }

    pub async fn move_state(&self, type_name: &str, req: MoveRequest) -> MoveResponse {
        tracing::debug!(type_name, "move state");
        match self.resource(type_name) {
            Ok(r) => r.implementation.move_state(&self.ctx(), req).await,
            Err(diagnostics) => MoveResponse {
                diagnostics,
                ..Default::default()
            },
        }
    }

    pub async fn read_data_source(&self, type_name: &str, config: Value) -> DataReadResponse {
        tracing::debug!(type_name, "read data source");
        match self.data_sources.get(type_name) {
            Some(d) => {
                let ctx = self.ctx();
                let cancel = ctx.cancel.clone();
                tokio::select! {
                    resp = d.implementation.read(&ctx, config) => resp,
                    _ = cancel.cancelled() => DataReadResponse {
                        state: Value::Null,
                        diagnostics: cancelled(type_name),
                    },
                }
            }
            None => DataReadResponse {
                state: Value::Null,
                diagnostics: unknown_type("data source", type_name),
            },
        }
    }
}

/// Reads may be abandoned when Terraform stops the provider: they change nothing remotely. (Apply is
/// not cut short here: a resource knows what it already created and must answer for it.)
fn cancelled(type_name: &str) -> Diagnostics {
    let mut diagnostics = Diagnostics::new();
    diagnostics.error(
        "Operation cancelled",
        format!(
            "Terraform asked the provider to stop while reading {type_name}; nothing was changed."
        ),
    );
    diagnostics
}

fn failed(diagnostics: Diagnostics) -> PlanResponse {
    PlanResponse {
        diagnostics,
        ..Default::default()
    }
}

fn unknown_type(kind: &str, type_name: &str) -> Diagnostics {
    let mut diagnostics = Diagnostics::new();
    diagnostics.error(
        format!("Unknown {kind} type"),
        format!(
            "This provider has no {kind} named {type_name:?}. Check the spelling, or upgrade the provider if it was added in a later version."
        ),
    );
    diagnostics
}

/// The default state upgrade: decode JSON stored at the current version; refuse any other version
/// with a message that names both, instead of guessing.
pub(crate) fn upgrade_same_version(
    schema: &Schema,
    type_name: &str,
    req: UpgradeRequest,
) -> UpgradeResponse {
    let mut diagnostics = Diagnostics::new();
    if req.version > schema.version {
        diagnostics.error(
            "State was written by a newer provider",
            format!(
                "The state of this {type_name} has schema version {}, but this provider only knows version {}. Upgrade the provider.",
                req.version, schema.version
            ),
        );
        return UpgradeResponse {
            diagnostics,
            ..Default::default()
        };
    }
    if req.version < schema.version {
        diagnostics.error(
            "Unsupported state version",
            format!(
                "The state of this {type_name} has schema version {}, which this provider cannot upgrade to version {}.",
                req.version, schema.version
            ),
        );
        return UpgradeResponse {
            diagnostics,
            ..Default::default()
        };
    }
    // Like terraform-plugin-framework: attributes a newer build removed at the same version are dropped.
    let options = JsonDecodeOptions {
        ignore_undefined_attributes: true,
    };
    match from_json_with(&req.raw_json, &schema.value_type(), options) {
        Ok(upgraded_state) => UpgradeResponse {
            upgraded_state,
            diagnostics,
        },
        Err(e) => {
            diagnostics.error("Stored state could not be decoded", e.to_string());
            UpgradeResponse {
                diagnostics,
                ..Default::default()
            }
        }
    }
}
