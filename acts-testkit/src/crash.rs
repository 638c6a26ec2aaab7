//! [`CrashStore`]: cut the durable history at a chosen write, as a process
//! that dies there would, then recover from exactly what was committed.

use acts_store::{
    BatchOp, Condition, ErrorKind, KvPair, KvStore, MemoryStore, ScanRange, StoreError, StoreOp,
    StoreResult, validate_batch, validate_conditional,
};
use async_trait::async_trait;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Mutex;

#[derive(Debug, Default)]
struct CrashLog {
    /// Every committed (non-empty) batch, in commit order.
    batches: Vec<Vec<BatchOp>>,
    /// Set by the first call refused because of the crash point.
    crashed: bool,
}

/// An in-memory store that records every committed batch in order and can
/// "crash" after the n-th one.
///
/// A single put or delete counts as a batch of one; an empty batch is not
/// recorded. After [`crash_after(n)`](CrashStore::crash_after), the first
/// write beyond the n-th committed batch fails with [`ErrorKind::Closed`] and
/// the store is dead from then on: every later call, read or write, fails the
/// same way, as calls of a process that died would. [`recover`](CrashStore::recover)
/// returns a fresh store holding exactly the durable prefix, as a restart
/// finds it.
///
/// ```
/// use acts_store::KvStore;
/// use acts_testkit::CrashStore;
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = CrashStore::new();
/// store.crash_after(1);
/// store.put(b"a", b"1").await.unwrap();
/// assert!(store.put(b"b", b"2").await.is_err()); // died here
/// let restarted = store.recover().await;
/// assert_eq!(restarted.get(b"a").await.unwrap(), Some(b"1".to_vec()));
/// assert_eq!(restarted.get(b"b").await.unwrap(), None);
/// # });
/// ```
#[derive(Debug)]
pub struct CrashStore {
    data: MemoryStore,
    /// Held across the inner write so log order is apply order: the async
    /// lock across `.await` is the point here.
    log: Mutex<CrashLog>,
    /// Batches after this many committed ones fail (`usize::MAX`: never).
    crash_after: AtomicUsize,
}

impl Default for CrashStore {
    fn default() -> Self {
        Self {
            data: MemoryStore::new(),
            log: Mutex::default(),
            crash_after: AtomicUsize::new(usize::MAX),
        }
    }
}

impl CrashStore {
    /// An empty store with no crash point.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes every batch after the `n`-th committed one (counting the whole
    /// log, recovered batches included) fail, killing the store.
    pub fn crash_after(&self, n: usize) {
        self.crash_after.store(n, Ordering::SeqCst);
    }

    /// How many batches have been committed.
    pub async fn committed(&self) -> usize {
        self.log.lock().await.batches.len()
    }

    /// Whether the crash point has been hit.
    pub async fn has_crashed(&self) -> bool {
        self.log.lock().await.crashed
    }

    /// Every committed batch, in order.
    pub async fn committed_batches(&self) -> Vec<Vec<BatchOp>> {
        self.log.lock().await.batches.clone()
    }

    /// A fresh store holding every committed batch: what a restart after the
    /// crash finds. It has no crash point.
    pub async fn recover(&self) -> CrashStore {
        let batches = self.log.lock().await.batches.clone();
        Self::replay(batches).await
    }

    /// A fresh store holding only the first `k` committed batches (as if the
    /// process had died right after the `k`-th), for crash matrices that cut
    /// one recorded run at every point.
    pub async fn recover_prefix(&self, k: usize) -> CrashStore {
        let log = self.log.lock().await;
        let batches = log.batches[..k.min(log.batches.len())].to_vec();
        drop(log);
        Self::replay(batches).await
    }

    async fn replay(batches: Vec<Vec<BatchOp>>) -> CrashStore {
        let data = MemoryStore::new();
        for batch in &batches {
            // The batches were validated when first committed, and a
            // MemoryStore accepts every valid batch.
            if let Err(e) = data.batch(batch.clone()).await {
                unreachable!("replaying a committed batch failed: {e}");
            }
        }
        CrashStore {
            data,
            log: Mutex::new(CrashLog {
                batches,
                crashed: false,
            }),
            crash_after: AtomicUsize::new(usize::MAX),
        }
    }

    /// A copy of every pair, in key order.
    pub fn snapshot(&self) -> Vec<KvPair> {
        self.data.snapshot()
    }

    fn dead(op: StoreOp) -> StoreError {
        StoreError::new(
            "crash",
            op,
            ErrorKind::Closed,
            "the process crashed at this write (acts-testkit CrashStore)",
        )
    }

    async fn check_alive(&self, op: StoreOp) -> StoreResult<()> {
        if self.log.lock().await.crashed {
            return Err(Self::dead(op));
        }
        Ok(())
    }
}

