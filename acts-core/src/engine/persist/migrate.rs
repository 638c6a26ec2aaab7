//! Moving one stored process from one model version to another: its rows
//! rewritten for the new version's node tree (tasks and dynamic nodes
//! follow their node by id, or by the plan's map), the process rebuilt on
//! the new tree to prove the result runs, and the ops of one batch. The
//! same function answers a dry run (nothing is written) and a migration,
//! so the report of one is what the other does.
//!
//! A task whose node is gone from the new version:
//! - still active (waiting, running): the process cannot be migrated —
//!   nothing is written, and the reason names the node to map;
//! - finished: it stays, as history, on a copy of its old node (kept as a
//!   dynamic node of the process), so the process still shows it.
//!
//! A node whose kind changed (a step that is an act in the new version) is
//! refused the same way.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use acts_store::BatchOp;

use crate::durable::Collection;
use crate::model::Vars;
use crate::scheduler::{Process, TaskEvent, TaskState};
use crate::tree::{ModelTree, NodeData};

use super::process::{Wake, transition_ops};
use super::rows::{NodeRow, ProcRow, TaskRow};
use super::stored_process::{StoredProcess, implied_acts, rebuild};

/// An active task and where it goes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TaskMove {
    pub tid: String,
    pub state: TaskState,
    pub from: String,
    pub to: String,
}

/// A migration of one process, ready to write.
pub(crate) struct Migrated {
    /// The batch.
    pub ops: Vec<BatchOp>,
    /// The process as it will be (for its timer and messages).
    pub process: Process,
    /// Every active task, with its node before and after.
    pub moves: Vec<TaskMove>,
    /// Finished tasks whose node is gone (kept as history).
    pub kept_as_history: Vec<String>,
    /// Waiting interrupts whose node changed (announced again).
    pub reannounced: Vec<String>,
}

/// What to migrate to.
pub(crate) struct Target<'a> {
    /// The old version's tree.
    pub old: &'a ModelTree,
    /// The new version's tree.
    pub new: Arc<ModelTree>,
    /// Its revision.
    pub revision: u32,
    /// Old node id → new node id.
    pub map: &'a HashMap<String, String>,
    /// Process variables to set.
    pub vars: &'a Vars,
    /// The history entry to record on the root task.
    pub record: TaskEvent,
}

