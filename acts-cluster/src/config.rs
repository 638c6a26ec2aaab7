//! [`ClusterConfig`]: how one node joins a cluster, and its checks.

use std::sync::Arc;
use std::time::Duration;

use acts::{Clock, EngineConfig};

use crate::error::ClusterError;

/// Most partitions a cluster may have.
pub const MAX_PARTITIONS: u32 = 4096;

/// How one node joins a cluster.
#[derive(Clone)]
pub struct ClusterConfig {
    /// This node's id (letters, digits, `-`, `_`, `.`; at most 64).
    pub node: String,
    /// Where this node's API is reached by the other nodes
    /// (`http://HOST:PORT`).
    pub advertise: String,
    /// How many partitions the cluster has (fixed when it is created;
    /// a node started with another count is refused).
    pub partitions: u32,
    /// How long a partition's lease and a node's heartbeat last unless
    /// renewed: how long a dead node's partitions wait before they move.
    /// Renewed every third of it.
    pub lease_ttl: Duration,
    /// The settings of each partition's engine (the lease, the schedules
    /// and the pid filter are set per partition).
    pub engine: EngineConfig,
    /// The clock leases and heartbeats are measured on.
    pub clock: Arc<dyn Clock>,
    /// Run the tick and the lease renewals in the background (default).
    /// Off, nothing happens unless [`ClusterNode::tick`] is called (the
    /// deterministic tests drive it with a manual clock).
    pub background: bool,
    /// The application packages every partition's engine registers (e.g.
    /// `acts.core.http`; default none).
    pub packages: Vec<Arc<dyn acts::ActPackage>>,
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("node", &self.node)
            .field("advertise", &self.advertise)
            .field("partitions", &self.partitions)
            .field("lease_ttl", &self.lease_ttl)
            .field("background", &self.background)
            .finish_non_exhaustive()
    }
}

impl ClusterConfig {
    /// Node `node`, reached at `advertise`, in a cluster of `partitions`
    /// partitions; a 5 s TTL, default engine settings, the system clock,
    /// background ticks.
    pub fn new(node: &str, advertise: &str, partitions: u32) -> Self {
        Self {
            node: node.to_owned(),
            advertise: advertise.to_owned(),
            partitions,
            lease_ttl: Duration::from_secs(5),
            engine: EngineConfig::default(),
            clock: Arc::new(acts::SystemClock),
            background: true,
            packages: Vec::new(),
        }
    }

    pub(crate) fn check(&self) -> Result<(), ClusterError> {
        let ok_id = !self.node.is_empty()
            && self.node.len() <= 64
            && self
                .node
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !ok_id {
            return Err(ClusterError::Config(format!(
                "node id '{}' must be 1 to 64 letters, digits, '-', '_' or '.'",
                self.node
            )));
        }
        if self.partitions == 0 || self.partitions > MAX_PARTITIONS {
            return Err(ClusterError::Config(format!(
                "--partitions {} is out of range (1 to {MAX_PARTITIONS})",
                self.partitions
            )));
        }
        if self.lease_ttl < Duration::from_millis(300) || self.lease_ttl > Duration::from_secs(3600)
        {
            return Err(ClusterError::Config(format!(
                "a lease TTL of {:?} is out of range (300 ms to 1 h)",
                self.lease_ttl
            )));
        }
        if !(self.advertise.starts_with("http://") || self.advertise.starts_with("https://")) {
            return Err(ClusterError::Config(format!(
                "the advertised address '{}' must be a URL (http://HOST:PORT)",
                self.advertise
            )));
        }
        Ok(())
    }
}
