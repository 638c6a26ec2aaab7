//! The one transition protocol of the [`Kernel`]: a change to a process,
//! its one batch, what follows the commit; the timers a transition serves.
//!
//! ## One transition, one batch
//!
//! Every change to a process is a *transition*, run on the process's lane
//! (its async mutex, held until the transition is durable):
//!
//! 1. the pure core applies the change and runs what follows
//!    ([`Process::run`]), collecting client messages and requests;
//! 2. everything that changed — task rows, the scope rows whose data
//!    changed, the proc row, rows of subflow children it starts, outbox
//!    records for other processes — becomes **one** [`WriteBatch`];
//! 3. the group-commit writer commits it (merged with other processes'
//!    batches into one backend transaction);
//! 4. only then are messages handed to channels, requests started and the
//!    caller answered `Ok`.
//!
//! If the commit fails, nothing of the transition is stored: the caller
//! gets the error, the in-memory process is discarded, and the next use
//! reloads it from the store. A crash at any point therefore leaves the
//! store at a transition boundary, and recovery continues from there.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use acts_store::BatchOp;
use tokio::sync::OwnedMutexGuard;
use tracing::{Instrument, info_span, warn};

use crate::scheduler::{Action, ActionError, Process, Request, Services, TaskError, TaskState};

use crate::engine::kernel::cache::{ProcHandle, Slot};
use crate::engine::kernel::shared::Kernel;
use crate::engine::kernel::timers::TimerKey;
use crate::engine::persist;
use crate::engine::persist::boot_rows::BootRows;
use crate::engine::persist::delivery_rows::DeliveryRow;
use crate::engine::types::error::EngineError;

/// What a transition closure may return.
pub(crate) type Outcome<T> = Result<T, ActionError>;

impl Kernel {
    // ---- transitions ------------------------------------------------------

