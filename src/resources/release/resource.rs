//! The framework resource every [`ChartResource`] becomes: decode, connect, then the shared plan
//! and lifecycle for apply, read, import and move. Apply decodes the planned state (with the
//! configuration's write-only values), never re-deriving what the plan settled; nothing here is
//! specific to one chart.
//!
//! Import receives only the ID. With a provider connection it reads the release through it (an
//! error when it is not there); without one (a fleet's provider block) it returns the ID only,
//! marked so that refresh keeps it. Either way the plan, which has the configuration, reads the
//! release through the resource's own `cluster` when it has one (`fleet::read_at_plan`), an
//! error when it is not there: an import never installs.

use std::marker::PhantomData;
use std::time::Duration;

use super::plan::changes_values;
use super::{ChartResource, CheckAt, destroy, install, observe, refresh};
use super::{fleet, helm_major};
use crate::cluster::engine::EngineError;
use crate::cluster::helm::release::values_digest;
use crate::cluster::helm::release_values::{RecordedValues, current_values};
use crate::cluster::talos_inventory;
use crate::cluster::{ClusterHandle, Kube, ProviderConfig};
use crate::framework::model::{Unknowns, decode, encode};
use crate::framework::plan::with_write_only;
use crate::framework::*;
use crate::resources::connection;
use crate::resources::engine_report::engine_diagnostic;
use crate::resources::job::{self, Flavor};
use crate::resources::private::{Imported, Private};
use crate::values::{AttributePath, Value};
use async_trait::async_trait;

/// The framework resource of a [`ChartResource`].
pub struct ReleaseResource<K>(PhantomData<K>);

impl<K> Default for ReleaseResource<K> {
    fn default() -> Self {
        ReleaseResource(PhantomData)
    }
}

fn encode_state<K: ChartResource>(m: &K, diagnostics: &mut Diagnostics) -> Value {
    match encode(m, &K::schema().value_type()) {
        Ok(v) => v,
        Err(e) => {
            diagnostics.push(e.diagnostic("state"));
            Value::Null
        }
    }
}

fn decoded<K: ChartResource>(
    value: &Value,
    what: &str,
    diagnostics: &mut Diagnostics,
) -> Option<K> {
    match decode::<K>(value, Unknowns::AsNull) {
        Ok(m) => Some(m),
        Err(e) => {
            diagnostics.push(e.diagnostic(what));
            None
        }
    }
}

/// How long a plan waits for its best-effort cluster checks (a cluster that does not answer in
/// time is checked again at apply).
const PLAN_PREFLIGHT_BUDGET: Duration = Duration::from_secs(5);

/// [`ChartResource::prerequisites`] at plan, best-effort: only when the provider is configured and the
/// cluster answers within [`PLAN_PREFLIGHT_BUDGET`]; never an error because it could not.
async fn plan_prerequisites<K: ChartResource>(
    cluster: &ClusterHandle,
    m: &K,
    prior: Option<&K>,
) -> Diagnostics {
    let checked = tokio::time::timeout(PLAN_PREFLIGHT_BUDGET, async {
        let clients = cluster.connect().await.ok()?;
        match m.prerequisites(&clients, prior, CheckAt::Plan).await {
            Ok(found) => Some(found),
            Err(e) => {
                tracing::debug!(error = %e, "plan-time cluster check skipped");
                None
            }
        }
    })
    .await;
    checked.ok().flatten().unwrap_or_default()
}

