//! The talosboot provider: its configuration schema and the resources and data sources it serves.

use tokio_util::sync::CancellationToken;

use crate::cluster::ProviderConfig;
use crate::framework::Dispatcher;
use crate::{functions, resources};

/// The registry source address users write in `required_providers`.
pub const SOURCE_ADDRESS: &str = "registry.terraform.io/talosboot/talosboot";

/// Set to `1` to register `talosboot_test_object` (used by the protocol tests only).
pub const TEST_RESOURCES_ENV: &str = "TALOSBOOT_ENABLE_TEST_RESOURCES";

pub fn dispatcher(shutdown: CancellationToken, include_test_resources: bool) -> Dispatcher {
    Dispatcher::new(
        ProviderConfig::schema(),
        resources::resources(include_test_resources),
        resources::data_sources(),
        shutdown,
    )
    .with_functions(functions::functions())
}
