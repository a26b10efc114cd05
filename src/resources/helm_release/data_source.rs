//! Data source `talosboot_helm_release`: the current Helm release record, read natively.
//!
//! Useful on its own in `check` blocks and preconditions ("is cilium deployed?") and the decoder
//! behind `talosboot_cilium`'s import from `helm_release`. Values are never exposed, only their hash.
//!
//! Its `cluster` reads another cluster than the provider's through a kubeconfig file on disk, never
//! a credential ([`connection::read_cluster_block`]; the module docs of [`connection`] say what
//! the CLIs do with a data source's arguments). Its settings are write-only and the state keeps
//! none of them.

use async_trait::async_trait;

use crate::cluster::helm::release::current_release;
use crate::cluster::{ClusterError, Kube};
use crate::framework::secret_hash::salted_sha256;
use crate::framework::{
    Attribute, Block, Ctx, DataReadResponse, DataSource, Diagnostics, Schema, null_write_only,
};
use crate::resources::cluster_diagnostic;
use crate::resources::connection::{self, CLUSTER};
use crate::resources::names::{check_namespace, check_release_name};
use crate::values::{AttributePath, Type, Value};

pub struct HelmReleaseDataSource;

// --- schema ---------------------------------------------------------------------------------------

#[async_trait]
impl DataSource for HelmReleaseDataSource {
    fn type_name(&self) -> &'static str {
        "talosboot_helm_release"
    }

    fn schema(&self) -> Schema {
        let computed = |name, ty, doc| Attribute::computed(name, ty, doc);
        Schema::new(
            0,
            Block::new(
                "Reads the current record of a Helm release (the `sh.helm.release.v1.*` Secrets) without running Helm. The release's values are not exposed; `values_sha256` changes when they do.",
                vec![
                    Attribute::required("name", Type::String, "Release name, e.g. `cilium`."),
                    Attribute::optional_computed(
                        "namespace",
                        Type::String,
                        "Namespace of the release. Defaults to `default`.",
                    ),
                    computed("id", Type::String, "`<namespace>/<name>`."),
                    computed(
                        "exists",
                        Type::Bool,
                        "Whether any record of the release exists.",
                    ),
                    computed(
                        "status",
                        Type::String,
                        "Status of the current revision: `deployed`, `failed`, `pending-install`, `pending-upgrade`, `superseded`, ...",
                    ),
                    computed("revision", Type::Number, "The current (highest) revision."),
                    computed("chart", Type::String, "Chart name."),
                    computed("chart_version", Type::String, "Chart version."),
                    computed("app_version", Type::String, "The chart's app version."),
                    computed(
                        "last_deployed",
                        Type::String,
                        "When the current revision was deployed (RFC 3339).",
                    ),
                    computed(
                        "description",
                        Type::String,
                        "Helm's description of the last operation, e.g. `Install complete`.",
                    ),
                    computed(
                        "apply_method",
                        Type::String,
                        "How the current revision's objects were applied, as Helm 4 records it: `ssa` (server-side apply, Helm 4's default for an install) or `csa` (client-side apply). Null for a record Helm 3 wrote (it has no such field; Helm 4 upgrades such a release client-side).",
                    ),
                    computed(
                        "values_sha256",
                        Type::String,
                        "HMAC-SHA256 (`hmac-sha256:` + hex) of the user-supplied values (canonical JSON), keyed by the cluster's identity (the `kube-system` namespace UID, never stored): changes when the values change, yet cannot be tested against guesses of a secret value by someone who holds only the state.",
                    ),
                ],
            )
            .with_blocks(vec![connection::read_cluster_block()]),
        )
    }

    fn validate(&self, config: &Value, diagnostics: &mut Diagnostics) {
        if let Some(name) = config.attr("name").and_then(Value::as_str) {
            check_release_name(name, AttributePath::attr("name"), diagnostics);
        }
        if let Some(namespace) = config.attr("namespace").and_then(Value::as_str) {
            check_namespace(namespace, AttributePath::attr("namespace"), diagnostics);
        }
        connection::validate_read_cluster(config, diagnostics);
    }

    // --- read ---------------------------------------------------------------------------------------

    async fn read(&self, ctx: &Ctx, config: Value) -> DataReadResponse {
        let name = config
            .attr("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let namespace = config
            .attr("namespace")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_owned();
        let what = format!("read Helm release {namespace}/{name}");
        let mut diagnostics = Diagnostics::new();
        let target = match connection::read_target(ctx, &config) {
            Ok(target) => target,
            Err(diagnostics) => return DataReadResponse::from(diagnostics),
        };
        let read = async {
            let kube = target.handle().connect().await?;
            // A transient API error is retried within the connection's budget, as every other
            // read is, before it becomes the data source's error.
            let release = kube
                .retry_if("read the release", ClusterError::is_transient, || {
                    current_release(kube.client.clone(), &kube.endpoint, &namespace, &name)
                })
                .await?;
            let key = match &release {
                Some(_) => Some(cluster_identity(&kube).await?),
                None => None,
            };
            Ok::<_, ClusterError>((release, key))
        };
        let (release, key) = match read.await {
            Ok(read) => read,
            Err(e) => {
                diagnostics.push(cluster_diagnostic(&what, &e));
                return DataReadResponse {
                    state: Value::Null,
                    diagnostics,
                };
            }
        };
        let text = |s: Option<&String>| s.cloned().map(Value::String).unwrap_or(Value::Null);
        let mut state = Value::object([
            (
                CLUSTER,
                config.attr(CLUSTER).cloned().unwrap_or(Value::Null),
            ),
            ("name", Value::from(name.as_str())),
            ("namespace", Value::from(namespace.as_str())),
            ("id", Value::from(format!("{namespace}/{name}"))),
            ("exists", Value::from(release.is_some())),
            (
                "status",
                text(release.as_ref().map(|r| r.status.to_string()).as_ref()),
            ),
            (
                "revision",
                release
                    .as_ref()
                    .map_or(Value::Null, |r| Value::int(r.revision)),
            ),
            ("chart", text(release.as_ref().map(|r| &r.chart))),
            (
                "chart_version",
                text(release.as_ref().map(|r| &r.chart_version)),
            ),
            (
                "app_version",
                text(release.as_ref().map(|r| &r.app_version)),
            ),
            (
                "last_deployed",
                text(release.as_ref().map(|r| &r.last_deployed)),
            ),
            (
                "description",
                text(release.as_ref().map(|r| &r.description)),
            ),
            (
                "apply_method",
                release
                    .as_ref()
                    .and_then(|r| r.apply_method)
                    .map_or(Value::Null, |m| Value::from(m.as_str())),
            ),
            (
                "values_sha256",
                match (&release, &key) {
                    (Some(r), Some(key)) => {
                        Value::from(salted_sha256(key.as_bytes(), r.values_sha256.as_bytes()))
                    }
                    _ => Value::Null,
                },
            ),
        ]);
        // The CLIs store what a read returns, write-only values included: never return them.
        null_write_only(&self.schema().block, &mut state);
        DataReadResponse { state, diagnostics }
    }
}

