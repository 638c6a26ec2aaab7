//! [`Failure`]: an error of a command with the exit code it maps to.

use acts::EngineError;

/// A failure with the exit code it maps to.
#[derive(Debug)]
pub(crate) struct Failure {
    /// The exit code.
    pub(crate) code: u8,
    /// What to print.
    pub(crate) message: String,
}

impl Failure {
    /// Bad input (exit 2).
    pub(crate) fn input(message: impl Into<String>) -> Self {
        Self {
            code: 2,
            message: message.into(),
        }
    }

    /// A failure of the run (exit 1).
    pub(crate) fn run(message: impl Into<String>) -> Self {
        Self {
            code: 1,
            message: message.into(),
        }
    }

    /// Stopped by Ctrl-C (exit 130).
    pub(crate) fn stopped() -> Self {
        Self::stopped_saying("stopped; the store keeps every process: `acts resume` continues them")
    }

    /// Stopped by Ctrl-C (exit 130), saying what is left and what to do.
    pub(crate) fn stopped_saying(message: &str) -> Self {
        Self {
            code: 130,
            message: message.into(),
        }
    }

    /// An engine error: a damaged store is bad input (exit 2: no retry
    /// helps), anything else a failure of the run.
    pub(crate) fn engine(e: EngineError) -> Self {
        if e.is_damaged_store() {
            Self::input(e.to_string())
        } else {
            Self::run(e.to_string())
        }
    }

    /// An executor error as a failure: the caller's mistakes are bad input.
    pub(crate) fn action(e: EngineError) -> Failure {
        match e {
            EngineError::Action(_)
            | EngineError::ProcessNotFound(_)
            | EngineError::BulkJobNotFound(_)
            | EngineError::BulkJobRunning(_)
            | EngineError::BulkJobExists(_)
            | EngineError::TaskNotFound { .. }
            | EngineError::ModelNotFound(_)
            | EngineError::TriggerNotFound(_)
            | EngineError::Inputs { .. }
            | EngineError::BadPid { .. }
            | EngineError::TooLarge { .. }
            | EngineError::Duplicated(_)
            | EngineError::VersionNotFound { .. }
            | EngineError::VersionInUse { .. }
            | EngineError::Query(_)
            | EngineError::Conflict(_) => Failure::input(e.to_string()),
            other => Failure::engine(other),
        }
    }
}
