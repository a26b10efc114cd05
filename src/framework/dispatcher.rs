//! The dispatcher: routes every operation to its resource or data source, and holds the safety nets
//! so that resources need not:
//! - validation runs before every plan, so bad input never reaches apply; write-only values are
//!   refused from clients that would store them; deprecated attributes and blocks warn;
//! - computed attributes left unset and proposed null are planned unknown;
//! - requires-replace is derived from the schema, on top of what the resource asks for, comparing
//!   sets as sets;
//! - write-only values are nulled before any plan or state leaves the provider (plan, apply, read,
//!   import, state upgrade and move);
//!
//! Each of these covers nested attributes and nested blocks at any depth, not only the top level.
//! - private state a resource does not set is carried over unchanged;
//! - a failed update or destroy that returns no state keeps the prior state, and a "successful"
//!   create or update without state is reported as a provider bug (state tells the truth);
//! - a refresh while the provider configuration is still unknown keeps the state as it is;
//! - reads are abandoned on StopProvider; a panic in a resource becomes a diagnostic, not a crash.

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};

use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use super::resource::*;
use super::schema::{
    deprecated_set, mark_unset_computed_unknown, null_write_only, requires_replace, write_only_set,
};
use super::{Diagnostics, Schema};
use crate::values::{JsonDecodeOptions, Type, Value, from_json_with};

struct Registered<T: ?Sized> {
    implementation: Arc<T>,
    schema: Schema,
    /// The object type of config, plan and state values, computed once.
    value_type: Type,
}

impl<T: ?Sized> Registered<T> {
    fn new(implementation: Arc<T>, schema: Schema) -> Self {
        let value_type = schema.value_type();
        Self {
            implementation,
            schema,
            value_type,
        }
    }
}

/// All resources and data sources of the provider, plus the provider-level state that operations
/// share (the provider data from ConfigureProvider, the StopProvider token).
pub struct Dispatcher {
    provider: Arc<dyn Provider>,
    provider_schema: Schema,
    provider_type: Type,
    resources: BTreeMap<String, Registered<dyn Resource>>,
    data_sources: BTreeMap<String, Registered<dyn DataSource>>,
    configured: Mutex<Arc<Configured>>,
    stop: Mutex<CancellationToken>,
    shutdown: CancellationToken,
    /// Provider-defined functions by name (see [`Dispatcher::with_functions`]).
    functions: BTreeMap<String, Arc<dyn super::Function>>,
}

impl Dispatcher {
    pub fn new(
        provider: Arc<dyn Provider>,
        resources: Vec<Arc<dyn Resource>>,
        data_sources: Vec<Arc<dyn DataSource>>,
        shutdown: CancellationToken,
    ) -> Self {
        let resources = resources
            .into_iter()
            .map(|r| {
                (
                    r.type_name().to_owned(),
                    Registered::new(r.clone(), r.schema()),
                )
            })
            .collect();
        let data_sources = data_sources
            .into_iter()
            .map(|d| {
                (
                    d.type_name().to_owned(),
                    Registered::new(d.clone(), d.schema()),
                )
            })
            .collect();
        let provider_schema = provider.schema();
        Self {
            provider_type: provider_schema.value_type(),
            provider_schema,
            configured: Mutex::new(Arc::new(provider.unconfigured())),
            provider,
            resources,
            data_sources,
            stop: Mutex::new(shutdown.child_token()),
            shutdown,
            functions: BTreeMap::new(),
        }
    }

