//! # acts-store-redb: the embedded, durable default backend
//!
//! A [`KvStore`] in one [redb](https://docs.rs/redb) file:
//! ACID, crash-safe, no server. This is what `acts` uses unless told
//! otherwise.
//!
//! **Layering rule:** this crate depends only on `acts-store` and `redb` (plus
//! tokio to keep blocking commits off the async workers). It knows nothing of
//! workflows.
//!
//! ## Guarantees
//!
//! - Every key lives in one redb table, ordered by bytes as the contract asks.
//! - A [`batch`](acts_store::KvStore::batch) is one redb write transaction:
//!   all of it commits or none of it does, and readers (each read is one redb
//!   read transaction, an MVCC snapshot) never see half of it.
//! - Durability is chosen at open with [`Durability`]:
//!   - [`Durability::Immediate`] (the default): a write returns `Ok` only
//!     after redb's commit has been fsynced. A crash, kill or power loss right
//!     after loses nothing acknowledged.
//!   - [`Durability::None`]: a write returns once it is visible in this
//!     process, without fsync. The file stays consistent after a crash, but
//!     holds only the state of the last durable commit: everything written
//!     since is lost. Dropping the store (or calling [`RedbStore::sync`])
//!     makes everything durable. Use it for tests and throw-away runs, or when
//!     the engine's own group commit calls `sync` itself.
//! - Threads: commits (which may fsync) run on tokio's blocking pool; reads
//!   run on the calling task, since they are short (cached pages).
//! - Opening fails with a clear [`StoreError`]: `InvalidInput` for a path
//!   that cannot be opened or a file that is not a redb database (an empty,
//!   0-byte file included: it is never silently made into a new store),
//!   `Conflict` for a database another handle or process holds open,
//!   `Corruption` for a damaged file.
//! - **An I/O error heals without a restart.** A write that fails on an
//!   I/O error (a full disk, say) makes redb refuse every later call until
//!   the file is reopened. The store then answers `Unavailable` naming the
//!   error, and reopens the file on the next call (and on every
//!   [`health`](acts_store::KvStore::health) check) after a backoff of
//!   100 ms doubling to 5 s, until it succeeds: what was committed before
//!   the error is there, the failed write is not.
//! - A damaged file is an error, never a panic: redb panics on some damaged
//!   pages, so every call into redb runs under `catch_unwind`; a panic
//!   becomes a `Corruption` error naming the file, and every later call on
//!   that store fails the same way (nothing more is written to a file that
//!   is known to be damaged).
//!
//! - **Online backups.** [`backup`](acts_store::KvStore::backup) copies
//!   one read transaction's snapshot into a new file while commits go on
//!   (`backup.rs`).
//!
//! ## Where to start reading
//!
//! [`RedbStore::open`], then the `KvStore` impl; errors are mapped in
//! `error.rs`.

mod backup;
mod error;

use std::ops::Bound;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use acts_store::blocking::run_blocking;
use acts_store::{
    BackupInfo, BatchOp, Condition, ErrorKind, KvPair, KvStore, Persistence, ScanRange, StoreError,
    StoreOp, StoreResult, validate_batch, validate_conditional, validate_key, validate_keys,
};
use async_trait::async_trait;
use parking_lot::{Mutex, RwLock};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use crate::error::{BACKEND, map_err};

/// The one table every pair lives in.
const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("acts_kv");

/// When a committed write reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Every commit is fsynced before the write returns (crash-safe).
    #[default]
    Immediate,
    /// Commits are not fsynced; a crash rolls the file back to the last
    /// durable commit (see the crate docs).
    None,
}

/// The page cache a store gets unless told otherwise: 64 MiB (redb's own
/// default, 1 GiB, would make the cache most of an engine's memory; the
/// engine reads a process's rows when it loads it, mostly recent pages).
pub const DEFAULT_CACHE_SIZE: usize = 64 * 1024 * 1024;

/// Options for [`RedbStore::open`].
#[derive(Debug, Clone, Default)]
pub struct RedbOptions {
    /// When commits reach the disk.
    pub durability: Durability,
    /// redb's page cache size in bytes (`None`: [`DEFAULT_CACHE_SIZE`]).
    pub cache_size: Option<usize>,
}

impl RedbOptions {
    /// Options with the given durability.
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }
}

/// The first wait before reopening a file after an I/O error; it doubles
/// up to [`REOPEN_MAX_DELAY`] while reopening fails.
const REOPEN_FIRST_DELAY: Duration = Duration::from_millis(100);
const REOPEN_MAX_DELAY: Duration = Duration::from_secs(5);

/// Why the file must be reopened, and when to try.
#[derive(Debug)]
struct Broken {
    error: String,
    next_try: Instant,
    delay: Duration,
}

