//! A process and its rows: what one transition writes (what was last
//! written, the wake entry, the ops of a transition, a subflow's return).
//! Reading a process back and deleting its rows: `stored_process.rs`.
//!
//! A transition's writes are computed from what changed since the last
//! commit: the task table marks each task's lifecycle and data scope dirty
//! as the core changes them, so a lifecycle-only change writes a task row
//! and no vars row, and a write that folds up into an ancestor's scope
//! writes exactly that ancestor's vars row.

use acts_store::BatchOp;

use crate::durable::Collection;
use crate::model::Vars;
use crate::scheduler::{Process, Task, TaskError, TaskState, TaskTable};

use crate::engine::persist::rows::{
    NodeRow, OpRow, ProcRow, TaskRow, VarsRow, WakeRow, task_row_id,
};

/// What was last written for a resident process.
#[derive(Debug, Clone)]
pub(crate) struct Persisted {
    /// The proc row as stored. Its `nodes` are only those an older store
    /// kept in the proc row (kept there when the row is rewritten); every
    /// later dynamic node has a [`NodeRow`].
    pub row: ProcRow,
    /// How many node rows are stored (the proc row's nodes, then node
    /// rows): the position of the next one.
    pub nodes_stored: usize,
    /// How many of the process tree's dynamic nodes were looked at: stored,
    /// or implied by their task (the shared act of a literal `uses`).
    pub nodes_seen: usize,
    /// Whether the proc row is in the store (else its index entries are
    /// written with it).
    pub row_stored: bool,
    /// The wake entry as stored.
    pub wake: Wake,
}

/// What a restart must do for a process without loading it: its next
/// timer, and whether it has work to resume. `Wake::default()` (nothing)
/// is stored as no row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Wake {
    /// When its next timeout is due.
    pub due: Option<i64>,
    /// Whether it has work to resume.
    pub resume: bool,
}

impl Wake {
    /// What `p` needs after a transition whose next timer is `due`
    /// (nothing once it has ended).
    pub fn of(p: &Process, due: Option<i64>) -> Self {
        if p.state().is_terminal() {
            return Self::default();
        }
        Self {
            due,
            resume: p.has_queued_work() || p.runs_packages(),
        }
    }
}

impl Persisted {
    /// Nothing stored yet for a process whose row will be `row`.
    pub fn fresh(row: ProcRow) -> Self {
        Self {
            nodes_stored: row.nodes.len(),
            nodes_seen: row.nodes.len(),
            row,
            row_stored: false,
            wake: Wake::default(),
        }
    }
}

/// A task's lifecycle row, borrowed from the process (serializes as a
/// [`TaskRow`]).
#[derive(serde::Serialize)]
struct TaskView<'a> {
    seq: u32,
    nid: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prev: Option<u32>,
    state: crate::scheduler::TaskState,
    sign: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    err: Option<&'a TaskError>,
    start_time: i64,
    end_time: i64,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    history: &'a [crate::scheduler::TaskEvent],
}

/// A task's scope row, borrowed (serializes as a [`VarsRow`]).
#[derive(serde::Serialize)]
struct VarsView<'a> {
    data: &'a crate::scheduler::Scope,
}

fn task_view<'a>(p: &'a Process, ix: crate::scheduler::TaskIx, task: &'a Task) -> TaskView<'a> {
    TaskView {
        seq: TaskTable::position(ix) as u32,
        nid: p.tree.node(task.node).map_or("", |n| n.id.as_str()),
        parent: task.parent.map(|x| TaskTable::position(x) as u32),
        prev: task.prev.map(|x| TaskTable::position(x) as u32),
        state: task.state,
        sign: task.sign.0,
        err: task.err.as_deref(),
        start_time: task.start_time,
        end_time: task.end_time,
        history: &task.history,
    }
}

