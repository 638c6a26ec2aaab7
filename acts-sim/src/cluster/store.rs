//! The simulated shared store of a cluster run, and each node's link to
//! it.
//!
//! [`SharedStore`] is the store every node writes to (one namespace per
//! partition, one for the metadata), with a **replica** behind it: an
//! acknowledged batch is on the replica at once when the run models
//! `wait_replicas`, else only when the simulator replicates it — and a
//! [`failover`](SharedStore::failover) promotes the replica, losing the
//! batches it had not received (the Redis asynchronous replication
//! window). It also watches the fence: a batch conditioned on a
//! partition's epoch that is applied while the partition is at another
//! epoch, or under an epoch another node raised, is a **violation**.
//!
//! A [`Link`] is one node's connection: cut (every call fails), holding
//! the calls it sends (a frozen node whose commit is on its way), or
//! holding their answers (applied, not yet heard); a crash ends its
//! incarnation, failing every call still held. [`NodeView`] is a
//! namespace as one node's incarnation sees it through its link.
//!
//! May use: the store contract; nothing else of the simulator.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use acts_store::keys::KeyBuilder;
use acts_store::{
    BatchOp, Condition, ErrorKind, KvPair, KvStore, MemoryStore, Persistence, ScanRange,
    StoreError, StoreOp, StoreResult,
};
use async_trait::async_trait;
use parking_lot::Mutex;
use tokio::sync::watch;

const BACKEND: &str = "sim";

/// The key a partition's epoch is kept under (as the engine's lease
/// writes it): the fence every commit is conditioned on.
pub fn epoch_key() -> Vec<u8> {
    KeyBuilder::new().str("fence").str("epoch").finish()
}

/// A fault planted in the store to show the checks find it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Plant {
    /// None.
    #[default]
    None,
    /// The fence is ignored: a batch conditioned on an epoch is applied
    /// whatever the epoch is (as if the writer sent no fence).
    NoFence,
}

struct Namespace {
    primary: MemoryStore,
    replica: MemoryStore,
    /// Batches applied on the primary, not yet on the replica, in order.
    pending: Vec<Vec<BatchOp>>,
}

impl Namespace {
    fn new() -> Self {
        Self {
            primary: MemoryStore::new(),
            replica: MemoryStore::new(),
            pending: Vec::new(),
        }
    }
}

/// The store of a cluster run (see the module docs).
pub struct SharedStore {
    wait_replicas: bool,
    plant: Plant,
    spaces: tokio::sync::Mutex<BTreeMap<String, Namespace>>,
    /// Which node raised each (namespace, fence).
    raised: Mutex<HashMap<(String, Vec<u8>), String>>,
    violations: Mutex<Vec<String>>,
}

/// The epoch number of a stored fence (`N:TOKEN`).
fn epoch_of(value: Option<&[u8]>) -> Option<u64> {
    let text = std::str::from_utf8(value?).ok()?;
    text.split_once(':').map_or(text, |(n, _)| n).parse().ok()
}

fn shown(fence: Option<&[u8]>) -> String {
    fence.map_or_else(
        || "none".into(),
        |f| String::from_utf8_lossy(f).into_owned(),
    )
}

impl SharedStore {
    /// A store whose acknowledged batches are replicated before the
    /// answer (`wait_replicas`) or only when [`replicate`](Self::replicate)
    /// says so.
    pub fn new(wait_replicas: bool, plant: Plant) -> Arc<Self> {
        Arc::new(Self {
            wait_replicas,
            plant,
            spaces: tokio::sync::Mutex::default(),
            raised: Mutex::default(),
            violations: Mutex::default(),
        })
    }

    /// The fence violations seen so far.
    pub fn violations(&self) -> Vec<String> {
        self.violations.lock().clone()
    }

