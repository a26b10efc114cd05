//! One module per resource and data source. Each reads like a story: schema, plan, apply, read, import.

use std::sync::Arc;

use crate::cluster::{ClientCache, ClusterError, ClusterHandle};
use crate::framework::{Ctx, DataSource, Diagnostic, ListResource, Resource};

pub mod choice;
pub mod cilium;
pub mod connection;
pub mod duration;
pub mod engine_report;
pub mod fleet;
pub mod flux_bootstrap;
pub mod helm_release;
pub mod job;
pub mod names;
pub mod private;
pub mod rbac;
pub mod release;
#[cfg(any(debug_assertions, feature = "test-object"))]
pub mod test_object;

/// The resources users can declare, plus `talosboot_test_object` when `include_test_resources`
/// (protocol tests exercise the managed-resource RPCs with it) in a build that has it (debug
/// builds, or the `test-object` feature).
pub fn resources(include_test_resources: bool) -> Vec<Arc<dyn Resource>> {
    let out: Vec<Arc<dyn Resource>> = vec![
        Arc::new(cilium::CiliumResource::default()),
        Arc::new(helm_release::HelmReleaseResource::default()),
        Arc::new(flux_bootstrap::FluxBootstrap),
    ];
    // The test object is compiled into debug builds (the protocol tests) and, with the
    // `test-object` feature, into release ones; a release binary users run has none.
    #[cfg(any(debug_assertions, feature = "test-object"))]
    let out = {
        let mut out = out;
        if include_test_resources {
            out.push(Arc::new(test_object::TestObject));
        }
        out
    };
    #[cfg(not(any(debug_assertions, feature = "test-object")))]
    let _ = include_test_resources;
    out
}

/// The list resources of `terraform query`: one per chart resource (Terraform writes generated
/// blocks of the list's own type, so Cilium releases are listed as `talosboot_cilium`).
pub fn list_resources() -> Vec<Arc<dyn ListResource>> {
    use crate::resources::release::list::ReleaseList;
    vec![
        Arc::new(ReleaseList::<cilium::model::Cilium>::default()),
        Arc::new(ReleaseList::<helm_release::HelmReleaseModel>::default()),
    ]
}

pub fn data_sources() -> Vec<Arc<dyn DataSource>> {
    vec![Arc::new(helm_release::HelmReleaseDataSource)]
}

/// What ConfigureProvider hands every operation: the connection, the connections of the
/// resources' own `cluster` attributes ([`connection`]), and the Job defaults.
#[derive(Clone)]
pub struct ProviderData {
    pub cluster: ClusterHandle,
    pub clients: Arc<ClientCache>,
    pub job: job::JobDefaults,
}

impl ProviderData {
    /// The provider data of `cluster`, with the provider's Job defaults.
    pub fn new(cluster: ClusterHandle) -> ProviderData {
        ProviderData {
            cluster,
            clients: Arc::default(),
            job: job::JobDefaults::default(),
        }
    }
}

/// The cluster the provider was configured with (an unconfigured handle, whose clients answer
/// [`ClusterError::NotConfigured`], before ConfigureProvider). The one way resources reach it.
pub fn cluster(ctx: &Ctx) -> ClusterHandle {
    ctx.provider_data::<ProviderData>()
        .map(|d| d.cluster.clone())
        .unwrap_or_else(ClusterHandle::unconfigured)
}

/// The Job defaults of the provider (its own before ConfigureProvider).
pub fn job_defaults(ctx: &Ctx) -> job::JobDefaults {
    ctx.provider_data::<ProviderData>()
        .map(|d| d.job.clone())
        .unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::cluster::ProviderConfig;

    #[test]
    fn resources_reach_the_configured_cluster_through_the_provider_data() {
        let configured = ProviderData::new(ClusterHandle::new(ProviderConfig::Unknown));
        let ctx = Ctx::new(Arc::new(configured), Default::default());
        assert_eq!(cluster(&ctx).config(), &ProviderConfig::Unknown);
        assert_eq!(job_defaults(&ctx), job::JobDefaults::default());
        let other = Ctx::new(Arc::new("not a cluster"), Default::default());
        assert_eq!(cluster(&other).config(), &ProviderConfig::Missing);
    }
}
