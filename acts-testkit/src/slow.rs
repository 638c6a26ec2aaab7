//! [`SlowStore`]: every call takes a while — it yields to the runtime a
//! number of times drawn from a seed before it reaches the wrapped store —
//! so whatever else the engine has in hand (timers, continuations, other
//! transitions, the group-commit writer's next batch) runs in between.
//! On a single-threaded runtime the interleaving is a function of the
//! seed: a slow-commit schedule that replays exactly.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use acts_store::{BatchOp, Condition, KvPair, KvStore, ScanRange, StoreResult};
use async_trait::async_trait;

/// Wraps any [`KvStore`]; each call first yields 0 to `max_yields` times
/// (drawn from the seed, call by call), writes `write_factor` times as
/// long as reads.
///
/// ```
/// use acts_store::{KvStore, MemoryStore};
/// use acts_testkit::SlowStore;
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let store = SlowStore::new(MemoryStore::new(), 7, 8);
/// store.put(b"a", b"1").await.unwrap();
/// assert_eq!(store.get(b"a").await.unwrap(), Some(b"1".to_vec()));
/// assert!(store.yields() > 0);
/// # });
/// ```
#[derive(Debug)]
pub struct SlowStore<S> {
    inner: Arc<S>,
    state: AtomicU64,
    max_yields: u64,
    write_factor: u64,
    yields: AtomicU64,
}

impl<S: KvStore> SlowStore<S> {
    /// Wraps `inner`: calls yield up to `max_yields` times (writes up to
    /// four times as many), drawn from `seed`.
    pub fn new(inner: S, seed: u64, max_yields: u64) -> Self {
        Self::from_arc(Arc::new(inner), seed, max_yields)
    }

    /// Wraps a shared store.
    pub fn from_arc(inner: Arc<S>, seed: u64, max_yields: u64) -> Self {
        Self {
            inner,
            state: AtomicU64::new(seed),
            max_yields,
            write_factor: 4,
            yields: AtomicU64::new(0),
        }
    }

    /// How many times calls yielded so far.
    pub fn yields(&self) -> u64 {
        self.yields.load(Ordering::Relaxed)
    }

    /// The next draw of the seed's sequence (splitmix64).
    fn draw(&self) -> u64 {
        let mut z = self
            .state
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    async fn delay(&self, write: bool) {
        let max = if write {
            self.max_yields * self.write_factor
        } else {
            self.max_yields
        };
        let n = self.draw() % (max + 1);
        self.yields.fetch_add(n, Ordering::Relaxed);
        for _ in 0..n {
            tokio::task::yield_now().await;
        }
    }
}

#[async_trait]
impl<S: KvStore> KvStore for SlowStore<S> {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        self.delay(false).await;
        self.inner.get(key).await
    }

    async fn get_many(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        self.delay(false).await;
        self.inner.get_many(keys).await
    }

    async fn put(&self, key: &[u8], value: &[u8]) -> StoreResult<()> {
        self.delay(true).await;
        self.inner.put(key, value).await
    }

    async fn delete(&self, key: &[u8]) -> StoreResult<()> {
        self.delay(true).await;
        self.inner.delete(key).await
    }

    async fn batch(&self, ops: Vec<BatchOp>) -> StoreResult<()> {
        self.delay(true).await;
        self.inner.batch(ops).await
    }

    async fn batch_if(&self, conditions: Vec<Condition>, ops: Vec<BatchOp>) -> StoreResult<bool> {
        self.delay(true).await;
        self.inner.batch_if(conditions, ops).await
    }

    async fn scan(&self, range: ScanRange) -> StoreResult<Vec<KvPair>> {
        self.delay(false).await;
        self.inner.scan(range).await
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