    /// The object type of the provider block, computed once.
    pub fn provider_type(&self) -> &Type {
        &self.provider_type
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
    /// The value type of a resource, or the diagnostic for an unknown type name.
    pub fn resource_type(&self, type_name: &str) -> Result<&Type, Diagnostics> {
        self.resource(type_name).map(|r| &r.value_type)
    }
    pub fn data_source_type(&self, type_name: &str) -> Result<&Type, Diagnostics> {
        self.data_source(type_name).map(|d| &d.value_type)
    }

    fn resource(&self, type_name: &str) -> Result<&Registered<dyn Resource>, Diagnostics> {
        self.resources
            .get(type_name)
            .ok_or_else(|| unknown_type("resource", type_name))
    }
    fn data_source(&self, type_name: &str) -> Result<&Registered<dyn DataSource>, Diagnostics> {
        self.data_sources
            .get(type_name)
            .ok_or_else(|| unknown_type("data source", type_name))
    }

    fn configured(&self) -> Arc<Configured> {
        self.configured
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn ctx(&self) -> Ctx {
        let cancel = self
            .stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .child_token();
        Ctx::new(self.configured().data.clone(), cancel)
    }

    /// StopProvider: cancel what is in flight, keep serving new requests.
    pub fn stop(&self) {
        let mut stop = self.stop.lock().unwrap_or_else(PoisonError::into_inner);
        stop.cancel();
        *stop = self.shutdown.child_token();
    }

    /// True when ConfigureProvider received unknown connection settings (plan before the cluster exists).
    pub fn provider_config_unknown(&self) -> bool {
        self.configured().unknown
    }

    pub fn validate_provider_config(&self, config: &Value) -> Diagnostics {
        let mut diagnostics = deprecation_warnings(&self.provider_schema, config);
        let provider = &self.provider;
        validate_guarded("the provider", || {
            provider.validate(config, &mut diagnostics)
        })
        .map_or_else(|d| d, |()| diagnostics)
    }

    /// ConfigureProvider: the provider decides what it keeps (talosboot: the configuration, with
    /// the cluster contacted only when an operation needs it, so unknown values are fine here).
    pub fn configure(&self, config: &Value) -> Diagnostics {
        let mut diagnostics = Diagnostics::new();
        let provider = &self.provider;
        let configured = std::panic::catch_unwind(AssertUnwindSafe(|| {
            provider.configure(config, &mut diagnostics)
        }));
        match configured {
            Ok(Some(configured)) if !diagnostics.has_errors() => {
                *self
                    .configured
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Arc::new(configured);
                diagnostics
            }
            Ok(_) => diagnostics,
            Err(_) => panicked("the provider", "configure"),
        }
    }

    /// `write_only_allowed`: the client announced write-only support (ClientCapabilities).
    pub fn validate_resource(
        &self,
        type_name: &str,
        config: &Value,
        write_only_allowed: bool,
    ) -> Diagnostics {
        let r = match self.resource(type_name) {
            Ok(r) => r,
            Err(d) => return d,
        };
        let mut diagnostics = deprecation_warnings(&r.schema, config);
        if !write_only_allowed {
            for path in write_only_set(&r.schema.block, config) {
                diagnostics.error_at(
                    path.clone(),
                    "Write-only attribute needs a newer Terraform",
                    format!("`{path}` is write-only: it is never stored in state, which needs Terraform 1.11+ or OpenTofu 1.11+. Upgrade, or leave it unset."),
                );
            }
        }
        let mut diagnostics = validate_guarded(type_name, || {
            r.implementation.validate(config, &mut diagnostics)
        })
        .map_or_else(|d| d, |()| diagnostics);
        locatable_paths(&mut diagnostics, &r.schema.block);
        diagnostics
    }

    pub fn validate_data_source(&self, type_name: &str, config: &Value) -> Diagnostics {
        let d = match self.data_source(type_name) {
            Ok(d) => d,
            Err(diags) => return diags,
        };
        let mut diagnostics = deprecation_warnings(&d.schema, config);
        validate_guarded(type_name, || {
            d.implementation.validate(config, &mut diagnostics)
        })
        .map_or_else(|d| d, |()| diagnostics)
    }

    pub async fn plan(&self, type_name: &str, mut req: PlanRequest) -> PlanResponse {
        tracing::debug!(type_name, "plan");
        let r = match self.resource(type_name) {
            Ok(r) => r,
            Err(diagnostics) => {
                return PlanResponse {
                    diagnostics,
                    ..Default::default()
                };
            }
        };
        if req.proposed_new_state.is_null() {
            // Destroy: nothing to plan beyond the null.
            return PlanResponse {
                private: Some(req.prior_private),
                ..Default::default()
            };
        }
        let mut diagnostics = Diagnostics::new();
        let validated = validate_guarded(type_name, || {
            r.implementation.validate(&req.config, &mut diagnostics)
        });
        if let Err(panicked) = validated {
            diagnostics = panicked;
        }
        if diagnostics.has_errors() {
            locatable_paths(&mut diagnostics, &r.schema.block);
            return PlanResponse {
                diagnostics,
                ..Default::default()
            };
        }
        if req.prior_state.is_null()
            || changes(&r.schema, &req.prior_state, &req.proposed_new_state)
        {
            // Like terraform-plugin-framework: only a create or a change makes unset computed
            // values unknown; an unchanged resource keeps its (possibly null) computed values.
            mark_unset_computed_unknown(&r.schema.block, &mut req.proposed_new_state, &req.config);
        }
        // Declared defaults, as terraform-plugin-framework applies attribute defaults: the
        // resource plans from them and never re-derives them.
        super::plan::apply_defaults(&r.schema.block, &mut req.proposed_new_state, &req.config);
        let (prior, prior_private) = (req.prior_state.clone(), req.prior_private.clone());
        let mut resp =
            match guarded(type_name, "plan", r.implementation.plan(&self.ctx(), req)).await {
                Ok(resp) => resp,
                Err(diagnostics) => {
                    return PlanResponse {
                        diagnostics,
                        ..Default::default()
                    };
                }
            };
        if !prior.is_null() && !resp.planned_state.is_null() {
            for path in requires_replace(&r.schema.block, &prior, &resp.planned_state) {
                if !resp.requires_replace.contains(&path) {
                    resp.requires_replace.push(path);
                }
            }
        }
        null_write_only(&r.schema.block, &mut resp.planned_state);
        resp.private.get_or_insert(prior_private);
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
                    private: Some(req.planned_private),
                };
            }
        };
        let creating = req.prior_state.is_null();
        let destroying = req.planned_state.is_null();
        let (prior_state, prior_private) = (req.prior_state.clone(), req.planned_private.clone());
        let mut resp =
            match guarded(type_name, "apply", r.implementation.apply(&self.ctx(), req)).await {
                Ok(resp) => resp,
                Err(diagnostics) => ApplyResponse {
                    diagnostics,
                    ..Default::default()
                },
            };
        let failed = resp.diagnostics.has_errors();
        if destroying && !failed {
            resp.new_state = Value::Null;
        } else if resp.new_state.is_null() && !creating {
            // A failed update or destroy: the object may still exist, keep it rather than forget it.
            if !failed {
                resp.diagnostics.error(
                    "Provider produced no state",
                    format!("{type_name} reported success but returned no state after an update. This is a bug in the provider; please report it."),
                );
            }
            resp.new_state = prior_state;
            resp.private = Some(prior_private.clone());
        } else if resp.new_state.is_null() && !failed && !destroying {
            resp.diagnostics.error(
                "Provider produced no state",
                format!("{type_name} reported success but returned no state after create. This is a bug in the provider; please report it."),
            );
        }
        null_write_only(&r.schema.block, &mut resp.new_state);
        resp.private.get_or_insert(prior_private);
        resp
    }

    pub async fn read(&self, type_name: &str, req: ReadRequest) -> ReadResponse {
        tracing::debug!(type_name, "read");
        let keep = |req: ReadRequest, diagnostics| ReadResponse {
            new_state: req.current_state,
            private: Some(req.private),
            diagnostics,
        };
        let r = match self.resource(type_name) {
            Ok(r) => r,
            Err(diagnostics) => return keep(req, diagnostics),
        };
        if self.provider_config_unknown() {
            // The kubeconfig comes from a resource that is being (re)created: nothing to compare with yet.
            return keep(req, Diagnostics::new());
        }
        let (current, private) = (req.current_state.clone(), req.private.clone());
        let ctx = self.ctx();
        let cancel = ctx.cancel.clone();
        let outcome = tokio::select! {
            outcome = guarded(type_name, "read", r.implementation.read(&ctx, req)) => outcome,
            _ = cancel.cancelled() => Err(cancelled(type_name)),
        };
        let mut resp = match outcome {
            Ok(resp) => resp,
            Err(diagnostics) => ReadResponse {
                diagnostics,
                ..Default::default()
            },
        };
        if resp.diagnostics.has_errors() && resp.new_state.is_null() {
            // A failed refresh must not drop the resource from state (the helm_release trap).
            resp.new_state = current;
        }
        null_write_only(&r.schema.block, &mut resp.new_state);
        resp.private.get_or_insert(private);
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
        let mut resp = match guarded(
            type_name,
            "import",
            r.implementation.import(&self.ctx(), req),
        )
        .await
        {
            Ok(resp) => resp,
            Err(diagnostics) => ImportResponse {
                imported: Vec::new(),
                diagnostics,
            },
        };
        for imported in &mut resp.imported {
            null_write_only(&r.schema.block, &mut imported.state);
        }
        resp
    }

    pub async fn upgrade(&self, type_name: &str, req: UpgradeRequest) -> UpgradeResponse {
        tracing::debug!(type_name, "upgrade state");
        let r = match self.resource(type_name) {
            Ok(r) => r,
            Err(diagnostics) => {
                return UpgradeResponse {
                    diagnostics,
                    ..Default::default()
                };
            }
        };
        let mut resp = guarded(
            type_name,
            "state upgrade",
            r.implementation.upgrade_state(&self.ctx(), req),
        )
        .await
        .unwrap_or_else(|diagnostics| UpgradeResponse {
            diagnostics,
            ..Default::default()
        });
        null_write_only(&r.schema.block, &mut resp.upgraded_state);
        resp
    }

    pub async fn move_state(&self, type_name: &str, req: MoveRequest) -> MoveResponse {
        tracing::debug!(type_name, "move state");
        let r = match self.resource(type_name) {
            Ok(r) => r,
            Err(diagnostics) => {
                return MoveResponse {
                    diagnostics,
                    ..Default::default()
                };
            }
        };
        let mut resp = guarded(
            type_name,
            "move",
            r.implementation.move_state(&self.ctx(), req),
        )
        .await
        .unwrap_or_else(|diagnostics| MoveResponse {
            diagnostics,
            ..Default::default()
        });
        null_write_only(&r.schema.block, &mut resp.target_state);
        resp
    }

    pub async fn read_data_source(&self, type_name: &str, config: Value) -> DataReadResponse {
        tracing::debug!(type_name, "read data source");
        let d = match self.data_source(type_name) {
            Ok(d) => d,
            Err(diagnostics) => {
                return DataReadResponse {
                    state: Value::Null,
                    diagnostics,
                };
            }
        };
        let ctx = self.ctx();
        let cancel = ctx.cancel.clone();
        let outcome = tokio::select! {
            outcome = guarded(type_name, "read", d.implementation.read(&ctx, config)) => outcome,
            _ = cancel.cancelled() => Err(cancelled(type_name)),
        };
        outcome.unwrap_or_else(|diagnostics| DataReadResponse {
            state: Value::Null,
            diagnostics,
        })
    }
}

