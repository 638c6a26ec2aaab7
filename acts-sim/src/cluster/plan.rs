//! How a cluster seed is run ([`ClusterPlan`]) and what a passing one did
//! ([`ClusterReport`]).
//!
//! May use: the simulated `store` (its plants).

use super::store::Plant;

/// The partitions of a simulated cluster.
pub const PARTITIONS: u32 = 6;

/// How a cluster seed is run.
#[derive(Debug, Clone, Copy)]
pub struct ClusterPlan {
    /// Nodes (one more joins and leaves as a spare).
    pub nodes: usize,
    /// Seeded events before every fault heals.
    pub events: usize,
    /// Whether every acknowledged batch is on the replica before its
    /// answer (Redis `WAIT`): a failover then loses nothing.
    pub wait_replicas: bool,
    /// Most skew of a node's clock from the run's time (ms).
    pub max_skew_ms: i64,
    /// A fault planted to show the checks find it.
    pub plant: Plant,
}

impl Default for ClusterPlan {
    fn default() -> Self {
        Self {
            nodes: 3,
            events: 150,
            wait_replicas: true,
            max_skew_ms: 500,
            plant: Plant::None,
        }
    }
}

/// What a passing cluster seed did.
#[derive(Debug, Clone, Default)]
pub struct ClusterReport {
    /// Calls that returned `Ok`.
    pub acked: usize,
    /// Of them, lost by a failover (only without `wait_replicas`).
    pub lost: usize,
    /// Processes that ended otherwise than the fault-free run (only
    /// without `wait_replicas`: what the lost writes cost).
    pub diverged: usize,
    /// Store failovers.
    pub failovers: usize,
    /// Unreplicated batches the failovers dropped.
    pub dropped: usize,
    /// What the clients, the nodes and the faults did, in order.
    pub trace: Vec<String>,
}
