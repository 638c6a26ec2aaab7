//! Client actions on a running process: their types, guards and effects.

use serde_json::Value;

use crate::model::NodeKind;
use crate::model::{Act, Action, Vars};
use crate::scheduler::{TaskError, TaskIx, TaskState, is_reserved};

use super::{Job, Process, Services};

/// What [`ActionError::AlreadyCompleted`] adds for the process's root.
fn ended_note(tid: &str) -> &'static str {
    if tid == "$" {
        "; an ended process takes no more actions"
    } else {
        ""
    }
}

/// Why an action was refused; nothing was changed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
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
    /// The task is already terminal (`tid` `$`: the process has ended).
    #[error("task '{pid}:{tid}' has already ended ({state}){}", ended_note(.tid))]
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
    /// The action cannot apply to the task as the process stands.
    #[error("action on task '{pid}:{tid}': {message}")]
    NotAllowed {
        /// The process.
        pid: String,
        /// The task.
        tid: String,
        /// Why.
        message: String,
    },
    /// The process as a whole is not in a state for this (paused, not
    /// started, not paused); nothing changed.
    #[error("process '{pid}': {message}")]
    ProcessState {
        /// The process.
        pid: String,
        /// Why, and what to do.
        message: String,
    },
    /// The principal may not do this (nothing changed).
    #[error("'{principal}' may not do this: {reason}")]
    Denied {
        /// Who asked.
        principal: String,
        /// Why not.
        reason: String,
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

impl Process {
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
        if !self.is_kind(t, NodeKind::Act) {
            return Err(ActionError::NotAnAct { pid, tid: tid_s });
        }
        // An ended process takes no more actions: an act it left open (one
        // a timeout's abort did not reach) is no question any more (found
        // by the simulator, grammar 3 seed 3002: a catch's interrupt stayed
        // answerable after the process aborted).
        self.check_live("answered")?;
        let state = self.state_of(t);
        let guarded = !matches!(action, Action::Submit | Action::Remove | Action::Cancel);
        if guarded && state.is_terminal() {
            return Err(ActionError::AlreadyCompleted {
                pid,
                tid: tid_s,
                state,
            });
        }
        if let Some(key) = options.keys().find(|k| is_reserved(k)) {
            return Err(ActionError::BadOptions {
                pid,
                tid: tid_s,
                message: format!(
                    "'{key}' is an engine-owned key of the process's data and cannot be written"
                ),
            });
        }
        let options = self.exposed_options(t, action, options)?;
        self.tasks.set_max_scope_bytes(svc.limits.max_scope_bytes);
        let target = if action == Action::SetProcessVars {
            self.root()
        } else {
            t
        };
        if let Some(message) = self.tasks.would_refuse(target, &options) {
            return Err(ActionError::BadOptions {
                pid: self.pid.clone(),
                tid: tid_s,
                message,
            });
        }
        self.apply_action(t, action, options, svc)?;
        self.run(svc);
        Ok(())
    }

    /// An act that declares `exposes` is completed (or submitted) with
    /// exactly those values: each must be in the options, and nothing else
    /// is kept (the reference's guard). The options of control actions
    /// (`error`'s ecode, `back`'s to, ...) are not outputs and pass as they
    /// are.
    fn exposed_options(
        &self,
        t: TaskIx,
        action: Action,
        mut options: Vars,
    ) -> Result<Vars, ActionError> {
        if !matches!(action, Action::Complete | Action::Submit) {
            return Ok(options);
        }
        let exposes = self.exposes_of(t);
        if exposes.is_empty() {
            return Ok(options);
        }
        let tid = self.tasks.get(t).map(|x| x.id.clone()).unwrap_or_default();
        if let Some(missing) = exposes.iter().find(|e| !options.contains_key(&e.name)) {
            return Err(ActionError::BadOptions {
                pid: self.pid.clone(),
                tid: tid.clone(),
                message: format!(
                    "the options do not have the act's output '{}' (it declares exposes: {})",
                    missing.name,
                    exposes
                        .iter()
                        .map(|e| e.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        options.retain(|k, _| exposes.iter().any(|e| e.name == *k));
        Ok(options)
    }

    /// Applies `action` to act task `t` (already checked to be an act that
    /// the action may touch) without running what follows.
    pub(super) fn apply_action(
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
                self.emit(t, svc);
                self.queue.push_back(Job::Next(t));
            }
            Action::Skip => {
                self.skip_waiting_siblings(t, svc);
                self.tasks.set_state(t, TaskState::Skipped);
                self.emit(t, svc);
                self.queue.push_back(Job::Next(t));
            }
            Action::Abort => {
                self.skip_waiting_siblings(t, svc);
                self.tasks.set_data(t, &options);
                self.tasks.set_state(t, TaskState::Aborted);
                self.emit(t, svc);
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
                    self.emit(parent, svc);
                    cur = parent;
                }
                // The process is aborted: what is still open below the
                // steps the walk passed (a catch's act, an item of a
                // sibling's fan-out) ends with it, and its clients hear so.
                self.close_open_tasks(svc);
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
                // As the reference: the waiting siblings of the act's
                // step are skipped (a timeout step raising the error ends
                // the wait it guards, so the owner's catches can finish).
                if let Some(parent) = self.tasks.get(t).and_then(|x| x.parent) {
                    self.skip_waiting_siblings(parent, svc);
                }
                self.tasks.set_data(t, &options);
                self.fail(t, TaskError::new(ecode, message), svc);
            }
            Action::SetProcessVars => {
                let root = self.root();
                self.tasks.set_user_data(root, &options);
                self.emit(t, svc);
            }
            Action::Back => {
                let to = options
                    .get("to")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .ok_or(ActionError::MissingOption {
                        pid: pid.clone(),
                        tid: tid_s.clone(),
                        option: "to",
                    })?
                    .to_owned();
                self.back(t, &to, svc)
                    .map_err(|message| ActionError::NotAllowed {
                        pid,
                        tid: tid_s,
                        message,
                    })?;
            }
            Action::Cancel => {
                self.cancel(t, svc)
                    .map_err(|message| ActionError::NotAllowed {
                        pid,
                        tid: tid_s,
                        message,
                    })?;
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
        if !self.is_kind(t, NodeKind::Step) {
            return Err(ActionError::NotAStep { pid, tid });
        }
        self.check_live("pushed to")?;
        let state = self.state_of(t);
        if state == TaskState::None || state.is_terminal() {
            return Err(ActionError::AlreadyCompleted { pid, tid, state });
        }
        if options
            .get("uses")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
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
        self.dispatch_act(t, act)
            .map_err(|e| ActionError::BadOptions {
                pid,
                tid,
                message: e.message,
            })?;
        self.run(svc);
        Ok(())
    }

    pub(super) fn skip_waiting_siblings(&mut self, t: TaskIx, svc: Services<'_>) {
        let Some(parent) = self.tasks.get(t).and_then(|x| x.parent) else {
            return;
        };
        for s in self.tasks.children(parent) {
            if s != t && !self.state_of(s).is_terminal() {
                self.tasks.set_state(s, TaskState::Skipped);
                self.emit(s, svc);
            }
        }
    }
}
