//! [`Message`]: what clients are told when a task changes state.

use serde::{Deserialize, Serialize};

use crate::model::{NodeKind, Vars};

use super::state::TaskState;

/// The state a message reports: waiting states are all `created`.
pub fn message_state(state: TaskState) -> &'static str {
    match state {
        TaskState::Ready | TaskState::Pending | TaskState::Running | TaskState::Interrupt => {
            "created"
        }
        other => other.as_str(),
    }
}

/// One client-visible state change of a task.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Message {
    /// Stable message id (clients de-duplicate re-sent messages by it).
    #[serde(default)]
    pub id: String,
    /// The model the process runs.
    #[serde(default)]
    pub model_id: String,
    /// `workflow`, `step`, `branch` or `act`.
    pub r#type: String,
    /// `created`, `completed`, `error`, ... (see [`message_state`]).
    pub state: String,
    /// Process id.
    pub pid: String,
    /// Task id.
    pub tid: String,
    /// Node id.
    pub nid: String,
    /// Node name.
    pub name: String,
    /// Package id, for acts and `uses` steps.
    pub uses: Option<String>,
    /// `params.key` of an act, if any (how clients tell irqs apart).
    pub key: Option<String>,
    /// The act's evaluated params.
    pub params: serde_json::Value,
    /// The task's outputs when it finished.
    pub outputs: Vars,
    /// The task's inputs: its data when it was created or interrupted
    /// (what an irq's client needs to decide).
    #[serde(default)]
    pub inputs: Vars,
    /// The error of a failed task: `ecode` and `message`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub err: Option<(String, String)>,
    /// When it happened (ms on the engine clock).
    #[serde(default)]
    pub time: i64,
}

impl Message {
    /// The node kind as a message type.
    pub fn type_of(kind: NodeKind) -> &'static str {
        match kind {
            NodeKind::Workflow => "workflow",
            NodeKind::Step => "step",
            NodeKind::Branch => "branch",
            NodeKind::Act | NodeKind::Trigger => "act",
        }
    }

    /// `"<type>/<state>"`, the short form tests compare sequences with.
    pub fn short(&self) -> String {
        format!("{}/{}", self.r#type, self.state)
    }
}
