//! What the executor returns: plain, serializable views of models,
//! processes, tasks, deliveries, triggers and packages — never the rows
//! they are stored as, so the storage schema can change without changing
//! the API. Each is `#[non_exhaustive]`: fields will be added.
//!
//! Times are milliseconds on the engine clock; `None` means "not yet".

use serde::{Deserialize, Serialize};

use crate::model::{Variant, Vars};
use crate::scheduler::{MessageType, Pause, Process, TaskError, TaskEvent, TaskIx, TaskState};
use crate::tree::NodeContent;

use crate::package::PackageDefinition;

/// A stored time: 0 means "not set".
pub(crate) fn set(ms: i64) -> Option<i64> {
    (ms != 0).then_some(ms)
}

/// A deployed model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelInfo {
    /// Model id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Version.
    pub ver: String,
    /// How many times it was deployed.
    pub revision: u32,
    /// When it was last deployed (ms).
    pub deployed_at: i64,
    /// What the deploy found suspicious (unknown keys, interrupts without
    /// a key); empty when read back later.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Whether the deploy found the model's latest version identical and
    /// changed nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unchanged: bool,
}

/// One version of a model, as `versions` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelVersionInfo {
    /// The version (its `revision` is the engine's version number).
    #[serde(flatten)]
    pub model: ModelInfo,
    /// Whether new processes start on it.
    pub latest: bool,
    /// Stored processes that run (or ran) on it.
    pub processes: usize,
    /// Of those, the ones that have not ended.
    pub unfinished: usize,
}

/// What a parked process waits for (`ProcessQuery::waiting_for`,
/// [`ProcInfo::waiting_for`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum WaitingFor {
    /// A free slot of its concurrency key.
    Concurrency,
    /// A place under the engine's admission cap.
    Admission,
    /// Nothing of its own: it runs, but one of its tasks waits (`pending`)
    /// at a step's or act's concurrency or rate key.
    Gate,
}

impl WaitingFor {
    /// Its name (`concurrency`, `admission`, `gate`).
    pub fn as_str(self) -> &'static str {
        match self {
            WaitingFor::Concurrency => "concurrency",
            WaitingFor::Admission => "admission",
            WaitingFor::Gate => "gate",
        }
    }
}

/// A process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProcInfo {
    /// Process id.
    pub pid: String,
    /// Model id.
    pub model_id: String,
    /// The model version it runs (the revision it started on; 0 for a
    /// process stored before versions existed).
    #[serde(default)]
    pub model_rev: u32,
    /// State (`none` while parked).
    pub state: TaskState,
    /// When it started (`None` while parked).
    pub start_time: Option<i64>,
    /// When it ended (`None` while running).
    pub end_time: Option<i64>,
    /// The process outputs (the workflow's `exposes`, else its root data);
    /// empty in listings.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub outputs: Vars,
    /// The error it ended with.
    pub err: Option<TaskError>,
    /// The principal who started it (`None`: no principal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_by: Option<String>,
    /// Set while an operator holds it paused: by whom, since when, why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<Pause>,
    /// Its concurrency key (the model's `concurrency:`, as evaluated at
    /// its start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_key: Option<String>,
    /// What a parked process waits for: `concurrency` while its key has
    /// no free slot, `admission` while the engine is at its cap (`None`
    /// once it started, and in listings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
}

impl ProcInfo {
    pub(crate) fn of(p: &Process) -> Self {
        let root = p.tasks.get(p.root());
        Self {
            pid: p.pid.clone(),
            model_id: p.model_id(),
            model_rev: p.tree.model().revision,
            state: p.state(),
            start_time: set(root.map_or(0, |r| r.start_time)),
            end_time: set(root.map_or(0, |r| r.end_time)),
            outputs: p.outputs(),
            err: root.and_then(|r| r.err.as_deref().cloned()),
            started_by: p.audience.started_by.clone(),
            paused: p.paused.clone(),
            concurrency_key: p.concurrency_key.clone(),
            waiting_for: None,
        }
    }
}

/// A task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskInfo {
    /// Process id.
    pub pid: String,
    /// Task id.
    pub tid: String,
    /// Node id.
    pub nid: String,
    /// `workflow`, `step`, `branch` or `act` (as messages name it).
    pub kind: MessageType,
    /// Node name.
    pub name: String,
    /// Package, for acts.
    pub uses: Option<String>,
    /// An act's params (evaluated).
    pub params: serde_json::Value,
    /// An act's `params.key` (how clients tell interrupts apart).
    pub key: Option<String>,
    /// The enclosing task's id.
    pub parent: Option<String>,
    /// The id of the task it follows.
    pub prev: Option<String>,
    /// State.
    pub state: TaskState,
    /// When it started (`None` before).
    pub start_time: Option<i64>,
    /// When it ended (`None` while not terminal).
    pub end_time: Option<i64>,
    /// Its data scope.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub data: Vars,
    /// Its error.
    pub err: Option<TaskError>,
    /// The actions applied to it and who applied them, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<TaskEvent>,
    /// What an act's answer must hold (its `exposes`; empty: anything).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exposes: Vec<Variant>,
}

