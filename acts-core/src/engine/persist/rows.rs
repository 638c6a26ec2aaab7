//! The engine's row types, one [`Row`] per collection.
//!
//! - [`ModelRow`]: a deployed model (its JSON text).
//! - [`ProcRow`]: a process — state, times, environment and the dynamic
//!   nodes of its tree. A row in state `none` is *parked*: stored, not yet
//!   started (its start options wait in `start_vars`).
//! - [`TaskRow`]: a task's lifecycle (state, flags, links, times) — never
//!   its data.
//! - [`VarsRow`]: one task's data scope, written only when that scope
//!   changed.
//! - [`OpRow`]: outbox records of effects on *other* processes (the return
//!   of a subflow child to its parent act), written in the batch of the
//!   transition that caused them and deleted in the batch that applied them.

use serde::{Deserialize, Serialize};

use crate::durable::{IndexValue, Row};
use crate::model::Vars;
use crate::scheduler::TaskState;
use crate::tree::NodeData;

/// A deployed model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRow {
    /// Model id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Version.
    pub ver: String,
    /// The model as JSON (what a process of it is built from).
    pub model: String,
    /// When it was (last) deployed, ms on the engine clock.
    pub deployed_at: i64,
    /// How many times it was deployed.
    pub revision: u32,
}

impl Row for ModelRow {
    const COLLECTION: &'static str = "models";
    const VERSION: u32 = 1;
    const INDEXED: &'static [&'static str] = &["deployed_at"];

    fn id(&self) -> String {
        self.id.clone()
    }

    fn index_values(&self) -> Vec<IndexValue> {
        vec![IndexValue::Int(self.deployed_at)]
    }
}

/// A process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcRow {
    /// Process id.
    pub id: String,
    /// Model id.
    pub mid: String,
    /// The model as deployed when the process started (JSON), so a later
    /// deploy does not change a running process.
    pub model: String,
    /// State (the root task's; `none` while parked).
    pub state: TaskState,
    /// Admission order (ms on the engine clock): parked rows start oldest
    /// first, in-flight rows resume oldest first.
    pub timestamp: i64,
    /// When it started (0 while parked).
    pub start_time: i64,
    /// When it finished (0 while running).
    pub end_time: i64,
    /// The process environment (`$env`).
    pub env: Vars,
    /// Start options (root data) of a parked process.
    #[serde(default, skip_serializing_if = "Vars::is_empty")]
    pub start_vars: Vars,
    /// The error the process ended with: `(ecode, message)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub err: Option<(String, String)>,
    /// The dynamic nodes of its tree, in creation order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeData>,
    /// The jobs queued when its last transition handed back with work left
    /// (`e:<tid>`/`n:<tid>`; empty when it ran to a wait).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<String>,
}

impl ProcRow {
    /// The state as stored in the index.
    pub fn state_key(state: TaskState) -> &'static str {
        state.as_str()
    }
}

impl Row for ProcRow {
    const COLLECTION: &'static str = "procs";
    const VERSION: u32 = 1;
    const INDEXED: &'static [&'static str] = &["state", "mid", "timestamp"];

    fn id(&self) -> String {
        self.id.clone()
    }

    fn index_values(&self) -> Vec<IndexValue> {
        vec![
            IndexValue::Str(Self::state_key(self.state).to_owned()),
            IndexValue::Str(self.mid.clone()),
            IndexValue::Int(self.timestamp),
        ]
    }
}

/// A task's lifecycle row (its data lives in a [`VarsRow`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRow {
    /// Process id.
    pub pid: String,
    /// Task id.
    pub tid: String,
    /// Creation order within the process (links refer to it).
    pub seq: u32,
    /// Node id.
    pub nid: String,
    /// The enclosing task (by `seq`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u32>,
    /// The task this one follows (by `seq`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev: Option<u32>,
    /// State.
    pub state: TaskState,
    /// Scheduling flags.
    pub sign: u32,
    /// Error `(ecode, message)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub err: Option<(String, String)>,
    /// Start time (ms).
    pub start_time: i64,
    /// End time (ms, 0 while not terminal).
    pub end_time: i64,
}

/// The id prefix of every task and scope row of process `pid`.
pub fn process_rows_prefix(pid: &str) -> String {
    format!("{pid}/")
}

/// The row id of task `tid` of process `pid`.
pub fn task_row_id(pid: &str, tid: &str) -> String {
    format!("{pid}/{tid}")
}

/// Task and scope rows are read per process by their id prefix `<pid>/`
/// (pids contain no `/`), so they need no secondary index.
impl Row for TaskRow {
    const COLLECTION: &'static str = "tasks";
    const VERSION: u32 = 1;
    const INDEXED: &'static [&'static str] = &[];

    fn id(&self) -> String {
        task_row_id(&self.pid, &self.tid)
    }

    fn index_values(&self) -> Vec<IndexValue> {
        Vec::new()
    }
}

/// One task's data scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VarsRow {
    /// Process id.
    pub pid: String,
    /// Task id.
    pub tid: String,
    /// The data.
    pub data: Vars,
}

impl Row for VarsRow {
    const COLLECTION: &'static str = "vars";
    const VERSION: u32 = 1;
    const INDEXED: &'static [&'static str] = &[];

    fn id(&self) -> String {
        task_row_id(&self.pid, &self.tid)
    }

    fn index_values(&self) -> Vec<IndexValue> {
        Vec::new()
    }
}