/// The key of `values_sha256`: the `kube-system` namespace's UID, the cluster's identity. Stable for
/// the cluster's life and never in state, so the hash detects a change of the values but cannot be
/// tested against guesses of a secret value by someone holding only the state.
async fn cluster_identity(kube: &Kube) -> Result<String, crate::cluster::ClusterError> {
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
        kube::Api::all(kube.client.clone());
    let ns = kube
        .retry("read the kube-system namespace", || {
            namespaces.get("kube-system")
        })
        .await
        .map_err(|e| kube.cluster_error(e))?;
    Ok(ns.metadata.uid.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_release_name_is_reported_on_its_attribute() {
        let config = Value::object([
            ("name", Value::from("Cilium_1")),
            ("namespace", Value::Null),
        ]);
        let mut diagnostics = Diagnostics::new();
        HelmReleaseDataSource.validate(&config, &mut diagnostics);
        let d = diagnostics.iter().next().expect("one diagnostic");
        assert_eq!(d.attribute, Some(AttributePath::attr("name")));
    }

    #[test]
    fn unknown_name_is_not_judged_at_validate() {
        let config = Value::object([("name", Value::unknown()), ("namespace", Value::Null)]);
        let mut diagnostics = Diagnostics::new();
        HelmReleaseDataSource.validate(&config, &mut diagnostics);
        assert!(diagnostics.is_empty());
    }
}
