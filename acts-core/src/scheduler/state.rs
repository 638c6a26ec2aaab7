//! [`TaskState`]: the states of a task (and of a process), with the
//! reference engine's names and groupings.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The state of a task or process.
///
/// | state | terminal | business success | "created" group |
/// |---|---|---|---|
/// | `none` | | | |
/// | `ready`, `pending`, `interrupted` | | | yes |
/// | `running` | | | |
/// | `completed`, `submitted`, `backed`, `cancelled`, `removed` | yes | yes | |
/// | `error`, `aborted`, `skipped` | yes | | |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum TaskState {
    /// Not initialised yet (a parked process's root).
    #[default]
    None,
    /// Initialised, about to run.
    Ready,
    /// Waiting for a condition (a branch's `needs`, an `else` branch).
    Pending,
    /// Running: its children or its package are at work.
    Running,
    /// Waiting for a client action (an irq act).
    #[serde(rename = "interrupted")]
    Interrupt,
    /// Finished successfully.
    Completed,
    /// Finished by a `submit` action.
    Submitted,
    /// Finished by a `back` action (the flow went back to an earlier step).
    Backed,
    /// Undone by a `cancel` action.
    Cancelled,
    /// Failed.
    Error,
    /// Aborted by an `abort` action (or an aborted descendant).
    Aborted,
    /// Skipped (a false condition, a `skip` action, an unused branch).
    Skipped,
    /// Removed by a `remove` action.
    Removed,
}

impl TaskState {
    /// Every state, in declaration order.
    pub const ALL: [TaskState; 13] = [
        TaskState::None,
        TaskState::Ready,
        TaskState::Pending,
        TaskState::Running,
        TaskState::Interrupt,
        TaskState::Completed,
        TaskState::Submitted,
        TaskState::Backed,
        TaskState::Cancelled,
        TaskState::Error,
        TaskState::Aborted,
        TaskState::Skipped,
        TaskState::Removed,
    ];

    /// The wire name (`interrupted` for [`TaskState::Interrupt`]).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::None => "none",
            TaskState::Ready => "ready",
            TaskState::Pending => "pending",
            TaskState::Running => "running",
            TaskState::Interrupt => "interrupted",
            TaskState::Completed => "completed",
            TaskState::Submitted => "submitted",
            TaskState::Backed => "backed",
            TaskState::Cancelled => "cancelled",
            TaskState::Error => "error",
            TaskState::Aborted => "aborted",
            TaskState::Skipped => "skipped",
            TaskState::Removed => "removed",
        }
    }

    /// Whether the state is final: a task in it never changes again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed
                | TaskState::Submitted
                | TaskState::Backed
                | TaskState::Cancelled
                | TaskState::Error
                | TaskState::Aborted
                | TaskState::Skipped
                | TaskState::Removed
        )
    }

    /// Whether the state is a final business success (the flow goes on).
    pub fn is_success(self) -> bool {
        matches!(
            self,
            TaskState::Completed
                | TaskState::Submitted
                | TaskState::Backed
                | TaskState::Cancelled
                | TaskState::Removed
        )
    }

    /// Whether the state is reported to clients as "created" (the task is
    /// waiting or about to run).
    pub fn is_created(self) -> bool {
        matches!(
            self,
            TaskState::Ready | TaskState::Pending | TaskState::Interrupt
        )
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TaskState {
    type Err = std::convert::Infallible;

    /// Parses a wire name; unknown names are [`TaskState::None`], as in the
    /// reference engine (rows from newer versions stay readable).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(TaskState::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .unwrap_or(TaskState::None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_is_none() {
        for state in TaskState::ALL {
            assert_eq!(state.as_str().parse::<TaskState>(), Ok(state));
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{}\"", state.as_str()));
        }
        assert_eq!("paused".parse::<TaskState>(), Ok(TaskState::None));
    }

    #[test]
    fn groupings_match_the_reference_table() {
        let terminal: Vec<_> = TaskState::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(terminal.len(), 8);
        assert!(
            TaskState::ALL
                .into_iter()
                .all(|s| !s.is_success() || s.is_terminal())
        );
        assert!(
            !TaskState::Error.is_success()
                && !TaskState::Skipped.is_success()
                && !TaskState::Aborted.is_success()
        );
        let created: Vec<_> = TaskState::ALL
            .into_iter()
            .filter(|s| s.is_created())
            .collect();
        assert_eq!(
            created,
            vec![TaskState::Ready, TaskState::Pending, TaskState::Interrupt]
        );
    }
}
