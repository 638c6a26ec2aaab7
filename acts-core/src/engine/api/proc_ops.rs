//! [`Executor::proc`]: the processes' handle.
//!
//! Each handle borrows the executor (and so its principal) and groups
//! what belongs to one concern; `Executor`'s own methods are only these
//! accessors and who it acts for.

use crate::model::{Vars, Workflow};
use crate::scheduler::TaskState;

use crate::engine::api::census::Census;
use crate::engine::api::executor::Executor;
use crate::engine::api::find::ProcessQuery;
use crate::engine::types::error::EngineError;
use crate::engine::types::info::ProcInfo;
use crate::engine::types::page::Page;

impl Executor {
    /// The processes: starting, reading, finding, counting, and what operators do to them.
    pub fn proc(&self) -> ProcOps<'_> {
        ProcOps { exec: self }
    }
}

/// The processes: starting, reading, finding, counting, and what operators do to them. From [`Executor::proc`].
#[derive(Debug, Clone, Copy)]
pub struct ProcOps<'a> {
    exec: &'a Executor,
}

impl ProcOps<'_> {
    /// Starts a process of model `model_id` with start options `vars`
    /// (checked against the model's `inputs`; a `pid` option names the
    /// process). Returns once the process's first transition is durable —
    /// a process with no interrupt may already be finished. Over the cache
    /// cap it is parked (state `none`) and starts when a slot frees.
    pub async fn start(self, model_id: &str, vars: Vars) -> Result<ProcInfo, EngineError> {
        self.exec.start(model_id, vars).await
    }

    /// [`start`](Self::start) on version `revision` of the model rather
    /// than its latest (see [`versions`](ModelOps::versions)).
    pub async fn start_version(
        self,
        model_id: &str,
        revision: u32,
        vars: Vars,
    ) -> Result<ProcInfo, EngineError> {
        self.exec.start_version(model_id, revision, vars).await
    }

    /// The concurrency key a start of `model_id` (its latest version, or
    /// `revision`) with start options `vars` would have; `None` when the
    /// model has no `concurrency:`. A cluster routes such a start by it.
    pub async fn concurrency_key(
        self,
        model_id: &str,
        revision: Option<u32>,
        vars: &Vars,
    ) -> Result<Option<String>, EngineError> {
        self.exec.concurrency_key(model_id, revision, vars).await
    }

    /// A process, with its outputs.
    pub async fn get(self, pid: &str) -> Result<ProcInfo, EngineError> {
        self.exec.process(pid).await
    }

    /// The model process `pid` runs: as deployed when it started (a later
    /// deploy of its id does not change it).
    pub async fn model(self, pid: &str) -> Result<Workflow, EngineError> {
        self.exec.process_model(pid).await
    }

    /// How many processes are in `state` (counted from the state index;
    /// no process row is read). An operator's or admin's.
    pub async fn count(self, state: TaskState) -> Result<usize, EngineError> {
        self.exec.count_processes(state).await
    }

    /// Aborts a running process: running tasks are aborted, waiting ones
    /// skipped, and the process ends `aborted`.
    pub async fn abort(self, pid: &str) -> Result<(), EngineError> {
        self.exec.abort_process(pid).await
    }

    /// Removes a process and all its rows (a running one stops). Returns
    /// whether it existed.
    pub async fn remove(self, pid: &str) -> Result<bool, EngineError> {
        self.exec.remove_process(pid).await
    }

    /// Whether this executor may see process `pid` (`false` when it does
    /// not exist). What a message stream for a principal filters on.
    pub async fn may_see(self, pid: &str) -> Result<bool, EngineError> {
        self.exec.may_see_process(pid).await
    }

    /// Processes, optionally only those in `state` and of model `model`
    /// (in admission order; outputs are left empty — read one process for
    /// them); every match, read a page at a time (use
    /// [`find_processes`](Self::find) for one page).
    /// A user's listing holds only the processes they may see.
    pub async fn list(
        self,
        state: Option<TaskState>,
        model: Option<&str>,
    ) -> Result<Vec<ProcInfo>, EngineError> {
        self.exec.processes(state, model).await
    }

    /// One page of the processes matching `q` (see [`ProcessQuery`]),
    /// answered from an index: with a variable filter only the index
    /// entries in its range are read, and one row per entry. A user's
    /// page holds only the processes they may see.
    pub async fn find(self, q: &ProcessQuery) -> Result<Page<ProcInfo>, EngineError> {
        self.exec.find_processes(q).await
    }

    /// How many processes match `q` (its cursor and limit ignored) that
    /// this executor may see. For an operator or admin a query on one
    /// variable alone (with its model) counts index keys only; any other
    /// filter, or a user's count, reads the rows the index walk yields.
    pub async fn count_matching(self, q: &ProcessQuery) -> Result<usize, EngineError> {
        self.exec.count_matching(q).await
    }

    /// Pauses process `pid` (operator): its automatic steps and timers hold
    /// and client actions are refused until [`unpause_process`](Self::unpause);
    /// recorded in its history with `reason`.
    pub async fn pause(self, pid: &str, reason: &str) -> Result<(), EngineError> {
        self.exec.pause_process(pid, reason).await
    }

    /// Resumes a paused process (operator): timeouts that fell due while
    /// it was paused fire, and its held work runs.
    pub async fn unpause(self, pid: &str) -> Result<(), EngineError> {
        self.exec.unpause_process(pid).await
    }

    /// Rewinds process `pid` to step `to` (operator): `vars` are set as
    /// process variables, the step runs again, and what ran after it on
    /// the line of the active act is marked backed (as `back` does);
    /// recorded in its history.
    pub async fn rewind(self, pid: &str, to: &str, vars: Vars) -> Result<(), EngineError> {
        self.exec.rewind_process(pid, to, vars).await
    }

    /// Retries process `pid`, which ended in an error (operator): the
    /// errored step `tid` names (default: the step where the error began)
    /// runs again as a new task, with `vars` set as process variables
    /// first, and the process is in flight again (it takes an admission
    /// place: `Busy` at the cap). The failed attempt stays in its history.
    /// Refused for a process that did not end in an error, and for a
    /// subflow child (retry its parent).
    pub async fn retry(self, pid: &str, tid: Option<&str>, vars: Vars) -> Result<(), EngineError> {
        self.exec.retry_process(pid, tid, vars).await
    }

    /// Terminates process `pid` (operator): it ends `aborted`, with error
    /// `terminated` carrying `reason`, recorded in its history.
    pub async fn terminate(self, pid: &str, reason: &str) -> Result<(), EngineError> {
        self.exec.terminate_process(pid, reason).await
    }

    /// The processes that have been *quiet* — in flight, not paused, with
    /// no interrupt, timer, package or subflow to wait for — for longer
    /// than `after` (default: the engine's `stuck_after`), the longest
    /// quiet first, at most 1,000 (operator). Read from an index of quiet
    /// processes, never by scanning every process.
    pub async fn stuck(
        self,
        after: Option<std::time::Duration>,
    ) -> Result<Vec<ProcInfo>, EngineError> {
        self.exec.stuck_processes(after).await
    }

    /// What the store holds: its models and its processes by state. An
    /// operator's or admin's.
    pub async fn census(self) -> Result<Census, EngineError> {
        self.exec.census().await
    }
}
