//! Response helpers: JSON bodies, `Status` errors, streaming bodies.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use serde_json::{Value, json};

use crate::store::ApiError;

pub type Body = BoxBody<Bytes, std::io::Error>;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

pub fn json_response(code: u16, value: &Value) -> Response<Body> {
    let mut resp = Response::new(full(value.to_string()));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

pub fn ok(value: &Value) -> Response<Body> {
    json_response(200, value)
}

pub fn error(e: &ApiError) -> Response<Body> {
    let mut resp = json_response(e.code, &e.to_status());
    if let Some(secs) = e.retry_after {
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    resp
}

pub fn text(code: u16, body: &str) -> Response<Body> {
    let mut resp = Response::new(full(body.to_string()));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// `Status` with `status: Success` (the answer to some deletes).
pub fn success_status(details: Value) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

/// The error an injected fault answers with.
pub fn fault_error(status: u16, retry_after: Option<u64>) -> ApiError {
    let (reason, message) = match status {
        429 => (
            "TooManyRequests",
            "Too many requests, please try again later.",
        ),
        503 => (
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        ),
        504 => (
            "Timeout",
            "the server was unable to return a response in the time allotted, but may still be processing the request",
        ),
        500 => ("InternalError", "Internal error occurred: injected fault"),
        _ => ("InternalError", "injected fault"),
    };
    let mut e = ApiError::new(status, reason, message);
    e.retry_after = retry_after;
    e
}
