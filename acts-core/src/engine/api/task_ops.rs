//! [`Executor::task`] and [`Executor::act`]: the handles of tasks and of the actions on acts.
//!
//! Each handle borrows the executor (and so its principal) and groups
//! what belongs to one concern; `Executor`'s own methods are only these
//! accessors and who it acts for.

use crate::model::Vars;
use crate::scheduler::Action;

use crate::engine::api::executor::Executor;
use crate::engine::api::find_tasks::TaskQuery;
use crate::engine::types::error::EngineError;
use crate::engine::types::info::{ProcInfo, TaskInfo};
use crate::engine::types::page::Page;

impl Executor {
    /// The tasks: one, a process's, a page of those matching a query, the inbox.
    pub fn task(&self) -> TaskOps<'_> {
        TaskOps { exec: self }
    }
}

/// The tasks: one, a process's, a page of those matching a query, the inbox. From [`Executor::task`].
#[derive(Debug, Clone, Copy)]
pub struct TaskOps<'a> {
    exec: &'a Executor,
}

impl TaskOps<'_> {
    /// One task of a process.
    pub async fn get(self, pid: &str, tid: &str) -> Result<TaskInfo, EngineError> {
        self.exec.task_of(pid, tid).await
    }

    /// Every task of a process, in creation order.
    pub async fn list(self, pid: &str) -> Result<Vec<TaskInfo>, EngineError> {
        self.exec.tasks(pid).await
    }

    /// One page of the tasks matching `q` (see [`TaskQuery`]): the
    /// processes are walked through their index, one at a time, and only
    /// the processes this executor may see are looked in.
    pub async fn find(self, q: &TaskQuery) -> Result<Page<TaskInfo>, EngineError> {
        self.exec.find_tasks(q).await
    }

    /// How many tasks match `q` that this executor may see (every page
    /// walked; its cursor and limit are ignored).
    pub async fn count(self, q: &TaskQuery) -> Result<usize, EngineError> {
        self.exec.count_tasks(q).await
    }

    /// The open interrupts this executor may answer, oldest process first:
    /// for a user those addressed to them or one of their roles, for an
    /// operator, an admin or the application all of them, each with its
    /// process (as listed: no outputs). At most `limit`: the pages of
    /// [`TaskQuery::inbox`] until then.
    pub async fn inbox(self, limit: usize) -> Result<Vec<(ProcInfo, TaskInfo)>, EngineError> {
        self.exec.inbox(limit).await
    }
}

impl Executor {
    /// The actions on acts: completing, submitting, skipping, aborting, failing, going back, cancelling, removing, pushing.
    pub fn act(&self) -> ActOps<'_> {
        ActOps { exec: self }
    }
}

/// The actions on acts: completing, submitting, skipping, aborting, failing, going back, cancelling, removing, pushing. From [`Executor::act`].
#[derive(Debug, Clone, Copy)]
pub struct ActOps<'a> {
    exec: &'a Executor,
}

impl ActOps<'_> {
    /// Applies `action` to act `tid` of process `pid` with `options`
    /// (recorded in the task's history with who applied it).
    pub async fn apply(
        self,
        pid: &str,
        tid: &str,
        action: Action,
        options: Vars,
    ) -> Result<(), EngineError> {
        self.exec.act_on(pid, tid, action, options).await
    }

    /// Completes an act (`next`), folding `vars` into it.
    pub async fn complete(self, pid: &str, tid: &str, vars: Vars) -> Result<(), EngineError> {
        self.exec.complete(pid, tid, vars).await
    }

    /// Submits an act.
    pub async fn submit(self, pid: &str, tid: &str, vars: Vars) -> Result<(), EngineError> {
        self.exec.submit(pid, tid, vars).await
    }

    /// Skips an act (and its waiting siblings).
    pub async fn skip(self, pid: &str, tid: &str, vars: Vars) -> Result<(), EngineError> {
        self.exec.skip(pid, tid, vars).await
    }

    /// Aborts an act and every ancestor: the process ends `aborted`.
    pub async fn abort(self, pid: &str, tid: &str, vars: Vars) -> Result<(), EngineError> {
        self.exec.abort(pid, tid, vars).await
    }

    /// Fails an act with `ecode` (what `catches` match) and `message`.
    pub async fn error(
        self,
        pid: &str,
        tid: &str,
        ecode: &str,
        message: &str,
    ) -> Result<(), EngineError> {
        self.exec.error(pid, tid, ecode, message).await
    }

    /// Goes back from an act to the earlier step `to`, which runs again.
    pub async fn back(self, pid: &str, tid: &str, to: &str) -> Result<(), EngineError> {
        self.exec.back(pid, tid, to).await
    }

    /// Withdraws a finished act: its step runs again and the steps that
    /// followed are undone.
    pub async fn cancel(self, pid: &str, tid: &str) -> Result<(), EngineError> {
        self.exec.cancel(pid, tid).await
    }

    /// Removes an act.
    pub async fn remove(self, pid: &str, tid: &str) -> Result<(), EngineError> {
        self.exec.remove(pid, tid).await
    }

    /// Writes `vars` into the process's root data (through act `tid`).
    pub async fn set_process_vars(
        self,
        pid: &str,
        tid: &str,
        vars: Vars,
    ) -> Result<(), EngineError> {
        self.exec.set_process_vars(pid, tid, vars).await
    }

    /// Runs a new act under step task `tid`; `act` holds its definition
    /// (`uses` required; `params`, `id`, `name`, `key` ...).
    pub async fn push(self, pid: &str, tid: &str, act: Vars) -> Result<(), EngineError> {
        self.exec.push(pid, tid, act).await
    }
}
