//! `talosboot_helm_release`: the data source (the current release record, read natively) and the
//! resource (any chart installed the pre-CNI-safe way, a drop-in for hashicorp/helm's
//! `helm_release` on the shared Helm-release lifecycle).

pub mod data_source;
pub mod resource;

pub use data_source::HelmReleaseDataSource;
pub use resource::HelmReleaseResource;
