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
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use super::resource::*;
use super::walks::{
    deprecated_set, mark_unset_computed_unknown, null_write_only, requires_replace, write_only_set,
};
use super::{Diagnostics, IdentitySchema, Schema};
use crate::values::{JsonDecodeOptions, Type, Value, from_json_with};

struct Registered<T: ?Sized> {
    implementation: Arc<T>,
    build: fn(&T) -> Schema,
    /// The schema and the object type of config, plan and state values, built once, on first
    /// use (the first RPC that needs them) rather than at start-up: building every schema touches
    /// every resource's schema code and descriptions before the handshake, which shows in the
    /// provider's start-up memory.
    built: OnceLock<(Schema, Type)>,
}

/// Resources (or data sources) by their type name, each schema built on first use.
fn by_type_name<T: ?Sized>(
    items: Vec<Arc<T>>,
    type_name: fn(&T) -> &'static str,
    schema: fn(&T) -> Schema,
) -> BTreeMap<String, Registered<T>> {
    items
        .into_iter()
        .map(|item| (type_name(&item).to_owned(), Registered::new(item, schema)))
        .collect()
}

impl<T: ?Sized> Registered<T> {
    fn new(implementation: Arc<T>, build: fn(&T) -> Schema) -> Self {
        Self {
            implementation,
            build,
            built: OnceLock::new(),
        }
    }

    fn built(&self) -> &(Schema, Type) {
        self.built.get_or_init(|| {
            let schema = (self.build)(&self.implementation);
            let value_type = schema.value_type();
            (schema, value_type)
        })
    }

    fn schema(&self) -> &Schema {
        &self.built().0
    }

    fn value_type(&self) -> &Type {
        &self.built().1
    }
}

/// All resources and data sources of the provider, plus the provider-level state that operations
/// share (the provider data from ConfigureProvider, the StopProvider token).
pub struct Dispatcher {
    provider: Arc<dyn Provider>,
    provider_schema: Schema,
    provider_type: Type,
    resources: BTreeMap<String, Registered<dyn Resource>>,
    /// The identity each resource declares (and the type of its values), by type name.
    identities: BTreeMap<String, (IdentitySchema, Type)>,
    data_sources: BTreeMap<String, Registered<dyn DataSource>>,
    /// List resources (`terraform query`), by the managed type they list.
    list_resources: BTreeMap<String, Registered<dyn ListResource>>,
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
        let identities = resources
            .iter()
            .filter_map(|r| {
                let identity = r.identity()?;
                let ty = identity.value_type();
                Some((r.type_name().to_owned(), (identity, ty)))
            })
            .collect();
        let resources = by_type_name(resources, |r| r.type_name(), |r| r.schema());
        let data_sources = by_type_name(data_sources, |d| d.type_name(), |d| d.schema());
        let provider_schema = provider.schema();
        Self {
            provider_type: provider_schema.value_type(),
            provider_schema,
            configured: Mutex::new(Arc::new(provider.unconfigured())),
            provider,
            resources,
            identities,
            data_sources,
            list_resources: BTreeMap::new(),
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
        self.resources.iter().map(|(k, r)| (k.as_str(), r.schema()))
    }
    pub fn data_source_schemas(&self) -> impl Iterator<Item = (&str, &Schema)> {
        self.data_sources
            .iter()
            .map(|(k, r)| (k.as_str(), r.schema()))
    }
    /// The value type of a resource, or the diagnostic for an unknown type name.
    pub fn resource_type(&self, type_name: &str) -> Result<&Type, Diagnostics> {
        self.resource(type_name).map(|r| r.value_type())
    }
    pub fn data_source_type(&self, type_name: &str) -> Result<&Type, Diagnostics> {
        self.data_source(type_name).map(|d| d.value_type())
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

/// [`guarded`], a panic answered by the operation's response of diagnostics alone.
async fn guarded_response<R: From<Diagnostics>>(
    type_name: &str,
    operation: &str,
    fut: impl Future<Output = R>,
) -> R {
    guarded(type_name, operation, fut)
        .await
        .unwrap_or_else(R::from)
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
            "OpenTofu/Terraform asked the provider to stop while reading {type_name}; nothing was changed."
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

mod apply;
mod identity;
mod list;
mod plan;
mod read;
mod state;
mod validate;

pub use list::{ListOutcome, ListedObject};
pub(crate) use state::upgrade_same_version;
use validate::{deprecation_warnings, locatable_paths};

#[cfg(test)]
mod tests;
