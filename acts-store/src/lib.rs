//! # acts-store: the storage contract of the acts workflow engine
//!
//! This crate defines what the engine needs from a database, and nothing
//! about workflows. It is to acts what TiKV's `engine_traits` is to TiKV: the
//! one crate every backend and the engine agree on.
//!
//! **Layering rule:** this crate depends on no database client and on no
//! other acts crate. Backends (`acts-store-redb`, `acts-store-rocksdb`,
//! `acts-store-redis`, `acts-store-postgres`) depend on it; `acts-core`
//! depends on it and on no backend.
//!
//! ## Key types
//!
//! - [`KvStore`]: the async, object-safe trait (`Arc<dyn KvStore>`) over byte
//!   keys and values: point read, multi-read, put, delete, an atomic
//!   [`batch`](KvStore::batch), a conditional batch
//!   ([`batch_if`](KvStore::batch_if): applied only if keys hold given values,
//!   checked in the same atomic step — the fence of a writer that may have
//!   lost its lease) and ordered [`scan`](KvStore::scan)s. Its docs state the
//!   guarantees (ordering, atomicity, conditions, visibility, durability,
//!   errors) every backend gives.
//! - [`StoreError`]: the one error type, saying which backend and operation
//!   failed and classifying the fault ([`ErrorKind`]) as retryable or not.
//! - [`BatchOp`], [`Condition`], [`ScanRange`], [`KvPair`]: what the trait
//!   takes and returns.
//! - [`MemoryStore`]: the embedded default, a `BTreeMap` behind one lock.
//! - `blocking` (feature `tokio`): runs a blocking client call off the async
//!   workers, for backends whose client blocks (redb, RocksDB).
//! - [`keys`]: order-preserving encodings (integers, timestamps, composite
//!   keys) and [`prefix_successor`](keys::prefix_successor) for prefix scans.
//!
//! ## Where to start reading
//!
//! `kv.rs` (the trait and its guarantees), then `memory.rs` (the simplest
//! complete backend).
//!
//! ## Writing a backend
//!
//! 1. Implement [`KvStore`]: map every client error into [`StoreError`] in one
//!    place, classifying it with [`ErrorKind`] (connection faults are
//!    `Unavailable`, lock contention is `Conflict`, a bad file is `Corruption`
//!    or `InvalidInput`).
//! 2. Call [`validate_key`] / [`validate_batch`] / [`validate_conditional`]
//!    before touching the database so every backend rejects the same
//!    oversized input.
//! 3. Make [`batch_if`](KvStore::batch_if)'s check and write one step: in the
//!    database's own write transaction, under a lock every write of the
//!    store takes, or in one server-side script.
//! 4. Check [`ScanRange::is_empty`] first: inverted ranges are empty, not an
//!    error.
//! 5. Run `acts-testkit`'s conformance suite from the backend's tests
//!    (`acts_testkit::conformance_tests!`), including the reopen tests if the
//!    backend is durable.
//!
//! ```
//! use acts_store::{BatchOp, KvStore, MemoryStore};
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let store = MemoryStore::new();
//! store
//!     .batch(vec![BatchOp::put("proc/1", "running"), BatchOp::put("proc/2", "done")])
//!     .await?;
//! let procs = store.scan_prefix(b"proc/", None, false).await?;
//! assert_eq!(procs.len(), 2);
//! assert_eq!(store.get(b"proc/9").await?, None); // missing is Ok(None)
//! # Ok::<(), acts_store::StoreError>(())
//! # }).unwrap();
//! ```

#[cfg(feature = "tokio")]
pub mod backup;
pub mod blocking;
mod error;
mod io;
pub mod keys;
mod kv;
mod memory;
#[cfg(feature = "tokio")]
mod point_reads;
mod url;

pub use backup::BackupInfo;
pub use error::{ErrorKind, StoreError, StoreOp, StoreResult};
pub use io::StoreIo;
pub use kv::{
    BatchOp, Condition, KvPair, KvStore, MAX_KEY_LEN, MAX_VALUE_LEN, Persistence, ScanRange,
    validate_batch, validate_conditional, validate_key, validate_keys,
};
pub use memory::MemoryStore;
#[cfg(feature = "tokio")]
pub use point_reads::PointReads;
pub use url::redacted_url;