/// An outbox record: an action to apply to another process's act.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpRow {
    /// Record id.
    pub id: String,
    /// The process that wrote it.
    pub from_pid: String,
    /// The process to act on.
    pub pid: String,
    /// Its act task.
    pub tid: String,
    /// The action's wire name.
    pub action: String,
    /// The action's options.
    pub options: Vars,
    /// When it was written (ms); replayed oldest first.
    pub created_at: i64,
}

impl Row for OpRow {
    const COLLECTION: &'static str = "ops";
    const VERSION: u32 = 1;
    const INDEXED: &'static [&'static str] = &["created_at", "pid"];

    fn id(&self) -> String {
        self.id.clone()
    }

    fn index_values(&self) -> Vec<IndexValue> {
        vec![
            IndexValue::Int(self.created_at),
            IndexValue::Str(self.pid.clone()),
        ]
    }
}

/// A message a process emitted, kept while durable channels have not
/// settled its deliveries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageRow {
    /// The message id.
    pub id: String,
    /// Its process.
    pub pid: String,
    /// The message.
    pub message: crate::scheduler::Message,
}

impl Row for MessageRow {
    const COLLECTION: &'static str = "messages";
    const VERSION: u32 = 1;
    const INDEXED: &'static [&'static str] = &["pid"];

    fn id(&self) -> String {
        self.id.clone()
    }

    fn index_values(&self) -> Vec<IndexValue> {
        vec![IndexValue::Str(self.pid.clone())]
    }
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryState {
    /// Not acknowledged yet: re-sent on the retry timer.
    Pending,
    /// Acknowledged by the client.
    Acked,
    /// Given up after the last try (the dead-letter view).
    Failed,
    /// Settled without an ack: the message's task has ended since (an
    /// interrupt answered, an act finished), so re-sending it would be
    /// stale.
    Closed,
}

impl DeliveryState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Acked => "acked",
            DeliveryState::Failed => "failed",
            DeliveryState::Closed => "closed",
        }
    }
}

/// One message owed to one durable channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryRow {
    /// The channel id.
    pub channel: String,
    /// The message id.
    pub msg_id: String,
    /// The message's process.
    pub pid: String,
    /// The message's task.
    #[serde(default)]
    pub tid: String,
    /// Where it stands.
    pub state: DeliveryState,
    /// How many times it was sent.
    pub tries: u32,
    /// When it is re-sent next (ms on the engine clock).
    pub next_at: i64,
    /// When it was created (ms).
    pub created_at: i64,
    /// Creation order within the same millisecond (messages of one
    /// transition keep their order).
    #[serde(default)]
    pub seq: u64,
}

/// The row id of the delivery of message `msg_id` to channel `channel`.
pub fn delivery_row_id(channel: &str, msg_id: &str) -> String {
    format!("{channel}/{msg_id}")
}

impl Row for DeliveryRow {
    const COLLECTION: &'static str = "deliveries";
    const VERSION: u32 = 1;
    const INDEXED: &'static [&'static str] = &["channel", "pid", "state"];

    fn id(&self) -> String {
        delivery_row_id(&self.channel, &self.msg_id)
    }

    fn index_values(&self) -> Vec<IndexValue> {
        vec![
            IndexValue::Str(self.channel.clone()),
            IndexValue::Str(self.pid.clone()),
            IndexValue::Str(self.state.as_str().to_owned()),
        ]
    }
}

/// A durable channel's registration: its filters keep recording
/// deliveries while its client is away (e.g. across an engine restart).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelRow {
    /// The channel id.
    pub id: String,
    /// Its filters.
    pub options: crate::engine::filter::ChannelOptions,
}

impl Row for ChannelRow {
    const COLLECTION: &'static str = "channels";
    const VERSION: u32 = 1;
    const INDEXED: &'static [&'static str] = &[];

    fn id(&self) -> String {
        self.id.clone()
    }

    fn index_values(&self) -> Vec<IndexValue> {
        Vec::new()
    }
}

/// A model's trigger (`on:`), with the schedule state of cron triggers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRow {
    /// `<model id>:<trigger id>`.
    pub id: String,
    /// The model.
    pub mid: String,
    /// The trigger id.
    pub trigger: String,
    /// `manual`, `hook`, `schedule`, ...
    pub kind: String,
    /// Default start params.
    pub params: serde_json::Value,
    /// Cron expression (schedules).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// When it fires next (ms; 0: never).
    pub next_run: i64,
    /// When it last fired (ms; 0: never).
    pub last_run: i64,
}

impl Row for EventRow {
    const COLLECTION: &'static str = "events";
    const VERSION: u32 = 1;
    const INDEXED: &'static [&'static str] = &["kind", "mid"];

    fn id(&self) -> String {
        self.id.clone()
    }

    fn index_values(&self) -> Vec<IndexValue> {
        vec![
            IndexValue::Str(self.kind.clone()),
            IndexValue::Str(self.mid.clone()),
        ]
    }
}

/// A package the engine knows (built-in or registered by the
/// application), published at start so tools can list them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackageRow {
    /// The definition.
    pub package: crate::package::PackageDefinition,
    /// Whether it is built in.
    pub builtin: bool,
}

impl Row for PackageRow {
    const COLLECTION: &'static str = "packages";
    const VERSION: u32 = 1;
    const INDEXED: &'static [&'static str] = &[];

    fn id(&self) -> String {
        self.package.id.clone()
    }

    fn index_values(&self) -> Vec<IndexValue> {
        Vec::new()
    }
}
