//! [`ApiError`]: a failed API operation, rendered as a Kubernetes `Status` with the real server's
//! reasons, codes and message wording.

use serde_json::{Value, json};

use super::types::GroupResource;

/// One field-level cause of an `Invalid` (422) or conflict error.
#[derive(Clone, Debug, PartialEq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldManagerConflict`, ...
    pub reason: String,
    pub message: String,
    pub field: String,
}

/// A failed API operation. `Display` is the `Status.message`.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub code: u16,
    /// `NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, `Forbidden`, `BadRequest`, ...
    pub reason: String,
    pub message: String,
    /// `Status.details`: `{name, group, kind, causes}` when known.
    pub details: Option<Value>,
    /// Extra response headers (e.g. `Retry-After`).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason: reason.into(),
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    fn with_details(mut self, name: &str, gr: &GroupResource, kind: &str) -> Self {
        let mut d = json!({ "name": name, "kind": kind });
        if !gr.group.is_empty() {
            d["group"] = json!(gr.group);
        }
        self.details = Some(d);
        self
    }

    /// 404 `secrets "x" not found`.
    pub fn not_found(gr: &GroupResource, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{gr} \"{name}\" not found")).with_details(
            name,
            gr,
            &gr.resource,
        )
    }

    /// 409 `configmaps "x" already exists`.
    pub fn already_exists(gr: &GroupResource, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{gr} \"{name}\" already exists"),
        )
        .with_details(name, gr, &gr.resource)
    }

    /// 409 `Operation cannot be fulfilled on configmaps "x": <why>`.
    pub fn conflict(gr: &GroupResource, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {gr} \"{name}\": {why}"),
        )
        .with_details(name, gr, &gr.resource)
    }

    /// The stale-resourceVersion conflict.
    pub fn stale(gr: &GroupResource, name: &str) -> Self {
        Self::conflict(
            gr,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 `Job.batch "x" is invalid: spec.template: Invalid value: ...: field is immutable`.
    pub fn invalid(kind: &str, gr: &GroupResource, name: &str, causes: Vec<Cause>) -> Self {
        let qualified = if gr.group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{}", gr.group)
        };
        let msgs: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let message = if msgs.len() == 1 {
            format!("{qualified} \"{name}\" is invalid: {}", msgs[0])
        } else {
            format!("{qualified} \"{name}\" is invalid: [{}]", msgs.join(", "))
        };
        let mut e = Self::new(422, "Invalid", message).with_details(name, gr, kind);
        if let Some(d) = e.details.as_mut() {
            d["causes"] = causes_json(&causes);
        }
        e
    }

    /// 403 `<resource> "x" is forbidden: <why>`.
    pub fn forbidden(gr: &GroupResource, name: &str, why: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!("{gr} \"{name}\" is forbidden: {why}"),
        )
        .with_details(name, gr, &gr.resource)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    /// 404 for a path or resource type the server does not serve.
    pub fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// 410 `too old resource version: 5 (10)`.
    pub fn gone(requested: u64, oldest: u64) -> Self {
        Self::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    pub fn unsupported_media_type(ct: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {ct:?})"
            ),
        )
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The apply-conflict error, with one `FieldManagerConflict` cause per field.
    pub fn apply_conflicts(
        gr: &GroupResource,
        name: &str,
        message: String,
        causes: Vec<Cause>,
    ) -> Self {
        let mut e = Self::new(409, "Conflict", message).with_details(name, gr, &gr.resource);
        if let Some(d) = e.details.as_mut() {
            d["causes"] = causes_json(&causes);
        }
        e
    }

    /// The `Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty() {
            // An untyped error (StatusReasonUnknown): the real server omits the reason.
            if let Some(m) = s.as_object_mut() {
                m.remove("reason");
            }
        }
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        if let Some(secs) = self.retry_after {
            let d = s
                .as_object_mut()
                .map(|m| m.entry("details").or_insert_with(|| json!({})));
            if let Some(d) = d {
                d["retryAfterSeconds"] = json!(secs);
            }
        }
        s
    }
}

fn causes_json(causes: &[Cause]) -> Value {
    Value::Array(
        causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect(),
    )
}

/// Shorthand for an `Invalid` cause.
pub fn invalid_value(field: &str, value: &Value, detail: &str) -> Cause {
    let shown = match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {shown}: {detail}"),
        field: field.into(),
    }
}

/// Shorthand for a `Required` cause.
pub fn required(field: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired".into(),
        message: if detail.is_empty() {
            "Required value".into()
        } else {
            format!("Required value: {detail}")
        },
        field: field.into(),
    }
}
