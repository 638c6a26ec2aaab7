//! Access control: [`Principal`]s and what each may do, checked by the
//! [`Executor`](crate::engine::Executor) itself so that every front end (the HTTP
//! API, the CLI, an embedding application) gets the same answer.
//!
//! An executor without a principal is the embedding application and may do
//! everything. One made with
//! [`Executor::as_principal`](crate::engine::Executor::as_principal) checks each
//! call:
//! - role `admin`: everything;
//! - role `operator`: everything except deploying and removing models —
//!   every action on any process (abort, remove, push, set_process_vars
//!   included) and the dead letters of durable channels;
//! - anyone else (a *user*): lists models and triggers, starts processes
//!   (directly, by a manual trigger or a hook), sees the processes they
//!   started or whose interrupts addressed them, and answers — `next`,
//!   `submit`, `back`, `cancel`, `skip`, `error` — the interrupts whose
//!   `params.to` addresses them (`user:<id>`, or a bare id) or one of their
//!   roles (`role:<name>`).
//!
//! A denial is [`EngineError::Denied`] and changes nothing.

use serde::{Deserialize, Serialize};

use crate::scheduler::{Action, ActionError, Audience, Process, addressees};

use super::error::EngineError;

/// The role that may do everything.
pub const ROLE_ADMIN: &str = "admin";
/// The role that may act on every process and manage deliveries.
pub const ROLE_OPERATOR: &str = "operator";

/// The actions a user may apply to an interrupt that addresses them.
pub const USER_ACTIONS: [Action; 6] = [
    Action::Complete,
    Action::Submit,
    Action::Back,
    Action::Cancel,
    Action::Skip,
    Action::Error,
];

/// Who is asking: an id and roles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Principal {
    /// The principal's id (what `user:<id>` addresses and task history
    /// records).
    pub id: String,
    /// Its roles: `admin`, `operator`, or any name interrupts address as
    /// `role:<name>`.
    #[serde(default)]
    pub roles: Vec<String>,
}

impl Principal {
    /// A principal `id` with `roles`.
    pub fn new(id: impl Into<String>, roles: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            id: id.into(),
            roles: roles.into_iter().map(Into::into).collect(),
        }
    }

    /// Whether it has role `role`.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }

    /// Whether it may do everything.
    pub fn is_admin(&self) -> bool {
        self.has_role(ROLE_ADMIN)
    }

    /// Whether it may act on every process (an admin may too).
    pub fn is_operator(&self) -> bool {
        self.is_admin() || self.has_role(ROLE_OPERATOR)
    }

    /// Whether one of `names` (`user:<id>`, `role:<name>`) is this
    /// principal or one of its roles.
    pub fn is_addressed_by<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> bool {
        names.into_iter().any(|n| match n.split_once(':') {
            Some(("user", id)) => id == self.id,
            Some(("role", role)) => self.has_role(role),
            _ => false,
        })
    }

    /// Whether it may see a process started by `started_by` whose
    /// interrupts addressed `names`.
    pub fn may_see<'a>(
        &self,
        started_by: Option<&str>,
        names: impl IntoIterator<Item = &'a str>,
    ) -> bool {
        self.is_operator() || started_by == Some(self.id.as_str()) || self.is_addressed_by(names)
    }

    /// Whether it may see process `p`.
    pub(crate) fn may_see_process(&self, p: &Process) -> bool {
        let a: &Audience = &p.audience;
        self.may_see(a.started_by.as_deref(), a.names())
    }

    /// `Ok` if it may see process `p`; the denial otherwise.
    pub(crate) fn check_see(&self, p: &Process) -> Result<(), EngineError> {
        let a = &p.audience;
        self.check_sees(&p.pid, a.started_by.as_deref(), a.names())
    }

    /// `Ok` if it may see process `pid` started by `started_by` whose
    /// interrupts addressed `names`; the denial otherwise.
    pub(crate) fn check_sees<'a>(
        &self,
        pid: &str,
        started_by: Option<&str>,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), EngineError> {
        if self.may_see(started_by, names) {
            Ok(())
        } else {
            Err(self.denied(format!(
                "process '{pid}' was neither started by them nor has an interrupt addressed to them or their roles"
            )))
        }
    }

    /// Whether it may answer act `ix` of process `p`: an operator any, a
    /// user those whose `params.to` addresses them or their roles.
    pub(crate) fn may_answer(&self, p: &Process, ix: crate::scheduler::TaskIx) -> bool {
        self.is_operator()
            || self.is_addressed_by(addressees(&p.act_params(ix)).iter().map(String::as_str))
    }

    /// `Ok` if it has the operator's rights; the denial for `what`
    /// otherwise (what the HTTP server checks for what it owns: durable
    /// channels, metrics).
    pub fn check_operator(&self, what: &str) -> Result<(), EngineError> {
        if self.is_operator() {
            Ok(())
        } else {
            Err(self.denied(format!("{what} needs the operator or admin role")))
        }
    }

    /// `Ok` if it is an admin; the denial for `what` otherwise.
    pub fn check_admin(&self, what: &str) -> Result<(), EngineError> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(self.denied(format!("{what} needs the admin role")))
        }
    }

    /// `Ok` if it may apply `action` to task `tid` of process `p` (checked
    /// inside the transition, so the task cannot change in between).
    pub(crate) fn check_act(
        &self,
        p: &Process,
        tid: &str,
        action: Action,
    ) -> Result<(), ActionError> {
        if self.is_operator() {
            return Ok(());
        }
        let deny = |reason: String| ActionError::Denied {
            principal: self.id.clone(),
            reason,
        };
        if !USER_ACTIONS.contains(&action) {
            return Err(deny(format!(
                "'{}' needs the operator or admin role (a user may {})",
                action.as_str(),
                USER_ACTIONS.map(Action::as_str).join(", ")
            )));
        }
        if !self.may_see_process(p) {
            return Err(deny(format!(
                "process '{}' has no interrupt addressed to them or their roles",
                p.pid
            )));
        }
        // An unknown task is the action's own error (after the checks
        // above, it tells nothing about a process the user may not see).
        let Some(ix) = p.tasks.find_id(tid) else {
            return Ok(());
        };
        let to = addressees(&p.act_params(ix));
        if self.is_addressed_by(to.iter().map(String::as_str)) {
            Ok(())
        } else if to.is_empty() {
            Err(deny(format!(
                "task '{tid}' addresses nobody (no params.to); only an operator or admin may answer it"
            )))
        } else {
            Err(deny(format!(
                "task '{tid}' is addressed to {} (params.to)",
                to.join(", ")
            )))
        }
    }

    /// The denial of something for `reason`.
    pub(crate) fn denied(&self, reason: String) -> EngineError {
        EngineError::Denied {
            principal: self.id.clone(),
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_and_addresses() {
        let ann = Principal::new("ann", ["finance"]);
        assert!(!ann.is_operator() && !ann.is_admin());
        assert!(ann.is_addressed_by(["role:finance"]));
        assert!(ann.is_addressed_by(["user:bob", "user:ann"]));
        assert!(!ann.is_addressed_by(["user:bob", "role:ops", "ann"]));
        assert!(ann.may_see(Some("ann"), []));
        assert!(!ann.may_see(Some("bob"), ["role:hr"]));
        let op = Principal::new("olga", ["operator"]);
        assert!(op.is_operator() && !op.is_admin());
        assert!(op.may_see(None, []));
        assert!(Principal::new("root", ["admin"]).is_operator());
    }
}
