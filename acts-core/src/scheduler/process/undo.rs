//! The `back` and `cancel` actions (the reference's §3.10): re-running an
//! earlier step as a new task instance and settling the tasks in between.

use std::collections::VecDeque;

use crate::model::NodeKind;
use crate::scheduler::{TaskIx, TaskState};

use super::{Job, Process, Services};

impl Process {
    fn is_step(&self, t: TaskIx) -> bool {
        self.is_kind(t, NodeKind::Step)
    }

    /// A new instance of step task `target` (following what it followed),
    /// queued to run.
    pub(super) fn redo(&mut self, target: TaskIx) -> Result<(), String> {
        let (node, prev) = self
            .tasks
            .get(target)
            .map(|x| (x.node, x.prev))
            .ok_or("the step to run again is gone")?;
        let task = self.new_task(node, prev).map_err(|e| e.message)?;
        self.queue.push_back(Job::Exec(task));
        Ok(())
    }

    /// Settles a task passed over by back/cancel: running → completed,
    /// pending → skipped.
    fn settle_path(&mut self, path: &[TaskIx], svc: Services<'_>) {
        for &p in path {
            let to = match self.state_of(p) {
                TaskState::Running | TaskState::Interrupt => TaskState::Completed,
                TaskState::Pending => TaskState::Skipped,
                _ => continue,
            };
            self.tasks.set_state(p, to);
            self.emit(p, svc);
        }
    }

    /// `back`: walks act `t`'s `prev` chain to the step task of node `to`,
    /// runs that step again, and marks `t` backed.
    pub(super) fn back(&mut self, t: TaskIx, to: &str, svc: Services<'_>) -> Result<(), String> {
        let mut path = Vec::new();
        let mut cur = self.tasks.get(t).and_then(|x| x.prev);
        let target = loop {
            let Some(c) = cur else {
                return Err(format!("cannot find history task by nid '{to}'"));
            };
            if self.is_step(c) && self.node_id(c) == to {
                break c;
            }
            if matches!(self.state_of(c), TaskState::Running | TaskState::Pending) {
                path.push(c);
            }
            cur = self.tasks.get(c).and_then(|x| x.prev);
        };
        // Back to the act's own step (still running): that instance is
        // passed over too, or it would stay running beside the new one and
        // the process would never end.
        if matches!(
            self.state_of(target),
            TaskState::Running | TaskState::Pending
        ) {
            path.push(target);
        }
        self.redo(target)?;
        self.skip_waiting_siblings(t, svc);
        self.tasks.set_state(t, TaskState::Backed);
        self.emit(t, svc);
        self.skip_abandoned(t, &path, svc);
        self.settle_path(&path, svc);
        Ok(())
    }

    /// Skips what the passed-over tasks of a `back` from `t` still hold
    /// open besides `t`'s own line: e.g. the other items of a parallel
    /// fan-out, whose interrupts would otherwise stay answerable and, when
    /// answered, carry the abandoned run on (found by the simulator, seed
    /// 1404: the step after the fan-out ran twice and the process stalled).
    fn skip_abandoned(&mut self, t: TaskIx, path: &[TaskIx], svc: Services<'_>) {
        let mut keep = self.tasks.ancestors(t);
        keep.push(t);
        let mut queue: VecDeque<TaskIx> =
            path.iter().flat_map(|p| self.tasks.children(*p)).collect();
        while let Some(d) = queue.pop_front() {
            queue.extend(self.tasks.children(d));
            if keep.contains(&d) || path.contains(&d) || self.state_of(d).is_terminal() {
                continue;
            }
            self.tasks.set_state(d, TaskState::Skipped);
            self.emit(d, svc);
        }
    }

    /// `cancel`: the step that owns act `t` (finished with success) runs
    /// again, and the steps that followed it and own acts are undone.
    pub(super) fn cancel(&mut self, t: TaskIx, svc: Services<'_>) -> Result<(), String> {
        let tid = self.tasks.get(t).map(|x| x.id.clone()).unwrap_or_default();
        let step = self
            .tasks
            .ancestors(t)
            .into_iter()
            .find(|a| self.is_step(*a))
            .filter(|s| self.state_of(*s).is_success())
            .ok_or_else(|| format!("task('{tid}') is not allowed to cancel"))?;
        // Walk what followed the step: the first steps that own an act are
        // the targets; running or pending tasks passed over are the path.
        let mut targets = Vec::new();
        let mut path = Vec::new();
        let mut frontier: VecDeque<TaskIx> = self.followers(step).into();
        while let Some(f) = frontier.pop_front() {
            let owns_act = self
                .tasks
                .children(f)
                .into_iter()
                .any(|c| self.is_kind(c, NodeKind::Act));
            if self.is_step(f) && owns_act {
                targets.push(f);
                continue;
            }
            if matches!(self.state_of(f), TaskState::Running | TaskState::Pending) {
                path.push(f);
            }
            frontier.extend(self.followers(f));
        }
        if targets.is_empty() {
            return Err("cannot find cancelled tasks".into());
        }
        if let Some(done) = targets.iter().find(|x| self.state_of(**x).is_terminal()) {
            let id = self
                .tasks
                .get(*done)
                .map(|x| x.id.clone())
                .unwrap_or_default();
            return Err(format!(
                "task('{id}') is already completed and cannot be undone"
            ));
        }
        self.redo(step)?;
        self.settle_path(&path, svc);
        for target in targets {
            let mut queue: VecDeque<TaskIx> = self.tasks.children(target).into();
            while let Some(d) = queue.pop_front() {
                if !self.state_of(d).is_terminal() {
                    self.tasks.set_state(d, TaskState::Cancelled);
                    self.emit(d, svc);
                }
                queue.extend(self.tasks.children(d));
            }
            self.tasks.set_state(target, TaskState::Completed);
            self.emit(target, svc);
        }
        Ok(())
    }

    /// The tasks created to follow `t` (whose `prev` is `t`).
    fn followers(&self, t: TaskIx) -> Vec<TaskIx> {
        self.tasks
            .all()
            .filter(|(_, x)| x.prev == Some(t))
            .map(|(ix, _)| ix)
            .collect()
    }
}

impl Process {
    /// Aborts the whole process (the executor's process abort): running
    /// and interrupted tasks are aborted, waiting ones skipped, newest
    /// first, and the root ends `aborted`. Fails if it has already ended.
    pub fn abort_process(&mut self, svc: Services<'_>) -> Result<(), super::ActionError> {
        let root = self.root();
        let state = self.state_of(root);
        if state.is_terminal() {
            return Err(super::ActionError::AlreadyCompleted {
                pid: self.pid.clone(),
                tid: "$".into(),
                state,
            });
        }
        self.close_open_tasks(svc);
        self.queue.clear();
        Ok(())
    }

    /// Ends every task still open, innermost first: running and waiting
    /// ones (and the root) `aborted`, the rest `skipped`, each announced.
    pub(crate) fn close_open_tasks(&mut self, svc: Services<'_>) {
        let root = self.root();
        let open: Vec<TaskIx> = self.tasks.open().map(|(ix, _)| ix).collect();
        for t in open.into_iter().rev() {
            let to = match self.state_of(t) {
                TaskState::Running | TaskState::Interrupt => TaskState::Aborted,
                _ => TaskState::Skipped,
            };
            self.tasks
                .set_state(t, if t == root { TaskState::Aborted } else { to });
            self.emit(t, svc);
        }
    }
}
