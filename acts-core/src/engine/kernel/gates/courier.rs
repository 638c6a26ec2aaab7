//! How the gates of steps and acts hold across engines that split one
//! store's processes between them (a cluster's partitions): each key has
//! a **home** engine that keeps its slots and its bucket (the engine its
//! key hashes to), and the engine of a gated task asks that home for its
//! place. The engines talk through a [`GateCourier`] the cluster gives
//! them ([`EngineConfig::gate_courier`](crate::engine::kernel::EngineConfig)): it carries
//! a [`GateCall`] (as JSON) to the key's home or to a process's engine,
//! which answers it with [`RuntimeOps::gate_call`](crate::RuntimeOps::gate_call).
//!
//! The protocol (`remote.rs` is both sides of it):
//! - a task's gate is asked in parts: its concurrency key's slot, then —
//!   holding it — its rate key's token (each part at its key's home);
//! - the home keeps what it grants as a **seat** row in its own store
//!   (fenced like every write of it), so a home that moves hands its
//!   slots and queues over; it answers `open` at once or calls the task's
//!   engine back ([`GateCall::Granted`]) when the place frees;
//! - the task's engine tells the home when the task ends
//!   ([`GateCall::End`]); a lost end is found by the home, which asks
//!   every holder of a slot again now and then (the answer `gone` frees
//!   it), and a task that waited across a crash asks again.
//!
//! May use: the scheduler's gate types and the persist rows' queue order.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::engine::persist::rows::QueueOrder;
use crate::scheduler::TaskGate;

/// What a [`GateRoute`] answers: the receiving engine's answer, or why it
/// could not be reached (tried again later).
pub type GateReply = Pin<Box<dyn Future<Output = Result<Value, String>> + Send>>;

/// Carries gate calls between the engines of one store (see the module
/// docs): `to_key_home` to the engine keeping `key`, `to_process` to the
/// engine of process `pid`; each hands the call to that engine's
/// [`RuntimeOps::gate_call`](crate::RuntimeOps::gate_call) and returns its answer.
pub trait GateRoute: Send + Sync + 'static {
    /// Delivers `call` to the home of concurrency or rate key `key`.
    fn to_key_home(&self, key: &str, call: Value) -> GateReply;
    /// Delivers `call` to the engine that runs process `pid`.
    fn to_process(&self, pid: &str, call: Value) -> GateReply;
}

/// The courier of gate calls ([`EngineConfig::gate_courier`](crate::engine::kernel::EngineConfig)).
#[derive(Clone)]
pub struct GateCourier(Arc<dyn GateRoute>);

impl GateCourier {
    /// Calls go through `route`.
    pub fn new(route: Arc<dyn GateRoute>) -> Self {
        Self(route)
    }

    pub(crate) fn route(&self) -> &dyn GateRoute {
        self.0.as_ref()
    }
}

impl std::fmt::Debug for GateCourier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GateCourier(..)")
    }
}

/// One call of the protocol. A part is named `TID#N` (its task, its
/// place in the task's parts).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum GateCall {
    /// To a key's home: part `part` of a task of `pid` asks for its place
    /// (asked again: the same answer). Answer: `{"open": bool}`.
    Ask {
        pid: String,
        part: String,
        gate: TaskGate,
        order: QueueOrder,
    },
    /// To a key's home: the task of part `part` ended (or went). Answer:
    /// `{}`.
    End { pid: String, part: String },
    /// To a process's engine: part `part` of one of its tasks has its
    /// place. Answer: `{"task": "waits" | "runs" | "gone"}` (`gone`: the
    /// home frees the place).
    Granted { pid: String, part: String },
}

/// The parts of a task's gate, in the order they are asked: `(part name,
/// home key, the part's gate)`.
pub(crate) fn gate_parts(tid: &str, gate: &TaskGate) -> Vec<(String, String, TaskGate)> {
    let mut parts = Vec::new();
    if let Some(key) = &gate.key {
        let slot = TaskGate {
            rate: None,
            ..gate.clone()
        };
        parts.push((key.clone(), slot));
    }
    if let Some(rate) = &gate.rate {
        let token = TaskGate {
            key: None,
            limit: 0,
            ..gate.clone()
        };
        parts.push((rate.key.clone(), token));
    }
    parts
        .into_iter()
        .enumerate()
        .map(|(i, (home, g))| (format!("{tid}#{i}"), home, g))
        .collect()
}

/// A part's task and place: `TID#N` → `(TID, N)`.
pub(crate) fn part_of(part: &str) -> Option<(&str, usize)> {
    let (tid, n) = part.rsplit_once('#')?;
    Some((tid, n.parse().ok()?))
}

/// The task's side's and the home's side's state.
#[derive(Default)]
pub(crate) struct RemoteGates {
    /// One seat change at a time: the memory table and the seat rows
    /// change in one order (held across the row's write: that is its
    /// point; no other lock is taken under it across an await).
    pub(super) seats: tokio::sync::Mutex<()>,
    /// The gated tasks of this engine's processes that asked homes:
    /// pid → tid → (gate, queue order).
    pub(super) asked: parking_lot::Mutex<HashMap<String, AskedTasks>>,
}

/// A process's tasks that asked homes: tid → (gate, queue order).
pub(crate) type AskedTasks = BTreeMap<String, (TaskGate, QueueOrder)>;