/// Whether `proposed` differs from `prior`, sets compared as sets and write-only values (never in
/// prior state) left out.
fn changes(schema: &Schema, prior: &Value, proposed: &Value) -> bool {
    let (mut prior, mut proposed) = (prior.clone(), proposed.clone());
    null_write_only(&schema.block, &mut prior);
    null_write_only(&schema.block, &mut proposed);
    prior != proposed
}

/// Terraform does not warn about deprecated attributes by itself: the provider does, at validate,
/// for every deprecated attribute or block the configuration sets, at any depth.
fn deprecation_warnings(schema: &Schema, config: &Value) -> Diagnostics {
    let mut diagnostics = Diagnostics::new();
    for (path, message) in deprecated_set(&schema.block, config) {
        diagnostics.push(super::Diagnostic::warning("Deprecated attribute", message).at(path));
    }
    diagnostics
}

/// Runs a resource's future; a panic becomes a diagnostic instead of taking the plugin down (which
/// Terraform would only report as "plugin did not respond").
async fn guarded<T>(
    type_name: &str,
    operation: &str,
    fut: impl Future<Output = T>,
) -> Result<T, Diagnostics> {
    AssertUnwindSafe(fut)
        .catch_unwind()
        .await
        .map_err(|_| panicked(type_name, operation))
}

