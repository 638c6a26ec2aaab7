//! What the front and its spokes (fan-out, streams, metrics, status)
//! share about one API call: the buffered request ([`Call`]) and answer
//! ([`Answer`]), where a partition's calls go ([`Target`]), the headers
//! one node sets on a call it forwards, and an error in the API's shape.
//!
//! May use: the `node`'s `Owner`; never the front or a spoke.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::node::Owner;

/// Set on a request one node forwards to another (the value: the
/// forwarding node): the receiver runs it or refuses, never forwards it
/// again.
pub(crate) const FORWARDED: &str = "x-acts-forwarded";
/// Set on a forwarded request that is meant for one partition (listings
/// and calls that name no process).
pub(crate) const PARTITION: &str = "x-acts-partition";

/// The partition a call another node pinned names ([`PARTITION`]):
/// `None` without the header, `Some(Err(answer))` when it names no
/// partition of a cluster of `partitions`.
pub(crate) fn pinned_partition(
    headers: &HeaderMap,
    partitions: u32,
) -> Option<Result<u32, Response>> {
    let value = headers.get(PARTITION)?;
    let p = value
        .to_str()
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|p| *p < partitions);
    Some(p.ok_or_else(|| {
        error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!(
                "{PARTITION} must name a partition of this cluster (0 to {})",
                partitions - 1
            ),
        )
    }))
}

/// An error answer in the API's shape.
pub(crate) fn error(
    status: StatusCode,
    code: &'static str,
    message: impl Into<String>,
) -> Response {
    acts_server::ApiError {
        status,
        code,
        message: message.into(),
    }
    .into_response()
}

/// A buffered request: what a retry or a forward needs again.
#[derive(Clone)]
pub(crate) struct Call {
    pub(crate) method: Method,
    pub(crate) uri: Uri,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Call {
    pub(crate) fn request(&self) -> Request {
        let mut req = Request::new(Body::from(self.body.clone()));
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.headers.clone();
        req
    }

    pub(crate) fn forwarded(&self) -> bool {
        self.headers.contains_key(FORWARDED)
    }
}

/// A buffered answer.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) content_type: Option<HeaderValue>,
    pub(crate) body: Bytes,
}

impl Answer {
    /// A 503 with `code` and `message`, in the API's error shape
    /// (`acts_server::ApiError`'s body).
    pub(crate) fn unavailable(code: &'static str, message: String) -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            content_type: Some(HeaderValue::from_static("application/json")),
            body: Bytes::from(json!({"error": {"code": code, "message": message}}).to_string()),
        }
    }

    /// The API error code of a failed answer.
    pub(crate) fn code(&self) -> Option<String> {
        let v: Value = serde_json::from_slice(&self.body).ok()?;
        v["error"]["code"].as_str().map(str::to_owned)
    }

    /// Whether the partition was not (or no longer) served where the call
    /// went: worth trying again once ownership settles.
    pub(crate) fn moved(&self) -> bool {
        self.status == StatusCode::SERVICE_UNAVAILABLE
            && matches!(
                self.code().as_deref(),
                Some("not_owner" | "closing" | "moving")
            )
    }

    pub(crate) fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    pub(crate) fn into_response(self) -> Response {
        let mut r = Response::new(Body::from(self.body));
        *r.status_mut() = self.status;
        if let Some(ct) = self.content_type {
            r.headers_mut().insert(header::CONTENT_TYPE, ct);
        }
        r
    }
}

/// Where a partition's calls go now.
pub(crate) enum Target {
    Local(Router),
    Remote(Owner),
    Nobody,
}
