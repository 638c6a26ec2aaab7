//! A stored process's rows: reading every row of a process, building the
//! process back from them (at a load, a restart, a migration), and the ops
//! that delete them all.

use std::sync::Arc;

use acts_store::{BatchOp, KvStore};

use crate::durable::{Collection, CollectionError};
use crate::model::Vars;
use crate::scheduler::{Process, Task, TaskState, TaskTable};
use crate::tree::{ModelTree, NodeData};

use crate::engine::persist::process::{Persisted, Wake, wake_op};
use crate::engine::persist::rows::{
    NodeRow, ProcRow, TaskRow, VarsRow, WakeRow, process_rows_prefix, task_row_id,
};

/// The ops that delete every row of a stored process.
pub(crate) fn delete_ops(stored: &StoredProcess) -> Vec<BatchOp> {
    let mut ops = Collection::<ProcRow>::delete_ops(&stored.row);
    let r = &stored.row;
    ops.extend(super::var_index::var_index_ops(
        &r.mid,
        &r.id,
        &r.indexed,
        &Vars::new(),
    ));
    ops.push(wake_op(&stored.row.id, Wake::default()));
    for t in &stored.tasks {
        ops.extend(Collection::<TaskRow>::delete_ops(t));
    }
    for v in &stored.vars {
        ops.extend(Collection::<VarsRow>::delete_ops(v));
    }
    for n in &stored.nodes {
        ops.extend(Collection::<NodeRow>::delete_ops(n));
    }
    ops
}

/// A stored process's rows.
pub(crate) struct StoredProcess {
    /// The proc row.
    pub row: ProcRow,
    /// Its task rows, in creation order.
    pub tasks: Vec<TaskRow>,
    /// Its scope rows.
    pub vars: Vec<VarsRow>,
    /// Its dynamic node rows, in creation order.
    pub nodes: Vec<NodeRow>,
    /// Its wake entry (`Wake::default()` when it has no row).
    pub wake: Wake,
}

impl StoredProcess {
    /// Its stored dynamic nodes: those an older store kept in the proc
    /// row, then its node rows.
    pub fn stored_nodes(&self) -> impl Iterator<Item = &NodeData> {
        self.row
            .nodes
            .iter()
            .chain(self.nodes.iter().map(|n| &n.node))
    }
}

/// Reads every row of process `pid`; `Ok(None)` when it has no proc row.
/// A store failure is an error, never "no process".
pub(crate) async fn read_process(
    store: &Arc<dyn KvStore>,
    pid: &str,
) -> Result<Option<StoredProcess>, CollectionError> {
    let Some(row) = Collection::<ProcRow>::new(store.clone()).get(pid).await? else {
        return Ok(None);
    };
    let prefix = process_rows_prefix(pid);
    let mut tasks = Collection::<TaskRow>::new(store.clone())
        .get_by_id_prefix(&prefix)
        .await?;
    tasks.sort_by_key(|t| t.seq);
    let vars = Collection::<VarsRow>::new(store.clone())
        .get_by_id_prefix(&prefix)
        .await?;
    let mut nodes = Collection::<NodeRow>::new(store.clone())
        .get_by_id_prefix(&prefix)
        .await?;
    nodes.sort_by_key(|n| n.seq);
    let wake = Collection::<WakeRow>::new(store.clone())
        .get(pid)
        .await?
        .map_or_else(Wake::default, |w| Wake {
            due: w.due,
            resume: w.resume,
        });
    Ok(Some(StoredProcess {
        row,
        tasks,
        vars,
        nodes,
        wake,
    }))
}

