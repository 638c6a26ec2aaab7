//! What every action takes and answers: the caller and its options
//! ([`Call`]), and why an action was not done ([`Refusal`]).
//!
//! May use: the facade `acts`, the server's error type, the room's `acks`.

use acts::{Engine, Executor, Principal, Vars};
use serde_json::Value;

use crate::error::ApiError;

/// Why an action was not done.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    /// A name neither the reference nor acts knows.
    #[error("not found action '{0}'")]
    NotFound(String),
    /// A name of the reference's table acts does not support, and why.
    #[error("action '{name}' is not supported by acts: {why}")]
    Unsupported {
        /// The action.
        name: String,
        /// Why, and what to use instead.
        why: &'static str,
    },
    /// Missing or malformed options.
    #[error("{0}")]
    Invalid(String),
    /// The engine's answer (not found, denied, unavailable, ...).
    #[error(transparent)]
    Api(#[from] ApiError),
}

impl Refusal {
    /// As the HTTP API's error (404, 501, 400, or the engine's).
    pub(crate) fn into_api(self) -> ApiError {
        let (status, code) = match &self {
            Self::NotFound(_) => (axum::http::StatusCode::NOT_FOUND, "not_found"),
            Self::Unsupported { .. } => (axum::http::StatusCode::NOT_IMPLEMENTED, "not_supported"),
            Self::Invalid(_) => (axum::http::StatusCode::BAD_REQUEST, "bad_request"),
            Self::Api(e) => return e.clone(),
        };
        ApiError {
            status,
            code,
            message: self.to_string(),
        }
    }
}

impl From<acts::EngineError> for Refusal {
    fn from(e: acts::EngineError) -> Self {
        Self::Api(e.into())
    }
}

/// What an action answers.
pub(crate) type Answer = Result<Value, Refusal>;

/// Who asks, and the engine they ask.
pub(crate) struct Call {
    pub(crate) engine: Engine,
    pub(crate) exec: Executor,
    pub(crate) who: Principal,
    pub(crate) options: Vars,
    /// Where a gRPC server's acks go behind the answer (`None`: an ack
    /// is answered once it is stored).
    pub(crate) acks: Option<std::sync::Arc<super::acks::Acks>>,
}

impl Call {
    /// Takes required string option `key` ("`key` is required", as the
    /// reference says).
    pub(crate) fn need(&mut self, key: &str) -> Result<String, Refusal> {
        match self.options.remove(key) {
            Some(Value::String(s)) => Ok(s),
            Some(Value::Number(n)) => Ok(n.to_string()),
            Some(other) => Err(Refusal::Invalid(format!(
                "{key} must be a string, got {other}"
            ))),
            None => Err(Refusal::Invalid(format!("{key} is required"))),
        }
    }

    /// Takes optional string option `key`.
    pub(crate) fn take(&mut self, key: &str) -> Result<Option<String>, Refusal> {
        match self.options.get(key) {
            None | Some(Value::Null) => Ok(None),
            _ => self.need(key).map(Some),
        }
    }

    /// `Ok` if the caller is an operator or admin.
    pub(crate) fn need_operator(&self, what: &str) -> Result<(), Refusal> {
        self.who
            .check_operator(what)
            .map_err(|e| Refusal::Api(e.into()))
    }
}