    /// Applies `ops` for `node` on namespace `ns` if `conditions` hold;
    /// watches the fence (module docs).
    async fn write(
        &self,
        node: &str,
        ns: &str,
        conditions: Vec<Condition>,
        ops: Vec<BatchOp>,
    ) -> StoreResult<bool> {
        let mut spaces = self.spaces.lock().await;
        let space = spaces.entry(ns.to_owned()).or_insert_with(Namespace::new);
        let fence_key = epoch_key();
        let fence = conditions
            .iter()
            .find(|c| c.key == fence_key)
            .and_then(|c| c.value.clone());
        let conditions = match self.plant {
            Plant::NoFence => conditions
                .into_iter()
                .filter(|c| c.key != fence_key)
                .collect(),
            Plant::None => conditions,
        };
        let current = space.primary.get(&fence_key).await?;
        if !space.primary.batch_if(conditions, ops.clone()).await? {
            return Ok(false);
        }
        let raised = ops.iter().find_map(|op| match op {
            BatchOp::Put { key, value } if *key == fence_key => Some(value.clone()),
            _ => None,
        });
        match (raised, fence) {
            // A node taking the partition: it raises the epoch it read.
            (Some(e), _) => {
                self.raised
                    .lock()
                    .insert((ns.to_owned(), e), node.to_owned());
            }
            // A fenced write: under the partition's epoch, its own.
            (None, Some(e)) => {
                if Some(&e) != current.as_ref() {
                    self.violations.lock().push(format!(
                        "node {node} applied a batch to {ns} under fence {} while it was at {}",
                        shown(Some(&e)),
                        shown(current.as_deref())
                    ));
                }
                let raiser = self.raised.lock().get(&(ns.to_owned(), e.clone())).cloned();
                if raiser.as_deref().is_some_and(|r| r != node) {
                    self.violations.lock().push(format!(
                        "node {node} applied a batch to {ns} under fence {}, which node {} raised",
                        shown(Some(&e)),
                        raiser.unwrap_or_default()
                    ));
                }
            }
            (None, None) => {}
        }
        if self.wait_replicas {
            space.replica.batch(ops).await?;
        } else {
            space.pending.push(ops);
        }
        Ok(true)
    }

    async fn read<T>(
        &self,
        ns: &str,
        f: impl AsyncFnOnce(&MemoryStore) -> StoreResult<T>,
    ) -> StoreResult<T> {
        let mut spaces = self.spaces.lock().await;
        let space = spaces.entry(ns.to_owned()).or_insert_with(Namespace::new);
        f(&space.primary).await
    }

    /// Sends the first `share` (0.0 to 1.0) of every namespace's pending
    /// batches to the replica.
    pub async fn replicate(&self, share: f64) -> StoreResult<()> {
        let mut spaces = self.spaces.lock().await;
        for space in spaces.values_mut() {
            // A share of a count: at most the count.
            let n = ((space.pending.len() as f64) * share.clamp(0.0, 1.0)).ceil() as usize;
            let sent: Vec<Vec<BatchOp>> =
                space.pending.drain(..n.min(space.pending.len())).collect();
            for ops in sent {
                space.replica.batch(ops).await?;
            }
        }
        Ok(())
    }

    /// The replica takes over: every namespace loses the batches it had
    /// not sent to it, but the first `keep` (0.0 to 1.0) share of them
    /// (which arrived just in time). Returns how many batches were lost.
    pub async fn failover(&self, keep: f64) -> StoreResult<usize> {
        let mut spaces = self.spaces.lock().await;
        let mut lost = 0;
        for (ns, space) in spaces.iter_mut() {
            let kept = ((space.pending.len() as f64) * keep.clamp(0.0, 1.0)).floor() as usize;
            let pending = std::mem::take(&mut space.pending);
            lost += pending.len() - kept.min(pending.len());
            for ops in pending.into_iter().take(kept) {
                space.replica.batch(ops).await?;
            }
            let promoted = MemoryStore::new();
            let rows: Vec<BatchOp> = space
                .replica
                .snapshot()
                .into_iter()
                .map(|p| BatchOp::put(p.key, p.value))
                .collect();
            if !rows.is_empty() {
                promoted.batch(rows).await?;
            }
            space.primary = promoted;
            // Epochs raised in what was lost may be raised again by others.
            let at = epoch_of(space.primary.get(&epoch_key()).await?.as_deref()).unwrap_or(0);
            self.raised
                .lock()
                .retain(|(n, e), _| n != ns || epoch_of(Some(e)).unwrap_or(0) <= at);
        }
        Ok(lost)
    }
}

