//! `talosboot_test_object` (debug builds and the `test-object` feature): a resource with no remote
//! side, registered only when `TALOSBOOT_ENABLE_TEST_RESOURCES=1`. It exercises every
//! managed-resource path of the framework (plan with requires-replace and private state, apply
//! incl. a failure after create, read, import, state upgrade from version 0, write-only values,
//! identity, and an identity that changes, which the framework must report)
//! without needing a cluster.

use async_trait::async_trait;

use crate::cluster::helm::release::sha256_hex;
use crate::framework::plan::mark_unknown;
use crate::framework::*;
use crate::values::{AttributePath, Type, Value, from_json};

pub struct TestObject;

/// Values of `value` that make the resource misbehave, to exercise the dispatcher's safety nets.
const FAIL_AFTER_CREATE: &str = "fail-after-create";
const FAIL_DESTROY: &str = "fail-destroy";
const NO_STATE_AFTER_UPDATE: &str = "no-state-after-update";
/// Makes read and update answer with another `name` than the object has: a provider bug the
/// identity check must report.
const RENAME: &str = "rename";

#[async_trait]
impl Resource for TestObject {
    fn type_name(&self) -> &'static str {
        "talosboot_test_object"
    }

    // --- schema ---------------------------------------------------------------------------------
    fn schema(&self) -> Schema {
        Schema::new(
            1,
            Block::new(
                "Test-only resource.",
                vec![
                    Attribute::computed("id", Type::String, "Same as `name`."),
                    Attribute::required("name", Type::String, "Changing it replaces the object.")
                        .requires_replace(),
                    Attribute::optional(
                        "value",
                        Type::String,
                        "Free text. `fail-after-create`, `fail-destroy` and `no-state-after-update` make the resource misbehave.",
                    ),
                    Attribute::optional(
                        "secret",
                        Type::String,
                        "Write-only; only its hash is stored.",
                    )
                    .sensitive()
                    .write_only(),
                    Attribute::computed("secret_sha256", Type::String, "SHA-256 of `secret`."),
                    Attribute::optional(
                        "note",
                        Type::String,
                        "Free text, kept for old configurations.",
                    )
                    .deprecated("`note` is deprecated: use `value` instead."),
                    Attribute::computed("revision", Type::Number, "Bumped on every update."),
                ],
            ),
        )
    }

    fn identity(&self) -> Option<IdentitySchema> {
        Some(IdentitySchema::new(
            0,
            vec![IdentityAttribute::required("name", "The object's name.")],
        ))
    }

    fn validate(&self, config: &Value, diagnostics: &mut Diagnostics) {
        if config.attr("name").and_then(Value::as_str) == Some("") {
            diagnostics.error_at(
                AttributePath::attr("name"),
                "Empty name",
                "`name` must not be empty.",
            );
        }
    }

    // --- plan -----------------------------------------------------------------------------------
    async fn plan(&self, _ctx: &Ctx, req: PlanRequest) -> PlanResponse {
        let mut planned = req.proposed_new_state;
        mark_unset_computed_unknown(&self.schema().block, &mut planned, &req.config);
        if let Some(attrs) = planned.attrs_mut() {
            attrs.insert("secret_sha256".into(), secret_hash(&req.config));
        }
        if !req.prior_state.is_null() && req.prior_state.attr("value") != planned.attr("value") {
            mark_unknown(&mut planned, &["revision"]);
        }
        PlanResponse {
            planned_state: planned,
            private: Some(b"planned".to_vec()),
            ..Default::default()
        }
    }

    // --- apply ----------------------------------------------------------------------------------
    async fn apply(&self, _ctx: &Ctx, req: ApplyRequest) -> ApplyResponse {
        let misbehave = |v: &Value, what| v.attr("value").and_then(Value::as_str) == Some(what);
        if req.planned_state.is_null() {
            let mut diagnostics = Diagnostics::new();
            if misbehave(&req.prior_state, FAIL_DESTROY) {
                diagnostics.error(
                    "Destroy failed",
                    "Test failure: the object may still exist.",
                );
            }
            return ApplyResponse::from(diagnostics);
        }
        if !req.prior_state.is_null() && misbehave(&req.planned_state, NO_STATE_AFTER_UPDATE) {
            return ApplyResponse::default();
        }
        let mut state = req.planned_state;
        if !req.prior_state.is_null() && misbehave(&state, RENAME) {
            renamed(&mut state);
        }
        let name = state.attr("name").cloned().unwrap_or_default();
        let revision = match req.prior_state.attr("revision").and_then(Value::as_i64) {
            Some(r) if state.attr("revision").is_some_and(Value::is_unknown) => r + 1,
            Some(r) => r,
            None => 1,
        };
        if let Some(attrs) = state.attrs_mut() {
            attrs.insert("id".into(), name);
            attrs.insert("revision".into(), Value::int(revision));
            attrs.insert("secret_sha256".into(), secret_hash(&req.config));
        }
        let mut diagnostics = Diagnostics::new();
        if req.prior_state.is_null()
            && state.attr("value").and_then(Value::as_str) == Some(FAIL_AFTER_CREATE)
        {
            diagnostics.error(
                "Create failed after the object was created",
                "Test failure: the object exists and is kept in state as tainted.",
            );
        }
        ApplyResponse {
            new_state: state,
            private: Some(b"applied".to_vec()),
            diagnostics,
        }
    }

    // --- read -----------------------------------------------------------------------------------
    async fn read(&self, _ctx: &Ctx, req: ReadRequest) -> ReadResponse {
        let mut new_state = req.current_state;
        if new_state.attr("value").and_then(Value::as_str) == Some(RENAME) {
            renamed(&mut new_state);
        }
        ReadResponse {
            new_state,
            ..Default::default()
        }
    }

    // --- import ---------------------------------------------------------------------------------
    async fn import(&self, _ctx: &Ctx, req: ImportRequest) -> ImportResponse {
        let state = Value::object([
            ("id", Value::from(req.id.as_str())),
            ("name", Value::from(req.id.as_str())),
            ("value", Value::Null),
            ("secret", Value::Null),
            ("secret_sha256", Value::Null),
            ("note", Value::Null),
            ("revision", Value::int(1)),
        ]);
        ImportResponse {
            imported: vec![ImportedResource {
                state,
                private: Vec::new(),
            }],
            diagnostics: Diagnostics::new(),
        }
    }

    // --- upgrade: version 0 called `value` `text` -----------------------------------------------
    async fn upgrade_state(&self, _ctx: &Ctx, req: UpgradeRequest) -> UpgradeResponse {
        if req.version != 0 {
            return dispatcher::upgrade_same_version(&self.schema(), self.type_name(), req);
        }
        let v0 = Type::object([
            ("id", Type::String),
            ("name", Type::String),
            ("text", Type::String),
        ]);
        let mut diagnostics = Diagnostics::new();
        match from_json(&req.raw_json, &v0) {
            Ok(old) => UpgradeResponse {
                upgraded_state: Value::object([
                    ("id", old.attr("id").cloned().unwrap_or_default()),
                    ("name", old.attr("name").cloned().unwrap_or_default()),
                    ("value", old.attr("text").cloned().unwrap_or_default()),
                    ("secret", Value::Null),
                    ("secret_sha256", Value::Null),
                    ("note", Value::Null),
                    ("revision", Value::int(1)),
                ]),
                diagnostics,
            },
            Err(e) => {
                diagnostics.error("Stored state could not be decoded", e.to_string());
                UpgradeResponse::from(diagnostics)
            }
        }
    }
}

/// `name` with `-renamed` appended (the [`RENAME`] misbehaviour).
fn renamed(state: &mut Value) {
    let name = state
        .attr("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = Value::string(format!("{name}-renamed"));
    if let Some(attrs) = state.attrs_mut() {
        attrs.insert("name".into(), name);
    }
}

fn secret_hash(config: &Value) -> Value {
    match config.attr("secret") {
        Some(Value::String(s)) => Value::String(sha256_hex(s.as_bytes())),
        Some(Value::Unknown(_)) => Value::unknown(),
        _ => Value::Null,
    }
}
