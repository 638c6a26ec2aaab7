//! Rebuilding a process from its stored rows so it continues exactly where
//! it was, and the work it hands to the engine ([`Request`]) again.

use std::collections::VecDeque;

use serde_json::Value;

use crate::model::Vars;
use crate::scheduler::{Sign, Task, TaskState, TaskTable};
use crate::tree::{NodeContent, ProcessTree};

use super::request::Request;
use super::{Job, Process};

/// The package of a subflow act (its child runs on its own).
const SUBFLOW: &str = "acts.core.subflow";

impl Process {
    /// Whether the last [`run`](Self::run) handed back with work left
    /// (its job budget ran out): the engine runs it again in a new
    /// transition.
    pub fn has_queued_work(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Whether an act waits for an application package (which a resume
    /// requests again). A subflow act's child runs on its own: it does not
    /// count.
    pub fn runs_packages(&self) -> bool {
        self.tasks.open().any(|(_, t)| {
            t.state == TaskState::Running
                && t.sign.has(Sign::EXTERNAL)
                && matches!(
                    self.tree.node(t.node).map(|n| &*n.content),
                    Some(NodeContent::Act(act)) if act.uses != SUBFLOW
                )
        })
    }

    /// The queued jobs as stored in the process row (`e:<tid>` to run a
    /// task, `n:<tid>` for its next pass), so a restart continues exactly
    /// where a transition that handed back left off.
    pub fn queued_jobs(&self) -> Vec<String> {
        self.queue
            .iter()
            .filter_map(|j| {
                let (kind, t) = match j {
                    Job::Exec(t) => ("e", *t),
                    Job::Next(t) => ("n", *t),
                };
                self.tasks.get(t).map(|x| format!("{kind}:{}", x.id))
            })
            .collect()
    }

    /// Gives a restored process the jobs it had queued when it was stored
    /// ([`queued_jobs`](Self::queued_jobs)); [`resume`](Self::resume)
    /// queues exactly these.
    pub fn restore_jobs(&mut self, jobs: &[String]) -> Result<(), String> {
        if jobs.is_empty() {
            return Ok(());
        }
        let mut out = Vec::with_capacity(jobs.len());
        for j in jobs {
            let (kind, tid) = j
                .split_once(':')
                .ok_or_else(|| format!("queued job '{j}' is malformed"))?;
            let t = self
                .tasks
                .find_id(tid)
                .ok_or_else(|| format!("queued job '{j}' names a missing task"))?;
            out.push(match kind {
                "e" => Job::Exec(t),
                "n" => Job::Next(t),
                _ => return Err(format!("queued job '{j}' is malformed")),
            });
        }
        self.restored_jobs = Some(out);
        Ok(())
    }

    /// The requests made since the last call, in order.
    pub fn take_requests(&mut self) -> Vec<Request> {
        std::mem::take(&mut self.requests)
    }

    /// A process rebuilt from stored state: its tree (the model and its
    /// dynamic nodes, [`ProcessTree::restore`]), its tasks in creation
    /// order, and its environment. Nothing is queued; call
    /// [`resume`](Self::resume) to continue.
    pub fn restore(
        pid: impl Into<String>,
        tree: ProcessTree,
        tasks: Vec<Task>,
        env: Vars,
    ) -> Result<Self, String> {
        for t in &tasks {
            if tree.node(t.node).is_none() {
                return Err(format!("task '{}' runs a node that does not exist", t.id));
            }
        }
        let tasks = TaskTable::restore(tasks)?;
        let root = tasks.find_id("$");
        let mut p = Self {
            pid: pid.into(),
            tree,
            tasks,
            env,
            audience: super::Audience::default(),
            paused: None,
            concurrency_key: None,
            root,
            queue: VecDeque::new(),
            messages: Vec::new(),
            requests: Vec::new(),
            limits: super::RunLimits::default(),
            restored_jobs: None,
            limit_hit: false,
            has_gates: false,
        };
        p.find_gates();
        if p.root.is_none() {
            // A row written before its root task (not something this engine
            // writes, but a store may hold one): start from the root.
            let root_node = p.tree.root();
            let root = p
                .tasks
                .create(&p.tree, "$".into(), root_node, None)
                .map_err(|e| format!("cannot create the root task: {e}"))?;
            p.root = Some(root);
        }
        Ok(p)
    }

    /// Queues what a restored process was doing when it was stored: tasks
    /// not yet run are executed, tasks whose children all finished take
    /// their `next` step, and external work its acts wait for is
    /// requested again (at least once). A process stored with jobs queued
    /// ([`restore_jobs`](Self::restore_jobs)) continues with exactly those.
    pub fn resume(&mut self) {
        let mut jobs = Vec::new();
        let mut requests = Vec::new();
        let restored = self.restored_jobs.take();
        // Only tasks that have not ended need anything.
        for (ix, task) in self.tasks.open() {
            match task.state {
                TaskState::None | TaskState::Ready if restored.is_none() => {
                    jobs.push(Job::Exec(ix));
                }
                TaskState::Pending if self.waits_at_gate(ix) => {
                    // Asked again: the engine knows it from the count (a
                    // repeated ask changes nothing) or lets it through.
                    requests.extend(self.gate_request(ix));
                }
                TaskState::Running => {
                    let children = self.tasks.children(ix);
                    let is_act = matches!(
                        self.tree.node(task.node).map(|n| &*n.content),
                        Some(NodeContent::Act(_))
                    );
                    if is_act && task.sign.has(Sign::EXTERNAL) {
                        if let Some(r) = self.external_request(ix) {
                            requests.push(r);
                        }
                    } else {
                        // Cut off before its `next` pass: children (if any)
                        // all finished, or none were ever scheduled.
                        let settled = children
                            .iter()
                            .all(|c| self.tasks.get(*c).is_some_and(|c| c.state.is_terminal()));
                        if settled && !(is_act && children.is_empty()) && restored.is_none() {
                            jobs.push(Job::Next(ix));
                        }
                    }
                }
                _ => {}
            }
        }
        self.queue.extend(restored.unwrap_or(jobs));
        self.requests.extend(requests);
    }

    /// The request an external act waits for (rebuilt from its node).
    fn external_request(&self, t: crate::scheduler::TaskIx) -> Option<Request> {
        let task = self.tasks.get(t)?;
        let NodeContent::Act(act) = &*self.tree.node(task.node)?.content else {
            return None;
        };
        if act.uses == SUBFLOW {
            // The child's row was written with the act's transition; it
            // runs (or was parked) on its own.
            return None;
        }
        let params = task
            .data
            .get(super::PARAMS_KEY)
            .cloned()
            .unwrap_or(Value::Null);
        Some(Request::RunPackage {
            tid: task.id.clone(),
            uses: act.uses.clone(),
            params,
            inputs: task.data.to_vars(),
        })
    }
}
