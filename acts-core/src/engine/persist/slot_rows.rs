//! What a process row keeps of its place in the queues: its concurrency
//! key and limit ([`ConcurrencySlot`], `ProcRow::slot`) and its priority
//! and fairness key ([`QueueOrder`], `ProcRow::order`).

use serde::{Deserialize, Serialize};

/// Where a parked start goes in its queue ([`ProcRow::order`]): its
/// priority (1 to 5, higher first; 3 by default) and fairness key (the
/// keys take turns inside a priority; empty: none).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct QueueOrder {
    /// 1 to 5.
    pub priority: u8,
    /// The fairness key.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fairness: String,
}

impl Default for QueueOrder {
    fn default() -> Self {
        Self {
            priority: 3,
            fairness: String::new(),
        }
    }
}

/// A process's concurrency key and limit ([`ProcRow::slot`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConcurrencySlot {
    /// The evaluated key.
    pub key: String,
    /// How many processes of the key may be in flight at once.
    pub limit: u32,
}

/// A place a key's home engine keeps for a task of another engine's
/// process (`kernel/gates/courier.rs`): a slot held or a place in a queue. Read
/// back at a start, so a home that moves hands its slots and queues over.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateSeatRow {
    /// `PID/PART`.
    pub id: String,
    /// The process.
    pub pid: String,
    /// Its task's part (`TID#N`).
    pub part: String,
    /// The part's gate.
    pub gate: crate::scheduler::TaskGate,
    /// The process's queue order.
    pub order: QueueOrder,
    /// Whether the place is granted (a slot held).
    pub open: bool,
}

impl GateSeatRow {
    /// The seat of `part` of `pid`.
    pub fn new(
        pid: &str,
        part: &str,
        gate: crate::scheduler::TaskGate,
        order: QueueOrder,
        open: bool,
    ) -> Self {
        Self {
            id: Self::id_of(pid, part),
            pid: pid.to_owned(),
            part: part.to_owned(),
            gate,
            order,
            open,
        }
    }

    /// The id of the seat of `part` of `pid`.
    pub fn id_of(pid: &str, part: &str) -> String {
        format!("{pid}/{part}")
    }
}

crate::durable::impl_row!(GateSeatRow, "gate_seats", version = 1, |r| r.id.clone(), {});
