//! The kernel's side of gates (a step's or act's `concurrency:` and
//! `rate:`, see `act_gates.rs` and the scheduler's `gate.rs`): asking
//! inside a transition, releasing what a committed transition ended,
//! opening the tasks let through (each in a transition of its own
//! process), the rate timer, and the count of gated tasks at a start.

use std::time::Duration;

use tracing::{debug, warn};

use crate::scheduler::{Process, TaskGate};

use crate::engine::kernel::act_gates::{GateId, GateKeyUse};
use crate::engine::kernel::shared::Kernel;
use crate::engine::persist::proc_rows::ProcRows;
use crate::engine::persist::rows::{ProcRow, QueueOrder};
use crate::engine::types::error::EngineError;

impl Kernel {
    /// Task `tid` of `pid` asks to pass `gate` (inside a transition of
    /// `pid`, before its commit), queued by its process's `order` (its
    /// priority and fairness key): `(open now, asked first now)`.
    pub(crate) fn ask_gate(
        &self,
        pid: &str,
        tid: &str,
        gate: &TaskGate,
        order: Option<&QueueOrder>,
    ) -> (bool, bool) {
        let now = self.now();
        let order = order.cloned().unwrap_or_default();
        let (open, new) = {
            let mut gates = self.gates.lock();
            let new = !gates.knows(pid, tid);
            (gates.ask(pid, tid, gate, &order, now), new)
        };
        if !open {
            debug!(pid = %pid, tid = %tid, "waits at its gate");
            self.arm_gate_timer();
        }
        (open, new)
    }

    /// The gated tasks of `process` that ended with the transition just
    /// committed (all of them when the process ended).
    pub(crate) fn gates_ended(&self, process: &Process, terminal: bool) -> Vec<String> {
        if !process.has_gates() {
            // Nothing of it is counted: no lock on the commit path.
            return Vec::new();
        }
        if self.gates_remote() {
            return self.remote_gates_ended(process, terminal);
        }
        let gates = self.gates.lock();
        if !gates.has(&process.pid) {
            return Vec::new();
        }
        ended_of(process, terminal, gates.tids_of(&process.pid))
    }

    /// Frees the slots and places of tasks `tids` of `pid` and opens the
    /// tasks that lets through.
    pub(crate) fn release_gates(&self, pid: &str, tids: &[String]) {
        if tids.is_empty() {
            return;
        }
        if self.gates_remote() {
            return self.remote_release(pid, Some(tids));
        }
        let now = self.now();
        let opened: Vec<GateId> = {
            let mut gates = self.gates.lock();
            tids.iter()
                .flat_map(|tid| gates.ended(pid, tid, now))
                .collect()
        };
        self.open_gates(opened);
        // A waiter that took the freed slot may wait for a token now.
        self.arm_gate_timer();
    }

    /// Process `pid` went (removed): every gate of it is free.
    pub(crate) fn release_all_gates(&self, pid: &str) {
        if self.gates_remote() {
            return self.remote_release(pid, None);
        }
        let now = self.now();
        let opened = self.gates.lock().ended_all(pid, now);
        self.open_gates(opened);
        self.arm_gate_timer();
    }

    /// The gate timer fired: the tasks whose token came run.
    pub(crate) fn on_gate_timer(&self) {
        self.timers.gate_timer_fired();
        if self.gates_remote() {
            if let Some(rt) = self.this() {
                self.spawn(async move { rt.seats_refill().await });
            }
            return;
        }
        let opened = self.gates.lock().refill(self.now());
        self.open_gates(opened);
        self.arm_gate_timer();
    }

    /// Arms the gate timer for the next token a task waits for.
    pub(crate) fn arm_gate_timer(&self) {
        if self.is_closed() {
            return;
        }
        let next = self.gates.lock().next_token_at();
        if let Some(due) = next {
            self.timers.arm_gates(due);
        }
    }

    /// Opens each task let through, in a transition of its process.
    fn open_gates(&self, opened: Vec<GateId>) {
        let Some(rt) = self.this() else {
            return;
        };
        for (pid, tid) in opened {
            let rt = rt.clone();
            self.spawn(async move { rt.open_gate(pid, tid).await });
        }
    }

    /// Lets task `tid` of `pid` through its gate. A store fault is tried
    /// again (its slot stays taken meanwhile) until it holds or the engine
    /// closes; a task or process that went frees its slot.
    pub(crate) async fn open_gate(&self, pid: String, tid: String) {
        let mut wait = Duration::from_millis(50);
        loop {
            let handle = match self.handle(&pid).await {
                Ok(Some(h)) => h,
                Ok(None) => {
                    // The process went: whatever it held is free.
                    self.release_all_gates(&pid);
                    return;
                }
                Err(e) => {
                    if self.retry_gate_later(&pid, &tid, &e, &mut wait).await {
                        continue;
                    }
                    return;
                }
            };
            let svc_tid = tid.clone();
            let opened = self
                .transition(&handle, Vec::new(), move |p, svc| {
                    Ok(p.open_gate(&svc_tid, svc))
                })
                .await;
            match opened {
                // A task that no longer waits was released by the
                // transition that ended it (or is released by this one).
                Ok(_) => return,
                Err(EngineError::ProcessNotFound(_)) | Err(EngineError::Removed(_)) => {
                    self.release_all_gates(&pid);
                    return;
                }
                Err(e) => {
                    if !self.retry_gate_later(&pid, &tid, &e, &mut wait).await {
                        return;
                    }
                }
            }
        }
    }

    /// Waits before another try of an open that failed on `e`; `false`
    /// when the engine closed (a restart opens it from the rows).
    async fn retry_gate_later(
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
    pub(crate) async fn count_gates(&self) -> Result<(), EngineError> {
        let found = self.gated_rows().await?;
        if self.gates_remote() {
            // This engine's tasks ask their homes again; the places this
            // engine keeps as a home are read back.
            self.remote_restore(found);
            return self.seats_restore().await;
        }
        let opened = self.gates.lock().restore(found, self.now());
        self.open_gates(opened);
        self.arm_gate_timer();
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
            let rows = self.reads().rows::<ProcRow>(chunk).await?;
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

    /// Every concurrency and rate key of steps and acts in use.
    pub(crate) fn gate_keys(&self) -> Vec<GateKeyUse> {
        self.gates.lock().keys()
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
