//! The list resource of every [`ChartResource`] (`list "talosboot_helm_release"` and
//! `list "talosboot_cilium"` in a `.tfquery.hcl` file, Terraform 1.14+): the Helm releases of a
//! namespace (or of every namespace), each as the state an import of it makes plus the inputs
//! that keep what it runs, read from its Helm record: the chart, its version and the
//! user-supplied values. So `terraform query -generate-config-out=FILE` writes, per release, a
//! block that adopts it without a new revision.
//!
//! A record keeps neither the chart's repository nor secrets apart from other values: the
//! repository is the resource's default where it has one, otherwise [`REPOSITORY_TO_FILL_IN`]
//! (which plan refuses, naming `repository`); values that may be credentials (the rule the plan
//! uses to hide values) are left out of `values` and listed in `set_wo` by path, with no value,
//! for the user to fill in.
//!
//! A list's `cluster` lists another cluster than the provider's through a kubeconfig file on disk,
//! never a credential: `terraform query -json` prints a list block's whole `config` (see
//! [`connection`]'s module docs). Import receives no configuration, so the import blocks of a
//! generated configuration go through the provider's connection: the list warns when it lists
//! through `cluster` for a generated configuration.

use std::marker::PhantomData;

use async_trait::async_trait;

use super::values_diff::{SensitivePaths, without_credentials};
use super::{ChartResource, observe, refresh};
use crate::cluster::Kube;
use crate::cluster::engine::EngineError;
use crate::cluster::helm::release::{ReleaseRef, list_releases};
use crate::cluster::helm::release_values::current_values;
use crate::cluster::helm::values::SetValue;
use crate::framework::model::encode;
use crate::framework::*;
use crate::resources::connection::{self, CLUSTER, Target};
use crate::resources::engine_report::engine_diagnostic;
use crate::resources::names::check_namespace;
use crate::resources::private::Private;
use crate::values::{AttributePath, Type, Value};

/// The `repository` of a generated block when the resource has no default: a Helm record does not
/// keep where its chart came from. Not a URL, so plan refuses it at `repository` until the user
/// fills in the one line.
pub const REPOSITORY_TO_FILL_IN: &str = "FILL IN the chart repository (https://... or oci://...): a Helm release record does not keep it";

/// Which list shows a release, by its chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// This resource type's list.
    Here,
    /// Another type's list (by type name): Terraform writes generated blocks of the list's own
    /// type, so a chart with a resource of its own is listed there.
    Elsewhere(&'static str),
}

/// The list resource of `K`.
pub struct ReleaseList<K>(PhantomData<K>);

impl<K> Default for ReleaseList<K> {
    fn default() -> Self {
        ReleaseList(PhantomData)
    }
}

#[async_trait]
impl<K: ChartResource> ListResource for ReleaseList<K> {
    fn type_name(&self) -> &'static str {
        K::TYPE_NAME
    }

    fn schema(&self) -> Schema {
        Schema::new(
            0,
            Block::new(
                &format!(
                    "Lists the Helm releases of a cluster that `{}` can adopt, with their identities; `terraform query -generate-config-out=FILE` writes a block per release with its chart, version and user-supplied values (credentials left out, by path), plus an import block by identity.",
                    K::TYPE_NAME
                ),
                vec![Attribute::optional(
                    "namespace",
                    Type::String,
                    "Only the releases of this namespace. Default: every namespace.",
                )],
            )
            .with_blocks(vec![connection::read_cluster_block()]),
        )
    }

    fn validate(&self, config: &Value, diagnostics: &mut Diagnostics) {
        if let Some(ns) = config.attr("namespace").and_then(Value::as_str) {
            check_namespace(ns, AttributePath::attr("namespace"), diagnostics);
        }
        connection::validate_read_cluster(config, diagnostics);
    }

    async fn list(&self, ctx: &Ctx, req: ListRequest) -> ListResponse {
        let mut diagnostics = Diagnostics::new();
        let namespace = req.config.attr("namespace").and_then(Value::as_str);
        let target = match connection::read_target(ctx, &req.config) {
            Ok(target) => target,
            Err(diagnostics) => return ListResponse::from(diagnostics),
        };
        if req.include_resource_object && matches!(target, Target::Own { .. }) {
            diagnostics.push(
                Diagnostic::warning(
                    "Generated import blocks use the provider's connection",
                    "These releases were listed through this list's `cluster`, but an import receives no configuration: the generated import blocks read the release through the provider's connection. Run the import with the provider block pointed at this cluster (e.g. its `config_path`), then add the generated resources' own `cluster`.",
                )
                .at(AttributePath::attr(CLUSTER)),
            );
        }
        let kube = match target.handle().connect().await {
            Ok(kube) => kube,
            Err(e) => {
                diagnostics.push(engine_diagnostic(
                    "list Helm releases",
                    &EngineError::connect(e),
                ));
                return ListResponse::from(diagnostics);
            }
        };
        let releases = match list_releases(kube.client.clone(), &kube.endpoint, namespace).await {
            Ok(r) => r,
            Err(e) => {
                diagnostics.push(crate::resources::cluster_diagnostic(
                    "list Helm releases",
                    &e,
                ));
                return ListResponse::from(diagnostics);
            }
        };
        let mut results = Vec::new();
        let mut elsewhere = Vec::new();
        let limit = usize::try_from(req.limit).unwrap_or(0);
        for release in releases {
            if results.len() >= limit {
                break;
            }
            match listed::<K>(&kube, &release).await {
                Ok(Some((Listing::Here, listed))) => results.push(listed),
                Ok(Some((Listing::Elsewhere(list), _))) => {
                    elsewhere.push(format!(
                        "{}/{} (`list \"{list}\"`)",
                        release.namespace, release.name
                    ));
                }
                Ok(None) => {}
                Err(d) => diagnostics.push(d),
            }
        }
        if !elsewhere.is_empty() {
            diagnostics.warning(
                "Releases listed by another list type",
                format!(
                    "These releases run a chart talosboot has a resource of its own for, so they are listed there (and generated as that resource): {}.",
                    elsewhere.join(", ")
                ),
            );
        }
        ListResponse {
            results,
            diagnostics,
        }
    }
}

