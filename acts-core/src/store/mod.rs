//! The engine's side of the store: how transitions reach the `KvStore`.
//!
//! Built so far: [`GroupCommitWriter`], the single ordered writer with group
//! commit. The typed collections (models, procs, tasks, vars, messages,
//! deliveries, events, ops, packages) with their indexes come with the
//! durable runtime.

mod writer;

pub use writer::{GroupCommitWriter, WriteBatch, WriteError, WriteOutcome, WriterConfig};
