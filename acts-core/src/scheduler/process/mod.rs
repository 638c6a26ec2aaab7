//! [`Process`]: one workflow run as a pure, synchronous state machine.
//!
//! It owns its tree, tasks and a queue of jobs (`exec` or `next` of a
//! task); [`Process::run`] works the queue until every task is terminal or
//! waits for a client, collecting the messages for clients. No I/O here:
//! the engine persists the state and delivers the messages after that.
//! May use: of the rest of the scheduler, its task table (`tasks`) and
//! its data-scope rules (`task_data`), task states (`state`), errors
//! (`task_error`), events (`task_event`), messages (`message`), seals
//! (`seal`) and trace (`trace`).

use std::collections::VecDeque;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod actions;
mod audience;
mod control;
mod failure;
mod flow;
mod gate;
mod inputs;
mod outputs;
mod packages;
mod request;
mod resume;
mod retry;
mod sealing;
mod spans;
mod step_views;
mod task_gate;
mod timeouts;
mod trace_spans;
mod undo;

pub use crate::model::{ACTION_NAMES, Action, UnknownAction};
pub use actions::ActionError;
pub use audience::{Audience, MAX_AUDIENCE, addressees};
pub use control::MAX_REASON_BYTES;
pub use request::Request;
pub use task_gate::{GatePass, GateUse, RateGate, TaskGate};

use crate::model::Vars;
use crate::package::PackageRegistry;
use crate::script::{ScriptEngine, ScriptKind};
use crate::tree::{ChildKind, ModelTree, NodeContent, NodeIx, ProcessTree};

use super::message::Message;
use super::state::TaskState;
use super::task_error::TaskError;
use super::tasks::{Sign, TaskIx, TaskTable};

/// Why and since when a process is paused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Pause {
    /// Who paused it (`None`: the embedding application).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// When (ms on the engine clock).
    pub at: i64,
    /// The operator's reason (may be empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// The data key holding an act's params as evaluated when it ran (only
/// when they had expressions); application packages read them too.
pub(crate) const PARAMS_KEY: &str = "__params";

/// The data key holding a finished task's evaluated exposes.
pub(super) const OUTPUTS_KEY: &str = "__outputs";

/// What a process needs from the engine to run.
#[derive(Clone, Copy)]
pub struct Services<'a> {
    /// Evaluates conditions, substitutions and code.
    pub scripts: &'a ScriptEngine,
    /// Knows the packages acts use.
    pub packages: &'a PackageRegistry,
    /// External data sealed into tasks (snapshots), if any.
    pub seals: Option<&'a dyn super::seal::Seals>,
    /// Which models are deployed (what a subflow may start); `None`: any
    /// id is taken as deployed.
    pub models: Option<&'a dyn ModelCatalog>,
    /// Bounds on the work of a process.
    pub limits: RunLimits,
    /// Which messages anyone listens for (the others are not built).
    pub interest: super::MessageInterest,
}

/// The deployed models, as the core asks about them.
pub trait ModelCatalog: Sync {
    /// Whether model `id` is deployed.
    fn has_model(&self, id: &str) -> bool;
}

/// Bounds on the work of a process, so a runaway loop neither runs forever
/// nor holds a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunLimits {
    /// Most tasks one node may have in one process (the reference's
    /// `max_node_run_times`; 0: no limit). One more fails the task that
    /// would create it, naming the node. Default 1000.
    pub max_node_runs: u32,
    /// Most jobs (a task's execution or its next pass) one
    /// [`Process::run`] does before it hands back with work left
    /// ([`Process::has_queued_work`]); the engine commits and continues in
    /// the next transition. Default 1,000.
    pub jobs_per_run: usize,
    /// Most bytes one task's data (a scope: its variables, as stored) may
    /// hold (0: no limit). A write that would pass it is not made and
    /// fails the task, naming the key and the sizes. Default 4 MiB.
    pub max_scope_bytes: usize,
}