fn validate_guarded(type_name: &str, f: impl FnOnce()) -> Result<(), Diagnostics> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|_| panicked(type_name, "validate"))
}

fn panicked(type_name: &str, operation: &str) -> Diagnostics {
    let mut diagnostics = Diagnostics::new();
    diagnostics.error(
        "Provider bug",
        format!("The provider failed unexpectedly during {operation} of {type_name}. Please report this with the provider log (TF_LOG_PROVIDER=debug)."),
    );
    diagnostics
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

/// The diagnostic for a type name this provider does not have.
pub fn unknown_type(kind: &str, type_name: &str) -> Diagnostics {
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

/// Provider-defined functions. They are pure: no provider configuration, no cluster.
impl Dispatcher {
    /// Registers `functions` (by [`super::Function::name`]).
    pub fn with_functions(mut self, functions: Vec<Arc<dyn super::Function>>) -> Self {
        self.functions
            .extend(functions.into_iter().map(|f| (f.name().to_owned(), f)));
        self
    }

    /// Every function with its signature, in name order.
    pub fn functions(&self) -> impl Iterator<Item = (&str, super::Signature)> {
        self.functions
            .iter()
            .map(|(name, f)| (name.as_str(), f.signature()))
    }

    /// The function named `name`.
    ///
    /// # Errors
    /// A [`super::FunctionError`] naming the function when the provider has none by that name.
    pub fn function(&self, name: &str) -> Result<&dyn super::Function, super::FunctionError> {
        self.functions.get(name).map(AsRef::as_ref).ok_or_else(|| {
            super::FunctionError::new(format!(
                "The talosboot provider has no function named {name:?}. Check the spelling, or upgrade the provider if it was added in a later version."
            ))
        })
    }
}

/// OpenTofu and Terraform place a diagnostic at its attribute path only as far as the path names
/// attributes and blocks of the resource's body: a path into a nested attribute's object
/// (`job.pull_policy`, `set[1].name`) lands on the `resource` line. So such a path is cut after
/// the nested attribute (the diagnostic points at `job = { ... }`) and the detail starts with the
/// whole path, which the location no longer shows.
fn locatable_paths(diagnostics: &mut Diagnostics, block: &crate::framework::Block) {
    for d in diagnostics.iter_mut() {
        let Some(path) = &d.attribute else { continue };
        let Some(keep) = nested_attribute_depth(&path.steps, block) else {
            continue;
        };
        if keep >= path.steps.len() {
            continue;
        }
        let full = path.to_string();
        let mut cut = path.clone();
        cut.steps.truncate(keep);
        d.attribute = Some(cut);
        if !d.detail.contains(&full) {
            d.detail = format!("`{full}`: {}", d.detail);
        }
    }
}

/// Whether a nested attribute holds a sensitive or write-only attribute at any depth.
fn nested_secret(a: &crate::framework::Attribute) -> bool {
    match &a.ty {
        crate::framework::AttributeType::Nested { attributes, .. } => attributes
            .iter()
            .any(|n| n.sensitive || n.write_only || nested_secret(n)),
        crate::framework::AttributeType::Type(_) => false,
    }
}

/// How many steps of `steps` reach the first nested attribute (through nested blocks), if any.
fn nested_attribute_depth(
    steps: &[crate::values::PathStep],
    block: &crate::framework::Block,
) -> Option<usize> {
    use crate::framework::AttributeType;
    use crate::values::PathStep;
    let mut block = block;
    let mut i = 0;
    while let Some(PathStep::Attribute(name)) = steps.get(i) {
        if let Some(a) = block.attributes.iter().find(|a| &a.name == name) {
            // The client prints the source lines of the range it points at: never those of a
            // secret (a literal key in the configuration would be shown).
            let secret = a.sensitive || a.write_only || nested_secret(a);
            return (matches!(a.ty, AttributeType::Nested { .. }) && !secret).then_some(i + 1);
        }
        let nested = block.blocks.iter().find(|b| &b.type_name == name)?;
        block = &nested.block;
        i += 1;
        // A list or set block's element key.
        if matches!(
            steps.get(i),
            Some(PathStep::ElementKeyInt(_) | PathStep::ElementKeyString(_))
        ) {
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {

    #[test]
    fn paths_into_nested_attributes_are_cut_where_clients_can_place_them() {
        use crate::framework::{Attribute, Block, Nesting};
        use crate::values::{AttributePath, Type};
        let block = Block::new(
            "",
            vec![
                Attribute::optional("version", Type::String, ""),
                Attribute::optional("job", Type::Dynamic, "").nested(
                    Nesting::Single,
                    vec![Attribute::optional("pull_policy", Type::String, "")],
                ),
            ],
        );
        let mut d = Diagnostics::new();
        d.error_at(
            AttributePath::attr("job").then_attr("pull_policy"),
            "Invalid pull policy",
            "use `Always`",
        );
        d.error_at(AttributePath::attr("version"), "Bad version", "x");
        locatable_paths(&mut d, &block);
        let all: Vec<_> = d.iter().collect();
        assert_eq!(all[0].attribute, Some(AttributePath::attr("job")));
        assert_eq!(all[0].detail, "`job.pull_policy`: use `Always`");
        assert_eq!(
            all[1].attribute,
            Some(AttributePath::attr("version")),
            "top level: untouched"
        );
        assert_eq!(all[1].detail, "x");
        // The client would print the attribute's source lines: never for one holding a secret.
        let secret = Block::new(
            "",
            vec![Attribute::optional("managed", Type::Dynamic, "").nested(
                Nesting::Single,
                vec![Attribute::optional("key", Type::String, "").sensitive()],
            )],
        );
        let mut d = Diagnostics::new();
        d.error_at(AttributePath::attr("managed").then_attr("key"), "Bad", "y");
        locatable_paths(&mut d, &secret);
        let path = d.iter().next().and_then(|d| d.attribute.clone());
        assert_eq!(path, Some(AttributePath::attr("managed").then_attr("key")));
    }

    use std::sync::Mutex;

    use async_trait::async_trait;

    use super::*;
    use crate::framework::{Attribute, Block, Nesting};

    struct NoProvider;

    impl Provider for NoProvider {
        fn schema(&self) -> Schema {
            Schema::default()
        }
        fn validate(&self, _: &Value, _: &mut Diagnostics) {}
        fn configure(&self, _: &Value, _: &mut Diagnostics) -> Option<Configured> {
            None
        }
        fn unconfigured(&self) -> Configured {
            Configured {
                data: Arc::new(()),
                unknown: false,
            }
        }
    }

    /// Records the capabilities it was called with; panics in validate when `name` is "panic";
    /// answers upgrade and move with its input (write-only value included).
    #[derive(Default)]
    struct Probe {
        seen: Mutex<Vec<ClientCapabilities>>,
    }

    fn probe_schema() -> Schema {
        Schema::new(
            0,
            Block::new(
                "",
                vec![
                    Attribute::required("name", Type::String, ""),
                    Attribute::optional("inner", Type::Dynamic, "").nested(
                        Nesting::Single,
                        vec![Attribute::optional("key", Type::String, "").write_only()],
                    ),
                ],
            ),
        )
    }

    fn state(name: &str, key: &str) -> Value {
        Value::Object(BTreeMap::from([
            ("name".into(), name.into()),
            (
                "inner".into(),
                Value::Object(BTreeMap::from([("key".into(), key.into())])),
            ),
        ]))
    }

    #[async_trait]
    impl Resource for Probe {
        fn type_name(&self) -> &'static str {
            "probe"
        }
        fn schema(&self) -> Schema {
            probe_schema()
        }
        fn validate(&self, config: &Value, _: &mut Diagnostics) {
            assert_ne!(config.attr("name").and_then(Value::as_str), Some("panic"));
        }
        async fn plan(&self, _: &Ctx, req: PlanRequest) -> PlanResponse {
            self.seen
                .lock()
                .expect("lock")
                .push(req.client_capabilities);
            PlanResponse {
                planned_state: req.proposed_new_state,
                ..Default::default()
            }
        }
        async fn apply(&self, _: &Ctx, req: ApplyRequest) -> ApplyResponse {
            ApplyResponse {
                new_state: req.planned_state,
                ..Default::default()
            }
        }
        async fn read(&self, _: &Ctx, req: ReadRequest) -> ReadResponse {
            self.seen
                .lock()
                .expect("lock")
                .push(req.client_capabilities);
            ReadResponse {
                new_state: req.current_state,
                ..Default::default()
            }
        }
        async fn import(&self, _: &Ctx, req: ImportRequest) -> ImportResponse {
            self.seen
                .lock()
                .expect("lock")
                .push(req.client_capabilities);
            ImportResponse::default()
        }
        async fn upgrade_state(&self, _: &Ctx, _: UpgradeRequest) -> UpgradeResponse {
            UpgradeResponse {
                upgraded_state: state("old", "MARKER-upgrade"),
                diagnostics: Diagnostics::new(),
            }
        }
        async fn move_state(&self, _: &Ctx, _: MoveRequest) -> MoveResponse {
            MoveResponse {
                target_state: state("moved", "MARKER-move"),
                ..Default::default()
            }
        }
    }

    fn dispatcher(probe: Arc<Probe>) -> Dispatcher {
        Dispatcher::new(
            Arc::new(NoProvider),
            vec![probe],
            Vec::new(),
            CancellationToken::new(),
        )
    }

    fn inner_key(v: &Value) -> Option<&Value> {
        v.attr("inner").and_then(|i| i.attr("key"))
    }

    #[tokio::test]
    async fn upgraded_and_moved_state_never_carries_write_only_values() {
        let d = dispatcher(Arc::default());
        let upgraded = d
            .upgrade(
                "probe",
                UpgradeRequest {
                    version: 0,
                    raw_json: b"{}".to_vec(),
                },
            )
            .await;
        assert_eq!(inner_key(&upgraded.upgraded_state), Some(&Value::Null));
        let moved = d
            .move_state(
                "probe",
                MoveRequest {
                    source_provider_address: "x".into(),
                    source_type_name: "y".into(),
                    source_schema_version: 0,
                    source_state_json: b"{}".to_vec(),
                    source_private: Vec::new(),
                },
            )
            .await;
        assert_eq!(inner_key(&moved.target_state), Some(&Value::Null));
    }

    #[tokio::test]
    async fn a_panic_in_validate_during_plan_is_a_diagnostic() {
        let d = dispatcher(Arc::default());
        let config = state("panic", "k");
        let resp = d
            .plan(
                "probe",
                PlanRequest {
                    prior_state: Value::Null,
                    proposed_new_state: config.clone(),
                    config,
                    prior_private: Vec::new(),
                    client_capabilities: ClientCapabilities::default(),
                },
            )
            .await;
        let d = resp.diagnostics.iter().next().expect("a diagnostic");
        assert_eq!(d.summary, "Provider bug");
        assert!(d.detail.contains("validate"), "{}", d.detail);
    }

    #[tokio::test]
    async fn client_capabilities_reach_plan_read_and_import() {
        let probe = Arc::new(Probe::default());
        let d = dispatcher(probe.clone());
        let caps = ClientCapabilities {
            deferral_allowed: true,
            write_only_attributes_allowed: true,
        };
        let config = state("a", "k");
        let planned = d
            .plan(
                "probe",
                PlanRequest {
                    prior_state: Value::Null,
                    proposed_new_state: config.clone(),
                    config: config.clone(),
                    prior_private: Vec::new(),
                    client_capabilities: caps,
                },
            )
            .await;
        assert!(!planned.diagnostics.has_errors());
        assert_eq!(inner_key(&planned.planned_state), Some(&Value::Null));
        d.read(
            "probe",
            ReadRequest {
                current_state: config,
                private: Vec::new(),
                client_capabilities: caps,
            },
        )
        .await;
        d.import(
            "probe",
            ImportRequest {
                id: "a".into(),
                client_capabilities: caps,
            },
        )
        .await;
        assert_eq!(*probe.seen.lock().expect("lock"), vec![caps; 3]);
    }
}
