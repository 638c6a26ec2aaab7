//! The extractors handlers take: who calls ([`Exec`]), a JSON object
//! body ([`Body`], [`OptionalBody`]) or any JSON payload ([`Payload`]), a model's text ([`Text`]), path
//! parameters ([`Path`]) and query parameters ([`Params`]) — each failing with the API's error body
//! (`{"error": {code, message}}`), never axum's plain-text rejection.
//!
//! May use: `state`, `error` and the facade `acts`.

use acts::{Executor, Principal};
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::state::AppState;

/// The caller of a request, as the authentication middleware found it.
#[derive(Debug, Clone)]
pub(crate) struct Caller(pub Principal);

/// The engine's executor acting for the caller, and the caller.
pub(crate) struct Exec(pub Executor, pub Principal);

impl FromRequestParts<AppState> for Exec {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, ApiError> {
        let principal = parts
            .extensions
            .get::<Caller>()
            .map(|c| c.0.clone())
            .ok_or_else(|| ApiError::unauthorized("the request has no caller"))?;
        Ok(Exec(
            s.engine.executor().as_principal(principal.clone()),
            principal,
        ))
    }
}

impl Exec {
    /// `Ok` if the caller is an operator or admin; a 403 for `what`
    /// otherwise (for what the server owns rather than the executor:
    /// durable channels, metrics).
    pub(crate) fn need_operator(&self, what: &str) -> Result<(), ApiError> {
        Ok(self.1.check_operator(what)?)
    }

    /// `Ok` if the caller is an admin; a 403 for `what` otherwise (for
    /// what reaches the server's machine: backups).
    pub(crate) fn need_admin(&self, what: &str) -> Result<(), ApiError> {
        Ok(self.1.check_admin(what)?)
    }
}

/// The raw bytes of a body, a failure to read them (too large, cut off)
/// as an API error.
async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, state).await.map_err(|e| {
        let status = e.status();
        ApiError {
            status,
            code: if status == StatusCode::PAYLOAD_TOO_LARGE {
                "too_large"
            } else {
                "bad_request"
            },
            message: e.body_text(),
        }
    })
}

/// `bytes` as JSON for `T`, with a 400 that says what is wrong.
fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::bad_request(format!(
            "the request body is not valid JSON for this call: {e}"
        ))
    })
}

/// `bytes` as a JSON object for `T` (a struct would otherwise also read
/// from an array of its fields in order: found by the API fuzzer).
fn parse_object<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let value: serde_json::Value = parse_json(bytes)?;
    if !value.is_object() {
        return Err(ApiError::bad_request(format!(
            "the request body must be a JSON object, not {}",
            kind_of(&value)
        )));
    }
    let first = match T::deserialize(&value) {
        Ok(t) => return Ok(t),
        Err(e) => e,
    };
    // JSON has one kind of number: `10.0` is the integer 10 to JSON
    // Schema (and to the OpenAPI document), so a body that is refused only
    // because an integer field was written with a fraction of zero is read
    // again with such numbers as integers (only on this second try, so
    // the numbers of a body that reads as sent are kept as sent).
    let mut value = value;
    if acts::whole_numbers_as_integers(&mut value)
        && let Ok(t) = T::deserialize(&value)
    {
        return Ok(t);
    }
    Err(ApiError::bad_request(format!(
        "the request body is not valid JSON for this call: {first}"
    )))
}

fn kind_of(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// A JSON object request body (whatever its content type says; the
/// guard has already refused what a browser form could send).
pub(crate) struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        Ok(Body(parse_object(&body_bytes(req, state).await?)?))
    }
}

/// A JSON object request body that may be absent (or `null`): then
/// `T::default()` (no options).
pub(crate) struct OptionalBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for OptionalBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = body_bytes(req, state).await?;
        if bytes.is_empty() || bytes.trim_ascii() == b"null" {
            return Ok(OptionalBody(T::default()));
        }
        Ok(OptionalBody(parse_object(&bytes)?))
    }
}

/// A payload: any JSON value, or none (`null`).
pub(crate) struct Payload(pub serde_json::Value);

impl<S: Send + Sync> FromRequest<S> for Payload {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = body_bytes(req, state).await?;
        if bytes.is_empty() {
            return Ok(Payload(serde_json::Value::Null));
        }
        Ok(Payload(parse_json(&bytes)?))
    }
}

/// A text body (a model, as YAML or JSON): UTF-8 or a 400.
pub(crate) struct Text(pub String);

impl<S: Send + Sync> FromRequest<S> for Text {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = body_bytes(req, state).await?;
        String::from_utf8(bytes.into())
            .map(Text)
            .map_err(|_| ApiError::bad_request("the model must be UTF-8 text (YAML or JSON)"))
    }
}

/// Path parameters, with a 400 in the API's error body naming the one
/// that is wrong (axum's own rejection is plain text).
pub(crate) struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(p)| Path(p))
            .map_err(|e| ApiError::bad_request(e.body_text()))
    }
}

/// Query parameters, with a 400 naming the parameter that is wrong.
pub(crate) struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(q)| Params(q))
            .map_err(|e| ApiError::bad_request(e.body_text()))
    }
}

/// Whether a query also counts its matches (`?count=true`).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct CountParam {
    /// Also count every match (`total`; operator).
    #[serde(default)]
    count: bool,
}

impl CountParam {
    /// The number of matches from `count` when asked for, else `None`.
    pub(crate) async fn total<F>(
        &self,
        count: impl FnOnce() -> F,
    ) -> Result<Option<usize>, ApiError>
    where
        F: std::future::Future<Output = Result<usize, acts::EngineError>>,
    {
        Ok(match self.count {
            true => Some(count().await?),
            false => None,
        })
    }
}