/// With `adopt_existing`, best-effort within [`PLAN_PREFLIGHT_BUDGET`]: on a cluster with Talos'
/// manifest inventory (Talos 1.13+), what the apply will change in it before an adoption
/// (`installs`), or the entries of an adopted release it (again) lists. Nothing when the cluster
/// cannot be read, has no inventory, or the inventory lists nothing of the release.
async fn plan_talos_inventory(
    cluster: &ClusterHandle,
    planned: &Value,
    installs: bool,
) -> Diagnostics {
    let mut diagnostics = Diagnostics::new();
    let text = |attr| {
        planned
            .attr(attr)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let adopts = planned.attr("adopt_existing").and_then(Value::as_bool) == Some(true);
    let (Some(namespace), Some(name), true) = (text("namespace"), text("name"), adopts) else {
        return diagnostics;
    };
    let id = format!("{namespace}/{name}");
    let found = tokio::time::timeout(PLAN_PREFLIGHT_BUDGET, async {
        let kube = cluster.connect().await.ok()?;
        let inventory = talos_inventory::read(&kube)
            .await
            .inspect_err(|e| tracing::debug!(error = %e, "plan-time inventory read skipped"))
            .ok()??;
        let release = crate::cluster::helm::install::release(&kube, &namespace, &name)
            .await
            .ok()?;
        let adopted = release.filter(|r| !r.objects.is_empty());
        Some(match adopted {
            Some(r) => {
                let matched = inventory.entries_of(&r.objects, &namespace);
                (!matched.is_empty()).then(|| talos_inventory::still_listed(&id, &matched))
            }
            None => installs.then(|| talos_inventory::before_adoption(&id, inventory.keys.len())),
        })
    })
    .await;
    if let Ok(Some(Some((summary, detail)))) = found {
        diagnostics
            .push(Diagnostic::warning(summary, detail).at(AttributePath::attr("adopt_existing")));
    }
    diagnostics
}

/// The values the release of `prior` runs with, best-effort within [`PLAN_PREFLIGHT_BUDGET`]
/// (`None` when the cluster cannot be read: the plan then says it could not list the paths).
async fn plan_read_values(cluster: &ClusterHandle, prior: &Value) -> Option<RecordedValues> {
    let text = |attr| prior.attr(attr).and_then(Value::as_str).map(str::to_owned);
    let (namespace, name) = (text("namespace")?, text("name")?);
    let read = tokio::time::timeout(PLAN_PREFLIGHT_BUDGET, async {
        let kube = cluster.connect().await.ok()?;
        current_values(kube.client, &kube.endpoint, &namespace, &name)
            .await
            .inspect_err(|e| tracing::debug!(error = %e, "plan-time values read skipped"))
            .ok()
            .flatten()
    })
    .await;
    read.ok().flatten()
}

async fn connect(
    cluster: &ClusterHandle,
    what: &str,
    diagnostics: &mut Diagnostics,
) -> Option<Kube> {
    match cluster.connect().await {
        Ok(c) => Some(c),
        Err(e) => {
            diagnostics.push(engine_diagnostic(what, &EngineError::connect(e)));
            None
        }
    }
}

#[async_trait]
impl<K: ChartResource> Resource for ReleaseResource<K> {
    fn type_name(&self) -> &'static str {
        K::TYPE_NAME
    }

    fn schema(&self) -> Schema {
        K::schema()
    }

    /// The release's namespace and name, as `helm_release` (hashicorp/helm 3.0+) has it; the
    /// import ID `<namespace>/<name>` is the same pair.
    fn identity(&self) -> Option<IdentitySchema> {
        Some(IdentitySchema::namespaced(
            "The namespace of the Helm release.",
            IdentityAttribute::required("name", "The name of the Helm release."),
        ))
    }

    fn validate(&self, config: &Value, diagnostics: &mut Diagnostics) {
        if let Some(m) = decoded::<K>(config, "configuration", diagnostics) {
            super::validate(&m, diagnostics);
        }
        super::common::validate_null_set_values(config, diagnostics);
        // The same checks the provider block has, on `cluster.<name>`, before any plan.
        crate::resources::fleet::validate_cluster(config, diagnostics);
    }

    async fn plan(&self, ctx: &Ctx, req: PlanRequest) -> PlanResponse {
        let target = match connection::target(ctx, &req.config) {
            Ok(t) => t,
            Err(diagnostics) => return PlanResponse::from(diagnostics),
        };
        let cluster = target.handle();
        let stored_prior = req.prior_state.clone();
        let stored_private = req.prior_private.clone();
        // Refresh had no configuration to reach this resource's own cluster: read it now.
        let (req, read_at_plan) = fleet::read_at_plan::<K>(&target, req).await;
        if let Some(errors) = read_at_plan.errors() {
            return PlanResponse::from(errors);
        }
        let config = req.config.clone();
        let again = PlanRequest {
            prior_state: req.prior_state.clone(),
            proposed_new_state: req.proposed_new_state.clone(),
            config: req.config.clone(),
            prior_private: req.prior_private.clone(),
            client_capabilities: req.client_capabilities,
        };
        let prior_state = req.prior_state.clone();
        let mut resp = super::plan::plan::<K>(req, None);
        job::plan_defaults(&mut resp.planned_state, &config, Flavor::Chart);
        let private = Private::decode(&again.prior_private);
        if changes_values(&again.prior_state, &resp.planned_state, &private) {
            // The values that run, to name each path the upgrade changes (the plan is pure:
            // planning again with them only adds that).
            if let Some(recorded) = plan_read_values(&cluster, &again.prior_state).await {
                resp = super::plan::plan::<K>(again, Some(&recorded));
                job::plan_defaults(&mut resp.planned_state, &config, Flavor::Chart);
            }
        }
        // An install or upgrade is planned when the revision becomes "known after apply".
        let installs = resp
            .planned_state
            .attr("revision")
            .is_some_and(Value::is_unknown);
        let prior = (installs && !prior_state.is_null())
            .then(|| decode::<K>(&prior_state, Unknowns::AsNull).ok())
            .flatten();
        if installs && prior_state.is_null() && !resp.diagnostics.has_errors() {
            if let Ok(planned) = decode::<K>(&resp.planned_state, Unknowns::AsNull) {
                if let Some(d) = super::recovery::plan_create_over_live_release(
                    &cluster,
                    &planned,
                    PLAN_PREFLIGHT_BUDGET,
                )
                .await
                {
                    resp.diagnostics.push(d);
                }
            }
        }
        if installs && !resp.diagnostics.has_errors() {
            if let Some(m) = K::planned_for_checks(&resp.planned_state, &config) {
                let applied = K::applied_by_talosboot(prior.as_ref(), &private);
                resp.diagnostics
                    .extend(plan_prerequisites(&cluster, &m, applied).await);
            }
        }
        if installs && !resp.diagnostics.has_errors() {
            let planned = decode::<K>(&resp.planned_state, Unknowns::AsNull).ok();
            if let Some(planned) = planned {
                let found = planned
                    .plan_checks(prior.as_ref(), &private, PLAN_PREFLIGHT_BUDGET)
                    .await;
                resp.diagnostics.extend(found);
            }
        }
        if !resp.diagnostics.has_errors() {
            let found = plan_talos_inventory(&cluster, &resp.planned_state, installs).await;
            resp.diagnostics.extend(found);
        }
        if installs && !resp.diagnostics.has_errors() {
            // The Helm major the image's tag names, against the newest record; whose fields a
            // server-side adoption takes.
            if let Ok(m) = decode::<K>(&resp.planned_state, Unknowns::AsNull) {
                let kube = async { cluster.connect().await.ok() };
                let defaults = crate::resources::job_defaults(ctx);
                let found =
                    helm_major::plan_warnings(kube, &m, &defaults, PLAN_PREFLIGHT_BUDGET).await;
                resp.diagnostics.extend(found);
            }
        }
        read_at_plan.finish(&mut resp, &stored_prior);
        fleet::plan_identity(&target, &stored_prior, &stored_private, &mut resp).await;
        resp
    }

    async fn apply(&self, ctx: &Ctx, req: ApplyRequest) -> ApplyResponse {
        let mut diagnostics = Diagnostics::new();
        let mut private = Private::decode(&req.planned_private);
        let prior = match req.prior_state.is_null() {
            true => None,
            false => decoded::<K>(&req.prior_state, "prior state", &mut diagnostics),
        };
        let keep = |diagnostics| ApplyResponse {
            new_state: req.prior_state.clone(),
            diagnostics,
            private: None,
        };
        if req.planned_state.is_null() {
            let Some(prior) = prior else {
                return ApplyResponse::from(diagnostics);
            };
            // A destroy has no configuration: the provider's connection, if it is the cluster's.
            let Some(cluster) = fleet::destroy_handle(ctx, &req.prior_state, &private).await else {
                if prior.common().keep_on_destroy() {
                    diagnostics.warning(
                        format!("{} left running", prior.label()),
                        format!("deletion_policy is \"keep\": release {} stays in the cluster it was applied to and is no longer managed by this configuration.", prior.common().id()),
                    );
                    return ApplyResponse::from(diagnostics);
                }
                diagnostics.push(connection::unreachable_on_destroy(
                    &prior.label(),
                    &req.prior_state,
                ));
                return keep(diagnostics);
            };
            let Some(clients) = connect(&cluster, "connect to the cluster", &mut diagnostics).await
            else {
                return keep(diagnostics);
            };
            let defaults = crate::resources::job_defaults(ctx);
            diagnostics.extend(destroy(&clients, &prior, &defaults, &ctx.cancel).await);
            return ApplyResponse::from(diagnostics);
        }
        let target = match connection::target(ctx, &req.config) {
            Ok(t) => t,
            Err(d) => {
                diagnostics.extend(d);
                return keep(diagnostics);
            }
        };
        let identity = match fleet::applied_identity(&target, &req.planned_state, &private).await {
            Ok(identity) => identity,
            Err(d) => {
                diagnostics.push(d);
                return keep(diagnostics);
            }
        };
        let Some(clients) =
            connect(&target.handle(), "connect to the cluster", &mut diagnostics).await
        else {
            return keep(diagnostics);
        };
        let prior = match fleet::refreshed_prior(&clients, &target, prior, &mut private).await {
            Ok(prior) => prior,
            Err(d) => {
                diagnostics.extend(fleet::name_cluster(d.into(), &target, &clients.endpoint));
                return keep(diagnostics);
            }
        };
        // The planned state (defaults, id, the version in use are all settled by the plan),
        // with the write-only values only the configuration carries.
        let planned = with_write_only(&K::schema().block, &req.planned_state, &req.config);
        let Some(mut desired) = decoded::<K>(&planned, "planned state", &mut diagnostics) else {
            return keep(diagnostics);
        };
        desired.derive();
        let hash = desired
            .merged_values()
            .ok()
            .map(|v| private.salted(&values_digest(Some(&v))));
        desired.common_mut().values_sha256 = hash;
        desired.common_mut().cluster_identity = identity.clone();
        let defaults = crate::resources::job_defaults(ctx);
        let applied = install(
            &clients,
            desired,
            prior.as_ref(),
            &mut private,
            &defaults,
            &ctx.cancel,
        )
        .await;
        diagnostics.extend(fleet::name_cluster(
            applied.diagnostics,
            &target,
            &clients.endpoint,
        ));
        let new_state = match applied.state {
            Some(s) => job::keep(encode_state(&s, &mut diagnostics), &req.planned_state),
            None => Value::Null,
        };
        ApplyResponse {
            new_state,
            diagnostics,
            private: Some(private.encode()),
        }
    }

    async fn read(&self, ctx: &Ctx, req: ReadRequest) -> ReadResponse {
        let mut diagnostics = Diagnostics::new();
        let mut private = Private::decode(&req.private);
        let keep = |diagnostics| ReadResponse {
            new_state: req.current_state.clone(),
            diagnostics,
            private: None,
        };
        if private.imported == Some(Imported::NotRead) {
            // The ID only (an import without a provider connection): no configuration here to
            // reach its cluster; the plan reads it through the resource's target.
            tracing::debug!("refresh keeps an imported state the plan has still to read");
            return keep(diagnostics);
        }
        if connection::applied_through_own_cluster(&req.current_state) {
            // No configuration here, so no way to its own cluster: kept as it is; the plan
            // reads that cluster instead.
            tracing::debug!("refresh keeps a state applied through its own `cluster`");
            return keep(diagnostics);
        }
        let Some(state) = decoded::<K>(&req.current_state, "state", &mut diagnostics) else {
            return keep(diagnostics);
        };
        let what = format!("read {}", state.label());
        let Some(clients) = connect(&crate::resources::cluster(ctx), &what, &mut diagnostics).await
        else {
            return keep(diagnostics);
        };
        let observed = match observe(&clients, &state).await {
            Ok(o) => o,
            Err(e) => {
                // A transient error is an error, never a removal from state.
                diagnostics.push(engine_diagnostic(&what, &e));
                return keep(diagnostics);
            }
        };
        let new_state = match refresh(state, &observed, &mut private, &mut diagnostics) {
            Some(s) => job::keep(encode_state(&s, &mut diagnostics), &req.current_state),
            None => Value::Null,
        };
        ReadResponse {
            new_state,
            diagnostics,
            private: Some(private.encode()),
        }
    }

    async fn import(&self, ctx: &Ctx, req: ImportRequest) -> ImportResponse {
        let mut diagnostics = Diagnostics::new();
        let none = |diagnostics| ImportResponse {
            imported: Vec::new(),
            diagnostics,
        };
        let parts = req
            .id
            .split_once('/')
            .filter(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/'));
        let Some((namespace, name)) = parts else {
            diagnostics.error(
                "Invalid import ID",
                format!(
                    "{:?}: use `<namespace>/<release name>`, e.g. `kube-system/cilium`.",
                    req.id
                ),
            );
            return none(diagnostics);
        };
        let what = format!("import {}", req.id);
        let state = K::for_import(namespace, name);
        let mut private = Private::fresh();
        let provider = crate::resources::cluster(ctx);
        if !matches!(provider.config(), ProviderConfig::Known(_)) {
            // An import receives only the ID, no configuration and so no `cluster`, and a
            // fleet's provider block usually connects nowhere: the ID only, marked so that
            // refresh keeps it and the plan reads it through the resource's target.
            private.imported = Some(Imported::NotRead);
            return ImportResponse {
                imported: vec![ImportedResource {
                    state: encode_state(&state, &mut diagnostics),
                    private: private.encode(),
                }],
                diagnostics,
            };
        }
        let Some(clients) = connect(&provider, &what, &mut diagnostics).await else {
            return none(diagnostics);
        };
        let observed = match observe(&clients, &state).await {
            Ok(o) => o,
            Err(e) => {
                diagnostics.push(engine_diagnostic(&what, &e));
                return none(diagnostics);
            }
        };
        match refresh(state, &observed, &mut private, &mut diagnostics) {
            Some(state) => {
                let state = encode_state(&state, &mut diagnostics);
                // The configuration may name another cluster in `cluster`: the plan reads it
                // there again.
                private.imported = Some(Imported::ThroughProvider);
                ImportResponse {
                    imported: vec![ImportedResource {
                        state,
                        private: private.encode(),
                    }],
                    diagnostics,
                }
            }
            None => {
                diagnostics.error(
                    "Cannot import a missing release",
                    format!("No Helm release {} exists on {}, the provider's connection. Declare the resource and apply instead (for objects installed without Helm, `adopt_existing = true` takes them over in place). An import receives no configuration, so it cannot use this resource's `cluster`: to import from the cluster `cluster` names, leave the provider block without a connection (as a fleet's usually is), and the plan reads the release through `cluster`.", req.id, clients.endpoint),
                );
                none(diagnostics)
            }
        }
    }

    /// 0.1.0 states (version 0) had the chart resources' own `job` shape.
    async fn upgrade_state(&self, _ctx: &Ctx, req: UpgradeRequest) -> UpgradeResponse {
        job::upgrade_state(&K::schema(), K::TYPE_NAME, req, Flavor::Chart)
    }

    async fn move_state(&self, _ctx: &Ctx, req: MoveRequest) -> MoveResponse {
        let mut diagnostics = Diagnostics::new();
        let Some((state, private)) = K::moved(&req, &mut diagnostics) else {
            return MoveResponse::from(diagnostics);
        };
        let target_state = encode_state(&state, &mut diagnostics);
        MoveResponse {
            target_state,
            target_private: private.encode(),
            diagnostics,
        }
    }
}

#[cfg(test)]
mod tests {
    //! Import, refresh and validate of a chart resource through the dispatcher, with a provider
    //! block that connects nowhere (a fleet's): nothing here reaches a cluster.
    use std::sync::Arc;

    use crate::framework::{
        ClientCapabilities, Dispatcher, FixedProvider, ImportRequest, ReadRequest, Severity,
    };
    use crate::resources::cilium::CiliumResource;
    use crate::resources::connection::{CLUSTER, HOST};
    use crate::resources::private::{Imported, Private};
    use crate::values::{AttributePath, Type, Value};

    const TYPE: &str = "talosboot_cilium";

    fn dispatcher() -> Dispatcher {
        Dispatcher::new(
            Arc::new(FixedProvider(Arc::new(
                crate::resources::ProviderData::new(crate::cluster::ClusterHandle::unconfigured()),
            ))),
            vec![Arc::new(CiliumResource::default())],
            Vec::new(),
            Default::default(),
        )
    }

    #[tokio::test]
    async fn an_import_without_a_provider_connection_is_the_id_only_and_refresh_keeps_it() {
        let d = dispatcher();
        let imported = d
            .import(
                TYPE,
                ImportRequest {
                    id: "kube-system/cilium".into(),
                    client_capabilities: ClientCapabilities::default(),
                },
            )
            .await;
        assert!(
            !imported.diagnostics.has_errors(),
            "{:?}",
            imported.diagnostics
        );
        let one = imported.imported.first().expect("one imported state");
        assert_eq!(one.state.attr("name"), Some(&Value::from("cilium")));
        assert_eq!(
            one.state.attr("namespace"),
            Some(&Value::from("kube-system"))
        );
        assert_eq!(one.state.attr("revision"), Some(&Value::Null), "not read");
        let private = Private::decode_without_new_salt(&one.private);
        assert_eq!(private.imported, Some(Imported::NotRead));
        assert!(!private.salt.is_empty(), "the identity is planned salted");
        let read = d
            .read(
                TYPE,
                ReadRequest {
                    current_state: one.state.clone(),
                    private: one.private.clone(),
                    client_capabilities: ClientCapabilities::default(),
                },
            )
            .await;
        assert!(read.diagnostics.is_empty(), "{:?}", read.diagnostics);
        assert_eq!(read.new_state, one.state, "kept, never removed");
    }

    /// A configuration with `version = "1.20.2"` and `attr = value`, every other attribute null.
    fn cilium_config(d: &Dispatcher, attr: &str, value: Value) -> Value {
        let Ok(Type::Object { attributes, .. }) = d.resource_type(TYPE).cloned() else {
            panic!("object type");
        };
        let mut config: std::collections::BTreeMap<String, Value> = attributes
            .keys()
            .map(|k| (k.clone(), Value::Null))
            .collect();
        config.insert("version".into(), Value::from("1.20.2"));
        config.insert(attr.into(), value);
        Value::Object(config)
    }

    /// A `set` entry's name from a variable is unknown at validate (and in the validate walk of
    /// a plan): it is checked once known, and a known bad one still fails on its entry.
    #[test]
    fn a_set_name_not_known_yet_passes_validate_and_a_bad_known_one_fails_on_its_entry() {
        let d = dispatcher();
        let config = |set: Vec<Value>| cilium_config(&d, "set", Value::List(set));
        let entry = |name: Value| {
            Value::object([
                ("name", name),
                ("value", Value::from("1")),
                ("type", Value::Null),
            ])
        };
        let unknown = d.validate_resource(TYPE, &config(vec![entry(Value::unknown())]), true);
        assert!(
            !unknown.iter().any(|x| x.severity == Severity::Error),
            "{unknown:?}"
        );
        let bad = d.validate_resource(
            TYPE,
            &config(vec![entry(Value::unknown()), entry(Value::from("list[x]"))]),
            true,
        );
        let error = bad
            .iter()
            .find(|x| x.severity == Severity::Error)
            .expect("the known bad name fails");
        // The CLI is given the list, the entry is named in the detail.
        assert_eq!(
            error.attribute,
            Some(AttributePath::attr("set")),
            "{error:?}"
        );
        assert!(error.detail.starts_with("`set[1]`"), "{error:?}");
        assert_eq!(
            bad.iter().filter(|x| x.severity == Severity::Error).count(),
            1
        );
    }

    #[test]
    fn bad_cluster_settings_fail_at_validate_on_their_path() {
        let d = dispatcher();
        let config = cilium_config(
            &d,
            CLUSTER,
            Value::object([(HOST, Value::from("10.0.0.10:6443"))]),
        );
        let diagnostics = d.validate_resource(TYPE, &config, true);
        let error = diagnostics
            .iter()
            .find(|x| x.severity == Severity::Error)
            .expect("an error at validate");
        assert_eq!(
            error.attribute,
            Some(AttributePath::attr(CLUSTER).then_attr(HOST))
        );
    }
}
