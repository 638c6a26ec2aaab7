//! The words of bulk jobs shared by the rows and the API: where a job
//! stands ([`BulkState`]) and what it did to one process
//! ([`BulkOutcome`]).

use serde::{Deserialize, Serialize};

/// Where a bulk job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum BulkState {
    /// Working through its processes (also after a restart: it goes on
    /// where it was).
    Running,
    /// Every matching process was handled.
    Done,
    /// Stopped by an operator; what it did stays done.
    Cancelled,
    /// Stopped because it could not go on (its query no longer reads).
    Failed,
}

impl BulkState {
    /// The state's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            BulkState::Running => "running",
            BulkState::Done => "done",
            BulkState::Cancelled => "cancelled",
            BulkState::Failed => "failed",
        }
    }

    /// Whether the job has stopped for good.
    pub fn is_final(self) -> bool {
        self != BulkState::Running
    }
}

/// What a bulk job did to one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum BulkOutcome {
    /// The action was applied (in the same batch as this record).
    Done,
    /// The process refused the action or no longer matched (e.g. a retry
    /// of a process that is no longer in error, a removed process);
    /// nothing changed.
    Skipped,
    /// The action could not be applied (e.g. the engine stayed at its
    /// admission cap); nothing changed.
    Failed,
}

impl BulkOutcome {
    /// The outcome's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            BulkOutcome::Done => "done",
            BulkOutcome::Skipped => "skipped",
            BulkOutcome::Failed => "failed",
        }
    }
}
