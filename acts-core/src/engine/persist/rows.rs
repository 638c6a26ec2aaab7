//! The rows of processes and of the store's own facts, one [`Row`] per
//! collection (the rows of models, deliveries and triggers are beside
//! their row stores: `model_rows.rs`, `delivery_rows.rs`,
//! `trigger_rows.rs`).
//!
//! - [`ProcRow`]: a process — state, times, environment and the dynamic
//!   nodes of its tree. A row in state `none` is *parked*: stored, not yet
//!   started (its start options wait in `start_vars`).
//! - [`TaskRow`]: a task's lifecycle (state, flags, links, times) — never
//!   its data.
//! - [`VarsRow`]: one task's data scope, written only when that scope
//!   changed.
//! - [`NodeRow`]: one dynamic node of a process's tree, written once (not
//!   the shared act of a step's literal `uses`: its task implies it).
//! - [`OpRow`]: outbox records of effects on *other* processes (the return
//!   of a subflow child to its parent act), written in the batch of the
//!   transition that caused them and deleted in the batch that applied them.
//! - [`WakeRow`]: the timer index — what a restart must do for an
//!   in-flight process without loading it (arm its timer, resume it). A
//!   process that only waits for a client has none.
//! - [`MetaRow`]: facts about the store itself (e.g. that its wake index is
//!   complete).

use serde::{Deserialize, Serialize};

use crate::durable::{IndexValue, impl_row};
use crate::model::Vars;
use crate::scheduler::{TaskError, TaskState};
use crate::tree::NodeData;

pub use super::slot_rows::{ConcurrencySlot, QueueOrder};

/// A process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcRow {
    /// Process id.
    pub id: String,
    /// Model id.
    pub mid: String,
    /// The model version it runs ([`ModelVersionRow::revision`]): the one
    /// it started on, whatever is deployed later. 0 for a process stored
    /// before versions existed, which carries its model in `model`.
    #[serde(default)]
    pub rev: u32,
    /// The model JSON of a process stored before versions existed (empty
    /// since: the version row holds it, once for all its processes).
    #[serde(default, skip_serializing_if = "String::is_empty")]
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
    pub err: Option<TaskError>,
    /// The principal who started it (`None`: no principal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_by: Option<String>,
    /// Since when (ms) it has been *quiet* — in flight with nothing to
    /// wait for (see `Process::is_quiet`); the stuck detector reads the
    /// sparse `quiet` index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiet_since: Option<i64>,
    /// The values of the model's indexed variables as last stored (what
    /// its entries in the variable index say).
    #[serde(default, skip_serializing_if = "Vars::is_empty")]
    pub indexed: Vars,
    /// Set while an operator holds it paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<crate::scheduler::Pause>,
    /// The names its interrupts addressed (`user:<id>`, `role:<name>`),
    /// what a user's listing filters on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audience: Vec<String>,
    /// The dynamic nodes of its tree, in creation order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeData>,
    /// The jobs queued when its last transition handed back with work left
    /// (`e:<tid>`/`n:<tid>`; empty when it ran to a wait).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<String>,
    /// Its concurrency key and the limit it was started under (the
    /// model's `concurrency:`, evaluated at the start); kept for its whole
    /// life, so a restart counts the key's slots from the rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<ConcurrencySlot>,
    /// Its place in the queues of parked starts (the model's `priority:`
    /// and `fairness_key:`, evaluated at the start); `None`: the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<QueueOrder>,
    /// Its steps and acts that wait at their gates (`concurrency:`,
    /// `rate:`) or passed them and have not ended: what a restart counts
    /// their keys' slots and queues from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<crate::scheduler::GateUse>,
}

impl ProcRow {
    /// The `slot` index's value: its key while it is in flight (started,
    /// not ended) and has one; what a restart counts the key's holders by.
    fn slot_index(&self) -> IndexValue {
        match &self.slot {
            Some(slot) if self.state != TaskState::None && !self.state.is_terminal() => {
                IndexValue::Str(slot.key.clone())
            }
            _ => IndexValue::Absent,
        }
    }
}

