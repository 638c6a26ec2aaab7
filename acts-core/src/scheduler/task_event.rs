//! [`TaskEvent`]: one entry of a task's history.

use super::TaskState;

/// One action applied to a task, and who applied it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskEvent {
    /// The action's wire name (`next`, `submit`, `abort`, `push`, ...).
    pub action: String,
    /// The principal who applied it (`None`: the embedding application
    /// itself, through an executor without a principal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// When (ms since the epoch on the engine's clock).
    pub at: i64,
    /// The process's state before an operator control (`pause`,
    /// `resume`, `terminate`), recorded on the root task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<TaskState>,
    /// What the operator gave with it (a reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}
