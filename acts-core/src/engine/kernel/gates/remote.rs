//! Both sides of the gate protocol between the engines of one store
//! (`courier.rs` describes it): the **task's** side (ask each part
//! of a task's gate of its key's home after the commit that made it wait,
//! open it when the last part is granted, tell the homes when it ends)
//! and the **home's** side (keep the key's slots, queues and bucket in
//! [`ActGates`](super::act_gates::ActGates), a seat row per place, call
//! the task's engine back when a place frees, ask the holders again now
//! and then so a lost end frees its slot).
//!
//! Used only when the engine has a courier
//! ([`EngineConfig::gate_courier`](crate::engine::kernel::EngineConfig)); without one
//! `local.rs` keeps every key here.

use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{Value, json};
use tracing::{debug, warn};

use crate::scheduler::{GatePass, Process, TaskGate};

use super::act_gates::GateId;
use super::courier::{GateCall, gate_parts, part_of};
use super::local::ended_of;
use super::{GateChange, GateHost, GateRead, Gates};
use crate::engine::persist::boot_rows::BootRows;
use crate::engine::persist::rows::QueueOrder;
use crate::engine::persist::slot_rows::GateSeatRow;
use crate::engine::types::error::EngineError;

/// How often a home asks the holders of its slots whether their tasks
/// still run (a task's end that never arrived frees its slot then).
const ASK_HOLDERS_EVERY: Duration = Duration::from_secs(10);

