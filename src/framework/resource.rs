//! The small abstraction every resource and data source implements: one request and one response
//! type per operation, every response carrying diagnostics (and private state where it applies).
//!
//! Only `schema`, `plan`, `apply` and `read` are required of a resource; import, state upgrade and
//! move-state have defaults that answer with a proper diagnostic, so an unimplemented feature is a
//! message to the user, never a crash.

use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::{Diagnostics, IdentitySchema, Schema};
use crate::values::Value;

/// What ConfigureProvider produced, carried opaquely to every operation (the framework's
/// `ProviderData`): the provider decides its type, resources get it back with
/// [`Ctx::provider_data`].
pub type ProviderData = Arc<dyn Any + Send + Sync>;

/// What an operation may use: the configured provider data, and a token that is cancelled when
/// Terraform calls StopProvider (or the process shuts down).
#[derive(Clone)]
pub struct Ctx {
    provider_data: ProviderData,
    pub cancel: CancellationToken,
}

impl Ctx {
    pub fn new(provider_data: ProviderData, cancel: CancellationToken) -> Self {
        Self {
            provider_data,
            cancel,
        }
    }

    /// The provider data as the type the provider configured, or `None` for another type.
    pub fn provider_data<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.provider_data.downcast_ref::<T>()
    }
}

/// The result of configuring the provider.
pub struct Configured {
    /// Handed to every operation through [`Ctx::provider_data`].
    pub data: ProviderData,
    /// Some setting that decides where operations go is unknown (plan before the cluster exists):
    /// the dispatcher then keeps state as it is on refresh, and defers data sources when allowed.
    pub unknown: bool,
}

/// A provider block without settings that never configures, its data fixed: for tests that call
/// the dispatcher directly.
#[cfg(test)]
pub(crate) struct FixedProvider(pub ProviderData);

#[cfg(test)]
impl Provider for FixedProvider {
    fn schema(&self) -> Schema {
        Schema::default()
    }
    fn validate(&self, _: &Value, _: &mut Diagnostics) {}
    fn configure(&self, _: &Value, _: &mut Diagnostics) -> Option<Configured> {
        None
    }
    fn unconfigured(&self) -> Configured {
        Configured {
            data: self.0.clone(),
            unknown: false,
        }
    }
}

/// The provider block: its schema, validation without I/O, and configuration into provider data.
/// The framework knows nothing of what the data is.
pub trait Provider: Send + Sync + 'static {
    fn schema(&self) -> Schema;

    /// ValidateProviderConfig: checks without I/O. Values may be unknown; skip checks on unknowns.
    /// (Deprecation warnings come from the dispatcher.)
    fn validate(&self, config: &Value, diagnostics: &mut Diagnostics);

    /// ConfigureProvider. `None` (with errors in `diagnostics`) keeps the previous provider data.
    fn configure(&self, config: &Value, diagnostics: &mut Diagnostics) -> Option<Configured>;

    /// What operations see before ConfigureProvider (e.g. in validation RPCs).
    fn unconfigured(&self) -> Configured;
}

/// What the client (Terraform/OpenTofu) announced it understands, per request. Clients that predate
/// a capability send nothing: every field is then `false`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientCapabilities {
    /// The client understands a deferred response (plan/read/import can wait for a later round).
    pub deferral_allowed: bool,
    /// The client understands write-only attributes (never stores them).
    pub write_only_attributes_allowed: bool,
}

pub struct PlanRequest {
    /// Null when the resource is being created.
    pub prior_state: Value,
    /// Terraform's merge of config into prior state; null when the resource is being destroyed.
    /// Computed attributes the config leaves unset and Terraform proposes as null arrive unknown
    /// (at the top level and in nested single objects): the dispatcher marks them before `plan`.
    pub proposed_new_state: Value,
    pub config: Value,
    pub prior_private: Vec<u8>,
    pub client_capabilities: ClientCapabilities,
}

#[derive(Default)]
pub struct PlanResponse {
    pub planned_state: Value,
    pub requires_replace: Vec<crate::values::AttributePath>,
    /// `None` keeps the prior private state.
    pub private: Option<Vec<u8>>,
    pub diagnostics: Diagnostics,
}

pub struct ApplyRequest {
    pub prior_state: Value,
    /// Null for destroy.
    pub planned_state: Value,
    pub config: Value,
    pub planned_private: Vec<u8>,
}

#[derive(Default)]
pub struct ApplyResponse {
    /// On failure after the remote object exists, return the state that tells the truth (Terraform
    /// then marks it tainted); return null only when nothing was created (or it was destroyed).
    pub new_state: Value,
    /// `None` keeps the planned private state.
    pub private: Option<Vec<u8>>,
    pub diagnostics: Diagnostics,
}

pub struct ReadRequest {
    pub current_state: Value,
    pub private: Vec<u8>,
    pub client_capabilities: ClientCapabilities,
}

#[derive(Default)]
pub struct ReadResponse {
    /// Null means the remote object is gone: Terraform plans to create it again.
    pub new_state: Value,
    /// `None` keeps the current private state.
    pub private: Option<Vec<u8>>,
    pub diagnostics: Diagnostics,
}

pub struct ImportRequest {
    pub id: String,
    pub client_capabilities: ClientCapabilities,
}

pub struct ImportedResource {
    pub state: Value,
    pub private: Vec<u8>,
}

#[derive(Default)]
pub struct ImportResponse {
    pub imported: Vec<ImportedResource>,
    pub diagnostics: Diagnostics,
}

/// State stored by an older schema version (or an older provider), as JSON.
pub struct UpgradeRequest {
    pub version: i64,
    pub raw_json: Vec<u8>,
}

#[derive(Default)]
pub struct UpgradeResponse {
    pub upgraded_state: Value,
    pub diagnostics: Diagnostics,
}

