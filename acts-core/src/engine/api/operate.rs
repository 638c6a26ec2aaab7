//! Operator controls through the executor: pause, resume, rewind, retry
//! and terminate a process, and list the stuck ones (operators and admins).

use crate::model::Vars;

use crate::engine::api::executor::Executor;
use crate::engine::services::On;
use crate::engine::types::error::EngineError;
use crate::engine::types::info::ProcInfo;

impl Executor {
    /// `proc().pause` ([`ProcOps::pause`](super::ProcOps::pause)).
    pub(crate) async fn pause_process(&self, pid: &str, reason: &str) -> Result<(), EngineError> {
        self.need_operator("pausing a process")?;
        let by = self.by();
        self.rt.on_process(pid, |p, _| p.pause(by, reason)).await
    }

    /// `proc().unpause` ([`ProcOps::unpause`](super::ProcOps::unpause)).
    pub(crate) async fn unpause_process(&self, pid: &str) -> Result<(), EngineError> {
        self.need_operator("resuming a paused process")?;
        let by = self.by();
        self.rt.on_process(pid, |p, svc| p.unpause(by, svc)).await
    }

    /// `proc().rewind` ([`ProcOps::rewind`](super::ProcOps::rewind)).
    pub(crate) async fn rewind_process(
        &self,
        pid: &str,
        to: &str,
        vars: Vars,
    ) -> Result<(), EngineError> {
        self.need_operator("rewinding a process")?;
        self.rt.check_vars_size("the rewind's vars", &vars)?;
        let by = self.by();
        self.rt
            .on_process(pid, |p, svc| p.rewind(by, to, &vars, svc))
            .await
    }

    /// `proc().retry` ([`ProcOps::retry`](super::ProcOps::retry)).
    pub(crate) async fn retry_process(
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

    /// `proc().terminate` ([`ProcOps::terminate`](super::ProcOps::terminate)).
    pub(crate) async fn terminate_process(
        &self,
        pid: &str,
        reason: &str,
    ) -> Result<(), EngineError> {
        self.need_operator("terminating a process")?;
        let by = self.by();
        self.rt
            .on_process(pid, |p, svc| p.terminate(by, reason, svc))
            .await
    }

    /// `proc().stuck` ([`ProcOps::stuck`](super::ProcOps::stuck)).
    pub(crate) async fn stuck_processes(
        &self,
        after: Option<std::time::Duration>,
    ) -> Result<Vec<ProcInfo>, EngineError> {
        self.need_operator("listing stuck processes")?;
        let after = after.unwrap_or(self.rt.config().stuck_after);
        let rows = On::new(&self.rt, &self.services).stuck(after, 1000).await?;
        Ok(rows.iter().map(ProcInfo::from).collect())
    }
}
