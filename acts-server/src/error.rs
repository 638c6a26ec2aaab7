//! [`ApiError`]: every failure of a request as `{"error": {"code",
//! "message"}}` with the status a client can act on.

use acts::ActionError;
use acts::EngineError;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

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
            | EngineError::VersionNotFound { .. }
            | EngineError::ProcessNotFound(_)
            | EngineError::TaskNotFound { .. }
            | EngineError::DeliveryNotFound { .. }
            | EngineError::Removed(_) => (StatusCode::NOT_FOUND, "not_found"),
            EngineError::Duplicated(_) => (StatusCode::CONFLICT, "duplicated"),
            EngineError::VersionInUse { .. } => (StatusCode::CONFLICT, "version_in_use"),
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
        let body = Json(json!({"error": {"code": self.code, "message": self.message}}));
        (self.status, body).into_response()
    }
}