    /// Runs `f` on the process of `handle` as one transition (see the
    /// module docs). `extra` ops join the transition's batch.
    pub(crate) async fn transition<T>(
        &self,
        handle: &Arc<ProcHandle>,
        extra: Vec<BatchOp>,
        f: impl FnOnce(&mut Process, Services<'_>) -> Outcome<T>,
    ) -> Result<T, EngineError> {
        let mut current = handle.clone();
        // An instance unloaded (or discarded) after the caller got it is
        // looked up again: the next instance is loaded from the store.
        // Bounded: a fresh instance is only gone again if it is unloaded
        // or fails once more meanwhile.
        for _ in 0..8 {
            // With durable channels a transition that ends tasks closes
            // their pending deliveries in its batch: read them before
            // taking the lane, and use them if no transition committed
            // meanwhile.
            let pre_read = if self.emitter.has_durable() {
                let seen = current.commits.load(Ordering::Acquire);
                Some((seen, self.hooks.deliveries_of(self, current.pid()).await?))
            } else {
                None
            };
            let guard = current.lane.clone().lock_owned().await;
            if guard.process.is_none() {
                drop(guard);
                match self.handle(current.pid()).await? {
                    Some(next) if !Arc::ptr_eq(&next, &current) => {
                        current = next;
                        continue;
                    }
                    _ => return Err(EngineError::ProcessNotFound(current.pid().to_owned())),
                }
            }
            let known_pending = match pre_read {
                Some((seen, rows)) if current.commits.load(Ordering::Acquire) == seen => Some(rows),
                Some(_) => None, // a transition slipped in: read under the lane
                None => None,    // no durable channel: nothing to close (read if one appeared)
            };
            return self
                .transition_locked(&current, guard, extra, known_pending, f, |t, _| t)
                .instrument(info_span!("transition", pid = %current.pid()))
                .await;
        }
        Err(EngineError::ProcessNotFound(handle.pid().to_owned()))
    }

    /// [`transition`](Self::transition) on a lane already held; `finish`
    /// maps `f`'s result with the process as it will be committed.
    pub(crate) async fn transition_locked<T, U>(
        &self,
        handle: &Arc<ProcHandle>,
        mut guard: OwnedMutexGuard<Slot>,
        mut extra: Vec<BatchOp>,
        known_pending: Option<Vec<DeliveryRow>>,
        f: impl FnOnce(&mut Process, Services<'_>) -> Outcome<T>,
        finish: impl FnOnce(T, &Process) -> U,
    ) -> Result<U, EngineError> {
        let pid = handle.pid().to_owned();
        let slot = &mut *guard;
        let Some(process) = slot.process.as_mut() else {
            return Err(EngineError::ProcessNotFound(pid));
        };
        // The model versions of subflow children this batch creates.
        let mut pins = Vec::new();
        let svc = self.services();
        process.set_now(self.now());
        let out = match f(process, svc) {
            Ok(out) => out,
            // Refused after changing something: the instance no longer
            // matches the store; the next use reloads it.
            Err(e) if process.tasks.is_dirty() => {
                slot.process = None;
                self.cache.forget(&pid, handle);
                return Err(e.into());
            }
            Err(e) => return Err(e.into()),
        };
        let mut messages = process.take_messages();
        let traced = self.config.spans.is_some();
        let mut spans = process.take_spans(traced);
        let mut requests = Vec::new();
        let mut children = Vec::new();
        // Gated tasks this transition asked for first (forgotten if it
        // does not commit: a reload asks again).
        let mut asked = Vec::new();
        let mut remote_asks = Vec::new();
        // Subflow children are part of the transition: their rows go in
        // its batch; a child that cannot start fails its act right away.
        loop {
            let batch = process.take_requests();
            if batch.is_empty() {
                break;
            }
            for r in batch {
                match &r {
                    Request::StartSubflow {
                        tid,
                        child_pid,
                        to,
                        options,
                    } => match self.models.pin_deployed(to).map_or_else(
                        // Removed since the core checked (a race with
                        // `remove_model`): fail the act as the core does.
                        || Err(EngineError::ModelNotFound(to.clone())),
                        |(m, pin)| {
                            let parent_key = process.concurrency_key.as_deref();
                            let placement = self.placement();
                            let slot = placement.child_slot(&m, options, parent_key)?;
                            Ok(((slot, placement.queue_order(&m, options)?), m, pin))
                        },
                    ) {
                        Ok((queued, m, pin)) => {
                            // Held until the batch naming the version is
                            // durable (the end of this transition).
                            pins.push(pin);
                            let (ops, child) =
                                self.child_row_ops(&m, child_pid, options.clone(), queued);
                            extra.extend(ops);
                            children.push(child);
                        }
                        Err(e) => {
                            // Its key does not evaluate: the act fails as
                            // a start would be refused.
                            let o = TaskError::new("subflow", e.to_string()).to_vars();
                            if let Err(e) = process.act(tid, Action::Error, o, svc) {
                                warn!(pid = %pid, error = %e, "cannot fail a subflow act");
                            }
                            messages.extend(process.take_messages());
                            spans.extend(process.take_spans(traced));
                        }
                    },
                    Request::RunPackage { .. } => requests.push(r),
                    Request::Gate { tid, gate } if self.gates.remote() => {
                        remote_asks.push((tid.clone(), gate.clone()));
                    }
                    Request::Gate { tid, .. } if self.gates.refuses() => {
                        let refusal = crate::engine::kernel::gates::NOT_ON_A_CLUSTER;
                        if process.refuse_gate(tid, refusal, svc) {
                            messages.extend(process.take_messages());
                            spans.extend(process.take_spans(traced));
                        }
                    }
                    Request::Gate { tid, gate } => {
                        let order = slot.persisted.row.order.as_ref();
                        let (open, new) = self.gates.ask(&pid, tid, gate, order);
                        if new {
                            asked.push(tid.clone());
                        }
                        if open && process.open_gate(tid, svc) {
                            messages.extend(process.take_messages());
                            spans.extend(process.take_spans(traced));
                        }
                    }
                }
            }
        }
        let out = finish(out, process);
        let terminal = process.state().is_terminal();
        // The job budget ran out: commit what is done, continue in a new
        // transition (the queue is stored with the row, so a restart
        // continues from the same place).
        // (A paused process keeps its queue for the resume.)
        let continues = !terminal && process.has_queued_work() && process.paused.is_none();
        let return_op = terminal.then(|| persist::subflow_return(process)).flatten();
        let returned = return_op.is_some();
        if let Some(op) = &return_op {
            extra.extend(BootRows::insert_outbox_ops(op));
        }
        let next_timer = if terminal { None } else { process.next_timer() };
        let wake = persist::Wake::of(process, next_timer);
        // Whether the process was in the store before this transition (a
        // start's first transition stores it).
        let was_stored = slot.persisted.row_stored;
        // A parked process (a subflow child, a start over the cap) whose
        // first transition this is.
        let was_parked = was_stored && slot.persisted.row.state == TaskState::None;
        let mut ops = persist::transition_ops(process, &mut slot.persisted, wake);
        ops.extend(extra);
        // Without durable channels there is nothing to record (and no
        // call into the services on the commit path).
        let deliveries = if self.emitter.has_durable() {
            self.hooks
                .delivery_ops(self, &messages, known_pending)
                .await
        } else {
            Ok(Vec::new())
        };
        let committed = match deliveries {
            Ok(deliveries) => {
                ops.extend(deliveries);
                self.write(Some((&pid, handle.born)), ops).await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = committed {
            // Not stored: drop the in-memory state (the next use reloads
            // it). A start whose first transition failed stored nothing:
            // it is not in flight, so its place is free.
            let never_stored = !was_stored;
            slot.process = None;
            self.cache.forget(&pid, handle);
            if (never_stored || was_parked) && handle.give_place_back() {
                self.cache.release(&pid);
            }
            if was_parked {
                // Still parked in the store: found again by the next scan
                // of parked rows (the housekeeping tick), not retried at
                // once (found by the simulator: a subflow child whose first
                // transition failed on a store fault kept its place and
                // never ran).
                self.cache.unclaim_failed(&pid, true);
            }
            warn!(pid = %pid, error = %e, "transition not committed; process discarded");
            drop(guard);
            self.gates.release(&pid, &asked);
            self.refill();
            return Err(e);
        }
        // Durable: now the world may hear of it.
        handle.commits.fetch_add(1, Ordering::AcqRel);
        let gates_ended = self.gates.ended(process, terminal);
        self.work.committed();
        self.emitter.deliver(&messages);
        if let Some(export) = &self.config.spans {
            export.export(spans);
        }
        self.arm_timer(&pid, next_timer);
        if terminal {
            // Finished: out of memory and out of admission.
            self.cache.forget(&pid, handle);
            if handle.give_place_back() {
                self.cache.release(&pid);
            } else if was_parked {
                // Ended before it started (a client aborted it while it
                // was parked): out of the queues, and out of its key's.
                self.cache.unpark(&pid);
            }
        } else {
            // A process that only waits (a client, a timer, a subflow
            // child) may be unloaded when memory is over its limit.
            self.cache.note_idle(&pid, !wake.resume);
        }
        let order = (!remote_asks.is_empty())
            .then(|| slot.persisted.row.order.clone())
            .flatten();
        drop(guard);
        self.gates.release(&pid, &gates_ended);
        self.gates.ask_homes(&pid, remote_asks, order.as_ref());
        self.unload_over_limit();
        self.after_commit(&pid, requests, children, terminal, returned);
        if continues && let Some(rt) = self.this() {
            self.spawn(rt.continue_process(handle.clone()));
        }
        Ok(out)
    }

    /// Runs what a fired timer is for.
    pub(crate) async fn on_timer(&self, key: TimerKey) {
        match key {
            TimerKey::Process(pid) => {
                // The timer fired: it is armed no more. (A stale entry made
                // a later arm at the same due a no-op, so a tick that
                // failed on a store fault lost the timeout for good —
                // found by the simulator.)
                self.timers.fired(&pid, self.now());
                if let Err(e) = self.tick(&pid).await {
                    warn!(pid = %pid, error = %e, "timeout tick failed");
                    self.stall(&pid, crate::engine::kernel::stalled::Stalled::Tick, &e);
                }
            }
            TimerKey::Schedules => self.hooks.fire_schedules(self).await,
            TimerKey::Housekeeping => self.hooks.housekeeping(self, false).await,
            TimerKey::Gates => {
                self.timers.gate_timer_fired();
                self.gates.on_timer();
            }
        }
    }

    /// Fires the timeouts of `pid` that are due.
    pub(crate) async fn tick(&self, pid: &str) -> Result<(), EngineError> {
        let Some(handle) = self.handle(pid).await? else {
            return Ok(());
        };
        self.transition(&handle, Vec::new(), |p, svc| {
            p.tick(svc);
            Ok(())
        })
        .await
    }

    /// Reads process `pid` under its lane (`None` when it does not exist).
    pub(crate) async fn with_process<T>(
        &self,
        pid: &str,
        f: impl FnOnce(&Process) -> T,
    ) -> Result<Option<T>, EngineError> {
        let Some(handle) = self.handle_to_read(pid).await? else {
            return Ok(None);
        };
        let slot = handle.lane.lock().await;
        match &slot.process {
            Some(p) => Ok(Some(f(p))),
            None => {
                drop(slot);
                // Discarded after a failed commit: read the stored state.
                match self.load(pid).await? {
                    Some((h, _)) => {
                        let slot = h.lane.lock().await;
                        Ok(slot.process.as_ref().map(f))
                    }
                    None => Ok(None),
                }
            }
        }
    }
}