#[derive(Debug)]
struct Inner {
    /// The open database (`None` for the moment of a reopen).
    db: RwLock<Option<Arc<Database>>>,
    /// Set after an I/O error: the file is reopened before the next call.
    broken: Mutex<Option<Broken>>,
    cache_size: usize,
    durability: Durability,
    /// Set when a non-durable commit happened since the last durable one.
    unsynced: AtomicBool,
    /// Set once redb panicked on this file: it is damaged.
    damaged: AtomicBool,
    path: PathBuf,
}

/// A [`KvStore`] over one redb file; cheap to clone (clones share the file).
#[derive(Debug, Clone)]
pub struct RedbStore {
    inner: Arc<Inner>,
}

impl RedbStore {
    /// Opens the database at `path`, creating the file if it does not exist.
    pub fn open(path: impl AsRef<Path>, options: RedbOptions) -> StoreResult<Self> {
        let path = path.as_ref();
        if path.is_dir() {
            return Err(StoreError::new(
                BACKEND,
                StoreOp::Open,
                ErrorKind::InvalidInput,
                format!("{} is a directory, not a database file", path.display()),
            ));
        }
        if std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0) {
            return Err(StoreError::new(
                BACKEND,
                StoreOp::Open,
                ErrorKind::InvalidInput,
                format!(
                    "{} is an empty file, not a redb database; it was left untouched \
                     (restore it from a backup, or delete it to start a new store)",
                    path.display()
                ),
            ));
        }
        let cache_size = options.cache_size.unwrap_or(DEFAULT_CACHE_SIZE);
        let db = open_database(path, cache_size)?;
        tracing::debug!(path = %path.display(), durability = ?options.durability, "opened redb store");
        Ok(Self {
            inner: Arc::new(Inner {
                db: RwLock::new(Some(Arc::new(db))),
                broken: Mutex::new(None),
                cache_size,
                durability: options.durability,
                unsynced: AtomicBool::new(false),
                damaged: AtomicBool::new(false),
                path: path.to_owned(),
            }),
        })
    }

    /// The file this store lives in.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The durability this store was opened with.
    pub fn durability(&self) -> Durability {
        self.inner.durability
    }

    /// Makes every commit so far durable (an fsynced empty commit). A no-op
    /// when nothing unsynced was written.
    pub async fn sync(&self) -> StoreResult<()> {
        let inner = self.inner.clone();
        run_blocking(BACKEND, StoreOp::Batch, move || inner.sync()).await
    }
}

/// Opens (or creates) the database at `path` with its table.
fn open_database(path: &Path, cache_size: usize) -> StoreResult<Database> {
    let mut builder = Database::builder();
    builder.set_cache_size(cache_size);
    let opened = catch_unwind(AssertUnwindSafe(|| -> StoreResult<Database> {
        let db = builder
            .create(path)
            .map_err(|e| map_err(StoreOp::Open, Some(path), e))?;
        // Create the table up front so read transactions always find it.
        let txn = db
            .begin_write()
            .map_err(|e| map_err(StoreOp::Open, Some(path), e))?;
        txn.open_table(TABLE)
            .map_err(|e| map_err(StoreOp::Open, Some(path), e))?;
        txn.commit()
            .map_err(|e| map_err(StoreOp::Open, Some(path), e))?;
        Ok(db)
    }));
    match opened {
        Ok(db) => db,
        Err(panic) => Err(damaged(StoreOp::Open, path, &*panic)),
    }
}

/// The error for a file redb panicked on.
fn damaged(op: StoreOp, path: &Path, panic: &(dyn std::any::Any + Send)) -> StoreError {
    let detail = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("redb failed on a damaged page");
    StoreError::new(
        BACKEND,
        op,
        ErrorKind::Corruption,
        format!(
            "{} is damaged ({detail}); stop every program using it and restore it from a backup",
            path.display()
        ),
    )
}

impl Inner {
    /// Runs one call into redb: a panic (redb's reaction to some damaged
    /// pages) becomes a `Corruption` error, and the store refuses every
    /// later call.
    fn guarded<T>(&self, op: StoreOp, work: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
        if self.damaged.load(Ordering::Acquire) {
            return Err(StoreError::new(
                BACKEND,
                op,
                ErrorKind::Corruption,
                format!(
                    "{} is damaged (an earlier call failed on it); restore it from a backup",
                    self.path.display()
                ),
            ));
        }
        match catch_unwind(AssertUnwindSafe(work)) {
            Ok(result) => result,
            Err(panic) => {
                self.damaged.store(true, Ordering::Release);
                tracing::error!(path = %self.path.display(), "redb store: the file is damaged");
                Err(damaged(op, &self.path, &*panic))
            }
        }
    }

