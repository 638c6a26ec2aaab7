//! [`Process`]: one workflow run as a pure, synchronous state machine.
//!
//! The process owns its tree and tasks and a queue of jobs (`exec` or
//! `next` of a task). [`Process::run`] works the queue until nothing is left
//! to do (every task is terminal or waits for a client), collecting the
//! messages clients are to receive. No I/O happens here: the engine around it
//! persists the resulting state and delivers the messages after that.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::Value;

use crate::model::{Act, Variant, Vars};
use crate::package::{PackageRegistry, RunAs};
use crate::script::{ScriptEffect, ScriptEngine, ScriptKind, substitute};
use crate::tree::{ChildKind, ModelTree, NodeContent, NodeIx, ProcessTree, short_id};

use super::message::{Message, message_state};
use super::state::TaskState;
use super::tasks::{Sign, TaskIx, TaskTable};

/// What a process needs from the engine to run.
#[derive(Clone, Copy)]
pub struct Services<'a> {
    /// Evaluates conditions, substitutions and code.
    pub scripts: &'a ScriptEngine,
    /// Knows the packages acts use.
    pub packages: &'a PackageRegistry,
}

/// A client action on an act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Complete the act (wire name `next`), folding the options into it.
    Complete,
    /// Submit the act.
    Submit,
    /// Skip the act and its waiting siblings.
    Skip,
    /// Abort the act and every ancestor up to the process.
    Abort,
    /// Fail the act with `ecode` (and `message`) from the options.
    Error,
    /// Remove the act.
    Remove,
    /// Write the options into the process's root data.
    SetProcessVars,
}

impl Action {
    /// The action with wire name `name` (`next` and `complete` are the same).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "next" | "complete" => Action::Complete,
            "submit" => Action::Submit,
            "skip" => Action::Skip,
            "abort" => Action::Abort,
            "error" => Action::Error,
            "remove" => Action::Remove,
            "set_process_vars" | "set_vars" => Action::SetProcessVars,
            _ => return None,
        })
    }
}

