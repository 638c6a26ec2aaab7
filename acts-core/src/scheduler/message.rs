//! [`Message`]: what clients are told when a task changes state.

use serde::{Deserialize, Serialize};

use crate::model::{NodeKind, Vars};

use super::state::TaskState;
use super::task_error::TaskError;

/// Declares a message enum: its variants with their wire names, `as_str`,
/// `Display`, `FromStr`, and comparison with the wire name (`m.state ==
/// "created"`).
macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $wire:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
        #[serde(rename_all = "lowercase")]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$vmeta])* $variant),*
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The wire name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire),*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, String> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| {
                        let known: Vec<&str> = Self::ALL.iter().map(|v| v.as_str()).collect();
                        format!("unknown {} '{s}' (known: {})", stringify!($name), known.join(", "))
                    })
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}

wire_enum! {
    /// What kind of node a message (or a task) is about.
    MessageType {
        /// The process itself (the model's root).
        #[default]
        Workflow => "workflow",
        /// A step.
        Step => "step",
        /// A branch of a step.
        Branch => "branch",
        /// An act (also a trigger's task).
        Act => "act",
    }
}

impl From<NodeKind> for MessageType {
    fn from(kind: NodeKind) -> Self {
        match kind {
            NodeKind::Workflow => MessageType::Workflow,
            NodeKind::Step => MessageType::Step,
            NodeKind::Branch => MessageType::Branch,
            NodeKind::Act | NodeKind::Trigger => MessageType::Act,
        }
    }
}

wire_enum! {
    /// The state a message reports: every waiting state is `created`.
    MessageState {
        /// Created, waiting or running (ready, pending, running,
        /// interrupted).
        #[default]
        Created => "created",
        /// Completed.
        Completed => "completed",
        /// Submitted.
        Submitted => "submitted",
        /// Went back to an earlier step.
        Backed => "backed",
        /// Withdrawn.
        Cancelled => "cancelled",
        /// Failed (see the message's `err`).
        Error => "error",
        /// Aborted.
        Aborted => "aborted",
        /// Skipped.
        Skipped => "skipped",
        /// Removed.
        Removed => "removed",
        /// (Workflow messages only.) The stuck detector found the process
        /// quiet — in flight with nothing to wait for — for longer than
        /// its threshold; `inputs.quiet_since` says since when.
        Stuck => "stuck",
        /// A step or act waiting at its gate (`concurrency:`, `rate:`):
        /// it runs (and is announced again) when its key lets it through.
        Pending => "pending",
    }
}

impl From<TaskState> for MessageState {
    fn from(state: TaskState) -> Self {
        match state {
            // A task is announced once it exists; `none` is a parked
            // process's root, which has not started yet.
            TaskState::None
            | TaskState::Ready
            | TaskState::Pending
            | TaskState::Running
            | TaskState::Interrupt => MessageState::Created,
            TaskState::Completed => MessageState::Completed,
            TaskState::Submitted => MessageState::Submitted,
            TaskState::Backed => MessageState::Backed,
            TaskState::Cancelled => MessageState::Cancelled,
            TaskState::Error => MessageState::Error,
            TaskState::Aborted => MessageState::Aborted,
            TaskState::Skipped => MessageState::Skipped,
            TaskState::Removed => MessageState::Removed,
        }
    }
}

/// Which messages anyone listens for, by type and state: a process builds
/// only those (building one copies the task's data, its params and the
/// model's summary). The engine derives it from its channels' `type` and
/// `state` filters — every message while a durable channel is registered,
/// since those settle deliveries by the messages of ending tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageInterest(u64);

// One bit per (type, state): 16 states per type fit a `u64`.
const _: () = assert!(MessageType::ALL.len() <= 4 && MessageState::ALL.len() <= 16);

impl MessageInterest {
    /// Every message.
    pub const ALL: Self = Self(u64::MAX);
    /// No message.
    pub const NONE: Self = Self(0);

