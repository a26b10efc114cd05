//! The dispatcher's safety nets, by calling it directly with probe resources.

#[test]
fn paths_into_nested_attributes_are_cut_where_clients_can_place_them() {
    use crate::framework::{Attribute, Block, Nesting};
    use crate::values::{AttributePath, Type};
    let block = Block::new(
        "",
        vec![
            Attribute::optional("version", Type::String, ""),
            Attribute::optional("job", Type::Dynamic, "").nested(
                Nesting::Single,
                vec![Attribute::optional("pull_policy", Type::String, "")],
            ),
        ],
    );
    let mut d = Diagnostics::new();
    d.error_at(
        AttributePath::attr("job").then_attr("pull_policy"),
        "Invalid pull policy",
        "use `Always`",
    );
    d.error_at(AttributePath::attr("version"), "Bad version", "x");
    locatable_paths(&mut d, &block);
    let all: Vec<_> = d.iter().collect();
    assert_eq!(all[0].attribute, Some(AttributePath::attr("job")));
    assert_eq!(all[0].detail, "`job.pull_policy`: use `Always`");
    assert_eq!(
        all[1].attribute,
        Some(AttributePath::attr("version")),
        "top level: untouched"
    );
    assert_eq!(all[1].detail, "x");
    // The client would print the attribute's source lines: never for one holding a secret.
    let secret = Block::new(
        "",
        vec![Attribute::optional("managed", Type::Dynamic, "").nested(
            Nesting::Single,
            vec![Attribute::optional("key", Type::String, "").sensitive()],
        )],
    );
    let mut d = Diagnostics::new();
    d.error_at(AttributePath::attr("managed").then_attr("key"), "Bad", "y");
    locatable_paths(&mut d, &secret);
    let path = d.iter().next().and_then(|d| d.attribute.clone());
    assert_eq!(path, Some(AttributePath::attr("managed").then_attr("key")));
}

use std::sync::Mutex;

use async_trait::async_trait;

use super::*;
use crate::framework::{Attribute, Block, FixedProvider, Nesting};

/// Records the capabilities it was called with; panics in validate when `name` is "panic";
/// answers upgrade and move with its input (write-only value included).
#[derive(Default)]
struct Probe {
    seen: Mutex<Vec<ClientCapabilities>>,
}

fn probe_schema() -> Schema {
    Schema::new(
        0,
        Block::new(
            "",
            vec![
                Attribute::required("name", Type::String, ""),
                Attribute::optional("inner", Type::Dynamic, "").nested(
                    Nesting::Single,
                    vec![Attribute::optional("key", Type::String, "").write_only()],
                ),
            ],
        ),
    )
}

fn state(name: &str, key: &str) -> Value {
    Value::Object(BTreeMap::from([
        ("name".into(), name.into()),
        (
            "inner".into(),
            Value::Object(BTreeMap::from([("key".into(), key.into())])),
        ),
    ]))
}

#[async_trait]
impl Resource for Probe {
    fn type_name(&self) -> &'static str {
        "probe"
    }
    fn schema(&self) -> Schema {
        probe_schema()
    }
    fn validate(&self, config: &Value, _: &mut Diagnostics) {
        assert_ne!(config.attr("name").and_then(Value::as_str), Some("panic"));
    }
    async fn plan(&self, _: &Ctx, req: PlanRequest) -> PlanResponse {
        self.seen
            .lock()
            .expect("lock")
            .push(req.client_capabilities);
        PlanResponse {
            planned_state: req.proposed_new_state,
            ..Default::default()
        }
    }
    async fn apply(&self, _: &Ctx, req: ApplyRequest) -> ApplyResponse {
        ApplyResponse {
            new_state: req.planned_state,
            ..Default::default()
        }
    }
    async fn read(&self, _: &Ctx, req: ReadRequest) -> ReadResponse {
        self.seen
            .lock()
            .expect("lock")
            .push(req.client_capabilities);
        ReadResponse {
            new_state: req.current_state,
            ..Default::default()
        }
    }
    async fn import(&self, _: &Ctx, req: ImportRequest) -> ImportResponse {
        self.seen
            .lock()
            .expect("lock")
            .push(req.client_capabilities);
        ImportResponse::default()
    }
    async fn upgrade_state(&self, _: &Ctx, _: UpgradeRequest) -> UpgradeResponse {
        UpgradeResponse {
            upgraded_state: state("old", "MARKER-upgrade"),
            diagnostics: Diagnostics::new(),
        }
    }
    async fn move_state(&self, _: &Ctx, _: MoveRequest) -> MoveResponse {
        MoveResponse {
            target_state: state("moved", "MARKER-move"),
            ..Default::default()
        }
    }
}

fn dispatcher(probe: Arc<Probe>) -> Dispatcher {
    Dispatcher::new(
        Arc::new(FixedProvider(Arc::new(()))),
        vec![probe],
        Vec::new(),
        CancellationToken::new(),
    )
}

fn inner_key(v: &Value) -> Option<&Value> {
    v.attr("inner").and_then(|i| i.attr("key"))
}

#[tokio::test]
async fn upgraded_and_moved_state_never_carries_write_only_values() {
    let d = dispatcher(Arc::default());
    let upgraded = d
        .upgrade(
            "probe",
            UpgradeRequest {
                version: 0,
                raw_json: b"{}".to_vec(),
            },
        )
        .await;
    assert_eq!(inner_key(&upgraded.upgraded_state), Some(&Value::Null));
    let moved = d
        .move_state(
            "probe",
            MoveRequest {
                source_provider_address: "x".into(),
                source_type_name: "y".into(),
                source_schema_version: 0,
                source_state_json: b"{}".to_vec(),
                source_private: Vec::new(),
            },
        )
        .await;
    assert_eq!(inner_key(&moved.target_state), Some(&Value::Null));
}

#[tokio::test]
async fn a_panic_in_validate_during_plan_is_a_diagnostic() {
    let d = dispatcher(Arc::default());
    let config = state("panic", "k");
    let resp = d
        .plan(
            "probe",
            PlanRequest {
                prior_state: Value::Null,
                proposed_new_state: config.clone(),
                config,
                prior_private: Vec::new(),
                client_capabilities: ClientCapabilities::default(),
            },
        )
        .await;
    let d = resp.diagnostics.iter().next().expect("a diagnostic");
    assert_eq!(d.summary, "Provider bug");
    assert!(d.detail.contains("validate"), "{}", d.detail);
}

#[tokio::test]
async fn client_capabilities_reach_plan_read_and_import() {
    let probe = Arc::new(Probe::default());
    let d = dispatcher(probe.clone());
    let caps = ClientCapabilities {
        deferral_allowed: true,
        write_only_attributes_allowed: true,
    };
    let config = state("a", "k");
    let planned = d
        .plan(
            "probe",
            PlanRequest {
                prior_state: Value::Null,
                proposed_new_state: config.clone(),
                config: config.clone(),
                prior_private: Vec::new(),
                client_capabilities: caps,
            },
        )
        .await;
    assert!(!planned.diagnostics.has_errors());
    assert_eq!(inner_key(&planned.planned_state), Some(&Value::Null));
    d.read(
        "probe",
        ReadRequest {
            current_state: config,
            private: Vec::new(),
            client_capabilities: caps,
        },
    )
    .await;
    d.import(
        "probe",
        ImportRequest {
            id: "a".into(),
            client_capabilities: caps,
        },
    )
    .await;
    assert_eq!(*probe.seen.lock().expect("lock"), vec![caps; 3]);
}