/// The ops of one transition of `p`: every changed task and scope, the
/// proc row when it changed, and its wake entry (`wake`) when that
/// changed. Updates `persisted` to what the ops store (the caller discards
/// the process if the batch fails).
pub(crate) fn transition_ops(
    p: &mut Process,
    persisted: &mut Persisted,
    wake: Wake,
) -> Vec<BatchOp> {
    let mut ops = Vec::new();
    if persisted.wake != wake {
        ops.push(wake_op(&p.pid, wake));
        persisted.wake = wake;
    }
    let dirty = p.tasks.take_dirty();
    for (ix, d) in dirty {
        let Some(task) = p.tasks.get(ix) else {
            continue;
        };
        let id = task_row_id(&p.pid, &task.id);
        // Task and scope rows have no indexes: one put each, serialized
        // straight from the process (a new task is lifecycle-dirty).
        if d.lifecycle {
            ops.push(Collection::<TaskRow>::put_view_op(
                &id,
                &task_view(p, ix, task),
            ));
        }
        if d.vars {
            ops.push(Collection::<VarsRow>::put_view_op(
                &id,
                &VarsView { data: &task.data },
            ));
        }
    }
    // The proc row changes rarely (start, end, env, new dynamic nodes):
    // compare the cheap fields first, build the row only when needed.
    let root = p.tasks.get(p.root());
    let (state, start_time, end_time, err) = (
        p.state(),
        root.map_or(persisted.row.start_time, |r| r.start_time),
        root.map_or(0, |r| r.end_time),
        root.and_then(|r| r.err.as_deref()),
    );
    let old = &persisted.row;
    let indexed = match p.workflow() {
        Some(w) if !w.index.is_empty() => {
            let root = p.tasks.get(p.root()).map(|t| &t.data);
            root.map_or_else(Vars::new, |d| super::var_index::indexed_values(&w.index, d))
        }
        _ => Vars::new(),
    };
    if indexed != old.indexed {
        ops.extend(super::var_index::var_index_ops(
            &old.mid,
            &old.id,
            &old.indexed,
            &indexed,
        ));
    }
    // Quiet again: the detector measures from this transition.
    let quiet_since = p.is_quiet().then(|| p.tasks.now());
    let pending = if p.has_queued_work() {
        p.queued_jobs()
    } else {
        Vec::new()
    };
    // New dynamic nodes: one row each, written once (a node never changes
    // after the transition that created it); the shared act of a literal
    // `uses` has none (its task and step imply it).
    let nodes = p.tree.dynamic_len();
    if nodes > persisted.nodes_seen {
        for node in p.tree.dynamic_data_from(persisted.nodes_seen) {
            let seq = persisted.nodes_stored as u32;
            ops.push(Collection::<NodeRow>::put_row_op(&NodeRow {
                pid: p.pid.clone(),
                seq,
                node,
            }));
            persisted.nodes_stored += 1;
        }
        persisted.nodes_seen = nodes;
    }
    let gates = p.gates();
    let changed = pending != old.pending
        || gates != old.gates
        || state != old.state
        || end_time != old.end_time
        || start_time != old.start_time
        || err != old.err.as_ref()
        || p.env != old.env
        || p.audience.len() != old.audience.len()
        || p.paused != old.paused
        || quiet_since != old.quiet_since
        || indexed != old.indexed
        || !old.start_vars.is_empty();
    if changed {
        let row = ProcRow {
            state,
            start_time,
            end_time,
            env: p.env.clone(),
            err: err.cloned(),
            // Rows written before node rows existed keep their nodes.
            nodes: old.nodes.clone(),
            start_vars: Vars::new(),
            started_by: old.started_by.clone(),
            paused: p.paused.clone(),
            quiet_since,
            indexed: indexed.clone(),
            audience: p.audience.names().map(str::to_owned).collect(),
            id: old.id.clone(),
            mid: old.mid.clone(),
            rev: old.rev,
            model: old.model.clone(),
            timestamp: old.timestamp,
            pending,
            slot: old.slot.clone(),
            order: old.order.clone(),
            gates,
        };
        if row.state == old.state
            && row.quiet_since == old.quiet_since
            && row.gates.is_empty() == old.gates.is_empty()
            && persisted.row_stored
        {
            ops.push(Collection::<ProcRow>::put_row_op(&row));
        } else {
            // A row not in the store yet has no index entries to replace.
            let stored = persisted.row_stored.then_some(old);
            ops.extend(Collection::<ProcRow>::upsert_ops(stored, &row));
        }
        persisted.row_stored = true;
        persisted.row = row;
    }
    ops
}

