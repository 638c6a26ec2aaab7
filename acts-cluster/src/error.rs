//! What can go wrong in a cluster node.

use acts::{EngineError, OpenStoreError, StoreError};

/// Why a cluster node could not do something.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The node was started with another partition count than the
    /// cluster was created with.
    #[error(
        "the cluster has {cluster} partitions, this node was started with --partitions {asked}; \
         start it with --partitions {cluster} (the count is fixed when the cluster is created)"
    )]
    PartitionCount {
        /// What the node asked for.
        asked: u32,
        /// What the cluster has.
        cluster: u32,
    },
    /// A setting is out of range.
    #[error("{0}")]
    Config(String),
    /// Another live node already uses this node id.
    #[error(
        "node id '{node}' is in use by a live node at {addr}; give this node another --node \
         (or stop that one: its heartbeat expires {remaining_ms} ms after it stops)"
    )]
    NodeInUse {
        /// The id.
        node: String,
        /// Where the other one listens.
        addr: String,
        /// How long until its heartbeat expires.
        remaining_ms: i64,
    },
    /// The shared store failed.
    #[error("the cluster's store: {0}")]
    Store(#[from] StoreError),
    /// A partition's store could not be opened.
    #[error("opening a partition's store: {0}")]
    Open(#[from] OpenStoreError),
    /// A partition's engine failed.
    #[error("partition {partition}: {source}")]
    Engine {
        /// The partition.
        partition: u32,
        /// What failed.
        source: EngineError,
    },
    /// A metadata record is damaged.
    #[error("the cluster's metadata: {0}; repair or remove the record")]
    Corrupt(String),
}