#[async_trait]
impl KvStore for CrashStore {
    fn backend(&self) -> &'static str {
        "crash"
    }

    async fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        self.check_alive(StoreOp::Get).await?;
        self.data.get(key).await
    }

    async fn get_many(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        self.check_alive(StoreOp::GetMany).await?;
        self.data.get_many(keys).await
    }

    async fn batch(&self, ops: Vec<BatchOp>) -> StoreResult<()> {
        validate_batch("crash", StoreOp::Batch, &ops)?;
        let mut log = self.log.lock().await;
        if log.crashed {
            return Err(Self::dead(StoreOp::Batch));
        }
        if ops.is_empty() {
            return Ok(());
        }
        if log.batches.len() >= self.crash_after.load(Ordering::SeqCst) {
            log.crashed = true;
            return Err(Self::dead(StoreOp::Batch));
        }
        self.data.batch(ops.clone()).await?;
        log.batches.push(ops);
        Ok(())
    }

    async fn batch_if(&self, conditions: Vec<Condition>, ops: Vec<BatchOp>) -> StoreResult<bool> {
        validate_conditional("crash", &conditions, &ops)?;
        let mut log = self.log.lock().await;
        if log.crashed {
            return Err(Self::dead(StoreOp::BatchIf));
        }
        // The check and the write happen under the log's lock: no other
        // write comes between. A batch whose condition fails is not
        // committed (nothing is recorded).
        if ops.is_empty() {
            let current = self
                .data
                .get_many(&conditions.iter().map(|c| c.key.clone()).collect::<Vec<_>>())
                .await?;
            return Ok(conditions
                .iter()
                .zip(current)
                .all(|(c, v)| c.holds(v.as_deref())));
        }
        if log.batches.len() >= self.crash_after.load(Ordering::SeqCst) {
            log.crashed = true;
            return Err(Self::dead(StoreOp::BatchIf));
        }
        let applied = self.data.batch_if(conditions, ops.clone()).await?;
        if applied {
            log.batches.push(ops);
        }
        Ok(applied)
    }

    async fn scan(&self, range: ScanRange) -> StoreResult<Vec<KvPair>> {
        self.check_alive(StoreOp::Scan).await?;
        self.data.scan(range).await
    }

    async fn health(&self) -> StoreResult<()> {
        self.check_alive(StoreOp::Health).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_applied_conditional_batches_are_committed() {
        let store = CrashStore::new();
        store.put(b"epoch", b"1").await.unwrap();
        let fenced = store
            .batch_if(
                vec![Condition::equals("epoch", "2")],
                vec![BatchOp::put("x", "stale")],
            )
            .await
            .unwrap();
        assert!(!fenced);
        let applied = store
            .batch_if(
                vec![Condition::equals("epoch", "1")],
                vec![BatchOp::put("x", "fresh")],
            )
            .await
            .unwrap();
        assert!(applied);
        assert_eq!(store.committed().await, 2, "the put and the applied one");
        let cut = store.recover_prefix(2).await;
        assert_eq!(cut.get(b"x").await.unwrap(), Some(b"fresh".to_vec()));
        // A crash cut at the conditional batch kills the store.
        store.crash_after(2);
        let err = store
            .batch_if(
                vec![Condition::equals("epoch", "1")],
                vec![BatchOp::put("y", "1")],
            )
            .await
            .unwrap_err();
        assert_eq!(err.op(), StoreOp::BatchIf);
    }

    #[tokio::test]
    async fn crash_cuts_history_and_kills_the_store() {
        let store = CrashStore::new();
        store.crash_after(2);
        store.put(b"a", b"1").await.unwrap();
        store
            .batch(vec![BatchOp::put("b", "2"), BatchOp::delete("a")])
            .await
            .unwrap();
        let err = store.put(b"c", b"3").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed);
        assert_eq!(err.op(), StoreOp::Put);
        assert!(store.has_crashed().await);
        assert!(
            store.get(b"b").await.is_err(),
            "a dead store answers nothing"
        );

        let restarted = store.recover().await;
        assert_eq!(restarted.snapshot(), vec![KvPair::new("b", "2")]);
        assert_eq!(restarted.committed().await, 2);
        restarted.put(b"c", b"3").await.unwrap();
    }

    #[tokio::test]
    async fn recover_prefix_replays_only_the_first_k_batches() {
        let store = CrashStore::new();
        for i in 0..5u8 {
            store.put(&[i], &[i]).await.unwrap();
        }
        store.batch(Vec::new()).await.unwrap();
        assert_eq!(store.committed().await, 5, "empty batches are not recorded");
        let cut = store.recover_prefix(3).await;
        assert_eq!(
            cut.snapshot(),
            (0..3u8).map(|i| KvPair::new([i], [i])).collect::<Vec<_>>()
        );
        assert_eq!(store.recover_prefix(99).await.snapshot().len(), 5);
    }
}
