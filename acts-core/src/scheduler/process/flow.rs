//! The `next` pass: waiting for a `uses` step's acts, scheduling
//! children, auto-completion, pending branches, and where the flow goes
//! after a task finished.

use serde_json::Value;

use crate::model::{Act, NodeKind};
use crate::scheduler::{Sign, TaskError, TaskIx, TaskState};
use crate::tree::{ChildKind, NodeContent, NodeIx, short_id};

use super::{Job, Process, Services};

impl Process {
    pub(super) fn next(&mut self, t: TaskIx, svc: Services<'_>) -> Result<(), TaskError> {
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
            && matches!(content.as_deref(), Some(NodeContent::Step(s)) if s.uses.is_some())
            && !task.sign.has(Sign::USES_COMPLETE)
        {
            let acts: Vec<TaskIx> = self
                .tasks
                .children(t)
                .into_iter()
                .filter(|c| self.is_kind(*c, NodeKind::Act))
                .collect();
            // An act is settled once its own next pass ran; a failed one,
            // or one skipped because a sibling failed (an error raised by
            // a timeout step ends the wait it guards), has no next pass.
            let settled = |c: &TaskIx| {
                self.tasks.get(*c).is_some_and(|x| {
                    x.state.is_terminal()
                        && (x.sign.has(Sign::NEXT_COMPLETE)
                            || matches!(x.state, TaskState::Error | TaskState::Skipped))
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
            let node = self.node_of(t);
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
        if !(state.is_terminal() || state == TaskState::Interrupt) {
            return Ok(());
        }
        let go_parent = self.kind_next(t, state, svc)?;
        if state.is_terminal() {
            self.tasks.sign(t, Sign::NEXT_COMPLETE);
        }
        if go_parent && let Some(parent) = self.tasks.get(t).and_then(|x| x.parent) {
            self.fold_into_parent(t, svc);
            return self.next(parent, svc);
        }
        Ok(())
    }

    pub(super) fn auto_complete(&mut self, t: TaskIx, svc: Services<'_>) -> Result<(), TaskError> {
        if self.state_of(t) != TaskState::Running {
            return Ok(());
        }
        if self.is_kind(t, NodeKind::Act)
            && self
                .tasks
                .get(t)
                .and_then(|x| x.data.get("__run_as"))
                .and_then(Value::as_str)
                == Some("msg")
        {
            self.tasks.set_state(t, TaskState::Completed);
            self.emit(t, svc);
            return Ok(());
        }
        let children = self.tasks.children(t);
        for &c in &children {
            if self.state_of(c) == TaskState::Pending && self.resume_if_ready(c, &children) {
                self.tasks.set_state(c, TaskState::Ready);
                self.exec(c, svc)?;
            }
        }
        let all_done = children.iter().all(|c| self.state_of(*c).is_terminal());
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
            // The chain of catches has ended only when each catch had its
            // next pass (a skipped catch schedules the next one there).
            if handling_error
                && catches.iter().any(|c| {
                    !self
                        .tasks
                        .get(*c)
                        .is_some_and(|x| x.sign.has(Sign::NEXT_COMPLETE))
                })
            {
                return Ok(());
            }
            if handling_error
                && catches
                    .iter()
                    .all(|c| self.state_of(*c) == TaskState::Skipped)
            {
                // No catch matched: the original error stands.
                let data = self
                    .tasks
                    .get(t)
                    .map(|x| x.data.to_vars())
                    .unwrap_or_default();
                self.tasks.set_err(t, TaskError::from_vars(&data));
                self.tasks.sign(t, Sign::NEXT_COMPLETE);
                self.propagate_error(t, svc);
                return Ok(());
            }
            if t == self.root()
                && let Some(err) = self.outputs_mismatch(t, svc)
            {
                // The process ends in error, never `completed` first.
                self.fail(t, err, svc);
                return Ok(());
            }
            self.tasks.set_state(t, TaskState::Completed);
            self.emit(t, svc);
        }
        Ok(())
    }

    /// Whether a pending branch may run now; an `else` branch whose sibling
    /// did not skip is skipped here instead.
    pub(super) fn resume_if_ready(&mut self, c: TaskIx, siblings: &[TaskIx]) -> bool {
        if self.waits_at_gate(c) {
            return false; // the engine opens its gate
        }
        let content = self.content(c);
        let Some(NodeContent::Branch(b)) = content.as_deref() else {
            return true;
        };
        let others: Vec<TaskIx> = siblings.iter().copied().filter(|s| *s != c).collect();
        if !b.needs.is_empty() {
            return others
                .iter()
                .any(|s| b.needs.contains(&self.node_id(*s)) && self.state_of(*s).is_terminal());
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
                st.is_terminal() && st != TaskState::Skipped
            }) {
                self.tasks.set_state(c, TaskState::Skipped);
            }
            return false;
        }
        true
    }

    /// The kind's decision after a task finished: `true` to hand over to
    /// the parent, `false` when the flow continues elsewhere.
    pub(super) fn kind_next(
        &mut self,
        t: TaskIx,
        state: TaskState,
        svc: Services<'_>,
    ) -> Result<bool, TaskError> {
        let node = self.node_of(t);
        let Some(n) = self.tree.node(node).cloned() else {
            return Ok(true);
        };
        match &*n.content {
            NodeContent::Step(_)
                if self.tasks.get(t).is_some_and(|x| x.sign.has(Sign::TIMEOUT)) =>
            {
                Ok(true)
            }
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
                    if state.is_success() {
                        self.fold_into_parent(t, svc);
                    }
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
                    if state.is_success() {
                        self.fold_into_parent(t, svc);
                    }
                    let task = self.new_task(succ, Some(t))?;
                    self.queue.push_back(Job::Exec(task));
                    return Ok(false);
                }
                Ok(true)
            }
            NodeContent::Workflow(_) | NodeContent::Branch(_) => Ok(true),
        }
    }

    /// Folds task `t`'s outputs into its parent (the fold-up write) as it
    /// hands over to its successor in a chain, so the successor reads them
    /// there instead of from a copy of its own.
    fn fold_into_parent(&mut self, t: TaskIx, svc: Services<'_>) {
        if let Some(parent) = self.tasks.get(t).and_then(|x| x.parent) {
            let outputs = self.outputs_of(t, svc);
            self.tasks.update_data(parent, &outputs);
        }
    }

    /// Runs `act` under task `owner` (a step's `uses`, a pushed act): a new
    /// dynamic node, a task following the owner, queued to run.
    pub(super) fn dispatch_act(&mut self, owner: TaskIx, act: Act) -> Result<TaskIx, TaskError> {
        let act_node = self.tree.dispatch_act(self.node_of(owner), act);
        self.queue_act(owner, act_node)
    }

    /// A task of the dispatched act node `act_node` following `owner`,
    /// queued to run.
    pub(super) fn queue_act(
        &mut self,
        owner: TaskIx,
        act_node: NodeIx,
    ) -> Result<TaskIx, TaskError> {
        let child = self.new_task(act_node, Some(owner))?;
        self.queue.push_back(Job::Exec(child));
        Ok(child)
    }

    pub(super) fn new_task(
        &mut self,
        node: NodeIx,
        prev: Option<TaskIx>,
    ) -> Result<TaskIx, TaskError> {
        let max = self.limits.max_node_runs;
        if max > 0 && self.tasks.runs_of(node) >= max {
            self.limit_hit = true;
            let (id, name) = self.tree.node(node).map_or_else(
                || (String::new(), String::new()),
                |n| (n.id.clone(), n.content.name().to_owned()),
            );
            return Err(TaskError::new(
                "",
                format!(
                    "node '{id}' ({name}) in process '{}' was executed more than {max} times, a loop in the workflow is likely (limit: max_node_runs)",
                    self.pid
                ),
            ));
        }
        loop {
            match self.tasks.create(&self.tree, short_id(), node, prev) {
                Ok(t) => return Ok(t),
                Err(_) => continue, // an id collision: draw another id
            }
        }
    }

    /// `t`, or its nearest ancestor that has not ended (the root when all
    /// have).
    pub(super) fn nearest_open(&self, t: TaskIx) -> TaskIx {
        let mut cur = t;
        while self.state_of(cur).is_terminal() {
            match self.tasks.get(cur).and_then(|x| x.parent) {
                Some(p) => cur = p,
                None => break,
            }
        }
        cur
    }
}
