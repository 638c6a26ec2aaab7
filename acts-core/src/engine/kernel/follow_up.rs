//! What a committed transition sets off: the continuation of a process
//! whose job budget ran out, subflow children's rows, the process's timer,
//! unloading idle processes over the memory limit, application packages,
//! the subflow return of a finished child, and refilling freed places.

use std::sync::Arc;

use acts_store::BatchOp;
use serde_json::Value;
use tracing::warn;

use crate::model::Vars;
use crate::scheduler::{Request, TaskState};

use crate::engine::kernel::cache::ProcHandle;
use crate::engine::kernel::catalog::DeployedModel;
use crate::engine::kernel::refill::FoundParked;
use crate::engine::kernel::shared::Kernel;
use crate::engine::kernel::stalled::Stalled;
use crate::engine::persist::proc_rows::ProcRows;
use crate::engine::persist::rows::{ConcurrencySlot, ProcRow, QueueOrder};
use crate::engine::types::error::EngineError;

/// A subflow child parked by a transition: its admission time, pid,
/// concurrency slot and queue order.
pub(crate) type ParkedChild = FoundParked;

impl Kernel {
    /// The next transition of a process whose last one handed back with
    /// work left (boxed: a transition spawns it, so its type cannot name
    /// itself).
    pub(crate) fn continue_process(
        self: Arc<Self>,
        handle: Arc<ProcHandle>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(async move {
            let r = self
                .transition(&handle, Vec::new(), |p, svc| {
                    p.run(svc);
                    Ok(())
                })
                .await;
            if let Err(e) = r {
                warn!(pid = %handle.pid(), error = %e, "continuing the process failed");
                self.stall(handle.pid(), Stalled::Continue(handle.clone()), &e);
            }
        })
    }

    /// Notes that an automatic transition of `pid` failed with `e`: on a
    /// store fault it is retried on the housekeeping tick (found by the
    /// simulator: a subflow child whose first transition failed on a store
    /// fault was never run, and its parent waited for ever).
    pub(crate) fn stall(&self, pid: &str, what: Stalled, e: &EngineError) {
        if matches!(e, EngineError::Store(_) | EngineError::Commit { .. }) {
            self.stalled.insert(pid.to_owned(), what);
        }
    }

    /// Retries every stalled process's automatic transition. An instance
    /// still in memory runs the transition that failed; one discarded by a
    /// failed commit is loaded again (a load of an in-flight process
    /// resumes it), unless it is parked (the parked scan starts it). What
    /// fails again stays stalled.
    pub(crate) async fn retry_stalled(self: &Arc<Self>) {
        let stalled = self.stalled.take_all();
        if !stalled.is_empty() {
            tracing::info!(count = stalled.len(), "retrying stalled processes");
        }
        for (pid, what) in stalled {
            // `None`: its lane is busy (someone works on it).
            let live = match &what {
                Stalled::Resume(h) | Stalled::Continue(h) => {
                    h.lane.try_lock().ok().map(|slot| slot.process.is_some())
                }
                Stalled::Tick => Some(false),
            };
            let Some(live) = live else {
                self.stalled.insert(pid, what);
                continue;
            };
            match (what, live) {
                (Stalled::Resume(h), true) => self.clone().resume_process(h).await,
                (Stalled::Continue(h), true) => self.clone().continue_process(h).await,
                (Stalled::Tick, _) => {
                    if let Err(e) = self.tick(&pid).await {
                        self.stall(&pid, Stalled::Tick, &e);
                    }
                }
                (what, false) => match self.proc_row(&pid).await {
                    Ok(Some(row)) if row.state == TaskState::None => {}
                    Ok(None) => {}
                    Ok(Some(_)) => {
                        if let Err(e) = self.handle(&pid).await {
                            self.stall(&pid, what, &e);
                        }
                    }
                    Err(e) => self.stall(&pid, what, &e),
                },
            }
        }
    }

