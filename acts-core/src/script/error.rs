//! [`ScriptError`]: why a script failed.

use std::time::Duration;

/// A script that could not be evaluated. Every variant names the script
/// (its first 80 characters) so the failing task's error says which one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScriptError {
    /// The script threw (a syntax error, a reference to an unknown name, an
    /// explicit `throw`).
    #[error("script `{script}` failed: {message}")]
    Exception {
        /// The exception's message.
        message: String,
        /// The script.
        script: String,
    },
    /// The script ran past its time limit and was stopped.
    #[error("script `{script}` was stopped after {limit:?}: it ran too long (an endless loop?)")]
    Timeout {
        /// The script.
        script: String,
        /// The limit it hit.
        limit: Duration,
    },
    /// The script allocated past its memory limit and was stopped.
    #[error("script `{script}` was stopped: it used more memory than allowed")]
    OutOfMemory {
        /// The script.
        script: String,
    },
    /// A condition (`if`, `while`) did not produce a boolean.
    #[error("condition `{script}` must give true or false, got {value}")]
    NotBoolean {
        /// The condition.
        script: String,
        /// What it gave, as JSON.
        value: String,
    },
    /// The JavaScript runtime could not be created or used.
    #[error("script runtime error: {0}")]
    Setup(String),
}