/// Where a call goes.
enum To<'a> {
    Home(&'a str),
    Process(&'a str),
}

impl Gates {
    /// Answers a call of the protocol from another engine (or this one).
    pub(crate) async fn call(&self, call: Value) -> Result<Value, EngineError> {
        let call: GateCall = serde_json::from_value(call)
            .map_err(|e| EngineError::Corrupt(format!("an unreadable gate call: {e}")))?;
        if !self.remote() {
            return Err(EngineError::Corrupt(
                "a gate call to an engine without a gate courier (not a cluster's)".into(),
            ));
        }
        match call {
            GateCall::Ask {
                pid,
                part,
                gate,
                order,
            } => self.seat_ask(pid, part, gate, order).await,
            GateCall::End { pid, part } => {
                self.seat_end(&pid, &part).await;
                Ok(json!({}))
            }
            GateCall::Granted { pid, part } => self.on_granted(pid, part).await,
        }
    }

    // ---- the task's side ----

    /// After the commit that made tasks `asks` of `pid` wait at their
    /// gates: each asks its keys' homes.
    pub(crate) fn ask_homes(
        &self,
        pid: &str,
        asks: Vec<(String, TaskGate)>,
        order: Option<&QueueOrder>,
    ) {
        if asks.is_empty() {
            return;
        }
        let order = order.cloned().unwrap_or_default();
        {
            let mut asked = self.remote.asked.lock();
            let mine = asked.entry(pid.to_owned()).or_default();
            for (tid, gate) in &asks {
                mine.insert(tid.clone(), (gate.clone(), order.clone()));
            }
        }
        for (tid, gate) in asks {
            self.spawn_pass(pid.to_owned(), tid, gate, order.clone(), 0);
        }
    }

    fn spawn_pass(&self, pid: String, tid: String, gate: TaskGate, order: QueueOrder, from: usize) {
        self.spawn_with(|h| async move { h.gates().pass_parts(pid, tid, gate, order, from).await });
    }

    /// Asks the parts of a task's gate from `from` on, in order; opens the
    /// task when the last is granted at once (else its home calls back).
    async fn pass_parts(
        &self,
        pid: String,
        tid: String,
        gate: TaskGate,
        order: QueueOrder,
        from: usize,
    ) {
        for (part, home, g) in gate_parts(&tid, &gate).into_iter().skip(from) {
            let call = GateCall::Ask {
                pid: pid.clone(),
                part,
                gate: g,
                order: order.clone(),
            };
            match self.deliver(To::Home(&home), &call).await {
                Some(a) if a.get("open") == Some(&Value::Bool(true)) => {}
                // Queued: its home calls back (or the engine closed).
                _ => return,
            }
        }
        self.open(pid, tid).await;
    }

    /// A home granted part `part` of one of this engine's tasks.
    async fn on_granted(&self, pid: String, part: String) -> Result<Value, EngineError> {
        let Some((tid, n)) = part_of(&part) else {
            return Err(EngineError::Corrupt(format!("'{part}' names no gate part")));
        };
        let tid = tid.to_owned();
        // Read first: a holder asked again changes nothing.
        let Some(host) = self.host() else {
            return Err(EngineError::Closed);
        };
        let of = tid.clone();
        let read: GateRead = Box::new(move |p| p.gate_pass(&of, n));
        let seen = host.read_of(&pid, read).await?;
        let pass = match seen.unwrap_or(GatePass::Gone) {
            GatePass::Opens => self.open_granted(&pid, &tid, n).await?,
            other => other,
        };
        let task = match pass {
            GatePass::Waits(gate) => {
                let order = self
                    .remote
                    .asked
                    .lock()
                    .get(&pid)
                    .and_then(|m| m.get(&tid))
                    .map(|(_, o)| o.clone())
                    .unwrap_or_default();
                self.spawn_pass(pid, tid, gate, order, n + 1);
                "waits"
            }
            GatePass::Opens | GatePass::Runs => "runs",
            GatePass::Gone => "gone",
        };
        Ok(json!({ "task": task }))
    }

    /// Opens task `tid` of `pid`, whose last part was granted: what it is
    /// then.
    async fn open_granted(&self, pid: &str, tid: &str, n: usize) -> Result<GatePass, EngineError> {
        let Some(host) = self.host() else {
            return Err(EngineError::Closed);
        };
        let of = tid.to_owned();
        let change: GateChange = Box::new(move |p, svc| {
            if p.open_gate(&of, svc) {
                GatePass::Runs
            } else {
                p.gate_pass(&of, n)
            }
        });
        Ok(host
            .transition_of(pid, change)
            .await?
            .unwrap_or(GatePass::Gone))
    }

    /// The gated tasks of `process` that ended with the transition just
    /// committed (all of them when it ended).
    pub(super) fn remote_ended(&self, process: &Process, terminal: bool) -> Vec<String> {
        let asked = self.remote.asked.lock();
        let Some(mine) = asked.get(&process.pid) else {
            return Vec::new();
        };
        ended_of(process, terminal, mine.keys().cloned())
    }

    /// Tasks `tids` of `pid` ended (`None`: every one, the process went):
    /// their homes free their places.
    pub(super) fn remote_release(&self, pid: &str, tids: Option<&[String]>) {
        let gone: Vec<(String, TaskGate)> = {
            let mut asked = self.remote.asked.lock();
            let Some(mine) = asked.get_mut(pid) else {
                return;
            };
            let gone = match tids {
                Some(tids) => tids
                    .iter()
                    .filter_map(|t| mine.remove(t).map(|(g, _)| (t.clone(), g)))
                    .collect(),
                None => std::mem::take(mine)
                    .into_iter()
                    .map(|(t, (g, _))| (t, g))
                    .collect(),
            };
            if mine.is_empty() {
                asked.remove(pid);
            }
            gone
        };
        for (tid, gate) in gone {
            for (part, home, _) in gate_parts(&tid, &gate) {
                let call = GateCall::End {
                    pid: pid.to_owned(),
                    part,
                };
                self.spawn_with(|h| async move {
                    h.gates().deliver(To::Home(&home), &call).await;
                });
            }
        }
    }

    /// At a start: the gated tasks found in the process rows are this
    /// engine's again; the waiting ones ask their homes again (a place
    /// granted before is granted again).
    pub(super) fn remote_restore(
        &self,
        found: Vec<(String, crate::scheduler::GateUse, QueueOrder)>,
    ) {
        for (pid, u, order) in found {
            self.remote
                .asked
                .lock()
                .entry(pid.clone())
                .or_default()
                .insert(u.tid.clone(), (u.gate.clone(), order.clone()));
            if !u.open {
                self.spawn_pass(pid, u.tid, u.gate, order, 0);
            }
        }
    }

    /// Sends `call` until it is answered (a courier that cannot reach the
    /// other engine is tried again, backing off) or this engine closes.
    async fn deliver(&self, to: To<'_>, call: &GateCall) -> Option<Value> {
        let courier = self.courier.clone()?;
        let body = serde_json::to_value(call).ok()?;
        let mut wait = Duration::from_millis(50);
        loop {
            let reply = match to {
                To::Home(key) => courier.route().to_key_home(key, body.clone()),
                To::Process(pid) => courier.route().to_process(pid, body.clone()),
            };
            match reply.await {
                Ok(answer) => return Some(answer),
                Err(e) => {
                    if self.is_closed() {
                        return None;
                    }
                    // Backed off to the longest wait: no longer a blip
                    // (a peer down for long, or refusing the call).
                    if wait >= Duration::from_secs(5) {
                        warn!(error = %e, "a gate call still does not get through; trying again");
                    } else {
                        debug!(error = %e, "a gate call did not get through; trying again");
                    }
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                    if self.is_closed() {
                        return None;
                    }
                }
            }
        }
    }

    // ---- the home's side ----

    /// Writes a seat row's change, durable when this returns.
    async fn write(&self, ops: Vec<acts_store::BatchOp>) -> Result<(), EngineError> {
        match self.host() {
            Some(host) => host.write(ops).await,
            None => Err(EngineError::Closed),
        }
    }

    /// Part `part` of a task of `pid` asks for its place here.
    async fn seat_ask(
        &self,
        pid: String,
        part: String,
        gate: TaskGate,
        order: QueueOrder,
    ) -> Result<Value, EngineError> {
        let _one = self.remote.seats.lock().await;
        let now = self.now();
        if let Some((_, _, open)) = self.table.lock().gate_of(&pid, &part) {
            return Ok(json!({ "open": open }));
        }
        let open = self.table.lock().ask(&pid, &part, &gate, &order, now);
        if open && gate.key.is_none() {
            // A token spent: nothing to keep (a lost answer costs one).
            self.table.lock().ended(&pid, &part, now);
            return Ok(json!({ "open": true }));
        }
        let row = GateSeatRow::new(&pid, &part, gate, order, open);
        let put = vec![BootRows::put_seat_op(&row)];
        if let Err(e) = self.write(put).await {
            let opened = self.table.lock().ended(&pid, &part, now);
            self.seats_opened(opened).await;
            return Err(e);
        }
        if !open {
            self.arm_timer();
        }
        Ok(json!({ "open": open }))
    }

    /// The task of part `part` of `pid` ended: its place is free.
    async fn seat_end(&self, pid: &str, part: &str) {
        let _one = self.remote.seats.lock().await;
        if !self.table.lock().knows(pid, part) {
            return;
        }
        let opened = self.table.lock().ended(pid, part, self.now());
        let delete = BootRows::delete_seat_op(pid, part);
        if let Err(e) = self.write(vec![delete]).await {
            // Freed in memory; after a restart the row is asked about
            // again (and freed: its task is gone).
            warn!(pid = %pid, part = %part, error = %e, "cannot delete a freed gate seat");
        }
        self.seats_opened(opened).await;
    }

    /// The places just granted (under the seat lock): each stored as
    /// granted, then its task's engine told.
    async fn seats_opened(&self, opened: Vec<GateId>) {
        for (pid, part) in opened {
            let Some((gate, order, _)) = self.table.lock().gate_of(&pid, &part) else {
                continue;
            };
            let row = GateSeatRow::new(&pid, &part, gate, order, true);
            let mut wait = Duration::from_millis(50);
            loop {
                let put = vec![BootRows::put_seat_op(&row)];
                match self.write(put).await {
                    Ok(()) => break,
                    // Closed (the home moved): the next home reads the
                    // row as waiting and grants it again.
                    Err(_) if self.is_closed() => return,
                    Err(e) => {
                        warn!(pid = %pid, part = %part, error = %e, "cannot store a granted gate seat; trying again");
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(Duration::from_secs(5));
                    }
                }
            }
            self.spawn_announce(pid, part);
        }
    }

    fn spawn_announce(&self, pid: String, part: String) {
        self.spawn_with(|h| async move { h.gates().announce(pid, part).await });
    }

    /// Tells the task's engine its place is granted; a task that is gone
    /// frees it, a token (no slot) is kept no longer once told.
    async fn announce(&self, pid: String, part: String) {
        let call = GateCall::Granted {
            pid: pid.clone(),
            part: part.clone(),
        };
        let Some(answer) = self.deliver(To::Process(&pid), &call).await else {
            return;
        };
        let gone = answer.get("task").and_then(Value::as_str) == Some("gone");
        let token = self
            .table
            .lock()
            .gate_of(&pid, &part)
            .is_some_and(|(g, _, _)| g.key.is_none());
        if gone || token {
            self.seat_end(&pid, &part).await;
        }
    }

    /// The rate timer fired on a home: the tasks whose token came.
    pub(super) async fn seats_refill(&self) {
        let _one = self.remote.seats.lock().await;
        let opened = self.table.lock().refill(self.now());
        self.seats_opened(opened).await;
        self.arm_timer();
    }

    /// At a start: the seats kept here hold and queue again; the granted
    /// ones are announced again (an answer lost in a crash), and the
    /// holders are asked about from now on.
    pub(super) async fn seats_restore(&self) -> Result<(), EngineError> {
        let rows = BootRows::new(&self.store).gate_seats().await?;
        let granted: Vec<GateId> = rows
            .iter()
            .filter(|r| r.open)
            .map(|r| (r.pid.clone(), r.part.clone()))
            .collect();
        let found = rows
            .into_iter()
            .map(|r| {
                let u = crate::scheduler::GateUse {
                    tid: r.part,
                    gate: r.gate,
                    open: r.open,
                };
                (r.pid, u, r.order)
            })
            .collect();
        {
            let _one = self.remote.seats.lock().await;
            let opened = self.table.lock().restore(found, self.now());
            self.seats_opened(opened).await;
        }
        for (pid, part) in granted {
            self.spawn_announce(pid, part);
        }
        self.arm_timer();
        if let Some(host) = self.host() {
            tokio::spawn(ask_holders(Arc::downgrade(&host)));
        }
        Ok(())
    }
}

/// Every [`ASK_HOLDERS_EVERY`], while the engine lives: the holders of
/// the slots kept here are announced again (a task that is gone frees
/// its slot: its end was lost).
async fn ask_holders(host: Weak<dyn GateHost>) {
    loop {
        tokio::time::sleep(ASK_HOLDERS_EVERY).await;
        let Some(k) = host.upgrade() else {
            return;
        };
        if k.is_closed() {
            return;
        }
        let gates = k.gates();
        let holders = gates.table.lock().slot_holders();
        for (pid, part) in holders {
            gates.spawn_announce(pid, part);
        }
    }
}