impl TaskInfo {
    pub(crate) fn of(p: &Process, ix: TaskIx) -> Option<Self> {
        let t = p.tasks.get(ix)?;
        let node = p.tree.node(t.node)?;
        let params = p.act_params(ix);
        let key = params
            .get("key")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned);
        let id_of = |x: Option<TaskIx>| x.and_then(|x| p.tasks.get(x)).map(|x| x.id.clone());
        Some(Self {
            pid: p.pid.clone(),
            tid: t.id.clone(),
            nid: node.id.clone(),
            kind: node.content.kind().into(),
            name: node.content.name().to_owned(),
            uses: match &*node.content {
                NodeContent::Act(a) => Some(a.uses.clone()),
                NodeContent::Step(s) => s.uses.clone(),
                _ => None,
            },
            params,
            key,
            parent: id_of(t.parent),
            prev: id_of(t.prev),
            state: t.state,
            start_time: set(t.start_time),
            end_time: set(t.end_time),
            data: t.data.to_vars(),
            err: t.err.as_deref().cloned(),
            history: t.history.clone(),
            exposes: match &*node.content {
                NodeContent::Act(a) => a.exposes.clone(),
                _ => Vec::new(),
            },
        })
    }
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryInfo {
    /// The durable channel's id.
    pub channel: String,
    /// The message id (what the channel acks).
    pub msg_id: String,
    /// The message's process.
    pub pid: String,
    /// The message's task.
    pub tid: String,
    /// Where it stands.
    pub state: DeliveryState,
    /// How many times it was sent.
    pub tries: u32,
    /// When it is re-sent next (`None` unless pending).
    pub next_at: Option<i64>,
    /// When it was created.
    pub created_at: i64,
    /// The message itself, when asked for ([`DeliveryQuery::messages`](crate::engine::DeliveryQuery::messages))
    /// and still stored (a message is kept until every durable channel's
    /// delivery of it is settled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<crate::scheduler::Message>,
}

/// A model's trigger (`on:`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TriggerInfo {
    /// `<model id>:<trigger id>` (what
    /// [`TriggerOps::start`](crate::engine::TriggerOps::start)
    /// takes).
    pub id: String,
    /// The model it starts.
    pub model_id: String,
    /// The trigger's id in the model.
    pub trigger: String,
    /// `manual`, `hook` or `schedule`.
    pub kind: String,
    /// The default start params.
    pub params: serde_json::Value,
    /// The cron expression of a schedule.
    pub schedule: Option<String>,
    /// When a schedule fires next.
    pub next_run: Option<i64>,
    /// When it last fired.
    pub last_run: Option<i64>,
}

/// A package the engine knows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PackageInfo {
    /// Its definition (id, description, how it runs, its parameters).
    pub definition: PackageDefinition,
    /// Whether it is built in (else the application registered it).
    pub builtin: bool,
}

/// A migration plan: move the live processes of `model` from version
/// `from` to version `to`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MigrationPlan {
    /// The model.
    pub model: String,
    /// The version its processes run now.
    pub from: u32,
    /// The version to move them to.
    pub to: u32,
    /// Old node id → new node id, for nodes renamed or removed (by default
    /// a node maps to the node of the same id).
    pub map: std::collections::BTreeMap<String, String>,
    /// Process variables to set as each process moves.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub vars: Vars,
}

/// An active task of a migrated process and its node before and after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskMoveInfo {
    /// The task.
    pub tid: String,
    /// Its state.
    pub state: TaskState,
    /// Its node in the old version.
    pub from: String,
    /// Its node in the new version.
    pub to: String,
}

/// What a migration did (or, in a dry run, would do) to one process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProcessMigration {
    /// The process.
    pub pid: String,
    /// `migrated`, `would_migrate` (dry run) or `unmigratable`.
    pub outcome: String,
    /// Why it cannot be migrated (it was left untouched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Every active task and its new node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<TaskMoveInfo>,
    /// Finished tasks whose node the new version lacks (kept as history).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept_as_history: Vec<String>,
    /// Waiting interrupts whose node changed, announced again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reannounced: Vec<String>,
}

/// The result of a migration (or a dry run) over every live process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MigrationReport {
    /// The plan.
    pub plan: MigrationPlan,
    /// Whether nothing was written.
    pub dry_run: bool,
    /// One entry per live process of the old version.
    pub processes: Vec<ProcessMigration>,
}