impl Default for RunLimits {
    fn default() -> Self {
        Self {
            max_node_runs: 1000,
            jobs_per_run: 1_000,
            max_scope_bytes: 4 * 1024 * 1024,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Job {
    Exec(TaskIx),
    Next(TaskIx),
}

/// One workflow run (see the module docs).
pub struct Process {
    /// Process id.
    pub pid: String,
    /// The process's tree.
    pub tree: ProcessTree,
    /// Its tasks.
    pub tasks: TaskTable,
    /// Process environment (`$env`).
    pub env: Vars,
    /// Who started it and whom its interrupts addressed.
    pub audience: Audience,
    /// Set while an operator holds it (see [`Process::pause`]).
    pub paused: Option<Pause>,
    /// Its concurrency key (the model's `concurrency:`, as evaluated).
    pub concurrency_key: Option<String>,
    root: Option<TaskIx>,
    queue: VecDeque<Job>,
    messages: Vec<Message>,
    requests: Vec<Request>,
    /// The limits of the current run (set from [`Services`] by each run).
    limits: RunLimits,
    /// Jobs a stored process had queued (its last transition handed back
    /// with work left); [`resume`](Self::resume) queues exactly these.
    restored_jobs: Option<Vec<Job>>,
    /// Set when a job failed on the per-node run limit.
    limit_hit: bool,
    /// Whether any task waited at a gate (see `gate.rs`): only then are
    /// the tasks looked through for [`gates`](Self::gates).
    has_gates: bool,
}

impl Process {
    /// A new process of `model` with start options `vars` (they are root
    /// data and win over the workflow's own vars).
    pub fn new(pid: impl Into<String>, model: Arc<ModelTree>, vars: Vars) -> Self {
        let mut p = Self {
            pid: pid.into(),
            tree: ProcessTree::new(model),
            tasks: TaskTable::new(),
            env: Vars::new(),
            audience: Audience::default(),
            paused: None,
            concurrency_key: None,
            root: None,
            queue: VecDeque::new(),
            messages: Vec::new(),
            requests: Vec::new(),
            limits: RunLimits::default(),
            restored_jobs: None,
            limit_hit: false,
            has_gates: false,
        };
        let root_node = p.tree.root();
        // The root id is reserved; a fresh table cannot hold it yet.
        let root = p
            .tasks
            .create(&p.tree, "$".into(), root_node, None)
            .unwrap_or_else(|e| unreachable!("{e}"));
        p.tasks.set_data(root, &vars);
        p.root = Some(root);
        p.queue.push_back(Job::Exec(root));
        p
    }

    /// The root task.
    pub fn root(&self) -> TaskIx {
        // Set in `new`, never cleared.
        self.root
            .unwrap_or_else(|| unreachable!("a process always has a root task"))
    }

    /// The process state (its root task's state).
    pub fn state(&self) -> TaskState {
        self.tasks
            .get(self.root())
            .map_or(TaskState::None, |t| t.state)
    }

    /// The process outputs: the root's outputs (the workflow's `exposes`).
    pub fn outputs(&self) -> Vars {
        if let Some(Value::Object(kept)) = self
            .tasks
            .get(self.root())
            .and_then(|x| x.data.get(OUTPUTS_KEY))
        {
            return kept.clone();
        }
        let exposes = match self.tree.node(self.tree.root()).map(|n| &*n.content) {
            Some(NodeContent::Workflow(w)) => w.exposes.clone(),
            _ => Vec::new(),
        };
        self.tasks.outputs(self.root(), &exposes)
    }

    /// The messages produced since the last call, in order.
    pub fn take_messages(&mut self) -> Vec<Message> {
        std::mem::take(&mut self.messages)
    }

    /// The model id (the workflow root node's id).
    pub fn model_id(&self) -> String {
        self.tree
            .node(self.tree.root())
            .map(|n| n.id.clone())
            .unwrap_or_default()
    }

    /// The workflow this process runs.
    pub fn workflow(&self) -> Option<&crate::model::Workflow> {
        match self.tree.node(self.tree.root()).map(|n| &*n.content) {
            Some(NodeContent::Workflow(w)) => Some(w),
            _ => None,
        }
    }

    /// Sets the engine clock's time for the transitions that follow (task
    /// start/end times, `$cost`, timeouts).
    pub fn set_now(&mut self, now: i64) {
        self.tasks.set_now(now);
    }

    /// Whether jobs are queued (the process has work to do).
    pub fn has_work(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Works the job queue until nothing is left to do.
    ///
    /// At most [`RunLimits::jobs_per_run`] jobs run; with work left,
    /// [`has_queued_work`](Self::has_queued_work) is true and the next
    /// call continues.
    pub fn run(&mut self, svc: Services<'_>) {
        if self.paused.is_some() {
            // Held by an operator: the queue waits for `unpause`.
            return;
        }
        self.limits = svc.limits;
        self.tasks.set_max_scope_bytes(svc.limits.max_scope_bytes);
        let mut budget = svc.limits.jobs_per_run.max(1);
        let _process = self.process_span().entered();
        while budget > 0
            && let Some(job) = self.queue.pop_front()
        {
            budget -= 1;
            let (Job::Exec(t) | Job::Next(t)) = job;
            let _task = self.task_span(t).entered();
            let (task, mut result) = match job {
                Job::Exec(t) => (t, self.exec(t, svc)),
                Job::Next(t) => (t, self.next(t, svc)),
            };
            if let Some(refused) = self.tasks.take_refused()
                && result.is_ok()
            {
                result = Err(TaskError::new("", refused));
            }
            if let Err(err) = result {
                // The run limit is hit when a finished task would be
                // followed: the error belongs to the scope that loops.
                let target = if std::mem::take(&mut self.limit_hit) {
                    self.nearest_open(task)
                } else {
                    task
                };
                self.fail(target, err, svc);
            }
        }
    }

    // ---- exec ---------------------------------------------------------

    fn exec(&mut self, t: TaskIx, svc: Services<'_>) -> Result<(), TaskError> {
        let state = self.state_of(t);
        if state.is_terminal() {
            return Ok(());
        }
        if state == TaskState::None {
            self.prepare(t, svc)?;
            self.seal(t, svc)?;
            self.tasks.set_state(t, TaskState::Ready);
            self.init(t, svc)?;
            self.emit(t, svc);
            if self.state_of(t) != TaskState::Ready {
                self.queue.push_back(Job::Next(t));
                return Ok(());
            }
        }
        if self.state_of(t) == TaskState::Ready {
            if self.wait_at_gate(t, svc)? {
                // Pending until the engine opens its gate.
                return Ok(());
            }
            self.tasks.set_state(t, TaskState::Running);
            self.run_kind(t, svc)?;
            // Running is silent; an interrupt tells clients. A terminal state
            // reached while running (an action package) was already told.
            if self.state_of(t) == TaskState::Interrupt {
                self.emit(t, svc);
            }
        }
        self.queue.push_back(Job::Next(t));
        Ok(())
    }

    /// Whether task `t` runs a node of `kind` (no clone of the node).
    fn is_kind(&self, t: TaskIx, kind: crate::model::NodeKind) -> bool {
        self.tasks
            .get(t)
            .and_then(|x| self.tree.node(x.node))
            .is_some_and(|n| n.content.kind() == kind)
    }

    /// The content of task `t`'s node (shared, cheap to hold).
    fn content(&self, t: TaskIx) -> Option<Arc<NodeContent>> {
        let node = self.tasks.get(t)?.node;
        self.tree.node(node).map(|n| n.content.clone())
    }

    fn state_of(&self, t: TaskIx) -> TaskState {
        self.tasks.get(t).map_or(TaskState::None, |x| x.state)
    }

    fn init(&mut self, t: TaskIx, svc: Services<'_>) -> Result<(), TaskError> {
        match self.content(t).as_deref() {
            Some(NodeContent::Workflow(w)) => {
                for v in &w.env {
                    self.env.insert(v.name.clone(), v.value.clone());
                }
            }
            Some(NodeContent::Step(s)) => {
                for guard in [&s.r#if, &s.r#while].into_iter().flatten() {
                    if !self.condition(t, guard, svc)? {
                        self.tasks.set_state(t, TaskState::Skipped);
                        return Ok(());
                    }
                }
            }
            Some(NodeContent::Branch(b)) => {
                self.tasks.sign(t, Sign::NO_EMIT);
                if !b.needs.is_empty() {
                    self.tasks.set_state(t, TaskState::Pending);
                } else if let Some(cond) = &b.r#if {
                    if !self.condition(t, cond, svc)? {
                        self.tasks.set_state(t, TaskState::Skipped);
                    }
                } else if !b.r#else {
                    self.tasks.set_state(t, TaskState::Skipped);
                } else if self.sibling_branches(t) > 1 {
                    self.tasks.set_state(t, TaskState::Pending);
                }
            }
            Some(NodeContent::Act(a)) => {
                if let Some(cond) = &a.r#if
                    && !self.condition(t, cond, svc)?
                {
                    self.tasks.set_state(t, TaskState::Skipped);
                    return Ok(());
                }
                if a.uses.trim().is_empty() {
                    let nid = self.node_id(t);
                    return Err(TaskError::new(
                        "",
                        format!("cannot find 'uses' in act '{nid}'"),
                    ));
                }
                self.tasks.sign(t, Sign::NO_EMIT);
            }
            None => {}
        }
        Ok(())
    }

    /// How many branches the step owning branch task `t` has.
    fn sibling_branches(&self, t: TaskIx) -> usize {
        let Some(parent_node) = self
            .tasks
            .get(t)
            .and_then(|x| x.parent)
            .and_then(|p| self.tasks.get(p))
            .map(|p| p.node)
        else {
            return 0;
        };
        self.tree
            .children(parent_node)
            .iter()
            .filter(|(k, c)| {
                *k == ChildKind::Normal
                    && matches!(
                        self.tree.node(*c).map(|n| &*n.content),
                        Some(NodeContent::Branch(_))
                    )
            })
            .count()
    }

    fn run_kind(&mut self, t: TaskIx, svc: Services<'_>) -> Result<(), TaskError> {
        match self.content(t).as_deref() {
            Some(NodeContent::Step(s)) => {
                if let Some(uses) = &s.uses {
                    // Literal params: the act built with the model tree,
                    // shared (no copy per run).
                    let owner = self.node_of(t);
                    if let Some(node) = self.tree.dispatch_shared(owner) {
                        self.queue_act(t, node)?;
                    } else {
                        let params =
                            self.eval_params(t, std::borrow::Cow::Borrowed(&s.params), svc)?;
                        self.dispatch_act(t, crate::tree::step_act(s, uses, params))?;
                    }
                }
            }
            Some(NodeContent::Branch(b)) => {
                if let Some(script) = &b.run {
                    // The result is ignored; what the script writes
                    // (`$set`, `$set_process_var`, `$env`) is applied.
                    let out = svc
                        .scripts
                        .eval(ScriptKind::Expression, script, self.script_scope(t, script))
                        .map_err(|e| TaskError::new("", e.to_string()))?;
                    self.apply_effects(t, out.effects);
                }
            }
            Some(NodeContent::Act(a)) => {
                self.tasks.unsign(t, Sign::NO_EMIT);
                self.run_act(t, a, svc)?;
            }
            Some(NodeContent::Workflow(_)) | None => {}
        }
        Ok(())
    }

    /// The node task `t` runs (the root node for an unknown task).
    fn node_of(&self, t: TaskIx) -> NodeIx {
        self.tasks
            .get(t)
            .map_or_else(|| self.tree.root(), |x| x.node)
    }
}

impl Process {
    /// An act task's params as clients see them (evaluated when the act
    /// ran; the definition's while it has not); `Null` for other tasks.
    pub fn act_params(&self, ix: TaskIx) -> Value {
        let (Some(t), Some(node)) = (
            self.tasks.get(ix),
            self.tasks.get(ix).and_then(|t| self.tree.node(t.node)),
        ) else {
            return Value::Null;
        };
        match &*node.content {
            NodeContent::Act(a) => t
                .data
                .get(PARAMS_KEY)
                .cloned()
                .unwrap_or_else(|| a.params.to_value()),
            _ => Value::Null,
        }
    }
}
