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
