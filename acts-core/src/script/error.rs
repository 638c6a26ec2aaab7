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
    /// The script's result was a promise that was rejected (`return
    /// Promise.reject(..)`, an `async` function that threw).
    #[error("script `{script}` failed: its promise was rejected: {message}")]
    Rejected {
        /// The rejection reason's message.
        message: String,
        /// The script.
        script: String,
    },
    /// The script's result was a promise that can never settle (nothing
    /// left to run would resolve or reject it).
    #[error("script `{script}` failed: its promise never settled")]
    Unsettled {
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
    /// The script is not valid JavaScript (found before it runs).
    #[error("`{script}` is not valid JavaScript: {message}")]
    Syntax {
        /// The parser's message.
        message: String,
        /// The script.
        script: String,
    },
    /// The JavaScript runtime could not be created or used.
    #[error("script runtime error: {0}")]
    Setup(String),
}

impl ScriptError {
    /// Whether this failure is more than an expression that threw: a limit
    /// hit, a promise that failed, or a broken runtime. Such a failure
    /// fails the task even inside `${{ }}`, where a plain exception (e.g. an
    /// undefined name) only gives `null`.
    pub fn is_hard(&self) -> bool {
        !matches!(self, Self::Exception { .. } | Self::NotBoolean { .. })
    }
}