impl ProcRow {
    /// The `gated` index's value: present while it is in flight with
    /// gated tasks (see [`ProcRow::gates`]).
    fn gated_index(&self) -> IndexValue {
        if self.gates.is_empty() || self.state == TaskState::None || self.state.is_terminal() {
            IndexValue::Absent
        } else {
            IndexValue::Str("1".into())
        }
    }

    /// The row of process `id` of version `rev` of model `mid` before it
    /// starts (state `none`: parked, or about to start), admitted at
    /// `timestamp` with start options `start_vars`.
    pub fn unstarted(id: &str, mid: &str, rev: u32, timestamp: i64, start_vars: Vars) -> Self {
        Self {
            id: id.to_owned(),
            mid: mid.to_owned(),
            rev,
            model: String::new(),
            state: TaskState::None,
            timestamp,
            start_time: 0,
            end_time: 0,
            env: Vars::new(),
            start_vars,
            err: None,
            started_by: None,
            paused: None,
            quiet_since: None,
            indexed: Vars::new(),
            audience: Vec::new(),
            nodes: Vec::new(),
            pending: Vec::new(),
            slot: None,
            order: None,
            gates: Vec::new(),
        }
    }
}

impl_row!(ProcRow, "procs", version = 1, |r| r.id.clone(), {
    "timestamp" => IndexValue::Int(r.timestamp),
    "version" => IndexValue::Str(format!("{}@{}", r.mid, r.rev)),
    "quiet" => r.quiet_since.map_or(IndexValue::Absent, IndexValue::Int),
    // Sparse: the in-flight processes that hold a concurrency slot. No
    // row written before `slot` existed has an entry, so the generation
    // below did not change.
    "slot" => r.slot_index(),
    // Sparse, as `slot`: the in-flight processes with gated tasks.
    "gated" => r.gated_index(),
    // Listings of one state or one model, in admission order; they also
    // answer `state == s` and `mid == m` (no entries of their own).
    "state_time" => IndexValue::Pair(r.state.as_str().to_owned(), r.timestamp, 0),
    "model_time" => IndexValue::Pair(r.mid.clone(), r.timestamp, 0),
}, consts = {
    const EQ_BY_PAIR: &'static [(&'static str, &'static str)] =
        &[("state", "state_time"), ("mid", "model_time")];
    // Until generation 3 `state` and `mid` had entries of their own.
    const RETIRED: &'static [&'static str] = &["state", "mid"];
});

/// The [`MetaRow`] that says every process row's index entries include
/// those of [`PROC_INDEX_GENERATION`] (a store written before lacks some:
/// its first start writes them).
pub const PROC_INDEX: &str = "proc_index";

/// The generation of [`ProcRow`]'s index set (raised when an index is
/// added or retired, so a store written before fills it in, and drops
/// the retired entries, once). 3: `state` and `mid` answered by the
/// composite indexes.
pub const PROC_INDEX_GENERATION: u64 = 3;

/// The generation since which every stored [`ProcRow`] has the entries of
/// each index of the current set (generation 3 only retired two): a store
/// at it or later only has the retired entries deleted, no entry written.
pub const PROC_INDEX_ENTRIES_SINCE: u64 = 2;

/// A task's lifecycle row (its data lives in a [`VarsRow`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRow {
    /// Process id (in the row's key, not stored in its value).
    #[serde(skip_serializing)]
    pub pid: String,
    /// Task id (in the row's key, not stored in its value).
    #[serde(skip_serializing)]
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
    pub err: Option<TaskError>,
    /// Start time (ms).
    pub start_time: i64,
    /// End time (ms, 0 while not terminal).
    pub end_time: i64,
    /// The actions applied to it, and by whom.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<crate::scheduler::TaskEvent>,
}

/// The id prefix of every task and scope row of process `pid`.
pub fn process_rows_prefix(pid: &str) -> String {
    format!("{pid}/")
}

