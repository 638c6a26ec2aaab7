//! [`FailingStore`]: make chosen operations fail the way an unreachable or
//! broken backend does.

use std::sync::atomic::{AtomicU64, Ordering};

use acts_store::{
    BatchOp, Condition, ErrorKind, KvPair, KvStore, ScanRange, StoreError, StoreOp, StoreResult,
};
use async_trait::async_trait;
use parking_lot::Mutex;

/// The operation kinds a [`FailPlan`] can target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpSet {
    /// `get` and `get_many`.
    pub reads: bool,
    /// `scan` (and so `scan_prefix`).
    pub scans: bool,
    /// `put`, `delete` and `batch`.
    pub writes: bool,
}

impl OpSet {
    /// Every operation.
    pub const ALL: OpSet = OpSet {
        reads: true,
        scans: true,
        writes: true,
    };
    /// Point and multi reads only.
    pub const READS: OpSet = OpSet {
        reads: true,
        scans: false,
        writes: false,
    };
    /// Scans only.
    pub const SCANS: OpSet = OpSet {
        reads: false,
        scans: true,
        writes: false,
    };
    /// Writes only.
    pub const WRITES: OpSet = OpSet {
        reads: false,
        scans: false,
        writes: true,
    };

    fn contains(self, op: StoreOp) -> bool {
        match op {
            StoreOp::Get | StoreOp::GetMany => self.reads,
            StoreOp::Scan => self.scans,
            StoreOp::Put | StoreOp::Delete | StoreOp::Batch | StoreOp::BatchIf => self.writes,
            StoreOp::Health => self.writes,
            StoreOp::Open | StoreOp::Backup => false,
        }
    }
}

/// When the targeted operations fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailWhen {
    /// Every targeted call fails.
    Always,
    /// The first `n` targeted calls succeed, every later one fails (a backend
    /// that goes away mid-run).
    AfterCalls(u64),
    /// Every `n`-th targeted call fails: call number `c` (counted from 1)
    /// fails when `c % n == phase % n`, so phase 0 fails calls n, 2n, 3n...
    /// and phase 1 fails calls 1, n+1, 2n+1... A deterministic, periodic
    /// fault.
    EveryNth {
        /// The period (`0` and `1`: every call).
        n: u64,
        /// Shifts which calls fail (`0`: calls n, 2n, 3n, ...).
        phase: u64,
    },
    /// Each targeted call fails with probability `1 / one_in`, decided by a
    /// deterministic generator seeded with `seed` (reproducible flakiness).
    Randomly {
        /// Seed of the generator; the same seed fails the same calls.
        seed: u64,
        /// On average one call in `one_in` fails (`0` and `1`: every call).
        one_in: u64,
    },
}

/// What fails, when, and with which error kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailPlan {
    /// The operations that may fail.
    pub ops: OpSet,
    /// When they fail.
    pub when: FailWhen,
    /// The error kind they fail with.
    pub kind: ErrorKind,
}

impl FailPlan {
    /// Every call of `ops` fails with `kind`.
    pub fn always(ops: OpSet, kind: ErrorKind) -> Self {
        Self {
            ops,
            when: FailWhen::Always,
            kind,
        }
    }

    /// The first `n` calls of `ops` succeed, later ones fail with `kind`.
    pub fn after(ops: OpSet, n: u64, kind: ErrorKind) -> Self {
        Self {
            ops,
            when: FailWhen::AfterCalls(n),
            kind,
        }
    }

    /// Every `n`-th call of `ops` (shifted by `phase`) fails with `kind`.
    pub fn every_nth(ops: OpSet, n: u64, phase: u64, kind: ErrorKind) -> Self {
        Self {
            ops,
            when: FailWhen::EveryNth { n, phase },
            kind,
        }
    }

    /// About one call of `ops` in `one_in` fails with `kind`, reproducibly.
    pub fn random(ops: OpSet, seed: u64, one_in: u64, kind: ErrorKind) -> Self {
        Self {
            ops,
            when: FailWhen::Randomly { seed, one_in },
            kind,
        }
    }
}

#[derive(Debug)]
struct PlanState {
    plan: Option<FailPlan>,
    /// Targeted calls seen since the plan was set.
    calls: u64,
    /// State of the xorshift generator for [`FailWhen::Randomly`].
    rng: u64,
}

/// Wraps any [`KvStore`] and fails the operations a [`FailPlan`] names with a
/// [`StoreError`] of the plan's kind, without touching the inner store (a
/// failed batch applies nothing). With no plan it passes everything through.
#[derive(Debug)]
pub struct FailingStore<S> {
    inner: S,
    state: Mutex<PlanState>,
    failures: AtomicU64,
}

