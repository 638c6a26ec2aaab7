//! [`TaskTable`]: the tasks of one process and the data-scope rules between
//! them (the reference engine's §3.7, which compatibility depends on).
//!
//! Tasks are records in a per-process table and refer to each other by
//! index, never by pointer: a process owns its whole task graph, so dropping
//! (evicting) a process frees everything at once — no reference cycle can
//! keep it alive.

use std::collections::HashMap;

use serde_json::Value;

use crate::model::{Variant, Vars};
use crate::script::{ScriptScope, is_private};
use crate::tree::chunked::Chunked;
use crate::tree::{NodeIx, ProcessTree};

use super::scope::Scope;
use super::state::TaskState;
use super::task_error::TaskError;
use super::task_event::TaskEvent;

/// Whether `key` is engine-owned in a process's data: `pid` (the process's
/// id) and the `$parent_*` keys of a subflow child. User data — act
/// outputs, client action options, script writes, `set` acts — never
/// writes them: client actions that try are refused, scripts' writes are
/// ignored with a warning.
pub fn is_reserved(key: &str) -> bool {
    key == "pid" || key.starts_with("$parent_")
}

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

    /// The ancestors of `ix`, nearest first.
    pub fn ancestors(&self, ix: TaskIx) -> Vec<TaskIx> {
        let mut out = Vec::new();
        let mut cur = self.tasks[ix.index()].parent;
        while let Some(p) = cur {
            out.push(p);
            cur = self.tasks[p.index()].parent;
        }
        out
    }

    /// `find(name)`: the task's own value, else the nearest ancestor's.
    pub fn find(&self, ix: TaskIx, name: &str) -> Option<&Value> {
        std::iter::once(ix)
            .chain(self.ancestors(ix))
            .find_map(|t| self.tasks[t.index()].data.get(name))
    }

    /// The fold-up write: each non-private key goes to the **outermost**
    /// ancestor whose own data already holds it; then every key (private
    /// ones included) is written into the task itself. New keys therefore
    /// stay local until the task's outputs fold into its parent.
    ///
    /// Engine-owned keys ([`is_reserved`]) are never written: user data
    /// (act outputs, scripts, `set` acts) cannot change them.
    pub fn update_data(&mut self, ix: TaskIx, vars: &Vars) {
        let mut outermost_first = self.ancestors(ix);
        outermost_first.reverse();
        for (key, value) in vars {
            if is_private(key) || is_reserved(key) {
                continue;
            }
            if let Some(&holder) = outermost_first
                .iter()
                .find(|a| self.tasks[a.index()].data.contains_key(key))
            {
                self.put(holder, key, value);
            }
        }
        for (key, value) in vars {
            if !is_reserved(key) {
                self.put(ix, key, value);
            }
        }
    }

    /// A plain write of user data into the task's own data (no fold-up);
    /// engine-owned keys ([`is_reserved`]) are left as they are.
    pub fn set_user_data(&mut self, ix: TaskIx, vars: &Vars) {
        if vars.is_empty() {
            return;
        }
        for (key, value) in vars {
            if is_reserved(key) {
                tracing::warn!(key = %key, "ignored a write of an engine-owned key");
            } else {
                self.put(ix, key, value);
            }
        }
    }

    /// A plain write into the task's own data (no fold-up).
    pub fn set_data(&mut self, ix: TaskIx, vars: &Vars) {
        if vars.is_empty() {
            return;
        }
        for (key, value) in vars {
            self.put(ix, key, value);
        }
    }

    /// The task's outputs: with `exposes`, one entry per exposed name (a
    /// literal value as given; `null` looked up with [`find`](Self::find);
    /// expressions must be evaluated by the caller first); without, every
    /// non-private key of its own data.
    pub fn outputs(&self, ix: TaskIx, exposes: &[Variant]) -> Vars {
        if exposes.is_empty() {
            return self.tasks[ix.index()]
                .data
                .iter()
                .filter(|(k, _)| !is_private(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
        }
        exposes
            .iter()
            .map(|e| {
                let value = if e.value.is_null() {
                    self.find(ix, &e.name).cloned().unwrap_or(Value::Null)
                } else {
                    e.value.clone()
                };
                (e.name.clone(), value)
            })
            .collect()
    }

    /// What a script running in the task sees.
    pub fn script_scope(&self, ix: TaskIx) -> ScriptScope {
        // `$cost`: a recorded `__cost` (own, else an ancestor's), else the
        // time since the task started.
        let cost = self
            .find(ix, "__cost")
            .and_then(Value::as_i64)
            .unwrap_or_else(|| {
                let start = self.tasks[ix.index()].start_time;
                if start > 0 { self.now - start } else { 0 }
            });
        ScriptScope {
            cost_millis: cost.max(0) as u64,
            own: self.tasks[ix.index()].data.to_vars(),
            ancestors: self
                .ancestors(ix)
                .into_iter()
                .map(|a| self.tasks[a.index()].data.to_vars())
                .collect(),
            ..ScriptScope::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Act, Workflow};
    use crate::tree::ModelTree;
    use serde_json::json;
    use std::sync::Arc;

    fn vars(v: Value) -> Vars {
        v.as_object().cloned().unwrap_or_default()
    }

    /// Root `$` → step1 → its act, as the quick start's first step runs.
    fn quick_start() -> (TaskTable, ProcessTree, TaskIx, TaskIx, TaskIx) {
        let w = Workflow::new()
            .with_id("m")
            .with_step(|s| s.with_id("step1"))
            .with_step(|s| s.with_id("step2"));
        let mut tree = ProcessTree::new(Arc::new(ModelTree::build(&w).unwrap()));
        let step1 = tree.find("step1").unwrap();
        let act = tree.dispatch_act(step1, Act::new("acts.transform.set", json!({"a": 10})));
        let mut t = TaskTable::new();
        let root = t.create(&tree, "$".into(), tree.root(), None).unwrap();
        let s1 = t.create(&tree, "s1".into(), step1, Some(root)).unwrap();
        let a1 = t.create(&tree, "a1".into(), act, Some(s1)).unwrap();
        (t, tree, root, s1, a1)
    }

    #[test]
    fn parents_follow_levels() {
        let (mut t, tree, root, s1, a1) = quick_start();
        assert_eq!(t.get(s1).unwrap().parent, Some(root));
        assert_eq!(t.get(a1).unwrap().parent, Some(s1));
        // step2 follows step1 at the same level: same parent as step1.
        let s2 = t
            .create(&tree, "s2".into(), tree.find("step2").unwrap(), Some(s1))
            .unwrap();
        assert_eq!(t.get(s2).unwrap().parent, Some(root));
        assert_eq!(t.get(s2).unwrap().prev, Some(s1));
        assert!(
            t.create(&tree, "s2".into(), tree.root(), None).is_err(),
            "ids are unique"
        );
    }

    /// The data flow of the reference's quick start (spec §9.1).
    #[test]
    fn fold_up_writes_go_to_the_outermost_holder_and_new_keys_stay_local() {
        let (mut t, _, root, s1, a1) = quick_start();
        t.set_data(root, &vars(json!({"a": 0, "pid": "w1"})));
        t.update_data(a1, &vars(json!({"a": 10, "data": 20, "__run_as": "func"})));
        assert_eq!(
            t.get(root).unwrap().data,
            vars(json!({"a": 10, "pid": "w1"})),
            "a updated in place at the root"
        );
        assert_eq!(
            t.get(a1).unwrap().data,
            vars(json!({"a": 10, "data": 20, "__run_as": "func"}))
        );
        assert!(t.get(s1).unwrap().data.is_empty(), "new keys stay local");
        // Parent propagation: the act's outputs fold into the step.
        let outs = t.outputs(a1, &[]);
        assert_eq!(
            outs,
            vars(json!({"a": 10, "data": 20})),
            "private keys are not outputs"
        );
        t.update_data(s1, &outs);
        assert_eq!(t.get(s1).unwrap().data, vars(json!({"a": 10, "data": 20})));
        assert_eq!(t.find(a1, "pid"), Some(&json!("w1")));
        assert_eq!(t.find(a1, "nope"), None);
    }

    #[test]
    fn exposes_filter_outputs() {
        let (mut t, _, root, _, a1) = quick_start();
        t.set_data(root, &vars(json!({"region": "eu"})));
        t.set_data(a1, &vars(json!({"x": 1, "y": 2})));
        let exposes = vec![
            Variant::create("x", Value::Null),
            Variant::create("region", Value::Null),
            Variant::create("fixed", 7),
        ];
        assert_eq!(
            t.outputs(a1, &exposes),
            vars(json!({"x": 1, "region": "eu", "fixed": 7}))
        );
    }

    #[test]
    fn script_scope_sees_own_data_and_ancestors() {
        let (mut t, _, root, s1, a1) = quick_start();
        t.set_data(root, &vars(json!({"v": 1})));
        t.set_data(s1, &vars(json!({"v": 2})));
        t.set_data(a1, &vars(json!({"own": true})));
        let scope = t.script_scope(a1);
        assert_eq!(scope.find("v"), Some(&json!(2)));
        assert_eq!(scope.ancestors.len(), 2);
        assert_eq!(scope.globals()["own"], json!(true));
    }
}
