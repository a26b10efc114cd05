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

#[cfg(test)]
mod tests {
    //! What every resource and data source accepts at validate, whatever the configuration.

    use tokio_util::sync::CancellationToken;

    use crate::framework::{Attribute, AttributeType, Block, Diagnostics, Nesting, Severity};
    use crate::values::{Type, Value};

    /// A value of `ty` whose every leaf is unknown: one element in each list, set and map.
    fn unknown_leaves(ty: &Type) -> Value {
        match ty {
            Type::Object { attributes, .. } => Value::Object(
                attributes
                    .iter()
                    .map(|(k, t)| (k.clone(), unknown_leaves(t)))
                    .collect(),
            ),
            Type::List(t) => Value::List(vec![unknown_leaves(t)]),
            Type::Set(t) => Value::Set(vec![unknown_leaves(t)]),
            Type::Map(t) => Value::Map([("key".to_owned(), unknown_leaves(t))].into()),
            Type::Tuple(ts) => Value::Tuple(ts.iter().map(unknown_leaves).collect()),
            Type::Bool | Type::Number | Type::String | Type::Dynamic => Value::unknown(),
        }
    }

    /// The attributes a configuration can set: computed-only ones are null.
    fn attributes(of: &[Attribute]) -> Value {
        Value::Object(
            of.iter()
                .map(|a| {
                    let settable = a.required || a.optional;
                    let value = match (&a.ty, settable) {
                        (_, false) => Value::Null,
                        (AttributeType::Type(ty), true) => unknown_leaves(ty),
                        (
                            AttributeType::Nested {
                                nesting,
                                attributes: nested,
                            },
                            true,
                        ) => repeated(*nesting, attributes(nested)),
                    };
                    (a.name.clone(), value)
                })
                .collect(),
        )
    }

    fn repeated(nesting: Nesting, one: Value) -> Value {
        match nesting {
            Nesting::Single | Nesting::Group => one,
            Nesting::List => Value::List(vec![one]),
            Nesting::Set => Value::Set(vec![one]),
            Nesting::Map => Value::Map([("key".to_owned(), one)].into()),
        }
    }

    /// A configuration of `block` whose every settable leaf is unknown: what a module passing
    /// its variables through looks like at validate, where no variable is known.
    fn configuration(block: &Block) -> Value {
        let mut value = attributes(&block.attributes);
        if let Some(attrs) = value.attrs_mut() {
            for b in &block.blocks {
                attrs.insert(
                    b.type_name.clone(),
                    repeated(b.nesting, configuration(&b.block)),
                );
            }
        }
        value
    }

    /// What validate could not read (not what it rightly refuses: a configuration with every
    /// attribute set also sets ones that exclude each other).
    fn unreadable(name: &str, diagnostics: &Diagnostics) -> Vec<String> {
        diagnostics
            .iter()
            .filter(|x| x.severity == Severity::Error && x.detail.contains("could not decode"))
            .map(|x| format!("{name}: {}: {}", x.summary, x.detail))
            .collect()
    }

    /// A leaf not known yet is checked once it is: validate never fails to read a configuration
    /// because one is unknown (a `set` entry's name from a variable once made it fail).
    #[test]
    fn every_type_reads_a_configuration_whose_every_leaf_is_unknown() {
        let d = super::dispatcher(CancellationToken::new(), false);
        let resources: Vec<(String, Block)> = d
            .resource_schemas()
            .map(|(n, s)| (n.to_owned(), s.block.clone()))
            .collect();
        let data_sources: Vec<(String, Block)> = d
            .data_source_schemas()
            .map(|(n, s)| (n.to_owned(), s.block.clone()))
            .collect();
        assert!(resources.len() >= 3 && !data_sources.is_empty());
        let mut failed = Vec::new();
        for (name, block) in &resources {
            failed.extend(unreadable(
                name,
                &d.validate_resource(name, &configuration(block), true),
            ));
        }
        for (name, block) in &data_sources {
            failed.extend(unreadable(
                name,
                &d.validate_data_source(name, &configuration(block)),
            ));
        }
        assert!(failed.is_empty(), "{}", failed.join("\n"));
    }
}