/// The op that stores `wake` as process `pid`'s wake entry (deletes it
/// when there is nothing to do).
pub(super) fn wake_op(pid: &str, wake: Wake) -> BatchOp {
    let row = WakeRow {
        id: pid.to_owned(),
        due: wake.due,
        resume: wake.resume,
    };
    if wake == Wake::default() {
        BatchOp::Delete {
            key: Collection::<WakeRow>::row_key(pid),
        }
    } else {
        Collection::<WakeRow>::put_row_op(&row)
    }
}

/// The outbox record a finished subflow child writes for its parent act.
pub(crate) fn subflow_return(p: &Process) -> Option<OpRow> {
    let root = p.tasks.get(p.root())?;
    let parent_pid = root.data.get("$parent_pid")?.as_str()?.to_owned();
    let parent_tid = root.data.get("$parent_tid")?.as_str()?.to_owned();
    let mut options = p.outputs();
    // The child's own identity stays with the child.
    options.retain(|k, _| k != "pid" && !k.starts_with("$parent_"));
    let action = match root.state {
        TaskState::Aborted => "abort",
        TaskState::Skipped => "skip",
        TaskState::Error => {
            let mut err = root.err.clone().unwrap_or_default();
            if err.ecode.is_empty() {
                err.ecode = "subflow".into();
            }
            options.extend(err.to_vars());
            "error"
        }
        _ => "next",
    };
    Some(OpRow {
        id: p.pid.clone(),
        from_pid: p.pid.clone(),
        pid: parent_pid,
        tid: parent_tid,
        action: action.into(),
        options,
        created_at: root.end_time,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Workflow;
    use crate::scheduler::TaskState;
    use crate::tree::ModelTree;
    use std::sync::Arc;

    /// The borrowed views write exactly the rows they stand for, without
    /// the ids their key holds; a row reads back whole, and a row stored
    /// with its ids (by an older acts) reads the same.
    #[test]
    fn views_serialize_as_their_rows_without_the_ids_of_their_key() {
        let w = Workflow::new().with_id("m").with_step(|s| s.with_id("s1"));
        let mut p = Process::new("p1", Arc::new(ModelTree::build(&w).unwrap()), Vars::new());
        let root = p.root();
        p.tasks.set_err(root, TaskError::new("E1", "failed"));
        let task = p.tasks.get(root).unwrap().clone();
        let view = serde_json::to_value(task_view(&p, root, &task)).unwrap();
        let row = TaskRow {
            pid: "p1".into(),
            tid: "$".into(),
            seq: 0,
            nid: "m".into(),
            parent: None,
            prev: None,
            state: TaskState::Error,
            sign: task.sign.0,
            err: Some(TaskError::new("E1", "failed")),
            start_time: task.start_time,
            end_time: task.end_time,
            history: Vec::new(),
        };
        assert_eq!(view, serde_json::to_value(&row).unwrap());
        assert!(view.get("pid").is_none() && view.get("tid").is_none());
        let id = task_row_id("p1", "$");
        let stored = Collection::<TaskRow>::put_view_op(&id, &task_view(&p, root, &task));
        let BatchOp::Put { value, .. } = stored else {
            unreachable!("a put")
        };
        assert_eq!(Collection::<TaskRow>::decode_row(&id, &value).unwrap(), row);
        let mut older = serde_json::to_value(&row).unwrap();
        older["pid"] = "p1".into();
        older["tid"] = "$".into();
        let older = serde_json::to_vec(&serde_json::json!({ "v": 1, "d": older })).unwrap();
        assert_eq!(Collection::<TaskRow>::decode_row(&id, &older).unwrap(), row);
        let vars = serde_json::to_value(VarsView { data: &task.data }).unwrap();
        let vrow = VarsRow {
            pid: "p1".into(),
            tid: "$".into(),
            data: task.data.to_vars(),
        };
        assert_eq!(vars, serde_json::to_value(&vrow).unwrap());
        let stored = Collection::<VarsRow>::put_view_op(&id, &VarsView { data: &task.data });
        let BatchOp::Put { value, .. } = stored else {
            unreachable!("a put")
        };
        assert_eq!(
            Collection::<VarsRow>::decode_row(&id, &value).unwrap(),
            vrow
        );
        // A key that names no process is a corrupt row, not an empty id.
        assert!(Collection::<VarsRow>::decode_row("nokey", &value).is_err());
    }
}
