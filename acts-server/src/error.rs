//! [`ApiError`]: every failure of a request as `{"error": {"code",
//! "message"}}` with the status a client can act on; [`ErrorBody`] and
//! [`Errors`] describe it in the OpenAPI document.

use acts::ActionError;
use acts::EngineError;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::{IntoResponses, ToSchema};

/// What a handler returns.
pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// A request that failed: its status, a stable machine-readable code and a
/// message for people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable code (`not_found`, `bad_request`, `conflict`, ...).
    pub code: &'static str,
    /// What went wrong, for people.
    pub message: String,
}

impl ApiError {
    /// A 400 with `message`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            code: "bad_request",
            message: message.into(),
        }
    }

    /// A 401 with `message`.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            code: "unauthorized",
            message: message.into(),
        }
    }

    /// A 404 with `message`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            code: "not_found",
            message: message.into(),
        }
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        let (status, code) = match &e {
            EngineError::Model(_) => (StatusCode::BAD_REQUEST, "bad_model"),
            EngineError::Query(_) => (StatusCode::BAD_REQUEST, "bad_query"),
            EngineError::BadPid { .. } | EngineError::Inputs { .. } => {
                (StatusCode::BAD_REQUEST, "bad_request")
            }
            EngineError::Package(_) | EngineError::Script(_) | EngineError::Trigger { .. } => {
                (StatusCode::BAD_REQUEST, "bad_request")
            }
            EngineError::ModelNotFound(_)
            | EngineError::TriggerNotFound(_)
            | EngineError::VersionNotFound { .. }
            | EngineError::ProcessNotFound(_)
            | EngineError::BulkJobNotFound(_)
            | EngineError::TaskNotFound { .. }
            | EngineError::DeliveryNotFound { .. }
            | EngineError::Removed(_) => (StatusCode::NOT_FOUND, "not_found"),
            EngineError::Duplicated(_) => (StatusCode::CONFLICT, "duplicated"),
            EngineError::VersionInUse { .. } => (StatusCode::CONFLICT, "version_in_use"),
            // Its key's slots are taken: try again when one frees.
            EngineError::KeyBusy { .. }
            | EngineError::BulkJobRunning(_)
            | EngineError::BulkJobExists(_)
            | EngineError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            EngineError::Denied { .. } | EngineError::Action(ActionError::Denied { .. }) => {
                (StatusCode::FORBIDDEN, "forbidden")
            }
            EngineError::Action(ActionError::UnknownTask { .. }) => {
                (StatusCode::NOT_FOUND, "not_found")
            }
            EngineError::Action(
                ActionError::BadOptions { .. } | ActionError::MissingOption { .. },
            ) => (StatusCode::BAD_REQUEST, "bad_request"),
            // An action the task's state does not allow (or an unknown
            // one, refused before this point).
            EngineError::Action(_) | EngineError::Channel(_) => (StatusCode::CONFLICT, "conflict"),
            EngineError::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            EngineError::Store(_) | EngineError::Commit { .. } | EngineError::Busy { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
            }
            EngineError::Closed => (StatusCode::SERVICE_UNAVAILABLE, "closing"),
            EngineError::Fenced(_) | EngineError::LeaseHeld { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "not_owner")
            }
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        Self {
            status,
            code,
            message: e.to_string(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
            },
        };
        (self.status, Json(body)).into_response()
    }
}

/// Every `code` an error body may carry (the OpenAPI document lists them;
/// the contract tests check each error they meet against the list).
pub(crate) const ERROR_CODES: [&str; 19] = [
    "bad_model",
    "bad_query",
    "bad_request",
    "unauthorized",
    "forbidden",
    "forbidden_host",
    "forbidden_origin",
    "not_found",
    "duplicated",
    "version_in_use",
    "conflict",
    "too_large",
    "unsupported_media_type",
    "too_many_streams",
    "not_supported",
    "unavailable",
    "closing",
    "not_owner",
    "internal",
];

/// The body of every failed request.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"error": {"code": "not_found", "message": "cannot find process 'p9'"}}))]
pub(crate) struct ErrorBody {
    /// What went wrong.
    error: ErrorDetail,
}

/// A failure: a stable code and a message for people.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorDetail {
    /// A stable, machine-readable code.
    #[schema(schema_with = error_code_schema)]
    code: String,
    /// What went wrong, for people (it says what would work).
    message: String,
}

fn error_code_schema() -> impl Into<RefOr<Schema>> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(ERROR_CODES))
        .description(Some("A stable, machine-readable code."))
}

/// The failures any call may answer with (each with an [`ErrorBody`]).
#[derive(IntoResponses)]
#[allow(dead_code)]
pub(crate) enum Errors {
    /// A body, a parameter or a model that is not what the call takes.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// Tokens are configured and the request has none, or one the server
    /// does not know.
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// The caller's roles do not allow the call, or the request comes
    /// from a host or a web page the server does not serve.
    #[response(status = 403)]
    Forbidden(ErrorBody),
    /// No such model, process, task, delivery or endpoint.
    #[response(status = 404)]
    NotFound(ErrorBody),
    /// The state does not allow the call (a duplicated pid, an action the
    /// task's state refuses, a version in use).
    #[response(status = 409)]
    Conflict(ErrorBody),
    /// A body over the limit.
    #[response(status = 413)]
    TooLarge(ErrorBody),
    /// A body whose `Content-Type` the call does not take.
    #[response(status = 415)]
    UnsupportedMediaType(ErrorBody),
    /// More open streams than allowed.
    #[response(status = 429)]
    TooManyStreams(ErrorBody),
    /// The engine failed in a way it did not expect.
    #[response(status = 500)]
    Internal(ErrorBody),
    /// The store cannot answer, or the engine is stopping.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}
