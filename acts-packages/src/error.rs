//! The error a configuration that cannot be run is.

/// A configuration that cannot be run: a bound out of range, a pattern that
/// does not compile, a client that cannot be built. Reported at start, never
/// when the first act runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{section}.{key}: {message}")]
pub struct ConfigError {
    /// The section (`http` or `shell`).
    pub section: &'static str,
    /// The key at fault.
    pub key: &'static str,
    /// What is wrong and what is accepted.
    pub message: String,
}

impl ConfigError {
    pub(crate) fn new(
        section: &'static str,
        key: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            section,
            key,
            message: message.into(),
        }
    }
}
