//! [`GatedStore`]: park reads or writes at a gate so a test decides the
//! interleaving, instead of hoping a sleep does.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use acts_store::{BatchOp, Condition, KvPair, KvStore, ScanRange, StoreResult};
use async_trait::async_trait;
use tokio::sync::watch;

/// Which calls a gate holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateKind {
    /// Point reads, multi-reads and scans.
    Read,
    /// Puts, deletes and batches.
    Write,
}

/// One gate: armed or not, and who is waiting at it.
#[derive(Debug)]
struct Gate {
    armed: watch::Sender<bool>,
    /// Callers parked right now.
    parked: AtomicUsize,
    /// Callers that have ever parked here (never decreases).
    entered: AtomicUsize,
    /// Wakes waiters of `wait_parked` when `parked`/`entered` change.
    counts: watch::Sender<()>,
}

impl Gate {
    fn new() -> Self {
        Self {
            armed: watch::channel(false).0,
            parked: AtomicUsize::new(0),
            entered: AtomicUsize::new(0),
            counts: watch::channel(()).0,
        }
    }

    /// Parks the caller while the gate is armed.
    async fn pass(&self) {
        let mut armed = self.armed.subscribe();
        if !*armed.borrow_and_update() {
            return;
        }
        self.parked.fetch_add(1, Ordering::SeqCst);
        self.entered.fetch_add(1, Ordering::SeqCst);
        self.counts.send_replace(());
        // `wait_for` only fails when the sender is dropped, and the gate owns
        // the sender for as long as this borrow of it lives.
        let _ = armed.wait_for(|armed| !*armed).await;
        self.parked.fetch_sub(1, Ordering::SeqCst);
        self.counts.send_replace(());
    }
}

/// Wraps any [`KvStore`] with a read gate and a write gate.
///
/// While a gate is [armed](GatedStore::arm), every call of its kind parks
/// before reaching the inner store; [`disarm`](GatedStore::disarm) releases
/// all parked callers. A test waits with [`wait_parked`](GatedStore::wait_parked)
/// until a known number of callers are parked, so interleavings are exact.
///
/// ```
/// use std::sync::Arc;
/// use acts_store::{KvStore, MemoryStore};
/// use acts_testkit::{GateKind, GatedStore};
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let store = Arc::new(GatedStore::new(MemoryStore::new()));
/// store.arm(GateKind::Write);
/// let writer = tokio::spawn({
///     let store = store.clone();
///     async move { store.put(b"k", b"v").await }
/// });
/// store.wait_parked(GateKind::Write, 1).await;
/// assert_eq!(store.get(b"k").await.unwrap(), None); // the write is held
/// store.disarm(GateKind::Write);
/// writer.await.unwrap().unwrap();
/// assert_eq!(store.get(b"k").await.unwrap(), Some(b"v".to_vec()));
/// # });
/// ```
#[derive(Debug)]
pub struct GatedStore<S> {
    inner: Arc<S>,
    read: Gate,
    write: Gate,
    /// Scans of ranges under this prefix are held *after* they read (see
    /// [`hold_scans_under`](GatedStore::hold_scans_under)).
    held_prefix: std::sync::Mutex<Option<Vec<u8>>>,
    /// Point reads of this key are held *after* they read (see
    /// [`hold_gets_of`](GatedStore::hold_gets_of)).
    held_key: std::sync::Mutex<Option<Vec<u8>>>,
    held: Gate,
}

impl<S: KvStore> GatedStore<S> {
    /// Wraps `inner`, both gates open.
    pub fn new(inner: S) -> Self {
        Self::from_arc(Arc::new(inner))
    }

    /// Wraps a shared store, both gates open.
    pub fn from_arc(inner: Arc<S>) -> Self {
        Self {
            inner,
            read: Gate::new(),
            write: Gate::new(),
            held_prefix: std::sync::Mutex::new(None),
            held_key: std::sync::Mutex::new(None),
            held: Gate::new(),
        }
    }

    /// The wrapped store (calls on it bypass the gates).
    pub fn inner(&self) -> &Arc<S> {
        &self.inner
    }

    fn gate(&self, kind: GateKind) -> &Gate {
        match kind {
            GateKind::Read => &self.read,
            GateKind::Write => &self.write,
        }
    }

    /// Makes every later call of `kind` park until [`disarm`](Self::disarm).
    pub fn arm(&self, kind: GateKind) {
        self.gate(kind).armed.send_replace(true);
    }

    /// Opens the gate and releases every caller parked at it.
    pub fn disarm(&self, kind: GateKind) {
        self.gate(kind).armed.send_replace(false);
    }

    /// How many callers are parked at the gate now.
    pub fn parked(&self, kind: GateKind) -> usize {
        self.gate(kind).parked.load(Ordering::SeqCst)
    }

    /// How many callers have ever parked at the gate.
    pub fn entered(&self, kind: GateKind) -> usize {
        self.gate(kind).entered.load(Ordering::SeqCst)
    }

    /// Resolves once at least `n` callers are parked at the gate at the same
    /// time. Wrap it in a timeout as a hang guard in tests.
    pub async fn wait_parked(&self, kind: GateKind, n: usize) {
        let gate = self.gate(kind);
        let mut counts = gate.counts.subscribe();
        while gate.parked.load(Ordering::SeqCst) < n {
            // The sender lives in `gate`, borrowed for this whole loop.
            let _ = counts.changed().await;
        }
    }

