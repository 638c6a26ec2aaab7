//! Client actions on an existing process: one transition each, checked
//! against the actor's rights and recorded in the task's history inside
//! that transition.

use acts_store::BatchOp;

use crate::model::Vars;
use crate::scheduler::{Action, ActionError, Process, Services};

use crate::engine::kernel::shared::Kernel;
use crate::engine::kernel::transition::Outcome;
use crate::engine::types::access::Principal;
use crate::engine::types::error::EngineError;

impl Kernel {
    // ---- actions ------------------------------------------------------------

    /// Runs `f` as one transition of existing process `pid` (a missing
    /// process is `ProcessNotFound`).
    pub(crate) async fn on_process<T>(
        &self,
        pid: &str,
        f: impl FnOnce(&mut Process, Services<'_>) -> Outcome<T>,
    ) -> Result<T, EngineError> {
        self.on_process_with(pid, Vec::new(), f).await
    }

    /// [`on_process`](Self::on_process) with `extra` ops in the
    /// transition's batch (written only if it commits: a bulk job's record
    /// of what it did).
    pub(crate) async fn on_process_with<T>(
        &self,
        pid: &str,
        extra: Vec<BatchOp>,
        f: impl FnOnce(&mut Process, Services<'_>) -> Outcome<T>,
    ) -> Result<T, EngineError> {
        self.check_open()?;
        let handle = self
            .handle(pid)
            .await?
            .ok_or_else(|| EngineError::ProcessNotFound(pid.to_owned()))?;
        self.transition(&handle, extra, f).await
    }

    /// Applies a client action to act `tid` of process `pid` for `actor`
    /// (`None`: the application itself), checked and recorded in the
    /// task's history within the same transition.
    pub(crate) async fn act(
        &self,
        pid: &str,
        tid: &str,
        action: Action,
        options: Vars,
        actor: Option<&Principal>,
    ) -> Result<(), EngineError> {
        self.check_vars_size("the action's options", &options)?;
        self.on_process(pid, |p, svc| {
            if let Some(who) = actor {
                who.check_act(p, tid, action)?;
            }
            p.refuse_if_paused()?;
            p.act(tid, action, options, svc)?;
            if let Some(ix) = p.tasks.find_id(tid) {
                p.tasks
                    .record(ix, action.as_str(), actor.map(|a| a.id.as_str()));
            }
            Ok(())
        })
        .await
        .map_err(denial)?;
        // The act no longer waits: a package still running for it stops.
        self.package_runs.cancel(pid, tid);
        Ok(())
    }
}

/// A denial found inside a transition, reported as the executor reports
/// any other.
pub(crate) fn denial(e: EngineError) -> EngineError {
    match e {
        EngineError::Action(ActionError::Denied { principal, reason }) => {
            EngineError::Denied { principal, reason }
        }
        e => e,
    }
}