/// `moved { from = other_provider_resource.x  to = talosboot_y.x }` (protocol 6.5+).
pub struct MoveRequest {
    pub source_provider_address: String,
    pub source_type_name: String,
    pub source_schema_version: i64,
    pub source_state_json: Vec<u8>,
    pub source_private: Vec<u8>,
}

#[derive(Default)]
pub struct MoveResponse {
    pub target_state: Value,
    pub target_private: Vec<u8>,
    pub diagnostics: Diagnostics,
}

/// A response of diagnostics alone: the operation ended before it had anything else to return.
macro_rules! from_diagnostics {
    ($($response:ty),* $(,)?) => {$(
        impl From<Diagnostics> for $response {
            fn from(diagnostics: Diagnostics) -> Self {
                Self {
                    diagnostics,
                    ..Default::default()
                }
            }
        }
    )*};
}

from_diagnostics!(
    PlanResponse,
    ApplyResponse,
    ReadResponse,
    ImportResponse,
    UpgradeResponse,
    MoveResponse,
    DataReadResponse,
);

#[async_trait]
pub trait Resource: Send + Sync + 'static {
    /// The full type name users write, e.g. `talosboot_cilium`.
    fn type_name(&self) -> &'static str;
    fn schema(&self) -> Schema;

    /// Checks that need no I/O and no other resource: runs at `validate` and before every plan.
    /// Config values may be unknown here; skip checks on unknowns.
    fn validate(&self, _config: &Value, _diagnostics: &mut Diagnostics) {}

    /// The resource's identity, declared like its schema; `None`: the resource has none. The
    /// dispatcher derives every identity from the state and checks it never changes.
    fn identity(&self) -> Option<IdentitySchema> {
        None
    }

    /// GenerateResourceConfig (`-generate-config-out`): a configuration that, applied, keeps
    /// the object `state` describes. Default: the state without its computed-only attributes.
    fn generate_config(&self, state: &Value) -> GeneratedConfig {
        GeneratedConfig {
            config: super::plan::config_of_state(&self.schema().block, state),
            diagnostics: Diagnostics::new(),
        }
    }

    async fn plan(&self, ctx: &Ctx, req: PlanRequest) -> PlanResponse;
    async fn apply(&self, ctx: &Ctx, req: ApplyRequest) -> ApplyResponse;
    async fn read(&self, ctx: &Ctx, req: ReadRequest) -> ReadResponse;

    async fn import(&self, _ctx: &Ctx, _req: ImportRequest) -> ImportResponse {
        let mut diagnostics = Diagnostics::new();
        diagnostics.error(
            "Import is not supported",
            format!(
                "{} cannot be imported; create it with `tofu apply` (or `terraform apply`) instead.",
                self.type_name()
            ),
        );
        ImportResponse {
            imported: Vec::new(),
            diagnostics,
        }
    }

    /// Default: state of the current version is decoded as-is; any other version is an error naming
    /// both versions, which is the honest answer when no upgrader was written.
    async fn upgrade_state(&self, _ctx: &Ctx, req: UpgradeRequest) -> UpgradeResponse {
        super::dispatcher::upgrade_same_version(&self.schema(), self.type_name(), req)
    }

    async fn move_state(&self, _ctx: &Ctx, req: MoveRequest) -> MoveResponse {
        let mut diagnostics = Diagnostics::new();
        diagnostics.error(
            "Move is not supported",
            format!(
                "{} cannot be moved from {} ({}). Remove the old resource from state and import this one instead.",
                self.type_name(),
                req.source_type_name,
                req.source_provider_address
            ),
        );
        MoveResponse::from(diagnostics)
    }
}

/// What GenerateResourceConfig answers.
#[derive(Default)]
pub struct GeneratedConfig {
    pub config: Value,
    pub diagnostics: Diagnostics,
}

#[derive(Default)]
pub struct DataReadResponse {
    pub state: Value,
    pub diagnostics: Diagnostics,
}

#[async_trait]
pub trait DataSource: Send + Sync + 'static {
    fn type_name(&self) -> &'static str;
    fn schema(&self) -> Schema;
    fn validate(&self, _config: &Value, _diagnostics: &mut Diagnostics) {}
    async fn read(&self, ctx: &Ctx, config: Value) -> DataReadResponse;
}

/// What a `list` block of `terraform query` asks (protocol 6.10).
pub struct ListRequest {
    /// The `config` block of the `list` block (an object of the list schema; its attributes null
    /// when the block is absent).
    pub config: Value,
    /// Whether each result should carry the object as a full state (Terraform asks for it to
    /// generate configuration).
    pub include_resource_object: bool,
    /// The most results wanted.
    pub limit: i64,
}

/// One object a list found.
pub struct Listed {
    /// What a user reads to recognise it.
    pub display_name: String,
    /// The object as a state of the managed resource type the list lists: its identity is derived
    /// from it, and it is sent when asked for.
    pub state: Value,
}

#[derive(Default)]
pub struct ListResponse {
    pub results: Vec<Listed>,
    pub diagnostics: Diagnostics,
}

from_diagnostics!(ListResponse);

/// A list resource: the `list "<type>"` block of `terraform query`, listing the remote objects a
/// managed resource type of the same name could manage. The type must have an identity.
#[async_trait]
pub trait ListResource: Send + Sync + 'static {
    /// The managed resource type it lists, e.g. `talosboot_helm_release`.
    fn type_name(&self) -> &'static str;
    /// The schema of the `config` block.
    fn schema(&self) -> Schema;
    /// Checks without I/O (values may be unknown: skip those).
    fn validate(&self, _config: &Value, _diagnostics: &mut Diagnostics) {}
    async fn list(&self, ctx: &Ctx, req: ListRequest) -> ListResponse;
}