    /// The transition that resumes a loaded in-flight process (boxed, as
    /// [`continue_process`](Self::continue_process)).
    pub(crate) fn resume_process(
        self: Arc<Self>,
        handle: Arc<ProcHandle>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        let resuming = self.work.resuming();
        Box::pin(async move {
            let _resuming = resuming;
            let r = self
                .transition(&handle, Vec::new(), |p, svc| {
                    p.resume();
                    p.run(svc);
                    Ok(())
                })
                .await;
            if let Err(e) = r {
                warn!(pid = %handle.pid(), error = %e, "resuming the process failed");
                self.stall(handle.pid(), Stalled::Resume(handle.clone()), &e);
            }
        })
    }

    /// The parked row of subflow child `pid` of `model` (start options
    /// `vars`, concurrency slot and queue order): its ops, and what the cache is
    /// told once they are durable ([`after_commit`](Self::after_commit)).
    pub(crate) fn child_row_ops(
        &self,
        model: &DeployedModel,
        pid: &str,
        mut vars: Vars,
        (slot, order): (Option<ConcurrencySlot>, Option<QueueOrder>),
    ) -> (Vec<BatchOp>, ParkedChild) {
        vars.insert("pid".into(), Value::String(pid.to_owned()));
        let now = self.now();
        let row = ProcRow {
            slot: slot.clone(),
            order: order.clone(),
            ..ProcRow::unstarted(pid, &model.row.id, model.row.revision, now, vars)
        };
        (
            ProcRows::insert_ops(&row),
            (now, pid.to_owned(), slot, order),
        )
    }

    /// Arms (or re-arms, or cancels with `None`) the timeout timer of
    /// process `pid`, resident or not.
    pub(crate) fn arm_timer(&self, pid: &str, due: Option<i64>) {
        self.timers.arm_process(pid, due);
    }

    /// Unloads idle processes while more are resident than the memory
    /// limit allows, least recently idle first. Each is checked under its
    /// lane (taken only if free: a busy process is not idle) and marked
    /// gone there, so a caller still holding the instance loads it again.
    pub(crate) fn unload_over_limit(&self) {
        for h in self.cache.over_limit() {
            let Ok(mut slot) = h.lane.try_lock() else {
                // Busy right now (a read or a transition): still idle
                // afterwards unless a transition says otherwise, so it
                // stays a candidate (at the back).
                self.cache.note_idle(h.pid(), true);
                continue;
            };
            let idle = slot.process.as_ref().is_some_and(|p| {
                !p.state().is_terminal() && !p.has_queued_work() && !p.runs_packages()
            });
            if idle {
                slot.process = None;
                // Out of memory; it stays admitted.
                self.cache.forget(h.pid(), &h);
            }
        }
    }

    /// After a durable transition: note its parked subflow `children`,
    /// start what it requested; on a terminal
    /// state, refill the freed slot; when it `returned` (a subflow child
    /// wrote its return), apply the return to the parent.
    pub(crate) fn after_commit(
        &self,
        pid: &str,
        requests: Vec<Request>,
        children: Vec<ParkedChild>,
        terminal: bool,
        returned: bool,
    ) {
        let Some(rt) = self.this() else {
            return;
        };
        // Only a freed slot or a new parked child can let queued work start.
        let refill = terminal || !children.is_empty();
        self.cache.note_parked(children);
        for r in requests {
            match r {
                // Its child's row is noted above.
                // Its child's row is noted above; a gate was asked in
                // the transition.
                Request::StartSubflow { .. } | Request::Gate { .. } => {}
                Request::RunPackage {
                    tid,
                    uses,
                    params,
                    inputs,
                } => {
                    let rt = rt.clone();
                    let pid = pid.to_owned();
                    self.spawn(async move {
                        rt.package_runs
                            .run(&*rt, pid, tid, uses, params, inputs)
                            .await
                    });
                }
            }
        }
        if returned {
            // A subflow child's return, written with its last transition:
            // applied to the parent now (a restart replays it otherwise).
            let rt2 = rt.clone();
            let pid = pid.to_owned();
            self.spawn(async move {
                if let Err(e) = rt2.recovery.replay_op(&pid).await {
                    warn!(pid = %pid, error = %e, "subflow return not applied yet");
                }
            });
        }
        if terminal {
            // nothing of an ended process runs on
            rt.package_runs.cancel_process(pid);
        }
        if refill {
            rt.refill();
        }
    }
}
