//! What the executor returns: plain, serializable views of models,
//! processes and tasks.

use serde::{Deserialize, Serialize};

use crate::model::Vars;
use crate::scheduler::{Process, TaskIx, TaskState};
use crate::tree::NodeContent;

use crate::engine::persist::rows::{ModelRow, ProcRow};

/// A deployed model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}

impl From<&ModelRow> for ModelInfo {
    fn from(r: &ModelRow) -> Self {
        Self {
            id: r.id.clone(),
            name: r.name.clone(),
            ver: r.ver.clone(),
            revision: r.revision,
            deployed_at: r.deployed_at,
        }
    }
}

/// A process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcInfo {
    /// Process id.
    pub pid: String,
    /// Model id.
    pub model_id: String,
    /// State (`none` while parked).
    pub state: TaskState,
    /// Start time (ms; 0 while parked).
    pub start_time: i64,
    /// End time (ms; 0 while running).
    pub end_time: i64,
    /// The process outputs (the workflow's `exposes`, else its root data);
    /// empty in listings.
    pub outputs: Vars,
    /// The error it ended with: `(ecode, message)`.
    pub err: Option<(String, String)>,
}

impl ProcInfo {
    pub(crate) fn of(p: &Process) -> Self {
        let root = p.tasks.get(p.root());
        Self {
            pid: p.pid.clone(),
            model_id: p.model_id(),
            state: p.state(),
            start_time: root.map_or(0, |r| r.start_time),
            end_time: root.map_or(0, |r| r.end_time),
            outputs: p.outputs(),
            err: root.and_then(|r| r.err.clone()),
        }
    }

    pub(crate) fn of_row(r: &ProcRow) -> Self {
        Self {
            pid: r.id.clone(),
            model_id: r.mid.clone(),
            state: r.state,
            start_time: r.start_time,
            end_time: r.end_time,
            outputs: Vars::new(),
            err: r.err.clone(),
        }
    }
}

/// A task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskInfo {
    /// Process id.
    pub pid: String,
    /// Task id.
    pub tid: String,
    /// Node id.
    pub nid: String,
    /// `workflow`, `step`, `branch` or `act`.
    pub kind: String,
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
    /// Start time (ms).
    pub start_time: i64,
    /// End time (ms).
    pub end_time: i64,
    /// Its data scope.
    pub data: Vars,
    /// Its error.
    pub err: Option<(String, String)>,
}

impl TaskInfo {
    pub(crate) fn of(p: &Process, ix: TaskIx) -> Option<Self> {
        let t = p.tasks.get(ix)?;
        let node = p.tree.node(t.node)?;
        let params = match &*node.content {
            NodeContent::Act(a) => a.params.clone(),
            _ => serde_json::Value::Null,
        };
        let key = params
            .get("key")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned);
        let id_of = |x: Option<TaskIx>| x.and_then(|x| p.tasks.get(x)).map(|x| x.id.clone());
        Some(Self {
            pid: p.pid.clone(),
            tid: t.id.clone(),
            nid: node.id.clone(),
            kind: crate::scheduler::Message::type_of(node.content.kind()).to_owned(),
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
            start_time: t.start_time,
            end_time: t.end_time,
            data: t.data.clone(),
            err: t.err.clone(),
        })
    }
}
