//! # acts-store-rocksdb: RocksDB backend for large, write-heavy stores
//!
//! A [`KvStore`] over one RocksDB database (a directory).
//! Pick it over redb when the store grows large or takes many concurrent
//! writes: RocksDB's LSM tree turns random writes into sequential ones.
//!
//! **Layering rule:** this crate depends only on `acts-store` and the
//! `rocksdb` crate (plus tokio to keep blocking calls off the async workers).
//! It knows nothing of workflows.
//!
//! ## Guarantees
//!
//! - Keys are ordered by bytes (RocksDB's default bytewise comparator).
//! - A [`batch`](acts_store::KvStore::batch) is one `WriteBatch`: atomic, and
//!   invisible to readers until all of it is applied. Multi-reads and scans
//!   each read one snapshot.
//! - A [conditional batch](acts_store::KvStore::batch_if) reads its
//!   conditions and writes its `WriteBatch` under the store's write lock,
//!   which every write of this store takes (RocksDB allows one process per
//!   database, so nothing else writes between the check and the batch).
//! - Durability is chosen at open with [`RocksOptions::sync`]:
//!   - `true` (the default): every write syncs the write-ahead log before it
//!     returns `Ok`. A crash or power loss loses nothing acknowledged.
//!   - `false`: writes go to the WAL in the OS page cache. A process crash
//!     loses nothing (the OS still has the WAL); a machine crash or power
//!     loss can lose the most recent writes. The database stays consistent.
//! - Threads: writes (which may sync the WAL) run on tokio's blocking pool;
//!   reads and scans run on the calling task (block cache hits are short).
//! - Opening fails with a clear [`StoreError`](acts_store::StoreError): `Conflict` when another
//!   handle or process holds the database's lock, `Corruption` for damaged
//!   files, `InvalidInput` for a path that cannot hold a database.
//!
//! - **Online backups.** [`backup`](acts_store::KvStore::backup) makes a
//!   RocksDB checkpoint while commits go on (`backup.rs`).
//!
//! ## Defaults for a workflow store
//!
//! Point lookups and prefix scans dominate: a bloom filter (10 bits/key)
//! saves disk reads for missing keys, index and filter blocks live in an LRU
//! block cache (64 MiB by default), and LZ4 compresses every level.
//!
//! ## Where to start reading
//!
//! [`RocksStore::open`], then the `KvStore` impl; errors are mapped in
//! `error.rs`.

mod backup;
mod error;

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use acts_store::blocking::run_blocking;
use acts_store::{
    BatchOp, Condition, KvPair, KvStore, ScanRange, StoreOp, StoreResult, validate_batch,
    validate_conditional, validate_key, validate_keys,
};
use async_trait::async_trait;
use rocksdb::{
    BlockBasedOptions, Cache, DB, DBCompressionType, Options, ReadOptions, WriteBatch, WriteOptions,
};

use crate::error::{BACKEND, map_err};

/// Options for [`RocksStore::open`].
#[derive(Debug, Clone)]
pub struct RocksOptions {
    /// Sync the write-ahead log on every write (see the crate docs).
    pub sync: bool,
    /// Size of the LRU block cache in bytes.
    pub block_cache_bytes: usize,
    /// Background threads for flushes and compactions.
    pub parallelism: i32,
}

impl Default for RocksOptions {
    fn default() -> Self {
        Self {
            sync: true,
            block_cache_bytes: 64 * 1024 * 1024,
            parallelism: 2,
        }
    }
}

impl RocksOptions {
    /// Options with the given WAL sync setting.
    pub fn with_sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    fn to_rocksdb(&self) -> Options {
        let mut table = BlockBasedOptions::default();
        table.set_bloom_filter(10.0, false);
        table.set_block_cache(&Cache::new_lru_cache(self.block_cache_bytes));
        table.set_cache_index_and_filter_blocks(true);
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.increase_parallelism(self.parallelism);
        opts.set_compression_type(DBCompressionType::Lz4);
        opts.set_block_based_table_factory(&table);
        opts
    }
}

#[derive(Debug)]
struct Inner {
    db: DB,
    sync: bool,
    path: PathBuf,
    /// Held by every write: a conditional batch's check and its batch are
    /// one step.
    write_lock: Mutex<()>,
}

impl Inner {
    /// Applies `ops` as one `WriteBatch` if every condition holds (checked
    /// under the write lock); `false` when one does not.
    fn write(&self, op: StoreOp, conditions: &[Condition], ops: &[BatchOp]) -> StoreResult<bool> {
        let _writing = self
            .write_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for c in conditions {
            let current = self.db.get(&c.key).map_err(|e| map_err(op, None, e))?;
            if !c.holds(current.as_deref()) {
                return Ok(false);
            }
        }
        let mut batch = WriteBatch::default();
        for o in ops {
            match o {
                BatchOp::Put { key, value } => batch.put(key, value),
                BatchOp::Delete { key } => batch.delete(key),
            }
        }
        let mut write = WriteOptions::default();
        write.set_sync(self.sync);
        self.db
            .write_opt(batch, &write)
            .map_err(|e| map_err(op, None, e))?;
        Ok(true)
    }
}