    /// Holds every later scan whose range starts under `prefix` *after* it
    /// has read, before it returns its rows, until
    /// [`release_scans`](Self::release_scans): the caller then acts on
    /// what it read while the store has moved on (a stale read, on purpose).
    pub fn hold_scans_under(&self, prefix: &[u8]) {
        if let Ok(mut p) = self.held_prefix.lock() {
            *p = Some(prefix.to_vec());
        }
        self.held.armed.send_replace(true);
    }

    /// Holds every later point read of `key` *after* it has read, before
    /// it returns, until [`release_scans`](Self::release_scans) (as
    /// [`hold_scans_under`](Self::hold_scans_under) does for scans).
    pub fn hold_gets_of(&self, key: &[u8]) {
        if let Ok(mut k) = self.held_key.lock() {
            *k = Some(key.to_vec());
        }
        self.held.armed.send_replace(true);
    }

    /// Releases the reads held by [`hold_scans_under`](Self::hold_scans_under)
    /// and [`hold_gets_of`](Self::hold_gets_of), and holds no more.
    pub fn release_scans(&self) {
        self.held.armed.send_replace(false);
        if let Ok(mut p) = self.held_prefix.lock() {
            *p = None;
        }
        if let Ok(mut k) = self.held_key.lock() {
            *k = None;
        }
    }

    /// Resolves once at least `n` scans are held at the same time.
    pub async fn wait_held_scans(&self, n: usize) {
        let mut counts = self.held.counts.subscribe();
        while self.held.parked.load(Ordering::SeqCst) < n {
            let _ = counts.changed().await;
        }
    }

    /// Whether a scan of `range` is held (see [`hold_scans_under`](Self::hold_scans_under)).
    fn holds(&self, range: &ScanRange) -> bool {
        let start = match &range.start {
            std::ops::Bound::Included(k) | std::ops::Bound::Excluded(k) => k.as_slice(),
            std::ops::Bound::Unbounded => &[],
        };
        self.held_prefix
            .lock()
            .ok()
            .and_then(|p| p.as_ref().map(|p| start.starts_with(p)))
            .unwrap_or(false)
    }

    /// Resolves once at least `n` callers have ever parked at the gate (they
    /// may have been released since).
    pub async fn wait_entered(&self, kind: GateKind, n: usize) {
        let gate = self.gate(kind);
        let mut counts = gate.counts.subscribe();
        while gate.entered.load(Ordering::SeqCst) < n {
            let _ = counts.changed().await;
        }
    }
}

#[async_trait]
impl<S: KvStore> KvStore for GatedStore<S> {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        self.read.pass().await;
        let hold = self
            .held_key
            .lock()
            .ok()
            .is_some_and(|k| k.as_deref() == Some(key));
        let value = self.inner.get(key).await;
        if hold {
            self.held.pass().await;
        }
        value
    }

    async fn get_many(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        self.read.pass().await;
        self.inner.get_many(keys).await
    }

    async fn put(&self, key: &[u8], value: &[u8]) -> StoreResult<()> {
        self.write.pass().await;
        self.inner.put(key, value).await
    }

    async fn delete(&self, key: &[u8]) -> StoreResult<()> {
        self.write.pass().await;
        self.inner.delete(key).await
    }

    async fn batch(&self, ops: Vec<BatchOp>) -> StoreResult<()> {
        self.write.pass().await;
        self.inner.batch(ops).await
    }

    async fn batch_if(&self, conditions: Vec<Condition>, ops: Vec<BatchOp>) -> StoreResult<bool> {
        self.write.pass().await;
        self.inner.batch_if(conditions, ops).await
    }

    async fn scan(&self, range: ScanRange) -> StoreResult<Vec<KvPair>> {
        self.read.pass().await;
        let hold = self.holds(&range);
        let rows = self.inner.scan(range).await;
        if hold {
            self.held.pass().await;
        }
        rows
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

#[cfg(test)]
mod tests {
    use super::*;
    use acts_store::MemoryStore;
    use std::time::Duration;

    const HANG_GUARD: Duration = Duration::from_secs(10);

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn read_gate_parks_scans_but_not_writes() {
        let store = Arc::new(GatedStore::new(MemoryStore::new()));
        store.arm(GateKind::Read);
        let scans: Vec<_> = (0..3)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { store.scan(ScanRange::all()).await })
            })
            .collect();
        tokio::time::timeout(HANG_GUARD, store.wait_parked(GateKind::Read, 3))
            .await
            .expect("three scans park");
        // Writes pass an armed read gate.
        store.put(b"a", b"1").await.unwrap();
        assert_eq!(store.parked(GateKind::Read), 3);
        store.disarm(GateKind::Read);
        for scan in scans {
            // Released scans run after the put, so they see it.
            assert_eq!(scan.await.unwrap().unwrap().len(), 1);
        }
        assert_eq!(store.parked(GateKind::Read), 0);
        assert_eq!(store.entered(GateKind::Read), 3);
    }

    #[tokio::test]
    async fn open_gates_do_not_count() {
        let store = GatedStore::new(MemoryStore::new());
        store.batch(vec![BatchOp::put("k", "v")]).await.unwrap();
        assert_eq!(store.get(b"k").await.unwrap(), Some(b"v".to_vec()));
        assert_eq!(store.entered(GateKind::Write), 0);
        assert_eq!(store.entered(GateKind::Read), 0);
    }
}
