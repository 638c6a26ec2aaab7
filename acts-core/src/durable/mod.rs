//! The engine's side of the store: how transitions reach the `KvStore`.
//!
//! - [`GroupCommitWriter`]: the single ordered writer with group commit.
//! - [`Collection`]: typed rows with a schema version (older rows upgraded
//!   on read), secondary indexes written in the same batch as the row, and
//!   queries with filters, ordering by indexed fields and exhaustive paging.
//!
//! The engine's row types (models, procs, tasks, vars, ops) live in
//! `crate::engine` (`rows.rs`).

mod collection;
mod writer;

pub use collection::{Collection, CollectionError, Filter, IndexValue, Page, Query, Row};
pub use writer::{GroupCommitWriter, WriteBatch, WriteError, WriteOutcome, WriterConfig};
