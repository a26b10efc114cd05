//! The talosboot provider: its configuration (schema and decoding, in [`config`]), the resources and
//! data sources it serves, and the gRPC routes the plugin runtime serves them on.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::cluster::{ClusterHandle, ProviderConfig, RetryBudget};
use crate::framework::{Configured, Diagnostics, Dispatcher, Provider, Schema};
use crate::plugin::{MAX_MESSAGE_SIZE, ServeContext};
use crate::values::Value;
use crate::{functions, protocol, resources};

pub mod config;

/// The registry source address users write in `required_providers`.
pub const SOURCE_ADDRESS: &str = "registry.terraform.io/talosboot/talosboot";

/// Set to `1` to register `talosboot_test_object` (used by the protocol tests only).
pub const TEST_RESOURCES_ENV: &str = "TALOSBOOT_ENABLE_TEST_RESOURCES";

/// The provider block. Its provider data is a [`resources::ProviderData`] (the [`ClusterHandle`]
/// and the Job defaults): resources reach it through `crate::resources::cluster(ctx)` and
/// `crate::resources::job_defaults(ctx)`.
pub struct Talosboot;

impl Provider for Talosboot {
    fn schema(&self) -> Schema {
        config::schema()
    }

    fn validate(&self, config: &Value, diagnostics: &mut Diagnostics) {
        diagnostics.extend(config::from_value(config).1);
    }

    /// Remembers the configuration; the cluster is contacted only when an operation needs it.
    /// Its `api_retry_timeout` is the provider connection's retry budget, and the default of every
    /// `cluster` attribute's connection.
    fn configure(&self, config: &Value, diagnostics: &mut Diagnostics) -> Option<Configured> {
        let retry_budget = config::retry_budget(config)
            .map(RetryBudget::new)
            .unwrap_or_default();
        let (config, diags) = config::from_value(config);
        let ok = !diags.has_errors();
        diagnostics.extend(diags);
        ok.then(|| configured(ClusterHandle::with_retry_budget(config, retry_budget)))
    }

    fn unconfigured(&self) -> Configured {
        configured(ClusterHandle::unconfigured())
    }
}

fn configured(cluster: ClusterHandle) -> Configured {
    Configured {
        unknown: matches!(cluster.config(), ProviderConfig::Unknown),
        data: Arc::new(resources::ProviderData::new(cluster)),
    }
}

pub fn dispatcher(shutdown: CancellationToken, include_test_resources: bool) -> Dispatcher {
    Dispatcher::new(
        Arc::new(Talosboot),
        resources::resources(include_test_resources),
        resources::data_sources(),
        shutdown,
    )
    .with_functions(functions::functions())
    .with_list_resources(resources::list_resources())
}

/// The provider's gRPC routes, as the plugin runtime serves them.
pub fn routes(ctx: &ServeContext) -> tonic::service::Routes {
    let test_resources = std::env::var(TEST_RESOURCES_ENV).as_deref() == Ok("1");
    let dispatcher = Arc::new(dispatcher(ctx.shutdown.clone(), test_resources));
    tonic::service::Routes::new(protocol::server(
        dispatcher,
        ctx.applies.clone(),
        MAX_MESSAGE_SIZE,
    ))
}
