//! Retrying a process that ended in an error (an operator control): the
//! step where the error began runs again as a new task, optionally with
//! edited process variables, and the process is in flight again.
//!
//! The failed attempt stays in the task tree as history (its step and
//! acts keep their `error` state); what it left open (e.g. the other
//! items of a parallel fan-out) is skipped; the steps, branches and the
//! root that ended with the error run again. The engine takes the process
//! back into admission around this (see `Kernel::reopen`).

use std::collections::VecDeque;

use super::{ActionError, Process, Services};
use crate::model::{NodeKind, Vars};
use crate::scheduler::{Sign, TaskIx, TaskState};

impl Process {
    /// Whether `t` is a step that ended in an error.
    fn is_errored_step(&self, t: TaskIx) -> bool {
        self.is_kind(t, NodeKind::Step) && self.state_of(t) == TaskState::Error
    }

    /// The errored step a retry runs again: the one task `tid` names (an
    /// errored step, or an errored act of one), else the step where the
    /// error began (the innermost, i.e. last created, errored step).
    fn retry_target(&self, tid: Option<&str>) -> Result<TaskIx, ActionError> {
        let Some(tid) = tid else {
            return self
                .tasks
                .all()
                .map(|(ix, _)| ix)
                .filter(|ix| self.is_errored_step(*ix))
                .last()
                .ok_or_else(|| {
                    self.not_allowed(
                        "no step ended in an error (the process failed on its outputs): start it again instead"
                            .into(),
                    )
                });
        };
        let ix = self
            .tasks
            .find_id(tid)
            .ok_or_else(|| ActionError::UnknownTask {
                pid: self.pid.clone(),
                tid: tid.to_owned(),
            })?;
        let state = self.state_of(ix);
        if state != TaskState::Error {
            return Err(self.not_allowed(format!(
                "task '{tid}' did not end in an error (it is {state}): name an errored step or act, or leave the task out"
            )));
        }
        std::iter::once(ix)
            .chain(self.tasks.ancestors(ix))
            .find(|a| self.is_kind(*a, NodeKind::Step))
            .filter(|s| self.is_errored_step(*s))
            .ok_or_else(|| {
                self.not_allowed(format!(
                    "task '{tid}' is not a step, nor an act of a step that ended with the error"
                ))
            })
    }

    /// Retries the process (see the module docs): `tid` names the errored
    /// step (or act) to run again (default: where the error began); `vars`
    /// are set as process variables first. Refused unless the process
    /// ended in an error, and for a subflow child (its parent has taken
    /// the error: retry the parent, whose step starts a new child).
    pub fn retry(
        &mut self,
        by: Option<&str>,
        tid: Option<&str>,
        vars: &Vars,
        svc: Services<'_>,
    ) -> Result<(), ActionError> {
        let state = self.state();
        if state != TaskState::Error {
            let hint = if state.is_terminal() {
                ""
            } else {
                " (a running process can be rewound)"
            };
            return Err(self.not_allowed(format!(
                "it has not ended in an error (it is {state}): only such a process can be retried{hint}"
            )));
        }
        let root = self.root();
        if let Some(parent) = self
            .tasks
            .get(root)
            .and_then(|r| r.data.get("$parent_pid"))
            .and_then(|v| v.as_str())
        {
            return Err(self.not_allowed(format!(
                "it is a subflow of process '{parent}', which has taken its error: retry '{parent}' (its step starts a new subflow)"
            )));
        }
        let step = self.retry_target(tid)?;
        let err = self
            .tasks
            .get(step)
            .and_then(|t| t.err.clone())
            .unwrap_or_default();
        let code = if err.ecode.is_empty() {
            String::new()
        } else {
            format!(" '{}'", err.ecode)
        };
        let detail = format!(
            "step '{}' after its error{code}: {}",
            self.node_id(step),
            err.message
        );
        self.record_control("retry", by, &detail);
        // What the failed attempt left open under the step is settled.
        let mut queue: VecDeque<TaskIx> = self.tasks.children(step).into();
        while let Some(d) = queue.pop_front() {
            queue.extend(self.tasks.children(d));
            if !self.state_of(d).is_terminal() {
                self.tasks.set_state(d, TaskState::Skipped);
                self.emit(d, svc);
            }
        }
        // The tasks that ended with the error run again (a step whose
        // catches did not match may catch the next error).
        for a in self.tasks.ancestors(step) {
            if self.state_of(a) == TaskState::Error {
                self.tasks.unsign(a, Sign::ERROR | Sign::NEXT_COMPLETE);
                self.tasks.set_state(a, TaskState::Running);
                // The error's keys in its data (`set_err` put them there)
                // go with the error: the retry's outputs do not carry them.
                let data = self.tasks.data_mut(a);
                data.remove("ecode");
                data.remove("message");
            }
        }
        if !vars.is_empty() {
            self.tasks.set_user_data(root, vars);
        }
        self.redo(step).map_err(|m| self.not_allowed(m))?;
        self.run(svc);
        Ok(())
    }
}