/// The dynamic nodes a process's task rows imply without a row of their
/// own: the shared act of a step's literal `uses` (the model's
/// [`Node::uses_act`](crate::tree::Node::uses_act)), one per task whose
/// node is neither in `model` nor among the `stored` nodes and whose parent
/// task runs such a step. `tasks` are in creation order.
pub(crate) fn implied_acts<'a>(
    tasks: &[TaskRow],
    stored: impl Iterator<Item = &'a NodeData>,
    model: &ModelTree,
) -> Vec<NodeData> {
    let mut known: std::collections::HashSet<&str> = stored.map(|n| n.id.as_str()).collect();
    let mut implied = Vec::new();
    for t in tasks {
        if model.find(&t.nid).is_some() || known.contains(t.nid.as_str()) {
            continue;
        }
        let step = t
            .parent
            .and_then(|p| tasks.get(p as usize))
            .and_then(|p| model.find(&p.nid));
        if let Some(n) = step.and_then(|s| model.shared_act_data(s, &t.nid)) {
            known.insert(t.nid.as_str());
            implied.push(n);
        }
    }
    implied
}

/// Rebuilds a process from its rows (nothing queued yet), with what is
/// stored for it.
pub(crate) fn rebuild(
    stored: StoredProcess,
    model: Arc<ModelTree>,
) -> Result<(Process, Persisted), String> {
    let StoredProcess {
        row,
        tasks,
        vars,
        nodes,
        wake,
    } = stored;
    let pid = row.id.clone();
    // Node rows follow the nodes an older store kept in the proc row.
    for (i, n) in nodes.iter().enumerate() {
        let expected = row.nodes.len() + i;
        if n.seq as usize != expected {
            return Err(format!(
                "process '{pid}': dynamic node rows are not contiguous (node '{}' has position {} where {expected} was expected)",
                n.node.id, n.seq
            ));
        }
    }
    let all_nodes: Vec<NodeData> = row
        .nodes
        .iter()
        .cloned()
        .chain(nodes.into_iter().map(|n| n.node))
        .collect();
    let mut data: std::collections::HashMap<String, Vars> = vars
        .into_iter()
        .map(|v| (task_row_id(&v.pid, &v.tid), v.data))
        .collect();
    let implied = implied_acts(&tasks, all_nodes.iter(), &model);
    let tree = crate::tree::ProcessTree::restore_with(model, &implied, &all_nodes)?;
    let mut rebuilt = Vec::with_capacity(tasks.len());
    for (i, t) in tasks.iter().enumerate() {
        if t.seq as usize != i {
            return Err(format!(
                "process '{pid}': task rows are not contiguous (task '{}' has position {} where {i} was expected)",
                t.tid, t.seq
            ));
        }
        let node = tree.find(&t.nid).ok_or_else(|| {
            format!(
                "process '{pid}': task '{}' runs node '{}', which is not in its tree",
                t.tid, t.nid
            )
        })?;
        let scope = data.remove(&task_row_id(&pid, &t.tid));
        rebuilt.push(Task {
            id: t.tid.clone(),
            node,
            parent: t.parent.map(|x| TaskTable::ix_at(x as usize)),
            prev: t.prev.map(|x| TaskTable::ix_at(x as usize)),
            state: t.state,
            data: scope.unwrap_or_default().into(),
            sign: crate::scheduler::Sign(t.sign),
            err: t.err.clone().map(Box::new),
            start_time: t.start_time,
            end_time: t.end_time,
            history: t.history.clone(),
        });
    }
    let parked = row.state == TaskState::None && rebuilt.is_empty();
    let mut process = Process::restore(pid, tree, rebuilt, row.env.clone())
        .map_err(|e| format!("process '{}': {e}", row.id))?;
    process.audience =
        crate::scheduler::Audience::restore(row.started_by.clone(), row.audience.clone());
    process.paused = row.paused.clone();
    process.concurrency_key = row.slot.as_ref().map(|s| s.key.clone());
    process
        .restore_jobs(&row.pending)
        .map_err(|e| format!("process '{}': {e}", row.id))?;
    if parked {
        // A parked process: its start options become the root's data.
        let root = process.root();
        process.tasks.set_data(root, &row.start_vars);
    }
    let persisted = Persisted {
        nodes_stored: all_nodes.len(),
        nodes_seen: process.tree.dynamic_len(),
        row,
        row_stored: true,
        wake,
    };
    Ok((process, persisted))
}
