//! The gates' side of one engine (a step's or act's `concurrency:` and
//! `rate:`, see `act_gates.rs` and the scheduler's `gate.rs`): asking
//! inside a transition, releasing what a committed transition ended,
//! opening the tasks let through (each in a transition of its own
//! process, through the [`GateHost`]), the rate timer, and the count of
//! gated tasks at a start. With a courier each call hands over to
//! `remote.rs`.

use std::time::Duration;

use tracing::{debug, warn};

use crate::scheduler::{GatePass, Process, TaskGate};

use super::Gates;
use super::act_gates::GateId;
use crate::engine::persist::proc_rows::ProcRows;
use crate::engine::persist::reads::Reads;
use crate::engine::persist::rows::{ProcRow, QueueOrder};
use crate::engine::types::error::EngineError;

impl Gates {
    /// Task `tid` of `pid` asks to pass `gate` (inside a transition of
    /// `pid`, before its commit), queued by its process's `order` (its
    /// priority and fairness key): `(open now, asked first now)`.
    pub(crate) fn ask(
        &self,
        pid: &str,
        tid: &str,
        gate: &TaskGate,
        order: Option<&QueueOrder>,
    ) -> (bool, bool) {
        let now = self.now();
        let order = order.cloned().unwrap_or_default();
        let (open, new) = {
            let mut gates = self.table.lock();
            let new = !gates.knows(pid, tid);
            (gates.ask(pid, tid, gate, &order, now), new)
        };
        if !open {
            debug!(pid = %pid, tid = %tid, "waits at its gate");
            self.arm_timer();
        }
        (open, new)
    }

    /// The gated tasks of `process` that ended with the transition just
    /// committed (all of them when the process ended).
    pub(crate) fn ended(&self, process: &Process, terminal: bool) -> Vec<String> {
        if !process.has_gates() {
            // Nothing of it is counted: no lock on the commit path.
            return Vec::new();
        }
        if self.remote() {
            return self.remote_ended(process, terminal);
        }
        let gates = self.table.lock();
        if !gates.has(&process.pid) {
            return Vec::new();
        }
        ended_of(process, terminal, gates.tids_of(&process.pid))
    }

    /// Frees the slots and places of tasks `tids` of `pid` and opens the
    /// tasks that lets through.
    pub(crate) fn release(&self, pid: &str, tids: &[String]) {
        if tids.is_empty() {
            return;
        }
        if self.remote() {
            return self.remote_release(pid, Some(tids));
        }
        let now = self.now();
        let opened: Vec<GateId> = {
            let mut gates = self.table.lock();
            tids.iter()
                .flat_map(|tid| gates.ended(pid, tid, now))
                .collect()
        };
        self.open_gates(opened);
        // A waiter that took the freed slot may wait for a token now.
        self.arm_timer();
    }

    /// Process `pid` went (removed): every gate of it is free.
    pub(crate) fn release_all(&self, pid: &str) {
        if self.remote() {
            return self.remote_release(pid, None);
        }
        let now = self.now();
        let opened = self.table.lock().ended_all(pid, now);
        self.open_gates(opened);
        self.arm_timer();
    }

    /// The gate timer fired: the tasks whose token came run.
    pub(crate) fn on_timer(&self) {
        if self.remote() {
            self.spawn_with(|h| async move { h.gates().seats_refill().await });
            return;
        }
        let opened = self.table.lock().refill(self.now());
        self.open_gates(opened);
        self.arm_timer();
    }

    /// Opens each task let through, in a transition of its process.
    fn open_gates(&self, opened: Vec<GateId>) {
        for (pid, tid) in opened {
            self.spawn_with(|h| async move { h.gates().open(pid, tid).await });
        }
    }

    /// Lets task `tid` of `pid` through its gate. A store fault is tried
    /// again (its slot stays taken meanwhile) until it holds or the engine
    /// closes; a task or process that went frees its slot.
    pub(crate) async fn open(&self, pid: String, tid: String) {
        let mut wait = Duration::from_millis(50);
        loop {
            let Some(host) = self.host() else { return };
            let of = tid.clone();
            let change: super::GateChange = Box::new(move |p, svc| {
                // A task that no longer waits was released by the
                // transition that ended it (or is released by this one).
                if p.open_gate(&of, svc) {
                    GatePass::Runs
                } else {
                    GatePass::Gone
                }
            });
            match host.transition_of(&pid, change).await {
                Ok(Some(_)) => return,
                Ok(None) => {
                    // The process went: whatever it held is free.
                    self.release_all(&pid);
                    return;
                }
                Err(e) => {
                    if !self.retry_later(&pid, &tid, &e, &mut wait).await {
                        return;
                    }
                }
            }
        }
    }

    /// Waits before another try of an open that failed on `e`; `false`
    /// when the engine closed (a restart opens it from the rows).
    async fn retry_later(
        &self,
        pid: &str,
        tid: &str,
        e: &EngineError,
        wait: &mut Duration,
    ) -> bool {
        if self.is_closed() {
            return false;
        }
        warn!(pid = %pid, tid = %tid, error = %e, "cannot open a gate yet; trying again");
        tokio::time::sleep(*wait).await;
        *wait = (*wait * 2).min(Duration::from_secs(5));
        !self.is_closed()
    }

    /// At a start, before any process runs: the gated tasks of the
    /// processes in flight (the sparse `gated` index) hold their slots or
    /// wait again, in order; the ones with room run.
    pub(crate) async fn restore(&self) -> Result<(), EngineError> {
        let found = self.gated_rows().await?;
        if self.remote() {
            // This engine's tasks ask their homes again; the places this
            // engine keeps as a home are read back.
            self.remote_restore(found);
            return self.seats_restore().await;
        }
        let opened = self.table.lock().restore(found, self.now());
        self.open_gates(opened);
        self.arm_timer();
        Ok(())
    }

    /// The gated tasks of the stored processes (the sparse `gated` index).
    async fn gated_rows(
        &self,
    ) -> Result<Vec<(String, crate::scheduler::GateUse, QueueOrder)>, EngineError> {
        let pids = ProcRows::new(&self.store).gated_ids().await?;
        let mut found = Vec::new();
        // One multi-read per thousand processes.
        for chunk in pids.chunks(1000) {
            let rows = Reads::new(&self.store).rows::<ProcRow>(chunk).await?;
            for (pid, row) in chunk.iter().zip(rows) {
                let Some(row) = row else { continue };
                let order = row.order.unwrap_or_default();
                found.extend(
                    row.gates
                        .into_iter()
                        .map(|u| (pid.clone(), u, order.clone())),
                );
            }
        }
        Ok(found)
    }
}

/// Of tasks `tids` of `process`, the ones that ended (all of them when
/// the process ended: `terminal`).
pub(crate) fn ended_of(
    process: &Process,
    terminal: bool,
    tids: impl IntoIterator<Item = String>,
) -> Vec<String> {
    tids.into_iter()
        .filter(|tid| {
            terminal
                || process
                    .tasks
                    .find_id(tid)
                    .and_then(|t| process.tasks.get(t))
                    .is_none_or(|t| t.state.is_terminal())
        })
        .collect()
}