/// The row id of task `tid` of process `pid`.
pub fn task_row_id(pid: &str, tid: &str) -> String {
    format!("{pid}/{tid}")
}

// Task and scope rows are read per process by their id prefix `<pid>/`
// (pids contain no `/`), so they need no secondary index.
impl_row!(
    TaskRow,
    "tasks",
    version = 1,
    |r| task_row_id(&r.pid, &r.tid),
    {},
    fill = fill_pid_tid
);

/// Puts `pid` and `tid` back into a task or scope row from its id
/// `<pid>/<tid>` (rows written before they were left out keep theirs).
fn fill_pid_tid(id: &str, row: &mut serde_json::Value) {
    if let (Some((pid, tid)), Some(obj)) = (id.split_once('/'), row.as_object_mut()) {
        obj.entry("pid").or_insert_with(|| pid.into());
        obj.entry("tid").or_insert_with(|| tid.into());
    }
}

/// Puts `pid` back into a node row from its id `<pid>/<seq>`.
fn fill_pid(id: &str, row: &mut serde_json::Value) {
    if let (Some((pid, _)), Some(obj)) = (id.split_once('/'), row.as_object_mut()) {
        obj.entry("pid").or_insert_with(|| pid.into());
    }
}

/// One dynamic node of a process's tree (an act dispatched by a step's
/// `uses`, a block's or a push's acts), written once when it is created:
/// a process's rows then grow with its new nodes, not with all of them
/// on every transition. (Stores written before kept them in
/// [`ProcRow::nodes`]; those are read first.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRow {
    /// Process id (in the row's key, not stored in its value).
    #[serde(skip_serializing)]
    pub pid: String,
    /// Its place among the process's dynamic nodes.
    pub seq: u32,
    /// The node.
    pub node: NodeData,
}

/// The row id of dynamic node `seq` of process `pid` (after the task rows'
/// prefix, zero-padded so ids sort by creation).
pub fn node_row_id(pid: &str, seq: u32) -> String {
    format!("{pid}/{seq:010}")
}

impl_row!(
    NodeRow,
    "nodes",
    version = 1,
    |r| node_row_id(&r.pid, r.seq),
    {},
    fill = fill_pid
);

/// What a restarted engine must do for an in-flight process without
/// loading it; written in the batch of the transition that changed it,
/// absent when there is nothing to do (a process that waits for a client).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WakeRow {
    /// Process id.
    pub id: String,
    /// When its next timeout is due (ms on the engine clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due: Option<i64>,
    /// Whether it has work to resume (jobs queued by a transition that
    /// handed back, application packages to request again).
    #[serde(default)]
    pub resume: bool,
}

impl_row!(WakeRow, "wakes", version = 1, |r| r.id.clone(), {});

/// A fact about the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetaRow {
    /// The fact's name.
    pub id: String,
    /// Its value.
    pub value: serde_json::Value,
}

impl_row!(MetaRow, "meta", version = 1, |r| r.id.clone(), {});

/// The [`MetaRow`] that says every in-flight process's [`WakeRow`] is
/// stored (a store written before wake rows existed lacks it: its first
/// restart resumes every in-flight process, then writes it).
pub const WAKE_INDEX_COMPLETE: &str = "wake_index";

/// One task's data scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VarsRow {
    /// Process id (in the row's key, not stored in its value).
    #[serde(skip_serializing)]
    pub pid: String,
    /// Task id (in the row's key, not stored in its value).
    #[serde(skip_serializing)]
    pub tid: String,
    /// The data.
    pub data: Vars,
}

impl_row!(
    VarsRow,
    "vars",
    version = 1,
    |r| task_row_id(&r.pid, &r.tid),
    {},
    fill = fill_pid_tid
);

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

impl_row!(OpRow, "ops", version = 1, |r| r.id.clone(), {
    "created_at" => IndexValue::Int(r.created_at),
    "pid" => IndexValue::Str(r.pid.clone()),
});
