//! [`TaskTable`]: the tasks of one process — their records, lifecycle,
//! marks and what changed since the last save. The data-scope rules
//! between them (the reference engine's §3.7) are in `task_data.rs`.
//!
//! Tasks are records in a per-process table and refer to each other by
//! index, never by pointer: a process owns its whole task graph, so dropping
//! (evicting) a process frees everything at once — no reference cycle can
//! keep it alive.

use std::collections::HashMap;

use crate::tree::chunked::Chunked;
use crate::tree::{NodeIx, ProcessTree};

use super::scope::Scope;
use super::state::TaskState;
use super::task_error::TaskError;
use super::task_event::TaskEvent;

/// A task's position in its process's [`TaskTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskIx(u32);

impl TaskIx {
    pub(super) fn index(self) -> usize {
        self.0 as usize
    }
}

/// One run of one node.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// Task id: `$` for the root, a short id otherwise.
    pub id: String,
    /// The node this task runs.
    pub node: NodeIx,
    /// The enclosing task (data scopes fold up into it).
    pub parent: Option<TaskIx>,
    /// The task this one follows (its inputs come from it).
    pub prev: Option<TaskIx>,
    /// State.
    pub state: TaskState,
    /// The task's own data scope.
    pub data: Scope,
    /// Scheduling flags ([`Sign`]).
    pub sign: Sign,
    /// The error the task failed with: `(ecode, message)` (boxed: few
    /// tasks fail, and every task would otherwise carry its room).
    pub err: Option<Box<TaskError>>,
    /// When the task left `None` (ms since the epoch on the engine's clock).
    pub start_time: i64,
    /// When the task reached a terminal state (0 while it has not).
    pub end_time: i64,
    /// The client and operator actions applied to it, oldest first.
    pub history: Vec<TaskEvent>,
}

/// What changed in a task since its rows were last written (see
/// [`TaskTable::take_dirty`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Dirty {
    /// Lifecycle: state, flags, error, times, links.
    pub lifecycle: bool,
    /// The task's own data scope.
    pub vars: bool,
}

/// Scheduling flags of a task (the reference's `__sign` bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sign(pub u32);

impl Sign {
    /// The step is handling an error through its catches.
    pub const ERROR: u32 = 0x1;
    /// The task is a catch step.
    pub const CATCH: u32 = 0x2;
    /// The task is a timeout step: when it ends the flow returns to its
    /// owner step (later timeout steps are separate rules, not a chain).
    pub const TIMEOUT: u32 = 0x4;
    /// The task sends no client messages.
    pub const NO_EMIT: u32 = 0x8;
    /// The task's children were scheduled.
    pub const IN_CHILDREN: u32 = 0x10;
    /// The task does not complete when its children are done.
    pub const NO_AUTO_COMPLETE: u32 = 0x20;
    /// All acts of a `uses` step are done.
    pub const USES_COMPLETE: u32 = 0x40;
    /// The task's `next` pass finished.
    pub const NEXT_COMPLETE: u32 = 0x80;
    /// The act waits for work outside the process (an application package,
    /// a subflow child): the engine answers it with an action.
    pub const EXTERNAL: u32 = 0x100;
    /// The task waits at its gate (`concurrency:`, `rate:`) in state
    /// `pending`: the engine lets it through.
    pub const GATED: u32 = 0x200;
    /// The task's gate opened: it runs without asking again.
    pub const GATE_OPEN: u32 = 0x400;

    /// Whether `bit` is set.
    pub fn has(self, bit: u32) -> bool {
        self.0 & bit != 0
    }
}

