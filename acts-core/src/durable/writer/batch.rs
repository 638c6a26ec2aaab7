//! What a caller of the [`GroupCommitWriter`](super::GroupCommitWriter)
//! hands in and gets back: its settings, a batch, the outcome of a write
//! and why a write failed.

use std::sync::Arc;
use std::time::Duration;

use acts_store::{BatchOp, StoreError};

/// Settings of a [`GroupCommitWriter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriterConfig {
    /// Most ops merged into one backend transaction (a single batch larger
    /// than this is committed alone, never split).
    pub max_batch_ops: usize,
    /// How long the writer waits for more batches before committing a group
    /// that is not full. Zero: commit as soon as the previous commit is done
    /// (batches still merge while a commit is in flight).
    pub max_commit_delay: Duration,
    /// Batches that may wait in the queue; beyond it `write` waits for room
    /// (back-pressure), it never fails.
    pub queue_capacity: usize,
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            max_batch_ops: 4096,
            max_commit_delay: Duration::ZERO,
            queue_capacity: 8192,
        }
    }
}

/// One transition's writes, applied atomically with the others of its group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteBatch {
    /// The process the writes belong to; a batch of a removed process is
    /// skipped. `None` for writes that belong to no process.
    pub owner: Option<String>,
    /// The writer epoch ([`GroupCommitWriter::epoch`]) at which the
    /// owner's in-memory instance was created. A batch of an instance born
    /// before its pid's last removal is skipped; one born after it (the pid
    /// used again) is applied.
    pub born: u64,
    /// The writes, in order.
    pub ops: Vec<BatchOp>,
}

/// What happened to a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Committed: durable to the store's durability setting.
    Committed,
    /// Not applied because its process was removed (no resurrection).
    Skipped,
}

/// Why a batch was not committed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WriteError {
    /// The backend transaction carrying the batch failed; nothing of it was
    /// applied. Every batch of that transaction gets the same error.
    #[error("commit of {batches} batch(es) failed: {source}")]
    Commit {
        /// How many batches the failed transaction carried.
        batches: usize,
        /// The store's error.
        source: Arc<StoreError>,
    },
    /// The writer was shut down.
    #[error("the store writer is closed")]
    Closed,
    /// The store refused the batch because this writer's fence no longer
    /// holds: another node has taken the store (a higher epoch). Nothing
    /// of it was applied, and nothing this writer sends will be.
    #[error("fenced: {0}")]
    Fenced(String),
}
