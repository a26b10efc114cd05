//! The talosboot provider: its configuration schema and the resources and data sources it serves.

use tokio_util::sync::CancellationToken;

use crate::cluster::ProviderConfig;
use crate::framework::Dispatcher;
use crate::resources;

/// The registry source address users write in `required_providers`.
pub const SOURCE_ADDRESS: &str = "registry.terraform.io/talosboot/talosboot";

pub fn dispatcher(shutdown: CancellationToken) -> Dispatcher {
    Dispatcher::new(
        ProviderConfig::schema(),
        resources::resources(),
        resources::data_sources(),
        shutdown,
    )
}
