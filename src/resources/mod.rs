//! One module per resource and data source. Each reads like a story: schema, plan, apply, read, import.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::cluster::ClusterError;
use crate::framework::{DataSource, Diagnostic, Resource};
use crate::values::Value;

pub mod cilium;
pub mod duration;
pub mod engine_report;
pub mod flux_bootstrap;
pub mod helm_release;
pub mod private;
pub mod test_object;

/// The resources users can declare, plus `talosboot_test_object` when `include_test_resources`
/// (protocol tests exercise the managed-resource RPCs with it).
pub fn resources(include_test_resources: bool) -> Vec<Arc<dyn Resource>> {
    let mut out: Vec<Arc<dyn Resource>> = vec![Arc::new(cilium::CiliumResource)];
    out.push(Arc::new(flux_bootstrap::FluxBootstrap));
    if include_test_resources {
        out.push(Arc::new(test_object::TestObject));
    }
    out
}

pub fn data_sources() -> Vec<Arc<dyn DataSource>> {
    vec![Arc::new(helm_release::HelmReleaseDataSource)]
}

/// Builds an object value from attribute pairs.
pub(crate) fn object<const N: usize>(pairs: [(&str, Value); N]) -> Value {
    Value::Object(
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect::<BTreeMap<_, _>>(),
    )
}

/// A diagnostic for a failed cluster operation: what we tried, what broke, what to do.
pub(crate) fn cluster_diagnostic(what: &str, err: &ClusterError) -> Diagnostic {
    let hint = err.hint();
    let detail = if hint.is_empty() {
        format!("{err}.")
    } else {
        format!("{err}.\n\n{hint}")
    };
    Diagnostic::error(format!("Failed to {what}"), detail)
}