/// The tasks of one process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskTable {
    /// The tasks, in creation order (in chunks: a long process's table
    /// never doubles, see [`Chunked`]).
    pub(super) tasks: Chunked<Task>,
    by_id: HashMap<String, TaskIx>,
    /// Each task's children, in creation order (kept as tasks are created,
    /// so finding them never scans the table).
    children: Chunked<Vec<TaskIx>>,
    /// What changed per task since the last [`take_dirty`](Self::take_dirty).
    pub(super) dirty: Chunked<Dirty>,
    /// The tasks marked in `dirty`, in the order they were first marked
    /// (so taking them does not scan the table).
    pub(super) dirty_list: Vec<TaskIx>,
    /// The tasks that have not ended (so the checks each transition makes
    /// — timeouts, waits, packages — do not walk every task a long
    /// process ever had).
    pub(super) open: std::collections::BTreeSet<TaskIx>,
    /// The engine clock's time, stamped into `start_time`/`end_time`.
    now: i64,
    /// How many tasks each node has (the per-node run limit reads it).
    runs: HashMap<NodeIx, u32>,
    /// Each task's data size (its JSON text, as stored), kept as it is
    /// written.
    pub(super) sizes: Chunked<usize>,
    /// Most bytes one task's data may hold (0: no limit).
    pub(super) max_scope_bytes: usize,
    /// The first write refused since [`take_refused`](Self::take_refused).
    pub(super) refused: Option<String>,
    /// The tasks that ended since [`take_ended`](Self::take_ended).
    pub(super) ended: Vec<TaskIx>,
}

impl TaskTable {
    /// How many tasks node `node` has in this process (how often it ran).
    pub fn runs_of(&self, node: NodeIx) -> u32 {
        self.runs.get(&node).copied().unwrap_or(0)
    }

    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many tasks the process has.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// The task at `ix`.
    pub fn get(&self, ix: TaskIx) -> Option<&Task> {
        self.tasks.get(ix.index())
    }

    /// The task with id `id`.
    pub fn find_id(&self, id: &str) -> Option<TaskIx> {
        self.by_id.get(id).copied()
    }

    /// Sets the time stamped into tasks that start or finish from now on.
    pub fn set_now(&mut self, now: i64) {
        self.now = now;
    }

    /// Records that `action` was applied to task `ix` by `by`, now.
    pub fn record(&mut self, ix: TaskIx, action: &str, by: Option<&str>) {
        self.record_event(
            ix,
            TaskEvent {
                action: action.to_owned(),
                by: by.map(str::to_owned),
                at: self.now,
                from: None,
                detail: None,
            },
        );
    }

    /// Records `event` in task `ix`'s history.
    pub fn record_event(&mut self, ix: TaskIx, event: TaskEvent) {
        self.task_mut(ix).history.push(event);
    }

    /// The time set by [`set_now`](Self::set_now).
    pub fn now(&self) -> i64 {
        self.now
    }

    /// A table rebuilt from stored tasks, given in creation order (their
    /// `parent`/`prev` indexes refer to that order). Nothing is dirty.
    pub fn restore(tasks: Vec<Task>) -> Result<Self, String> {
        let mut table = Self::new();
        for (i, task) in tasks.into_iter().enumerate() {
            for link in [task.parent, task.prev].into_iter().flatten() {
                if link.index() >= i {
                    return Err(format!(
                        "task '{}' links to a task stored after it",
                        task.id
                    ));
                }
            }
            if table
                .by_id
                .insert(task.id.clone(), TaskIx(i as u32))
                .is_some()
            {
                return Err(format!("task id '{}' is stored twice", task.id));
            }
            if let Some(p) = task.parent {
                table.children[p.index()].push(TaskIx(i as u32));
            }
            table.children.push(Vec::new());
            table.dirty.push(Dirty::default());
            if !task.state.is_terminal() {
                table.open.insert(TaskIx(i as u32));
            }
            *table.runs.entry(task.node).or_default() += 1;
            table.sizes.push(0);
            table.tasks.push(task);
        }
        table.recount_sizes();
        Ok(table)
    }

    /// The index of the task at position `i` in creation order (for
    /// rebuilding links from stored rows).
    pub fn ix_at(i: usize) -> TaskIx {
        TaskIx(i as u32)
    }