    /// The open database: reopened first if an I/O error broke it (once
    /// its backoff has passed; until then, `Unavailable` with the error).
    fn database(&self, op: StoreOp) -> StoreResult<Arc<Database>> {
        {
            let mut broken = self.broken.lock();
            if let Some(b) = broken.as_mut() {
                if Instant::now() < b.next_try {
                    return Err(self.unavailable(op, &b.error, None));
                }
                match self.reopen() {
                    Ok(()) => {
                        tracing::warn!(path = %self.path.display(), after = %b.error, "redb store: the file is open again after an I/O error");
                        *broken = None;
                    }
                    Err(e) => {
                        b.delay = (b.delay * 2).min(REOPEN_MAX_DELAY);
                        b.next_try = Instant::now() + b.delay;
                        return Err(self.unavailable(op, &b.error, Some(&e)));
                    }
                }
            }
        }
        self.db
            .read()
            .clone()
            .ok_or_else(|| self.unavailable(op, "the file is being reopened", None))
    }

    /// Closes the file and opens it again (redb recovers it to its last
    /// commit).
    fn reopen(&self) -> StoreResult<()> {
        let mut db = self.db.write();
        // Dropping the last handle closes the file (and its lock).
        *db = None;
        let opened = open_database(&self.path, self.cache_size)?;
        *db = Some(Arc::new(opened));
        Ok(())
    }

    fn unavailable(&self, op: StoreOp, error: &str, reopen: Option<&StoreError>) -> StoreError {
        StoreError::new(
            BACKEND,
            op,
            ErrorKind::Unavailable,
            format!(
                "{}: a write failed on an I/O error ({error}); nothing since was acknowledged, \
                 and the file is reopened once it can be{}",
                self.path.display(),
                reopen.map_or_else(String::new, |e| format!(" (the last try: {e})"))
            ),
        )
    }

    /// Maps a redb error of `op`; an I/O error marks the file for a reopen
    /// (redb refuses every later call until then).
    fn fail(&self, op: StoreOp, e: impl Into<redb::Error>) -> StoreError {
        let e: redb::Error = e.into();
        if matches!(e, redb::Error::Io(_) | redb::Error::PreviousIo) {
            let mut broken = self.broken.lock();
            if broken.is_none() {
                tracing::error!(path = %self.path.display(), error = %e, "redb store: I/O error; the file is reopened before the next call");
                *broken = Some(Broken {
                    error: e.to_string(),
                    next_try: Instant::now() + REOPEN_FIRST_DELAY,
                    delay: REOPEN_FIRST_DELAY,
                });
            }
        }
        map_err(op, None, e)
    }

    fn sync(&self) -> StoreResult<()> {
        if !self.unsynced.swap(false, Ordering::SeqCst) {
            return Ok(());
        }
        let result = self.commit(Vec::new(), Durability::Immediate);
        if result.is_err() {
            self.unsynced.store(true, Ordering::SeqCst);
        }
        result
    }

    fn commit(&self, ops: Vec<BatchOp>, durability: Durability) -> StoreResult<()> {
        self.guarded(StoreOp::Batch, || {
            self.commit_unguarded(StoreOp::Batch, &[], ops, durability)
                .map(drop)
        })
    }

    /// Checks `conditions` and applies `ops` in one write transaction
    /// (redb's writers are exclusive: nothing comes between); `false` when
    /// a condition does not hold (the transaction is dropped: aborted).
    fn commit_unguarded(
        &self,
        op: StoreOp,
        conditions: &[Condition],
        ops: Vec<BatchOp>,
        durability: Durability,
    ) -> StoreResult<bool> {
        let mut txn = self
            .database(op)?
            .begin_write()
            .map_err(|e| self.fail(op, e))?;
        txn.set_durability(match durability {
            Durability::Immediate => redb::Durability::Immediate,
            Durability::None => redb::Durability::None,
        })
        .map_err(|e| self.fail(op, e))?;
        {
            let mut table = txn.open_table(TABLE).map_err(|e| self.fail(op, e))?;
            for c in conditions {
                let current = table.get(c.key.as_slice()).map_err(|e| self.fail(op, e))?;
                if !c.holds(current.as_ref().map(|v| v.value())) {
                    return Ok(false);
                }
            }
            for batch_op in &ops {
                match batch_op {
                    BatchOp::Put { key, value } => {
                        table
                            .insert(key.as_slice(), value.as_slice())
                            .map_err(|e| self.fail(op, e))?;
                    }
                    BatchOp::Delete { key } => {
                        table.remove(key.as_slice()).map_err(|e| self.fail(op, e))?;
                    }
                }
            }
        }
        // Dropping an uncommitted transaction aborts it: an error above
        // leaves the database untouched.
        txn.commit().map_err(|e| self.fail(op, e))?;
        if durability == Durability::None {
            self.unsynced.store(true, Ordering::SeqCst);
        }
        Ok(true)
    }