    fn bit(t: MessageType, s: MessageState) -> u64 {
        1 << ((t as u32) * 16 + s as u32)
    }

    /// This interest, and messages of type `t` in state `s`.
    pub fn with(self, t: MessageType, s: MessageState) -> Self {
        Self(self.0 | Self::bit(t, s))
    }

    /// Both interests.
    pub fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Whether messages of type `t` in state `s` are wanted.
    pub fn wants(self, t: MessageType, s: MessageState) -> bool {
        self.0 & Self::bit(t, s) != 0
    }

    /// The raw bits (to keep in an atomic).
    pub fn bits(self) -> u64 {
        self.0
    }

    /// An interest from [`bits`](Self::bits).
    pub fn from_bits(bits: u64) -> Self {
        Self(bits)
    }
}

impl Default for MessageInterest {
    /// Every message (what a caller that does not know its listeners
    /// must assume).
    fn default() -> Self {
        Self::ALL
    }
}

/// One client-visible state change of a task.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Message {
    /// Stable message id (clients de-duplicate re-sent messages by it).
    #[serde(default)]
    pub id: String,
    /// The model the process runs.
    #[serde(default)]
    pub model_id: String,
    /// `workflow`, `step`, `branch` or `act`.
    pub r#type: MessageType,
    /// `created`, `completed`, `error`, ...
    pub state: MessageState,
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
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub outputs: Vars,
    /// The task's inputs: its data when it was created or interrupted
    /// (what an irq's client needs to decide).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    #[serde(default)]
    pub inputs: Vars,
    /// The error of a failed task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub err: Option<TaskError>,
    /// When it happened (ms on the engine clock).
    #[serde(default)]
    pub time: i64,
    /// When the task started (an interrupted act: when it interrupted).
    #[serde(default)]
    pub start_time: Option<i64>,
    /// When the task ended (`None` while it has not).
    #[serde(default)]
    pub end_time: Option<i64>,
}

impl Message {
    /// `"<type>/<state>"`, the short form tests compare sequences with.
    #[cfg(any(test, feature = "testing"))]
    pub fn short(&self) -> String {
        format!("{}/{}", self.r#type, self.state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip_and_serialize_as_lowercase_strings() {
        for t in MessageType::ALL {
            assert_eq!(t.as_str().parse::<MessageType>(), Ok(*t));
            assert_eq!(
                serde_json::to_value(t).ok(),
                Some(serde_json::json!(t.as_str()))
            );
        }
        for s in MessageState::ALL {
            assert_eq!(s.as_str().parse::<MessageState>(), Ok(*s));
            assert_eq!(
                serde_json::to_value(s).ok(),
                Some(serde_json::json!(s.as_str()))
            );
        }
        assert!("interrupted".parse::<MessageState>().is_err());
        assert_eq!(MessageState::from(TaskState::Interrupt), "created");
        assert_eq!(MessageState::from(TaskState::Error), MessageState::Error);
        assert_eq!(MessageType::from(NodeKind::Trigger), "act");
    }

    #[test]
    fn an_interest_holds_exactly_the_pairs_added() {
        let i = MessageInterest::NONE
            .with(MessageType::Workflow, MessageState::Completed)
            .with(MessageType::Act, MessageState::Stuck);
        for t in MessageType::ALL {
            for s in MessageState::ALL {
                let want = matches!(
                    (t, s),
                    (MessageType::Workflow, MessageState::Completed)
                        | (MessageType::Act, MessageState::Stuck)
                );
                assert_eq!(i.wants(*t, *s), want, "{t}/{s}");
                assert!(MessageInterest::ALL.wants(*t, *s));
                assert!(!MessageInterest::NONE.wants(*t, *s));
            }
        }
        assert_eq!(MessageInterest::from_bits(i.bits()), i);
        assert_eq!(MessageInterest::NONE.union(i), i);
        assert_eq!(MessageInterest::default(), MessageInterest::ALL);
    }
}