/// A [`KvStore`] over one RocksDB database; cheap to clone (clones share it).
#[derive(Debug, Clone)]
pub struct RocksStore {
    inner: Arc<Inner>,
}

impl RocksStore {
    /// Opens the database in directory `path`, creating it if missing.
    pub fn open(path: impl AsRef<Path>, options: RocksOptions) -> StoreResult<Self> {
        let path = path.as_ref();
        let db = DB::open(&options.to_rocksdb(), path)
            .map_err(|e| map_err(StoreOp::Open, Some(path), e))?;
        tracing::debug!(path = %path.display(), sync = options.sync, "opened rocksdb store");
        Ok(Self {
            inner: Arc::new(Inner {
                db,
                sync: options.sync,
                path: path.to_owned(),
                write_lock: Mutex::new(()),
            }),
        })
    }

    /// The directory this store lives in.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }
}

/// The scan's bounds as RocksDB wants them: an inclusive lower bound and an
/// exclusive upper bound. `key ++ [0]` is the smallest key after `key`.
fn iterate_bounds(range: &ScanRange) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let successor = |k: &Vec<u8>| {
        let mut s = k.clone();
        s.push(0);
        s
    };
    let lower = match &range.start {
        Bound::Included(k) => Some(k.clone()),
        Bound::Excluded(k) => Some(successor(k)),
        Bound::Unbounded => None,
    };
    let upper = match &range.end {
        Bound::Included(k) => Some(successor(k)),
        Bound::Excluded(k) => Some(k.clone()),
        Bound::Unbounded => None,
    };
    (lower, upper)
}

impl Inner {
    fn scan(&self, range: &ScanRange) -> StoreResult<Vec<KvPair>> {
        let (lower, upper) = iterate_bounds(range);
        let mut read = ReadOptions::default();
        if let Some(lower) = lower {
            read.set_iterate_lower_bound(lower);
        }
        if let Some(upper) = upper {
            read.set_iterate_upper_bound(upper);
        }
        // The iterator reads one implicit snapshot taken when it is created.
        let mut iter = self.db.raw_iterator_opt(read);
        if range.reverse {
            iter.seek_to_last();
        } else {
            iter.seek_to_first();
        }
        let limit = range.limit_or_max();
        let mut out = Vec::new();
        while out.len() < limit {
            let (Some(key), Some(value)) = (iter.key(), iter.value()) else {
                break;
            };
            out.push(KvPair::new(key, value));
            if range.reverse {
                iter.prev();
            } else {
                iter.next();
            }
        }
        iter.status().map_err(|e| map_err(StoreOp::Scan, None, e))?;
        Ok(out)
    }
}

#[async_trait]
impl KvStore for RocksStore {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    fn persistence(&self) -> acts_store::Persistence {
        if self.inner.sync {
            acts_store::Persistence::Synced
        } else {
            acts_store::Persistence::Weak(format!(
                "{} is opened with sync=false: a crash of this machine loses what was \
                 acknowledged since the write-ahead log was last synced (remove ?sync=false)",
                self.inner.path.display()
            ))
        }
    }

    async fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        validate_key(BACKEND, StoreOp::Get, key)?;
        self.inner
            .db
            .get(key)
            .map_err(|e| map_err(StoreOp::Get, None, e))
    }

    async fn get_many(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        let op = StoreOp::GetMany;
        validate_keys(BACKEND, op, keys)?;
        let snapshot = self.inner.db.snapshot();
        snapshot
            .multi_get(keys)
            .into_iter()
            .map(|r| r.map_err(|e| map_err(op, None, e)))
            .collect()
    }

    async fn batch(&self, ops: Vec<BatchOp>) -> StoreResult<()> {
        validate_batch(BACKEND, StoreOp::Batch, &ops)?;
        if ops.is_empty() {
            return Ok(());
        }
        let inner = self.inner.clone();
        run_blocking(BACKEND, StoreOp::Batch, move || {
            inner.write(StoreOp::Batch, &[], &ops).map(drop)
        })
        .await
    }

    async fn batch_if(&self, conditions: Vec<Condition>, ops: Vec<BatchOp>) -> StoreResult<bool> {
        validate_conditional(BACKEND, &conditions, &ops)?;
        let inner = self.inner.clone();
        run_blocking(BACKEND, StoreOp::BatchIf, move || {
            inner.write(StoreOp::BatchIf, &conditions, &ops)
        })
        .await
    }

    async fn scan(&self, range: ScanRange) -> StoreResult<Vec<KvPair>> {
        if range.is_empty() {
            return Ok(Vec::new());
        }
        self.inner.scan(&range)
    }

    /// A checkpoint made while commits go on (`backup.rs`).
    async fn backup(&self, to: &Path) -> StoreResult<acts_store::BackupInfo> {
        let inner = self.inner.clone();
        let to = to.to_owned();
        run_blocking(BACKEND, StoreOp::Backup, move || inner.backup_to(&to)).await
    }
}