/// Rewrites `stored` for `to` (see the module docs); `Err` says why the
/// process cannot be migrated.
pub(crate) fn migrate_rows(stored: &StoredProcess, to: &Target<'_>) -> Result<Migrated, String> {
    let resolve = |id: &str| to.map.get(id).cloned().unwrap_or_else(|| id.to_owned());
    let kind_in = |tree: &ModelTree, id: &str| {
        tree.find(id)
            .and_then(|ix| tree.get(ix))
            .map(|n| n.content.kind())
    };
    // The shared acts of literal `uses` have no rows: their tasks imply
    // them (on the old version's steps).
    let implied = implied_acts(&stored.tasks, stored.stored_nodes(), to.old);
    let dynamic: HashSet<&str> = stored
        .stored_nodes()
        .chain(implied.iter())
        .map(|n| n.id.as_str())
        .collect();
    let mut ghosts: Vec<NodeData> = Vec::new();
    let mut tasks = stored.tasks.clone();
    let mut moves = Vec::new();
    let mut kept = Vec::new();
    let mut reannounced = Vec::new();
    // A static node that a migration renames or changes.
    let changed = |id: &str| {
        let target = resolve(id);
        match (to.old.find(id), to.new.find(&target)) {
            (Some(a), Some(b)) => {
                target != id
                    || to.old.get(a).map(|n| (&n.content, &n.uses_act))
                        != to.new.get(b).map(|n| (&n.content, &n.uses_act))
            }
            _ => true,
        }
    };
    let parent_of: HashMap<&str, &str> = stored
        .stored_nodes()
        .chain(implied.iter())
        .filter_map(|n| Some((n.id.as_str(), n.parent_id.as_deref()?)))
        .collect();
    for t in &mut tasks {
        if dynamic.contains(t.nid.as_str()) {
            // An interrupt belongs to its step: announced again when the
            // step moved or changed.
            let step = parent_of.get(t.nid.as_str()).copied();
            if t.state == TaskState::Interrupt
                && step.is_some_and(|p| !dynamic.contains(p) && changed(p))
            {
                reannounced.push(t.tid.clone());
            }
            if !t.state.is_terminal() {
                moves.push(TaskMove {
                    tid: t.tid.clone(),
                    state: t.state,
                    from: t.nid.clone(),
                    to: t.nid.clone(),
                });
            }
            continue;
        }
        let target = resolve(&t.nid);
        let old_kind = kind_in(to.old, &t.nid);
        let new_kind = kind_in(&to.new, &target);
        match new_kind {
            Some(k) if Some(k) == old_kind || old_kind.is_none() => {
                if !t.state.is_terminal() {
                    moves.push(TaskMove {
                        tid: t.tid.clone(),
                        state: t.state,
                        from: t.nid.clone(),
                        to: target.clone(),
                    });
                }
                t.nid = target;
            }
            Some(k) => {
                return Err(format!(
                    "task '{}' runs node '{}', a {} in this version and a {k} in the new one: map it to a node of the same kind",
                    t.tid,
                    t.nid,
                    old_kind.map_or_else(|| "node".to_owned(), |k| k.to_string()),
                ));
            }
            None if !t.state.is_terminal() => {
                return Err(format!(
                    "task '{}' ({}) runs node '{}', which the new version does not have: map it to one (`{}: NEW_NODE_ID`)",
                    t.tid,
                    t.state.as_str(),
                    t.nid,
                    t.nid
                ));
            }
            None => {
                // Finished on a node that is gone: kept as history, on a
                // copy of its old node.
                kept.push(t.tid.clone());
                if ghosts.iter().any(|g| g.id == t.nid) {
                    continue;
                }
                let Some(node) = to.old.find(&t.nid).and_then(|ix| to.old.get(ix)) else {
                    return Err(format!(
                        "task '{}' runs node '{}', which neither version has",
                        t.tid, t.nid
                    ));
                };
                ghosts.push(NodeData {
                    id: t.nid.clone(),
                    content: (*node.content).clone(),
                    level: node.level,
                    parent_id: None,
                    is_child: false,
                    prev_id: None,
                    next_id: None,
                });
            }
        }
    }
    // Dynamic nodes follow their (static) parents; one whose parent is
    // gone stays, detached, as the history of its finished tasks.
    let active_on = |id: &str| {
        stored
            .tasks
            .iter()
            .any(|t| t.nid == id && !t.state.is_terminal())
    };
    // A dynamic node follows its static parent to the new version;
    // detached (history) when that is gone and it has no active task.
    let mut follow = |n: &mut NodeData| -> Result<(), String> {
        let Some(p) = n
            .parent_id
            .clone()
            .filter(|p| !dynamic.contains(p.as_str()))
        else {
            return Ok(());
        };
        let target = resolve(&p);
        if to.new.find(&target).is_some() {
            n.parent_id = Some(target);
        } else if active_on(&n.id) {
            return Err(format!(
                "act '{}' is active under node '{p}', which the new version does not have: map '{p}' to a node of the new version",
                n.id
            ));
        } else {
            n.parent_id = None;
            n.is_child = false;
            kept.extend(
                stored
                    .tasks
                    .iter()
                    .filter(|t| t.nid == n.id)
                    .map(|t| t.tid.clone()),
            );
        }
        Ok(())
    };
    let mut nodes = stored.nodes.clone();
    for n in &mut nodes {
        follow(&mut n.node)?;
    }
    // An implied act stays implied while its step is the same in the new
    // version; otherwise it is written, with its old content, as any
    // dynamic node.
    let mut written_implied = Vec::new();
    for n in &implied {
        let step = n.parent_id.as_deref().unwrap_or_default();
        if !changed(step) {
            continue;
        }
        let mut n = n.clone();
        follow(&mut n)?;
        written_implied.push(n);
    }
    let mut row_nodes = stored.row.nodes.clone();
    for n in &mut row_nodes {
        if let Some(p) = &n.parent_id
            && !dynamic.contains(p.as_str())
        {
            n.parent_id = Some(resolve(p));
        }
    }
    let first_new = (row_nodes.len() + nodes.len()) as u32;
    let ghost_rows: Vec<NodeRow> = written_implied
        .into_iter()
        .chain(ghosts)
        .enumerate()
        .map(|(i, node)| NodeRow {
            pid: stored.row.id.clone(),
            seq: first_new + i as u32,
            node,
        })
        .collect();
    let mut row = stored.row.clone();
    row.nodes = row_nodes;
    let mut all_nodes = nodes.clone();
    all_nodes.extend(ghost_rows.iter().cloned());
    let rewritten = StoredProcess {
        row: row.clone(),
        tasks: tasks.clone(),
        vars: stored.vars.clone(),
        nodes: all_nodes,
        wake: stored.wake,
    };
    let (mut process, mut persisted) = rebuild(rewritten, to.new.clone())
        .map_err(|e| format!("the process does not fit the new version: {e}"))?;
    let root = process.root();
    if !to.vars.is_empty() {
        process.tasks.set_data(root, to.vars);
    }
    process.tasks.record_event(root, to.record.clone());
    // The batch: the rewritten rows, the transition's own (scopes, history,
    // wake, variable index), then the proc row on its new version.
    let mut ops = Vec::new();
    for (old, new) in stored.tasks.iter().zip(&tasks) {
        if old.nid != new.nid {
            ops.push(Collection::<TaskRow>::put_row_op(new));
        }
    }
    for (old, new) in stored.nodes.iter().zip(&nodes) {
        if old.node != new.node {
            ops.push(Collection::<NodeRow>::put_row_op(new));
        }
    }
    for g in &ghost_rows {
        ops.push(Collection::<NodeRow>::put_row_op(g));
    }
    let due = process.next_timer();
    let wake = Wake::of(&process, due);
    ops.extend(transition_ops(&mut process, &mut persisted, wake));
    let mut new_row = persisted.row.clone();
    new_row.rev = to.revision;
    new_row.model = String::new();
    new_row.nodes = row.nodes;
    ops.extend(Collection::<ProcRow>::upsert_ops(
        Some(&stored.row),
        &new_row,
    ));
    Ok(Migrated {
        ops,
        process,
        moves,
        kept_as_history: kept,
        reannounced,
    })
}
