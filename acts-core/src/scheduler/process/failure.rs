//! Failures: marking a task failed, propagating the error up the tree,
//! and handing it to a step's catches.

use crate::model::NodeKind;
use crate::scheduler::{Sign, TaskError, TaskIx, TaskState};
use crate::tree::ChildKind;

use super::{Job, Process, Services};

impl Process {
    /// Fails `t` and propagates the error up to the root.
    pub(super) fn fail(&mut self, t: TaskIx, err: TaskError, svc: Services<'_>) {
        if self.state_of(t).is_terminal() {
            return; // overridden by an action while its job ran
        }
        self.tasks.set_err(t, err);
        self.propagate_error(t, svc);
    }

    pub(super) fn propagate_error(&mut self, t: TaskIx, svc: Services<'_>) {
        let mut cur = t;
        loop {
            self.emit(cur, svc);
            let Some(parent) = self.tasks.get(cur).and_then(|x| x.parent) else {
                return;
            };
            if self.state_of(parent).is_terminal() {
                return;
            }
            let err = self
                .tasks
                .get(cur)
                .and_then(|x| x.err.as_deref().cloned())
                .unwrap_or_default();
            if self.is_kind(cur, NodeKind::Act) {
                let outputs = self.outputs_of(cur, svc);
                self.tasks.update_data(parent, &outputs);
            }
            self.tasks.set_err(parent, err);
            if self.start_catching(parent) {
                return;
            }
            cur = parent;
        }
    }

    /// A failed step with catches (and no scheduling flag yet) handles the
    /// error: it goes back to running (keeping `ecode`/`message` in its
    /// data) and its first catch step starts. Returns whether it did.
    pub(super) fn start_catching(&mut self, step: TaskIx) -> bool {
        let Some(task) = self.tasks.get(step) else {
            return false;
        };
        // A step in any special role (a catch, a timeout, handling an
        // error already, ...) does not catch; its gate is no role.
        if task.sign.0 & !(Sign::GATED | Sign::GATE_OPEN) != 0 {
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
}