impl<S: KvStore> FailingStore<S> {
    /// Wraps `inner` with no failures planned.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            state: Mutex::new(PlanState {
                plan: None,
                calls: 0,
                rng: 0,
            }),
            failures: AtomicU64::new(0),
        }
    }

    /// Wraps `inner` failing as `plan` says.
    pub fn with_plan(inner: S, plan: FailPlan) -> Self {
        let store = Self::new(inner);
        store.set_plan(plan);
        store
    }

    /// Replaces the plan (and restarts its call count and generator).
    pub fn set_plan(&self, plan: FailPlan) {
        let mut state = self.state.lock();
        state.calls = 0;
        state.rng = match plan.when {
            // xorshift must not start at zero.
            FailWhen::Randomly { seed, .. } => seed | 1,
            _ => 0,
        };
        state.plan = Some(plan);
    }

    /// Stops failing: the backend "came back".
    pub fn heal(&self) {
        self.state.lock().plan = None;
    }

    /// How many calls have failed so far.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::SeqCst)
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    fn check(&self, op: StoreOp) -> StoreResult<()> {
        let kind = {
            let mut state = self.state.lock();
            let Some(plan) = state.plan else {
                return Ok(());
            };
            if !plan.ops.contains(op) {
                return Ok(());
            }
            state.calls += 1;
            let fail = match plan.when {
                FailWhen::Always => true,
                FailWhen::AfterCalls(n) => state.calls > n,
                FailWhen::EveryNth { n, phase } => {
                    n <= 1 || (state.calls + n - phase % n).is_multiple_of(n)
                }
                FailWhen::Randomly { one_in, .. } => {
                    let mut x = state.rng;
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    state.rng = x;
                    one_in <= 1 || x.is_multiple_of(one_in)
                }
            };
            if !fail {
                return Ok(());
            }
            plan.kind
        };
        self.failures.fetch_add(1, Ordering::SeqCst);
        Err(StoreError::new(
            self.inner.backend(),
            op,
            kind,
            "injected failure (acts-testkit FailingStore)",
        ))
    }
}

#[async_trait]
impl<S: KvStore> KvStore for FailingStore<S> {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        self.check(StoreOp::Get)?;
        self.inner.get(key).await
    }

    async fn get_many(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        self.check(StoreOp::GetMany)?;
        self.inner.get_many(keys).await
    }

    async fn put(&self, key: &[u8], value: &[u8]) -> StoreResult<()> {
        self.check(StoreOp::Put)?;
        self.inner.put(key, value).await
    }

    async fn delete(&self, key: &[u8]) -> StoreResult<()> {
        self.check(StoreOp::Delete)?;
        self.inner.delete(key).await
    }

    async fn batch(&self, ops: Vec<BatchOp>) -> StoreResult<()> {
        self.check(StoreOp::Batch)?;
        self.inner.batch(ops).await
    }

    async fn batch_if(&self, conditions: Vec<Condition>, ops: Vec<BatchOp>) -> StoreResult<bool> {
        self.check(StoreOp::BatchIf)?;
        self.inner.batch_if(conditions, ops).await
    }

    async fn scan(&self, range: ScanRange) -> StoreResult<Vec<KvPair>> {
        self.check(StoreOp::Scan)?;
        self.inner.scan(range).await
    }

    fn persistence(&self) -> acts_store::Persistence {
        self.inner.persistence()
    }

    /// Fails as writes fail (a store that cannot write is not healthy).
    async fn health(&self) -> StoreResult<()> {
        self.check(StoreOp::Health)?;
        self.inner.health().await
    }

    fn io(&self) -> Option<acts_store::StoreIo> {
        self.inner.io()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acts_store::MemoryStore;

    #[tokio::test]
    async fn failing_reads_are_errors_not_absence() {
        let store = FailingStore::new(MemoryStore::new());
        store.put(b"k", b"v").await.unwrap();
        store.set_plan(FailPlan::always(OpSet::READS, ErrorKind::Unavailable));
        let err = store.get(b"missing").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable);
        assert_eq!(err.op(), StoreOp::Get);
        assert!(err.is_retryable());
        // Scans are not in the plan.
        assert_eq!(store.scan(ScanRange::all()).await.unwrap().len(), 1);
        store.heal();
        assert_eq!(store.get(b"k").await.unwrap(), Some(b"v".to_vec()));
        assert_eq!(store.failures(), 1);
    }

    #[tokio::test]
    async fn failed_batch_applies_nothing() {
        let store = FailingStore::with_plan(
            MemoryStore::new(),
            FailPlan::after(OpSet::WRITES, 1, ErrorKind::Timeout),
        );
        store.put(b"first", b"1").await.unwrap();
        let err = store
            .batch(vec![BatchOp::put("a", "1"), BatchOp::delete("first")])
            .await
            .unwrap_err();
        assert_eq!(err.op(), StoreOp::Batch);
        assert_eq!(
            store.inner().snapshot(),
            vec![KvPair::new("first", "1")],
            "nothing of the failed batch is applied"
        );
    }

    #[tokio::test]
    async fn every_nth_plan_fails_exactly_the_periodic_calls() {
        let pattern = |phase| async move {
            let store = FailingStore::with_plan(
                MemoryStore::new(),
                FailPlan::every_nth(OpSet::READS, 3, phase, ErrorKind::Timeout),
            );
            let mut failed = Vec::new();
            for call in 1..=9u64 {
                if store.get(b"k").await.is_err() {
                    failed.push(call);
                }
            }
            failed
        };
        assert_eq!(pattern(0).await, vec![3, 6, 9]);
        assert_eq!(pattern(1).await, vec![1, 4, 7]);
        assert_eq!(pattern(2).await, vec![2, 5, 8]);
    }

    #[tokio::test]
    async fn random_plan_is_reproducible_from_its_seed() {
        let pattern = |seed| async move {
            let store = FailingStore::with_plan(
                MemoryStore::new(),
                FailPlan::random(OpSet::ALL, seed, 3, ErrorKind::Unavailable),
            );
            let mut fails = Vec::new();
            for _ in 0..64 {
                fails.push(store.get(b"k").await.is_err());
            }
            fails
        };
        let a = pattern(42).await;
        assert_eq!(a, pattern(42).await);
        let failed = a.iter().filter(|f| **f).count();
        assert!(
            (5..40).contains(&failed),
            "about a third fail, got {failed}"
        );
        assert_ne!(a, pattern(7).await);
    }
}
