//! Resource `talosboot_cilium`: Cilium installed, adopted, upgraded, watched and repaired before any
//! CNI exists, on the shared bootstrap engine. Reads top-down: [`schema`], [`model`], [`plan`],
//! [`apply`], [`read`] (refresh and import).

pub mod apply;
pub mod model;
pub mod plan;
pub mod read;
pub mod schema;

use async_trait::async_trait;

use self::model::Cilium;
use crate::cluster::bootstrap::Clients;
use crate::framework::model::{Unknowns, decode, encode};
use crate::framework::*;
use crate::resources::engine_report::engine_diagnostic;
use crate::resources::private::Private;
use crate::values::Value;

pub struct CiliumResource;

fn encode_state(c: &Cilium, diagnostics: &mut Diagnostics) -> Value {
    match encode(c, &schema::schema().value_type()) {
        Ok(v) => v,
        Err(e) => {
            diagnostics.push(e.diagnostic("state"));
            Value::Null
        }
    }
}

fn decoded(value: &Value, what: &str, diagnostics: &mut Diagnostics) -> Option<Cilium> {
    match decode::<Cilium>(value, Unknowns::AsNull) {
        Ok(c) => Some(c),
        Err(e) => {
            diagnostics.push(e.diagnostic(what));
            None
        }
    }
}

#[async_trait]
impl Resource for CiliumResource {
    fn type_name(&self) -> &'static str {
        schema::TYPE_NAME
    }

    fn schema(&self) -> Schema {
        schema::schema()
    }

    fn validate(&self, config: &Value, diagnostics: &mut Diagnostics) {
        if let Some(c) = decoded(config, "configuration", diagnostics) {
            model::validate(&c, diagnostics);
        }
    }

    async fn plan(&self, _ctx: &Ctx, req: PlanRequest) -> PlanResponse {
        plan::plan(req)
    }

    async fn apply(&self, ctx: &Ctx, req: ApplyRequest) -> ApplyResponse {
        let mut diagnostics = Diagnostics::new();
        let mut private = Private::decode(&req.planned_private);
        let prior = if req.prior_state.is_null() {
            None
        } else {
            decoded(&req.prior_state, "prior state", &mut diagnostics)
        };
        let clients = match Clients::connect(&ctx.cluster).await {
            Ok(c) => c,
            Err(e) => {
                diagnostics.push(engine_diagnostic("connect to the cluster", &e));
                return ApplyResponse {
                    new_state: req.prior_state,
                    diagnostics,
                    private: None,
                };
            }
        };
        if req.planned_state.is_null() {
            if let Some(prior) = prior {
                diagnostics.extend(apply::destroy(&clients, &prior, &ctx.cancel).await);
            }
            return ApplyResponse {
                diagnostics,
                ..Default::default()
            };
        }
        let Some(config) = decoded(&req.config, "configuration", &mut diagnostics) else {
            return ApplyResponse {
                new_state: req.prior_state,
                diagnostics,
                private: None,
            };
        };
        let mut desired = config.with_defaults();
        desired.values_sha256 = match desired.merged_values() {
            Ok(v) => Some(private.salted(&crate::cluster::helm_release::values_digest(Some(&v)))),
            Err(_) => None,
        };
        if private.owner.is_some() {
            if let Some(prior) = &prior {
                diagnostics.warning(
                    "Cilium is managed by GitOps",
                    "No change was made in the cluster; the configuration is recorded only.",
                );
                let mut state = desired.clone();
                state.status = prior.status.clone();
                state.revision = prior.revision;
                state.chart_version = prior.chart_version.clone();
                state.app_version = prior.app_version.clone();
                state.values_sha256 = prior.values_sha256.clone();
                state.agents = prior.agents.clone();
                state.nodes_ready = prior.nodes_ready;
                let new_state = encode_state(&state, &mut diagnostics);
                return ApplyResponse {
                    new_state,
                    diagnostics,
                    private: Some(private.encode()),
                };
            }
        }
        let applied =
            apply::install(&clients, desired, prior.as_ref(), &mut private, &ctx.cancel).await;
        diagnostics.extend(applied.diagnostics);
        let new_state = match applied.state {
            Some(s) => encode_state(&s, &mut diagnostics),
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
        let Some(state) = decoded(&req.current_state, "state", &mut diagnostics) else {
            return ReadResponse {
                new_state: req.current_state,
                diagnostics,
                private: None,
            };
        };
        let clients = match Clients::connect(&ctx.cluster).await {
            Ok(c) => c,
            Err(e) => {
                diagnostics.push(engine_diagnostic("read Cilium", &e));
                return ReadResponse {
                    new_state: req.current_state,
                    diagnostics,
                    private: None,
                };
            }
        };
        let observed = match read::observe(&clients, &state).await {
            Ok(o) => o,
            Err(e) => {
                // A transient error is an error, never a removal from state.
                diagnostics.push(engine_diagnostic(
                    &format!("read Cilium ({})", state.id.clone().unwrap_or_default()),
                    &e,
                ));
                return ReadResponse {
                    new_state: req.current_state,
                    diagnostics,
                    private: None,
                };
            }
        };
        let new_state = match read::apply_observed(state, &observed, &mut private, &mut diagnostics)
        {
            Some(s) => encode_state(&s, &mut diagnostics),
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
        let Some((namespace, name)) = req
            .id
            .split_once('/')
            .filter(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/'))
        else {
            diagnostics.error(
                "Invalid import ID",
                format!(
                    "{:?}: use `<namespace>/<release name>`, e.g. `kube-system/cilium`.",
                    req.id
                ),
            );
            return ImportResponse {
                imported: Vec::new(),
                diagnostics,
            };
        };
        let clients = match Clients::connect(&ctx.cluster).await {
            Ok(c) => c,
            Err(e) => {
                diagnostics.push(engine_diagnostic("import Cilium", &e));
                return ImportResponse {
                    imported: Vec::new(),
                    diagnostics,
                };
            }
        };
        let mut state = Cilium {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        }
        .with_defaults();
        let mut private = Private::fresh();
        let observed = match read::observe(&clients, &state).await {
            Ok(o) => o,
            Err(e) => {
                diagnostics.push(engine_diagnostic(
                    &format!("import Cilium ({})", req.id),
                    &e,
                ));
                return ImportResponse {
                    imported: Vec::new(),
                    diagnostics,
                };
            }
        };
        if let Some(release) = &observed.release {
            state.version = Some(release.chart_version.clone());
            state.chart = Some(release.chart.clone());
        }
        match read::apply_observed(state, &observed, &mut private, &mut diagnostics) {
            Some(state) => {
                let state = encode_state(&state, &mut diagnostics);
                ImportResponse {
                    imported: vec![ImportedResource {
                        state,
                        private: private.encode(),
                    }],
                    diagnostics,
                }
            }
            None => {
                diagnostics.error("Cannot import a missing release", format!("No Helm release {} exists in the cluster. To take over Cilium installed without Helm (inline manifests), declare the resource with `adopt_existing = true` and apply instead.", req.id));
                ImportResponse {
                    imported: Vec::new(),
                    diagnostics,
                }
            }
        }
    }
}