/// One release as `K` would adopt it, and which list shows it; `None` when it vanished meanwhile.
async fn listed<K: ChartResource>(
    kube: &Kube,
    release: &ReleaseRef,
) -> Result<Option<(Listing, Listed)>, Diagnostic> {
    let what = format!("read release {}/{}", release.namespace, release.name);
    let fail = |e: &EngineError| engine_diagnostic(&what, e);
    let state = K::for_import(&release.namespace, &release.name);
    let observed = observe(kube, &state).await.map_err(|e| fail(&e))?;
    let Some(found) = observed.release.clone() else {
        return Ok(None);
    };
    let listing = K::listing(&found.chart);
    let mut ignored = Diagnostics::new();
    let Some(mut state) = refresh(state, &observed, &mut Private::fresh(), &mut ignored) else {
        return Ok(None);
    };
    let recorded = current_values(
        kube.client.clone(),
        &kube.endpoint,
        &release.namespace,
        &release.name,
    )
    .await
    .map_err(|e| crate::resources::cluster_diagnostic(&what, &e))?
    .unwrap_or_default();
    let marked = SensitivePaths::new(recorded.sensitive_paths.iter().map(String::as_str));
    let (kept, left_out) = without_credentials(&recorded.values, &marked);
    let common = state.common_mut();
    common.chart = Some(found.chart.clone());
    common.version = Some(found.chart_version.clone());
    common.values = values_document(&kept, &left_out);
    common.set_wo = (!left_out.is_empty()).then(|| {
        left_out
            .iter()
            .map(|l| SetValue {
                name: Some(l.path.clone()),
                // Write-only: never in a state; the user gives it (`value = var.x`).
                value: None,
                kind: l.string.then(|| "string".to_owned()),
            })
            .collect()
    });
    if common.repository.is_none() {
        common.repository = Some(REPOSITORY_TO_FILL_IN.to_owned());
    }
    state.adopted();
    let display_name = format!(
        "{}/{} ({} {}, revision {})",
        release.namespace, release.name, found.chart, found.chart_version, found.revision
    );
    let state =
        encode(&state, &K::schema().value_type()).map_err(|e| e.diagnostic("listed release"))?;
    Ok(Some((
        listing,
        Listed {
            display_name,
            state,
        },
    )))
}

/// The user-supplied values as one YAML document, headed by a comment naming the paths left out
/// (they are in `set_wo`); `None` when there are none.
fn values_document(
    kept: &serde_json::Value,
    left_out: &[super::values_diff::LeftOut],
) -> Option<Vec<String>> {
    let empty = kept.as_object().is_none_or(|m| m.is_empty());
    if empty && left_out.is_empty() {
        return None;
    }
    let mut doc = String::new();
    if !left_out.is_empty() {
        let paths: Vec<&str> = left_out.iter().map(|l| l.path.as_str()).collect();
        doc.push_str(&format!(
            "# Left out, as they may be credentials (give each in set_wo): {}\n",
            paths.join(", ")
        ));
    }
    match empty {
        // A document of comments alone is no mapping: say "none" explicitly.
        true => doc.push_str("{}\n"),
        false => doc.push_str(&serde_saphyr::to_string(kept).unwrap_or_default()),
    }
    Some(vec![doc])
}
