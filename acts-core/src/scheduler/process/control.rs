//! Operator controls of a whole process: pause, resume (unpause) and
//! terminate. Each is applied by one transition and recorded in the root
//! task's history with who, when, from which state and why.
//!
//! While a process is paused its job queue does not run (automatic steps
//! hold), its timeouts neither arm nor fire (those that fall due fire when
//! it is resumed), and client actions are refused (the engine checks
//! [`Process::paused`] before applying one). What arrives from outside —
//! an application package's result, a subflow child's return — is still
//! applied to its act, but what follows it waits for the resume.

use super::{ActionError, Pause, Process, Services};
use crate::scheduler::task_error::TaskError;
use crate::scheduler::{Sign, TaskEvent, TaskState};

/// Most bytes of an operator's reason.
pub const MAX_REASON_BYTES: usize = 1024;

impl Process {
    /// The error a client action on a paused process gets.
    pub fn refuse_if_paused(&self) -> Result<(), ActionError> {
        match &self.paused {
            None => Ok(()),
            Some(p) => Err(ActionError::ProcessState {
                pid: self.pid.clone(),
                message: format!(
                    "the process is paused{}{}; an operator must resume it first",
                    p.by.as_deref()
                        .map_or_else(String::new, |b| format!(" by '{b}'")),
                    if p.reason.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", p.reason)
                    }
                ),
            }),
        }
    }

    /// Whether nothing but a fault can be holding the process: it is in
    /// flight and not paused, yet no interrupt waits for a client, no
    /// timeout is armed and no act waits for a package or a subflow. A
    /// process quiet for long made no progress it could make (the stuck
    /// detector reports it).
    pub fn is_quiet(&self) -> bool {
        let state = self.state();
        if state.is_terminal() || state == TaskState::None || self.paused.is_some() {
            return false;
        }
        let waits = self.tasks.open().any(|(_, t)| {
            t.state == TaskState::Interrupt
                || (t.state == TaskState::Running && t.sign.has(Sign::EXTERNAL))
                || (t.state == TaskState::Pending && t.sign.has(Sign::GATED))
        });
        !waits && self.next_timer().is_none()
    }

    /// Announces task `ix` again (its message as it stands), e.g. an
    /// interrupt whose node a migration changed.
    pub fn announce_again(&mut self, ix: crate::scheduler::TaskIx, svc: Services<'_>) {
        self.emit(ix, svc);
    }

    /// Fails on a reason longer than [`MAX_REASON_BYTES`].
    fn check_reason(&self, reason: &str) -> Result<(), ActionError> {
        if reason.len() > MAX_REASON_BYTES {
            return Err(self.not_allowed(format!(
                "the reason is {} bytes, more than the limit of {MAX_REASON_BYTES}",
                reason.len()
            )));
        }
        Ok(())
    }

    /// Fails unless the process has started and not ended.
    pub(super) fn check_live(&self, what: &str) -> Result<(), ActionError> {
        let state = self.state();
        if state.is_terminal() {
            return Err(ActionError::AlreadyCompleted {
                pid: self.pid.clone(),
                tid: "$".into(),
                state,
            });
        }
        if state == crate::scheduler::TaskState::None {
            return Err(self.not_allowed(format!(
                "it has not started yet (it is parked: it waits for a place under the admission cap, or for a slot of its concurrency key), so it cannot be {what}; remove it to drop it"
            )));
        }
        Ok(())
    }

    pub(super) fn not_allowed(&self, message: String) -> ActionError {
        ActionError::ProcessState {
            pid: self.pid.clone(),
            message,
        }
    }

    /// Records operator control `action` on the root task.
    pub(super) fn record_control(&mut self, action: &str, by: Option<&str>, reason: &str) {
        let root = self.root();
        let event = TaskEvent {
            action: action.to_owned(),
            by: by.map(str::to_owned),
            at: self.tasks.now(),
            from: Some(self.state()),
            detail: (!reason.is_empty()).then(|| reason.to_owned()),
        };
        // Marks the root's row changed: the history lives in it.
        self.tasks.record_event(root, event);
    }

    /// Pauses the process (see the module docs).
    pub fn pause(&mut self, by: Option<&str>, reason: &str) -> Result<(), ActionError> {
        self.check_reason(reason)?;
        self.check_live("paused")?;
        if self.paused.is_some() {
            return Err(self.not_allowed("it is paused already".into()));
        }
        self.record_control("pause", by, reason);
        self.paused = Some(Pause {
            by: by.map(str::to_owned),
            at: self.tasks.now(),
            reason: reason.to_owned(),
        });
        Ok(())
    }

    /// Resumes a paused process: timeouts that fell due fire, and the work
    /// that waited runs.
    pub fn unpause(&mut self, by: Option<&str>, svc: Services<'_>) -> Result<(), ActionError> {
        self.check_live("resumed")?;
        if self.paused.is_none() {
            return Err(self.not_allowed("it is not paused".into()));
        }
        self.record_control("resume", by, "");
        self.paused = None;
        self.tick(svc);
        self.run(svc);
        Ok(())
    }

    /// Rewinds the process to step `to`, an earlier step on the line of
    /// its active act, with `vars` set as process variables first: the
    /// step runs again, and what ran after it is marked backed, as the
    /// `back` action does from that act.
    pub fn rewind(
        &mut self,
        by: Option<&str>,
        to: &str,
        vars: &crate::model::Vars,
        svc: Services<'_>,
    ) -> Result<(), ActionError> {
        self.check_live("rewound")?;
        // The latest act that is still waiting or running.
        let active = self
            .tasks
            .open()
            .filter(|(ix, t)| {
                matches!(t.state, TaskState::Interrupt | TaskState::Running)
                    && self.is_kind(*ix, crate::model::NodeKind::Act)
            })
            .map(|(_, t)| t.id.clone())
            .last()
            .ok_or_else(|| {
                self.not_allowed(
                    "no act is waiting or running, so there is no line to rewind along".into(),
                )
            })?;
        self.record_control("rewind", by, &format!("to step '{to}'"));
        if !vars.is_empty() {
            let root = self.root();
            self.tasks.set_user_data(root, vars);
        }
        let mut options = crate::model::Vars::new();
        options.insert("to".into(), serde_json::Value::String(to.to_owned()));
        self.act(&active, super::Action::Back, options, svc)
            .map_err(|e| match e {
                ActionError::NotAllowed { message, .. } => self.not_allowed(format!(
                    "cannot rewind to '{to}' ({message}): it must be a step that ran before the active act"
                )),
                other => other,
            })
    }

    /// Ends the process as aborted, with the operator's reason as its error
    /// (ecode `terminated`); a paused process can be terminated.
    pub fn terminate(
        &mut self,
        by: Option<&str>,
        reason: &str,
        svc: Services<'_>,
    ) -> Result<(), ActionError> {
        self.check_reason(reason)?;
        self.check_live("terminated")?;
        self.record_control("terminate", by, reason);
        self.paused = None;
        self.abort_process(svc)?;
        let root = self.root();
        let message = if reason.is_empty() {
            "terminated by an operator".to_owned()
        } else {
            reason.to_owned()
        };
        self.tasks
            .attach_err(root, TaskError::new("terminated", message));
        Ok(())
    }
}