    /// The task's position in creation order.
    pub fn position(ix: TaskIx) -> usize {
        ix.index()
    }

    /// Creates a task of `node` following `prev`. Its parent is `prev` when
    /// the node is deeper than `prev`'s node, else `prev`'s parent (the
    /// reference engine's rule). Fails if `id` is taken.
    pub fn create(
        &mut self,
        tree: &ProcessTree,
        id: String,
        node: NodeIx,
        prev: Option<TaskIx>,
    ) -> Result<TaskIx, String> {
        if self.by_id.contains_key(&id) {
            return Err(format!("task id '{id}' is already used in this process"));
        }
        let level = |n: NodeIx| tree.node(n).map_or(0, |n| n.level);
        let parent = prev.and_then(|p| {
            let p_task = &self.tasks[p.index()];
            if level(node) > level(p_task.node) {
                Some(p)
            } else {
                p_task.parent
            }
        });
        let ix = TaskIx(self.tasks.len() as u32);
        self.tasks.push(Task {
            id: id.clone(),
            node,
            parent,
            prev,
            state: TaskState::None,
            data: Scope::new(),
            sign: Sign::default(),
            err: None,
            start_time: 0,
            end_time: 0,
            history: Vec::new(),
        });
        self.by_id.insert(id, ix);
        *self.runs.entry(node).or_default() += 1;
        self.sizes.push(0);
        self.children.push(Vec::new());
        self.dirty.push(Dirty {
            lifecycle: true,
            vars: false,
        });
        self.dirty_list.push(ix);
        self.open.insert(ix);
        if let Some(p) = parent {
            self.children[p.index()].push(ix);
        }
        Ok(ix)
    }

    /// Sets a task's state. Leaving `Error` clears the task's error;
    /// entering a non-terminal state clears `NEXT_COMPLETE`.
    pub fn set_state(&mut self, ix: TaskIx, state: TaskState) {
        let now = self.now;
        if state.is_terminal() {
            self.open.remove(&ix);
        } else {
            self.open.insert(ix);
        }
        let task = self.task_mut(ix);
        let ends = state.is_terminal() && !task.state.is_terminal();
        task.state = state;
        if state != TaskState::None && task.start_time == 0 {
            task.start_time = now;
        }
        task.end_time = if state.is_terminal() { now } else { 0 };
        if state != TaskState::Error {
            task.err = None;
        }
        if !state.is_terminal() {
            task.sign.0 &= !Sign::NEXT_COMPLETE;
        }
        if ends {
            self.ended.push(ix);
        }
    }

    /// Records why a task ended without changing its state (an operator's
    /// reason for terminating a process).
    pub fn attach_err(&mut self, ix: TaskIx, err: TaskError) {
        self.task_mut(ix).err = Some(Box::new(err));
    }

    /// Fails the task: records the error in its data (`ecode`, `message`)
    /// and sets it to `Error`.
    pub fn set_err(&mut self, ix: TaskIx, err: TaskError) {
        self.set_state(ix, TaskState::Error);
        for (k, v) in err.to_vars() {
            self.put(ix, &k, &v);
        }
        self.task_mut(ix).err = Some(Box::new(err));
    }

    /// Sets flag bits on a task.
    pub fn sign(&mut self, ix: TaskIx, bits: u32) {
        self.task_mut(ix).sign.0 |= bits;
    }

    /// Clears flag bits on a task.
    pub fn unsign(&mut self, ix: TaskIx, bits: u32) {
        self.task_mut(ix).sign.0 &= !bits;
    }

    /// The tasks whose parent is `ix`, in creation order.
    pub fn children(&self, ix: TaskIx) -> Vec<TaskIx> {
        self.children.get(ix.index()).cloned().unwrap_or_default()
    }

    /// Every task, in creation order.
    pub fn all(&self) -> impl Iterator<Item = (TaskIx, &Task)> {
        self.tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (TaskIx(i as u32), t))
    }
}
