//! [`CountingStore`]: counts the calls that reach a store, by kind, so a
//! test or a benchmark can say how many commits (fsyncs, on a durable
//! store) an operation cost — counted, not guessed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use acts_store::{BatchOp, Condition, KvPair, KvStore, ScanRange, StoreResult};
use async_trait::async_trait;

/// How many calls of each kind reached the wrapped store.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StoreCounts {
    /// Point reads and multi-reads.
    pub reads: u64,
    /// Scans.
    pub scans: u64,
    /// Values returned by reads and scans (how much was read, not how
    /// often).
    pub values_read: u64,
    /// Writes: puts, deletes and batches — each one commit (one fsync on a
    /// store that syncs every commit).
    pub commits: u64,
}

/// Wraps any [`KvStore`] and counts the calls that reach it.
///
/// ```
/// use acts_store::{KvStore, MemoryStore, BatchOp};
/// use acts_testkit::CountingStore;
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let store = CountingStore::new(MemoryStore::new());
/// store.put(b"a", b"1").await.unwrap();
/// store.batch(vec![BatchOp::put(b"b".to_vec(), b"2".to_vec())]).await.unwrap();
/// store.get(b"a").await.unwrap();
/// let c = store.counts();
/// assert_eq!((c.commits, c.reads, c.scans, c.values_read), (2, 1, 0, 1));
/// # });
/// ```
#[derive(Debug)]
pub struct CountingStore<S> {
    inner: Arc<S>,
    reads: AtomicU64,
    scans: AtomicU64,
    values_read: AtomicU64,
    commits: AtomicU64,
}

impl<S: KvStore> CountingStore<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self::from_arc(Arc::new(inner))
    }

    /// Wraps a shared store.
    pub fn from_arc(inner: Arc<S>) -> Self {
        Self {
            inner,
            reads: AtomicU64::new(0),
            scans: AtomicU64::new(0),
            values_read: AtomicU64::new(0),
            commits: AtomicU64::new(0),
        }
    }

    /// The counts so far.
    pub fn counts(&self) -> StoreCounts {
        StoreCounts {
            reads: self.reads.load(Ordering::Relaxed),
            scans: self.scans.load(Ordering::Relaxed),
            values_read: self.values_read.load(Ordering::Relaxed),
            commits: self.commits.load(Ordering::Relaxed),
        }
    }

    fn count(&self, c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

#[async_trait]
impl<S: KvStore> KvStore for CountingStore<S> {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        self.count(&self.reads);
        let v = self.inner.get(key).await?;
        self.values_read
            .fetch_add(u64::from(v.is_some()), Ordering::Relaxed);
        Ok(v)
    }

    async fn get_many(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        self.count(&self.reads);
        let v = self.inner.get_many(keys).await?;
        let found = v.iter().filter(|x| x.is_some()).count() as u64;
        self.values_read.fetch_add(found, Ordering::Relaxed);
        Ok(v)
    }

    async fn put(&self, key: &[u8], value: &[u8]) -> StoreResult<()> {
        self.count(&self.commits);
        self.inner.put(key, value).await
    }

    async fn delete(&self, key: &[u8]) -> StoreResult<()> {
        self.count(&self.commits);
        self.inner.delete(key).await
    }

    async fn batch(&self, ops: Vec<BatchOp>) -> StoreResult<()> {
        self.count(&self.commits);
        self.inner.batch(ops).await
    }

    async fn batch_if(&self, conditions: Vec<Condition>, ops: Vec<BatchOp>) -> StoreResult<bool> {
        self.count(&self.commits);
        self.values_read
            .fetch_add(conditions.len() as u64, Ordering::Relaxed);
        self.inner.batch_if(conditions, ops).await
    }

    async fn scan(&self, range: ScanRange) -> StoreResult<Vec<KvPair>> {
        self.count(&self.scans);
        let v = self.inner.scan(range).await?;
        self.values_read
            .fetch_add(v.len() as u64, Ordering::Relaxed);
        Ok(v)
    }

    fn persistence(&self) -> acts_store::Persistence {
        self.inner.persistence()
    }

    async fn health(&self) -> StoreResult<()> {
        self.inner.health().await
    }

    fn io(&self) -> Option<acts_store::StoreIo> {
        self.inner.io()
    }
}
