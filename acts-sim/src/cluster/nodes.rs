//! The nodes of a cluster run: each a real [`ClusterNode`] (its
//! membership, leases, takeovers and catalog, ticked by the simulator, no
//! background work) on its own manual clock, skewed from the run's time,
//! reaching the shared store through its [`Link`]. What happens to a node
//! (frozen, cut off, crashed, restarted, joining, leaving) is done here.
//!
//! May use: the cluster, acts-core, and the simulated `store`.

use std::sync::Arc;
use std::time::Duration;

use acts::{Clock, EngineConfig, ManualClock, StoreFamily};
use acts_cluster::{ClusterConfig, ClusterNode};
use acts_store::KvStore;

use super::store::{Link, NodeView, SharedStore};

/// The lease TTL of every node.
pub const TTL: Duration = Duration::from_secs(5);

/// One node of the run.
pub struct SimNode {
    /// Its id.
    pub id: String,
    /// Its link to the store.
    pub link: Link,
    /// Its clock.
    pub clock: ManualClock,
    /// How far its clock is from the run's time (ms).
    pub skew: i64,
    /// The node while it runs (`None`: crashed, or never joined, or left).
    pub node: Option<ClusterNode>,
    /// Frozen (SIGSTOP): not ticked, calls to it go unanswered.
    pub frozen: bool,
    /// Cut off from the clients (and the other nodes' forwarded calls).
    pub unreachable: bool,
    /// Crashed (to be restarted), as opposed to never joined or left.
    pub crashed: bool,
}

impl SimNode {
    /// A node not yet joined.
    pub fn new(id: String, now: i64) -> Self {
        Self {
            id,
            link: Link::default(),
            clock: ManualClock::new(now),
            skew: 0,
            node: None,
            frozen: false,
            unreachable: false,
            crashed: false,
        }
    }

    /// The node, if it runs and is neither frozen nor cut from clients:
    /// what a call sent to it reaches.
    pub fn reachable(&self) -> Option<&ClusterNode> {
        self.node
            .as_ref()
            .filter(|_| !self.frozen && !self.unreachable)
    }

    /// Moves its clock to the run's time `now` (plus its skew; never
    /// back).
    pub fn set_time(&self, now: i64) {
        let to = now + self.skew;
        if to > self.clock.now_millis() {
            self.clock.set(to);
        }
    }

    /// Joins (or joins again after a crash, as a new incarnation).
    pub async fn join(&mut self, store: &Arc<SharedStore>, partitions: u32) -> Result<(), String> {
        let incarnation = self.link.state().incarnation;
        let (node_id, link, shared) = (self.id.clone(), self.link.clone(), store.clone());
        let family = StoreFamily::custom("sim", move |ns: &str| -> Arc<dyn KvStore> {
            Arc::new(NodeView {
                store: shared.clone(),
                ns: ns.to_owned(),
                node: node_id.clone(),
                link: link.clone(),
                incarnation,
            })
        });
        let mut config =
            ClusterConfig::new(&self.id, &format!("http://{}.sim", self.id), partitions);
        config.lease_ttl = TTL;
        config.clock = Arc::new(self.clock.clone());
        config.background = false;
        config.engine = {
            let mut v = EngineConfig::default();
            // No housekeeping of its own: the simulator's ticks renew.
            v.tick = Duration::from_secs(3600);
            v
        };
        let node = ClusterNode::join(config, family, acts_server::Auth::none())
            .await
            .map_err(|e| e.to_string())?;
        self.node = Some(node);
        self.crashed = false;
        Ok(())
    }

    /// Dies at once: every call it has in flight fails (a held commit
    /// never lands), nothing is handed over.
    pub async fn crash(&mut self) {
        self.link.set(|s| {
            s.incarnation += 1;
            s.hold_sends = false;
            s.hold_answers = false;
            s.cut = false;
        });
        self.frozen = false;
        self.unreachable = false;
        if let Some(node) = self.node.take() {
            node.halt().await;
        }
        self.crashed = true;
    }

    /// Leaves cleanly (hands its partitions over).
    pub async fn leave(&mut self) {
        if let Some(node) = self.node.take() {
            node.leave().await;
        }
    }

    /// Freezes: its calls on their way to the store (`answers`: their
    /// answers on their way back) wait until it thaws.
    pub fn freeze(&mut self, answers: bool) {
        self.frozen = true;
        self.link.set(|s| {
            if answers {
                s.hold_answers = true;
            } else {
                s.hold_sends = true;
            }
        });
    }

    /// Thaws.
    pub fn thaw(&mut self) {
        self.frozen = false;
        self.link.set(|s| {
            s.hold_sends = false;
            s.hold_answers = false;
        });
    }

    /// Cuts it from the store, or heals the cut.
    pub fn cut_store(&self, cut: bool) {
        self.link.set(|s| s.cut = cut);
    }
}