/// Why an action was refused; nothing was changed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ActionError {
    /// No task with that id.
    #[error("process '{pid}': cannot find task '{tid}'")]
    UnknownTask {
        /// The process.
        pid: String,
        /// The task asked for.
        tid: String,
    },
    /// The task is not an act.
    #[error("process '{pid}': task '{tid}' is not an act task")]
    NotAnAct {
        /// The process.
        pid: String,
        /// The task.
        tid: String,
    },
    /// The task is already terminal.
    #[error("task '{pid}:{tid}' is already completed ({state})")]
    AlreadyCompleted {
        /// The process.
        pid: String,
        /// The task.
        tid: String,
        /// Its state.
        state: TaskState,
    },
    /// `push` needs a step task.
    #[error("process '{pid}': task '{tid}' is not a step task")]
    NotAStep {
        /// The process.
        pid: String,
        /// The task.
        tid: String,
    },
    /// The options do not have the shape the action needs.
    #[error("action on task '{pid}:{tid}': invalid options: {message}")]
    BadOptions {
        /// The process.
        pid: String,
        /// The task.
        tid: String,
        /// What is wrong.
        message: String,
    },
    /// A required option is missing.
    #[error("action on task '{pid}:{tid}': missing option '{option}'")]
    MissingOption {
        /// The process.
        pid: String,
        /// The task.
        tid: String,
        /// The option.
        option: &'static str,
    },
}

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
    root: Option<TaskIx>,
    queue: VecDeque<Job>,
    messages: Vec<Message>,
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
            root: None,
            queue: VecDeque::new(),
            messages: Vec::new(),
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
        let exposes = match self.tree.node(self.tree.root()).map(|n| &n.content) {
            Some(NodeContent::Workflow(w)) => w.exposes.clone(),
            _ => Vec::new(),
        };
        self.tasks.outputs(self.root(), &exposes)
    }

    /// The messages produced since the last call, in order.
    pub fn take_messages(&mut self) -> Vec<Message> {
        std::mem::take(&mut self.messages)
    }

    /// Works the job queue until nothing is left to do.
    pub fn run(&mut self, svc: Services<'_>) {
        while let Some(job) = self.queue.pop_front() {
            let (task, result) = match job {
                Job::Exec(t) => (t, self.exec(t, svc)),
                Job::Next(t) => (t, self.next(t, svc)),
            };
            if let Err((ecode, message)) = result {
                self.fail(task, &ecode, &message, svc);
            }
        }
    }

    // ---- exec ---------------------------------------------------------

    fn exec(&mut self, t: TaskIx, svc: Services<'_>) -> Result<(), (String, String)> {
        let state = self.state_of(t);
        if state.is_completed() {
            return Ok(());
        }
        if state == TaskState::None {
            self.prepare(t, svc);
            self.tasks.set_state(t, TaskState::Ready);
            self.init(t, svc)?;
            self.emit(t);
            if self.state_of(t) != TaskState::Ready {
                self.queue.push_back(Job::Next(t));
                return Ok(());
            }
        }
        if self.state_of(t) == TaskState::Ready {
            self.tasks.set_state(t, TaskState::Running);
            self.run_kind(t, svc)?;
            // Running is silent; an interrupt tells clients. A terminal state
            // reached while running (an action package) was already told.
            if self.state_of(t) == TaskState::Interrupt {
                self.emit(t);
            }
        }
        self.queue.push_back(Job::Next(t));
        Ok(())
    }

    fn content(&self, t: TaskIx) -> Option<NodeContent> {
        let node = self.tasks.get(t)?.node;
        self.tree.node(node).map(|n| n.content.clone())
    }

    fn state_of(&self, t: TaskIx) -> TaskState {
        self.tasks.get(t).map_or(TaskState::None, |x| x.state)
    }

    /// inputs = prev's outputs overlaid with the node's vars (evaluated).
    fn prepare(&mut self, t: TaskIx, svc: Services<'_>) {
        let mut inputs = match self.tasks.get(t).and_then(|x| x.prev) {
            Some(prev) => self.tasks.outputs(prev, &self.exposes_of(prev)),
            None => Vars::new(),
        };
        let vars: Vec<Variant> = match self.content(t) {
            Some(NodeContent::Workflow(w)) => w.vars.clone(),
            Some(NodeContent::Step(s)) => s.vars.clone(),
            Some(NodeContent::Branch(b)) => b.vars.clone(),
            Some(NodeContent::Act(a)) => a.vars.clone(),
            None => Vec::new(),
        };
        let scope = self.tasks.script_scope(t);
        for v in vars {
            inputs.insert(
                v.name.clone(),
                substitute::vars(svc.scripts, &v.value, &scope),
            );
        }
        if t == self.root() {
            // Start options were set before; they win over the workflow vars.
            let options = self
                .tasks
                .get(t)
                .map(|x| x.data.clone())
                .unwrap_or_default();
            inputs.extend(options);
        }
        self.tasks.set_data(t, &inputs);
    }

    fn exposes_of(&self, t: TaskIx) -> Vec<Variant> {
        match self.content(t) {
            Some(NodeContent::Step(s)) => s.exposes,
            Some(NodeContent::Branch(b)) => b.exposes,
            Some(NodeContent::Act(a)) => a.exposes,
            Some(NodeContent::Workflow(w)) => w.exposes,
            None => Vec::new(),
        }
    }

    fn condition(
        &self,
        t: TaskIx,
        expr: &str,
        svc: Services<'_>,
    ) -> Result<bool, (String, String)> {
        svc.scripts
            .eval_bool(expr, self.tasks.script_scope(t))
            .map_err(|e| (String::new(), e.to_string()))
    }

    fn init(&mut self, t: TaskIx, svc: Services<'_>) -> Result<(), (String, String)> {
        match self.content(t) {
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
                    return Err((String::new(), format!("cannot find 'uses' in act '{nid}'")));
                }
                self.tasks.sign(t, Sign::NO_EMIT);
            }
            None => {}
        }
        Ok(())
    }

    fn node_id(&self, t: TaskIx) -> String {
        self.tasks
            .get(t)
            .and_then(|x| self.tree.node(x.node))
            .map(|n| n.id.clone())
            .unwrap_or_default()
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
                        self.tree.node(*c).map(|n| &n.content),
                        Some(NodeContent::Branch(_))
                    )
            })
            .count()
    }

    fn run_kind(&mut self, t: TaskIx, svc: Services<'_>) -> Result<(), (String, String)> {
        match self.content(t) {
            Some(NodeContent::Step(s)) => {
                if let Some(uses) = &s.uses {
                    let scope = self.tasks.script_scope(t);
                    let mut act = Act::new(
                        uses.clone(),
                        substitute::params(svc.scripts, &s.params, &scope),
                    );
                    act.name = s.name.clone();
                    act.options = s.options.clone();
                    let node = self
                        .tasks
                        .get(t)
                        .map(|x| x.node)
                        .unwrap_or_else(|| self.tree.root());
                    let act_node = self.tree.dispatch_act(node, act);
                    let child = self.new_task(act_node, Some(t))?;
                    self.queue.push_back(Job::Exec(child));
                }
            }
            Some(NodeContent::Branch(b)) => {
                if let Some(script) = &b.run {
                    svc.scripts
                        .eval(ScriptKind::Expression, script, self.tasks.script_scope(t))
                        .map_err(|e| (String::new(), e.to_string()))?;
                }
            }
            Some(NodeContent::Act(a)) => {
                self.tasks.unsign(t, Sign::NO_EMIT);
                self.run_act(t, &a, svc)?;
            }
            Some(NodeContent::Workflow(_)) | None => {}
        }
        Ok(())
    }

    fn new_task(&mut self, node: NodeIx, prev: Option<TaskIx>) -> Result<TaskIx, (String, String)> {
        loop {
            match self.tasks.create(&self.tree, short_id(), node, prev) {
                Ok(t) => return Ok(t),
                Err(_) => continue, // an id collision: draw another id
            }
        }
    }

    fn run_act(&mut self, t: TaskIx, act: &Act, svc: Services<'_>) -> Result<(), (String, String)> {
        let Some(def) = svc.packages.get(&act.uses) else {
            return Err((String::new(), format!("unknown package '{}'", act.uses)));
        };
        let run_as = def.run_as;
        let scope = self.tasks.script_scope(t);
        let params = substitute::params(svc.scripts, &act.params, &scope);
        svc.packages
            .check_params(&act.uses, &params)
            .map_err(|e| (String::new(), e.to_string()))?;
        let mut data = Vars::new();
        data.insert(
            "__run_as".into(),
            Value::String(format!("{run_as:?}").to_lowercase()),
        );
        self.tasks.set_data(t, &data);
        match run_as {
            RunAs::Irq => self.tasks.set_state(t, TaskState::Interrupt),
            RunAs::Msg => {}
            RunAs::Func => match act.uses.as_str() {
                "acts.transform.set" => {
                    if let Value::Object(vars) = params {
                        self.tasks.update_data(t, &vars);
                    }
                }
                "acts.transform.code" => {
                    let code = params.as_str().unwrap_or_default();
                    let out = svc
                        .scripts
                        .eval(ScriptKind::Code, code, self.tasks.script_scope(t))
                        .map_err(|e| (String::new(), e.to_string()))?;
                    self.apply_effects(t, out.effects);
                    if let Value::Object(vars) = out.value {
                        self.tasks.update_data(t, &vars);
                    }
                }
                "acts.core.block" => {
                    let sequence = params.get("mode").and_then(Value::as_str) != Some("parallel");
                    let acts = self.acts_param(&params, &act.options)?;
                    let node = self
                        .tasks
                        .get(t)
                        .map(|x| x.node)
                        .unwrap_or_else(|| self.tree.root());
                    self.tree.build_acts(node, acts, sequence);
                }
                "acts.core.parallel" | "acts.core.sequence" => {
                    let items = params
                        .get("in")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    let mode = if act.uses == "acts.core.parallel" {
                        "parallel"
                    } else {
                        "sequence"
                    };
                    let inner = params
                        .get("acts")
                        .cloned()
                        .unwrap_or(Value::Array(Vec::new()));
                    let blocks: Vec<Act> = items
                        .into_iter()
                        .enumerate()
                        .map(|(i, v)| {
                            let mut b = Act::new(
                                "acts.core.block",
                                serde_json::json!({"mode": "parallel", "acts": inner}),
                            );
                            b.options.insert("$index".into(), Value::from(i));
                            b.options.insert("$value".into(), v);
                            b
                        })
                        .collect();
                    let node = self
                        .tasks
                        .get(t)
                        .map(|x| x.node)
                        .unwrap_or_else(|| self.tree.root());
                    self.tree.build_acts(node, blocks, mode == "sequence");
                }
                "acts.core.action" => {
                    let name = params
                        .get("action")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let Some(action) = Action::from_name(name) else {
                        return Err((
                            String::new(),
                            format!(
                                "acts.core.action: action '{name}' cannot be applied by a package"
                            ),
                        ));
                    };
                    let options = params
                        .get("options")
                        .and_then(Value::as_object)
                        .cloned()
                        .unwrap_or_default();
                    self.apply_action(t, action, options, svc)
                        .map_err(|e| (String::new(), e.to_string()))?;
                }
                other => {
                    return Err((
                        String::new(),
                        format!(
                            "package '{other}' cannot run yet in this engine version (subflow needs the engine)"
                        ),
                    ));
                }
            },
        }
        Ok(())
    }

    /// The `acts` list of a block's params, each act given the block's
    /// options (the reference moved them into the first act only).
    fn acts_param(&self, params: &Value, options: &Vars) -> Result<Vec<Act>, (String, String)> {
        let list = params
            .get("acts")
            .cloned()
            .unwrap_or(Value::Array(Vec::new()));
        let mut acts: Vec<Act> = serde_json::from_value(list)
            .map_err(|e| (String::new(), format!("`acts` is not a list of acts: {e}")))?;
        for a in &mut acts {
            for (k, v) in options {
                a.options.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        Ok(acts)
    }

    fn apply_effects(&mut self, t: TaskIx, effects: Vec<ScriptEffect>) {
        for effect in effects {
            match effect {
                ScriptEffect::Set { name, value } => {
                    let mut v = Vars::new();
                    v.insert(name, value);
                    self.tasks.update_data(t, &v);
                }
                ScriptEffect::SetProcessVar { name, value } => {
                    let mut v = Vars::new();
                    v.insert(name, value);
                    let root = self.root();
                    self.tasks.set_data(root, &v);
                }
                ScriptEffect::SetEnv { name, value } => {
                    self.env.insert(name, value);
                }
            }
        }
    }

    // ---- next ---------------------------------------------------------

    fn next(&mut self, t: TaskIx, svc: Services<'_>) -> Result<(), (String, String)> {
        let Some(task) = self.tasks.get(t) else {
            return Ok(());
        };
        if task.sign.has(Sign::NEXT_COMPLETE) {
            return Ok(());
        }
        let state = task.state;
        let content = self.content(t);
        // A `uses` step waits for its acts.
        if state == TaskState::Running
            && matches!(&content, Some(NodeContent::Step(s)) if s.uses.is_some())
            && !task.sign.has(Sign::USES_COMPLETE)
        {
            let acts: Vec<TaskIx> = self
                .tasks
                .children(t)
                .into_iter()
                .filter(|c| matches!(self.content(*c), Some(NodeContent::Act(_))))
                .collect();
            let settled = |c: &TaskIx| {
                self.tasks.get(*c).is_some_and(|x| {
                    x.state.is_completed()
                        && (x.sign.has(Sign::NEXT_COMPLETE) || x.state == TaskState::Error)
                })
            };
            if !acts.iter().all(settled) {
                return Ok(());
            }
            self.tasks.sign(t, Sign::USES_COMPLETE);
        }
        // Schedule the node's children once.
        if state == TaskState::Running
            && !self
                .tasks
                .get(t)
                .is_some_and(|x| x.sign.has(Sign::IN_CHILDREN))
        {
            let node = self
                .tasks
                .get(t)
                .map(|x| x.node)
                .unwrap_or_else(|| self.tree.root());
            let children: Vec<NodeIx> = self
                .tree
                .children(node)
                .into_iter()
                .filter(|(k, _)| *k == ChildKind::Normal)
                .map(|(_, c)| c)
                .collect();
            if !children.is_empty() {
                self.tasks.sign(t, Sign::IN_CHILDREN);
                for c in children {
                    let child = self.new_task(c, Some(t))?;
                    self.queue.push_back(Job::Exec(child));
                }
                return Ok(());
            }
        }
        self.auto_complete(t, svc)?;
        if self
            .tasks
            .get(t)
            .is_some_and(|x| x.sign.has(Sign::NEXT_COMPLETE))
        {
            return Ok(()); // the error was restored and propagated
        }
        let state = self.state_of(t);
        if !(state.is_completed() || state == TaskState::Interrupt) {
            return Ok(());
        }
        let go_parent = self.kind_next(t, state)?;
        if state.is_completed() {
            self.tasks.sign(t, Sign::NEXT_COMPLETE);
        }
        if go_parent && let Some(parent) = self.tasks.get(t).and_then(|x| x.parent) {
            let outputs = self.tasks.outputs(t, &self.exposes_of(t));
            self.tasks.update_data(parent, &outputs);
            return self.next(parent, svc);
        }
        Ok(())
    }

    fn auto_complete(&mut self, t: TaskIx, svc: Services<'_>) -> Result<(), (String, String)> {
        if self.state_of(t) != TaskState::Running {
            return Ok(());
        }
        if matches!(self.content(t), Some(NodeContent::Act(_)))
            && self
                .tasks
                .get(t)
                .and_then(|x| x.data.get("__run_as"))
                .and_then(Value::as_str)
                == Some("msg")
        {
            self.tasks.set_state(t, TaskState::Completed);
            self.emit(t);
            return Ok(());
        }
        let children = self.tasks.children(t);
        for &c in &children {
            if self.state_of(c) == TaskState::Pending && self.resume_if_ready(c, &children) {
                self.tasks.set_state(c, TaskState::Ready);
                self.exec(c, svc)?;
            }
        }
        let all_done = children.iter().all(|c| self.state_of(*c).is_completed());
        let auto = !self
            .tasks
            .get(t)
            .is_some_and(|x| x.sign.has(Sign::NO_AUTO_COMPLETE));
        if all_done && auto {
            let handling_error = self.tasks.get(t).is_some_and(|x| x.sign.has(Sign::ERROR));
            let catches: Vec<TaskIx> = children
                .iter()
                .copied()
                .filter(|c| self.tasks.get(*c).is_some_and(|x| x.sign.has(Sign::CATCH)))
                .collect();
            if handling_error
                && catches
                    .iter()
                    .all(|c| self.state_of(*c) == TaskState::Skipped)
            {
                // No catch matched: the original error stands.
                let data = self
                    .tasks
                    .get(t)
                    .map(|x| x.data.clone())
                    .unwrap_or_default();
                let text = |k: &str| {
                    data.get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                self.tasks.set_err(t, &text("ecode"), &text("message"));
                self.tasks.sign(t, Sign::NEXT_COMPLETE);
                self.propagate_error(t, svc);
                return Ok(());
            }
            self.tasks.set_state(t, TaskState::Completed);
            self.emit(t);
        }
        Ok(())
    }

    /// Whether a pending branch may run now; an `else` branch whose sibling
    /// did not skip is skipped here instead.
    fn resume_if_ready(&mut self, c: TaskIx, siblings: &[TaskIx]) -> bool {
        let Some(NodeContent::Branch(b)) = self.content(c) else {
            return true;
        };
        let others: Vec<TaskIx> = siblings.iter().copied().filter(|s| *s != c).collect();
        if !b.needs.is_empty() {
            return others
                .iter()
                .any(|s| b.needs.contains(&self.node_id(*s)) && self.state_of(*s).is_completed());
        }
        if b.r#else {
            if others
                .iter()
                .all(|s| self.state_of(*s) == TaskState::Skipped)
            {
                return true;
            }
            if others.iter().any(|s| {
                let st = self.state_of(*s);
                st.is_completed() && st != TaskState::Skipped
            }) {
                self.tasks.set_state(c, TaskState::Skipped);
            }
            return false;
        }
        true
    }

    /// The kind's decision after a task finished: `true` to hand over to
    /// the parent, `false` when the flow continues elsewhere.
    fn kind_next(&mut self, t: TaskIx, state: TaskState) -> Result<bool, (String, String)> {
        let node = self
            .tasks
            .get(t)
            .map(|x| x.node)
            .unwrap_or_else(|| self.tree.root());
        let Some(n) = self.tree.node(node).cloned() else {
            return Ok(true);
        };
        match &n.content {
            NodeContent::Step(s) => {
                let successor = if state == TaskState::Skipped {
                    n.chain
                } else if state.is_success() {
                    if s.r#while.is_some() {
                        Some(node)
                    } else {
                        n.next
                    }
                } else {
                    None
                };
                if let Some(succ) = successor {
                    let task = self.new_task(succ, Some(t))?;
                    // Every step of a catch chain is a catch (the reference
                    // marks only the first; see docs).
                    if self.tasks.get(t).is_some_and(|x| x.sign.has(Sign::CATCH)) {
                        self.tasks.sign(task, Sign::CATCH);
                    }
                    self.queue.push_back(Job::Exec(task));
                    return Ok(false);
                }
                Ok(true)
            }
            NodeContent::Act(_) => {
                if state == TaskState::Interrupt {
                    return Ok(false);
                }
                if (state.is_success() || state == TaskState::Skipped)
                    && let Some(succ) = n.next
                {
                    let task = self.new_task(succ, Some(t))?;
                    self.queue.push_back(Job::Exec(task));
                    return Ok(false);
                }
                Ok(true)
            }
            NodeContent::Workflow(_) | NodeContent::Branch(_) => Ok(true),
        }
    }

    // ---- errors, messages, actions ------------------------------------

    /// Fails `t` and propagates the error up to the root.
    fn fail(&mut self, t: TaskIx, ecode: &str, message: &str, svc: Services<'_>) {
        if self.state_of(t).is_completed() {
            return; // overridden by an action while its job ran
        }
        self.tasks.set_err(t, ecode, message);
        self.propagate_error(t, svc);
    }

    fn propagate_error(&mut self, t: TaskIx, _svc: Services<'_>) {
        let mut cur = t;
        loop {
            self.emit(cur);
            let Some(parent) = self.tasks.get(cur).and_then(|x| x.parent) else {
                return;
            };
            if self.state_of(parent).is_completed() {
                return;
            }
            let (ecode, message) = self
                .tasks
                .get(cur)
                .and_then(|x| x.err.clone())
                .unwrap_or_default();
            if matches!(self.content(cur), Some(NodeContent::Act(_))) {
                let outputs = self.tasks.outputs(cur, &self.exposes_of(cur));
                self.tasks.update_data(parent, &outputs);
            }
            self.tasks.set_err(parent, &ecode, &message);
            if self.start_catching(parent) {
                return;
            }
            cur = parent;
        }
    }

    /// A failed step with catches (and no scheduling flag yet) handles the
    /// error: it goes back to running (keeping `ecode`/`message` in its
    /// data) and its first catch step starts. Returns whether it did.
    fn start_catching(&mut self, step: TaskIx) -> bool {
        let Some(task) = self.tasks.get(step) else {
            return false;
        };
        if task.sign.0 != 0 {
            return false;
        }
        let first_catch = self
            .tree
            .children(task.node)
            .into_iter()
            .find(|(k, _)| *k == ChildKind::Catch)
            .map(|(_, c)| c);
        let Some(catch_node) = first_catch else {
            return false;
        };
        self.tasks.sign(step, Sign::ERROR);
        self.tasks.set_state(step, TaskState::Running);
        match self.new_task(catch_node, Some(step)) {
            Ok(c) => {
                self.tasks.sign(c, Sign::CATCH);
                self.queue.push_back(Job::Exec(c));
                true
            }
            Err(_) => false,
        }
    }

    fn emit(&mut self, t: TaskIx) {
        let Some(task) = self.tasks.get(t) else {
            return;
        };
        let state = task.state;
        let visible =
            state.is_completed() || matches!(state, TaskState::Ready | TaskState::Interrupt);
        if task.sign.has(Sign::NO_EMIT) || !visible {
            return;
        }
        let Some(node) = self.tree.node(task.node) else {
            return;
        };
        let (uses, params) = match &node.content {
            NodeContent::Act(a) => (Some(a.uses.clone()), a.params.clone()),
            NodeContent::Step(s) => (s.uses.clone(), Value::Null),
            _ => (None, Value::Null),
        };
        let key = params.get("key").and_then(Value::as_str).map(str::to_owned);
        let outputs = if state.is_completed() {
            self.tasks.outputs(t, &self.exposes_of(t))
        } else {
            Vars::new()
        };
        self.messages.push(Message {
            r#type: Message::type_of(node.content.kind()).to_owned(),
            state: message_state(state).to_owned(),
            pid: self.pid.clone(),
            tid: task.id.clone(),
            nid: node.id.clone(),
            name: node.content.name().to_owned(),
            uses,
            key,
            params,
            outputs,
        });
    }

    /// Applies a client action to act task `tid`, then runs what follows.
    pub fn act(
        &mut self,
        tid: &str,
        action: Action,
        options: Vars,
        svc: Services<'_>,
    ) -> Result<(), ActionError> {
        let (pid, tid_s) = (self.pid.clone(), tid.to_owned());
        let t = self
            .tasks
            .find_id(tid)
            .ok_or_else(|| ActionError::UnknownTask {
                pid: pid.clone(),
                tid: tid_s.clone(),
            })?;
        if !matches!(self.content(t), Some(NodeContent::Act(_))) {
            return Err(ActionError::NotAnAct { pid, tid: tid_s });
        }
        let state = self.state_of(t);
        let guarded = !matches!(action, Action::Submit | Action::Remove);
        if guarded && state.is_completed() {
            return Err(ActionError::AlreadyCompleted {
                pid,
                tid: tid_s,
                state,
            });
        }
        self.apply_action(t, action, options, svc)?;
        self.run(svc);
        Ok(())
    }

    /// Applies `action` to act task `t` (already checked to be an act that
    /// the action may touch) without running what follows.
    fn apply_action(
        &mut self,
        t: TaskIx,
        action: Action,
        options: Vars,
        svc: Services<'_>,
    ) -> Result<(), ActionError> {
        let pid = self.pid.clone();
        let tid_s = self.tasks.get(t).map(|x| x.id.clone()).unwrap_or_default();
        match action {
            Action::Complete | Action::Submit | Action::Remove => {
                if action != Action::Remove {
                    self.tasks.update_data(t, &options);
                }
                let to = match action {
                    Action::Complete => TaskState::Completed,
                    Action::Submit => TaskState::Submitted,
                    _ => TaskState::Removed,
                };
                self.tasks.set_state(t, to);
                self.emit(t);
                self.queue.push_back(Job::Next(t));
            }
            Action::Skip => {
                self.skip_waiting_siblings(t);
                self.tasks.set_state(t, TaskState::Skipped);
                self.emit(t);
                self.queue.push_back(Job::Next(t));
            }
            Action::Abort => {
                self.skip_waiting_siblings(t);
                self.tasks.set_data(t, &options);
                self.tasks.set_state(t, TaskState::Aborted);
                self.emit(t);
                let mut cur = t;
                while let Some(parent) = self.tasks.get(cur).and_then(|x| x.parent) {
                    for c in self.tasks.children(parent) {
                        match self.state_of(c) {
                            TaskState::Pending | TaskState::Ready | TaskState::None => {
                                self.tasks.set_state(c, TaskState::Skipped)
                            }
                            TaskState::Running | TaskState::Interrupt => {
                                self.tasks.set_state(c, TaskState::Aborted)
                            }
                            _ => {}
                        }
                    }
                    self.tasks.set_state(parent, TaskState::Aborted);
                    self.emit(parent);
                    cur = parent;
                }
            }
            Action::Error => {
                let ecode = options
                    .get("ecode")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let Some(ecode) = ecode.filter(|e| !e.is_empty()) else {
                    return Err(ActionError::MissingOption {
                        pid,
                        tid: tid_s,
                        option: "ecode",
                    });
                };
                let message = options
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                self.tasks.set_data(t, &options);
                self.fail(t, &ecode, &message, svc);
            }
            Action::SetProcessVars => {
                let root = self.root();
                self.tasks.set_data(root, &options);
                self.emit(t);
            }
        }
        Ok(())
    }

    /// The `push` action: runs a new act under step task `step_tid` (options
    /// are the act: `uses`, `params`, `id`, `name`, ...).
    pub fn push(
        &mut self,
        step_tid: &str,
        options: Vars,
        svc: Services<'_>,
    ) -> Result<(), ActionError> {
        let (pid, tid) = (self.pid.clone(), step_tid.to_owned());
        let t = self
            .tasks
            .find_id(step_tid)
            .ok_or_else(|| ActionError::UnknownTask {
                pid: pid.clone(),
                tid: tid.clone(),
            })?;
        if !matches!(self.content(t), Some(NodeContent::Step(_))) {
            return Err(ActionError::NotAStep { pid, tid });
        }
        let state = self.state_of(t);
        if state == TaskState::None || state.is_completed() {
            return Err(ActionError::AlreadyCompleted { pid, tid, state });
        }
        if !options
            .get("uses")
            .and_then(Value::as_str)
            .is_some_and(|u| !u.is_empty())
        {
            return Err(ActionError::MissingOption {
                pid,
                tid,
                option: "uses",
            });
        }
        let act: Act = serde_json::from_value(Value::Object(options)).map_err(|e| {
            ActionError::BadOptions {
                pid: pid.clone(),
                tid: tid.clone(),
                message: e.to_string(),
            }
        })?;
        let node = self
            .tasks
            .get(t)
            .map(|x| x.node)
            .unwrap_or_else(|| self.tree.root());
        let act_node = self.tree.dispatch_act(node, act);
        let child = self
            .new_task(act_node, Some(t))
            .map_err(|(_, m)| ActionError::BadOptions {
                pid,
                tid,
                message: m,
            })?;
        self.queue.push_back(Job::Exec(child));
        self.run(svc);
        Ok(())
    }

    fn skip_waiting_siblings(&mut self, t: TaskIx) {
        let Some(parent) = self.tasks.get(t).and_then(|x| x.parent) else {
            return;
        };
        for s in self.tasks.children(parent) {
            if s != t && !self.state_of(s).is_completed() {
                self.tasks.set_state(s, TaskState::Skipped);
                self.emit(s);
            }
        }
    }
}
