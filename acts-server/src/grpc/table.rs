//! The reference's action table: every name `Send` answers, what each
//! takes, and the one dispatch from a name to acts' executor (in
//! `work.rs`, `catalog.rs`, `delivery.rs`). A name acts does not support
//! is refused by name with the reason; a name the reference does not
//! know is `NotFound`, as there.
//!
//! May use: the facade `acts`, the server's error type, the module's
//! shapes and listings.

use acts::{Engine, Executor, Principal, Vars};
use serde_json::Value;

use crate::error::ApiError;

/// Every action name of the acts 0.25 table (39), in its order.
pub const ACTIONS: [&str; 39] = [
    "act:abort",
    "act:back",
    "act:cancel",
    "act:complete",
    "act:error",
    "act:push",
    "act:remove",
    "act:skip",
    "act:submit",
    "evt:get",
    "evt:ls",
    "evt:start",
    "model:deploy",
    "model:get",
    "model:ls",
    "model:rm",
    "msg:ack",
    "msg:clear",
    "msg:get",
    "msg:ls",
    "msg:redo",
    "msg:rm",
    "msg:sub",
    "msg:unsub",
    "pack:get",
    "pack:ls",
    "pack:publish",
    "pack:rm",
    "proc:get",
    "proc:ls",
    "proc:start",
    "proc:start_from_model",
    "snap:get",
    "snap:ls",
    "snap:remove",
    "snap:upsert",
    "task:get",
    "task:ls",
    "acl:whoami",
];

/// Our extensions beside the reference's names (documented in
/// `docs/COMPATIBILITY.md`).
pub const EXTENSIONS: [&str; 1] = ["act:set_vars"];

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

/// Applies action `name` for `call.who`.
pub(crate) async fn apply(name: &str, call: Call) -> Answer {
    match name.split_once(':') {
        Some(("act", _)) => super::work::act(name, call).await,
        Some(("proc" | "task", _)) => super::work::apply(name, call).await,
        Some(("model" | "pack" | "evt", _)) => super::catalog::apply(name, call).await,
        Some(("msg" | "snap", _)) => super::delivery::apply(name, call).await,
        _ if name == "acl:whoami" => Ok(serde_json::json!({
            "subject": call.who.id,
            "roles": call.who.roles,
            "unrestricted": call.who.is_admin(),
        })),
        _ => Err(Refusal::NotFound(name.to_owned())),
    }
}