    fn read_table(
        &self,
        op: StoreOp,
    ) -> StoreResult<redb::ReadOnlyTable<&'static [u8], &'static [u8]>> {
        let txn = self
            .database(op)?
            .begin_read()
            .map_err(|e| self.fail(op, e))?;
        txn.open_table(TABLE).map_err(|e| self.fail(op, e))
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.damaged.load(Ordering::Acquire) {
            return;
        }
        // A clean close makes non-durable commits durable.
        if let Err(e) = self.sync() {
            tracing::error!(path = %self.path.display(), error = %e, "redb store: final sync on close failed");
        }
    }
}

fn to_slice(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(v) => Bound::Included(v.as_slice()),
        Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

#[async_trait]
impl KvStore for RedbStore {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    async fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        let op = StoreOp::Get;
        validate_key(BACKEND, op, key)?;
        self.inner.guarded(op, || {
            let table = self.inner.read_table(op)?;
            let value = table.get(key).map_err(|e| self.inner.fail(op, e))?;
            Ok(value.map(|guard| guard.value().to_vec()))
        })
    }

    async fn get_many(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        let op = StoreOp::GetMany;
        validate_keys(BACKEND, op, keys)?;
        // One read transaction: one snapshot for every key.
        self.inner.guarded(op, || {
            let table = self.inner.read_table(op)?;
            keys.iter()
                .map(|key| {
                    let value = table
                        .get(key.as_slice())
                        .map_err(|e| self.inner.fail(op, e))?;
                    Ok(value.map(|guard| guard.value().to_vec()))
                })
                .collect()
        })
    }

    async fn batch(&self, ops: Vec<BatchOp>) -> StoreResult<()> {
        validate_batch(BACKEND, StoreOp::Batch, &ops)?;
        if ops.is_empty() {
            return Ok(());
        }
        let inner = self.inner.clone();
        let durability = inner.durability;
        run_blocking(BACKEND, StoreOp::Batch, move || {
            inner.commit(ops, durability)
        })
        .await
    }

    async fn batch_if(&self, conditions: Vec<Condition>, ops: Vec<BatchOp>) -> StoreResult<bool> {
        validate_conditional(BACKEND, &conditions, &ops)?;
        let inner = self.inner.clone();
        let durability = inner.durability;
        run_blocking(BACKEND, StoreOp::BatchIf, move || {
            inner.guarded(StoreOp::BatchIf, || {
                inner.commit_unguarded(StoreOp::BatchIf, &conditions, ops, durability)
            })
        })
        .await
    }

    async fn scan(&self, range: ScanRange) -> StoreResult<Vec<KvPair>> {
        let op = StoreOp::Scan;
        if range.is_empty() {
            return Ok(Vec::new());
        }
        self.inner.guarded(op, || {
            let table = self.inner.read_table(op)?;
            let bounds = (to_slice(&range.start), to_slice(&range.end));
            let iter = table
                .range::<&[u8]>(bounds)
                .map_err(|e| self.inner.fail(op, e))?;
            let to_pair = |item: Result<
                (redb::AccessGuard<&[u8]>, redb::AccessGuard<&[u8]>),
                redb::StorageError,
            >| {
                item.map(|(k, v)| KvPair::new(k.value(), v.value()))
                    .map_err(|e| self.inner.fail(op, e))
            };
            let limit = range.limit_or_max();
            if range.reverse {
                iter.rev().take(limit).map(to_pair).collect()
            } else {
                iter.take(limit).map(to_pair).collect()
            }
        })
    }
    /// A snapshot (one read transaction) copied into a new redb file while
    /// commits go on (`backup.rs`).
    async fn backup(&self, to: &Path) -> StoreResult<BackupInfo> {
        let inner = self.inner.clone();
        let to = to.to_owned();
        run_blocking(BACKEND, StoreOp::Backup, move || inner.backup_to(&to)).await
    }

    fn persistence(&self) -> Persistence {
        match self.inner.durability {
            Durability::Immediate => Persistence::Synced,
            Durability::None => Persistence::Weak(format!(
                "{} is opened with fsync=false: a crash of this machine loses what was \
                 acknowledged since the last sync (remove ?fsync=false)",
                self.inner.path.display()
            )),
        }
    }

    /// `Ok` unless the file failed on an I/O error and cannot be reopened
    /// yet (this check tries to reopen it).
    async fn health(&self) -> StoreResult<()> {
        let inner = self.inner.clone();
        run_blocking(BACKEND, StoreOp::Health, move || {
            inner.guarded(StoreOp::Health, || {
                inner.database(StoreOp::Health).map(drop)
            })
        })
        .await
    }
}