/// What a node's link does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkState {
    /// Every call fails (the node is cut off from the store).
    pub cut: bool,
    /// Calls wait before they reach the store (the node is frozen).
    pub hold_sends: bool,
    /// Answers wait before they reach the node (frozen after sending).
    pub hold_answers: bool,
    /// The node's incarnation: a crash starts another, and every call of
    /// an older one fails.
    pub incarnation: u64,
}

/// One node's connection to the store (module docs).
#[derive(Clone)]
pub struct Link {
    state: Arc<watch::Sender<LinkState>>,
}

impl Default for Link {
    fn default() -> Self {
        Self {
            state: Arc::new(watch::channel(LinkState::default()).0),
        }
    }
}

fn unavailable(op: StoreOp, why: &str) -> StoreError {
    StoreError::new(BACKEND, op, ErrorKind::Unavailable, why)
}

impl Link {
    /// What the link does now.
    pub fn state(&self) -> LinkState {
        *self.state.borrow()
    }

    /// Changes what the link does.
    pub fn set(&self, f: impl FnOnce(&mut LinkState)) {
        self.state.send_modify(f);
    }

    async fn pass(&self, op: StoreOp, incarnation: u64, answer: bool) -> StoreResult<()> {
        let mut rx = self.state.subscribe();
        let held = |s: &LinkState| if answer { s.hold_answers } else { s.hold_sends };
        let s = *rx
            .wait_for(|s| !held(s) || s.incarnation != incarnation)
            .await
            .map_err(|_| unavailable(op, "the simulated link is gone"))?;
        if s.incarnation != incarnation {
            return Err(StoreError::new(
                BACKEND,
                op,
                ErrorKind::Closed,
                "the node crashed",
            ));
        }
        if s.cut {
            return Err(unavailable(op, "the node is cut off from the store"));
        }
        Ok(())
    }
}

/// Namespace `ns` of `store` as incarnation `incarnation` of node `node`
/// sees it through `link`.
pub struct NodeView {
    /// The shared store.
    pub store: Arc<SharedStore>,
    /// The namespace.
    pub ns: String,
    /// The node.
    pub node: String,
    /// Its link.
    pub link: Link,
    /// The incarnation this view belongs to.
    pub incarnation: u64,
}

impl NodeView {
    async fn call<T>(
        &self,
        op: StoreOp,
        f: impl AsyncFnOnce(&SharedStore) -> StoreResult<T>,
    ) -> StoreResult<T> {
        self.link.pass(op, self.incarnation, false).await?;
        let out = f(&self.store).await?;
        self.link.pass(op, self.incarnation, true).await?;
        Ok(out)
    }
}

#[async_trait]
impl KvStore for NodeView {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    fn persistence(&self) -> Persistence {
        Persistence::Weak("a simulated store".into())
    }

    async fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        self.call(StoreOp::Get, async |s| {
            s.read(&self.ns, async |m| m.get(key).await).await
        })
        .await
    }

    async fn get_many(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        self.call(StoreOp::GetMany, async |s| {
            s.read(&self.ns, async |m| m.get_many(keys).await).await
        })
        .await
    }

    async fn batch(&self, ops: Vec<BatchOp>) -> StoreResult<()> {
        self.call(StoreOp::Batch, async |s| {
            s.write(&self.node, &self.ns, Vec::new(), ops)
                .await
                .map(drop)
        })
        .await
    }

    async fn batch_if(&self, conditions: Vec<Condition>, ops: Vec<BatchOp>) -> StoreResult<bool> {
        self.call(StoreOp::Batch, async |s| {
            s.write(&self.node, &self.ns, conditions, ops).await
        })
        .await
    }

    async fn scan(&self, range: ScanRange) -> StoreResult<Vec<KvPair>> {
        self.call(StoreOp::Scan, async |s| {
            s.read(&self.ns, async |m| m.scan(range).await).await
        })
        .await
    }
}
