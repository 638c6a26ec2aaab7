//! Operator controls through the executor: pause, resume, rewind, retry
//! and terminate a process, and list the stuck ones (operators and admins).

use crate::model::Vars;

use crate::engine::api::executor::Executor;
use crate::engine::services::On;
use crate::engine::types::error::EngineError;
use crate::engine::types::info::ProcInfo;

impl Executor {
    /// Pauses process `pid` (operator): its automatic steps and timers hold
    /// and client actions are refused until [`unpause_process`](Self::unpause_process);
    /// recorded in its history with `reason`.
    pub async fn pause_process(&self, pid: &str, reason: &str) -> Result<(), EngineError> {
        self.need_operator("pausing a process")?;
        let by = self.by();
        self.rt.on_process(pid, |p, _| p.pause(by, reason)).await
    }

    /// Resumes a paused process (operator): timeouts that fell due while
    /// it was paused fire, and its held work runs.
    pub async fn unpause_process(&self, pid: &str) -> Result<(), EngineError> {
        self.need_operator("resuming a paused process")?;
        let by = self.by();
        self.rt.on_process(pid, |p, svc| p.unpause(by, svc)).await
    }

    /// Rewinds process `pid` to step `to` (operator): `vars` are set as
    /// process variables, the step runs again, and what ran after it on
    /// the line of the active act is marked backed (as `back` does);
    /// recorded in its history.
    pub async fn rewind_process(&self, pid: &str, to: &str, vars: Vars) -> Result<(), EngineError> {
        self.need_operator("rewinding a process")?;
        self.rt.check_vars_size("the rewind's vars", &vars)?;
        let by = self.by();
        self.rt
            .on_process(pid, |p, svc| p.rewind(by, to, &vars, svc))
            .await
    }

    /// Retries process `pid`, which ended in an error (operator): the
    /// errored step `tid` names (default: the step where the error began)
    /// runs again as a new task, with `vars` set as process variables
    /// first, and the process is in flight again (it takes an admission
    /// place: `Busy` at the cap). The failed attempt stays in its history.
    /// Refused for a process that did not end in an error, and for a
    /// subflow child (retry its parent).
    pub async fn retry_process(
        &self,
        pid: &str,
        tid: Option<&str>,
        vars: Vars,
    ) -> Result<(), EngineError> {
        self.need_operator("retrying a process")?;
        self.rt.check_vars_size("the retry's vars", &vars)?;
        let by = self.by();
        self.rt
            .reopen(pid, |p, svc| p.retry(by, tid, &vars, svc))
            .await
    }

    /// Terminates process `pid` (operator): it ends `aborted`, with error
    /// `terminated` carrying `reason`, recorded in its history.
    pub async fn terminate_process(&self, pid: &str, reason: &str) -> Result<(), EngineError> {
        self.need_operator("terminating a process")?;
        let by = self.by();
        self.rt
            .on_process(pid, |p, svc| p.terminate(by, reason, svc))
            .await
    }

    /// The processes that have been *quiet* — in flight, not paused, with
    /// no interrupt, timer, package or subflow to wait for — for longer
    /// than `after` (default: the engine's `stuck_after`), the longest
    /// quiet first, at most 1,000 (operator). Read from an index of quiet
    /// processes, never by scanning every process.
    pub async fn stuck_processes(
        &self,
        after: Option<std::time::Duration>,
    ) -> Result<Vec<ProcInfo>, EngineError> {
        self.need_operator("listing stuck processes")?;
        let after = after.unwrap_or(self.rt.config().stuck_after);
        let rows = On::new(&self.rt, &self.services).stuck(after, 1000).await?;
        Ok(rows.iter().map(ProcInfo::from).collect())
    }
}
