//! [`ClusterNode`]: one engine node of a cluster — its membership, the
//! partitions it owns (one leased, fenced engine each; taking and letting
//! go of them: `holding.rs`), and the periodic
//! [`tick`](ClusterNode::tick) that keeps both in step with the cluster.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use acts::{Engine, StoreFamily};
use acts_server::ServerOptions;
use axum::Router;
use parking_lot::{Mutex, RwLock};
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use crate::catalog;
use crate::config::ClusterConfig;
use crate::error::ClusterError;
use crate::meta::{ClusterInfo, HeldPartition, Member, Meta};
use crate::placement::{owner_of, partition_of};

/// A partition this node holds.
#[derive(Clone)]
pub(crate) struct Held {
    pub(crate) engine: Engine,
    pub(crate) router: Router,
    pub(crate) epoch: u64,
    /// The last catalog change applied to it.
    pub(crate) synced: u64,
    /// Which taking of the partition by this node this is (a partition
    /// handed over and taken again is another holding: what was attached
    /// to the old engine, e.g. a stream, must end).
    pub(crate) holding: u64,
}

/// Who owns a partition, as the members' heartbeats say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    pub(crate) node: String,
    pub(crate) addr: String,
    pub(crate) epoch: u64,
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) held: BTreeMap<u32, Held>,
    /// The owner of each partition (index: partition).
    pub(crate) owners: Vec<Option<Owner>>,
    /// The live members at the last tick (this node included).
    pub(crate) live: Vec<Member>,
    /// When the last tick ran (ms).
    pub(crate) last_tick: i64,
}

pub(crate) struct Inner {
    pub(crate) config: ClusterConfig,
    pub(crate) info: ClusterInfo,
    pub(crate) family: StoreFamily,
    pub(crate) meta: Meta,
    /// Who may call this node, and the one stream budget all its
    /// partitions share.
    pub(crate) server: ServerOptions,
    started_at: i64,
    pub(crate) state: RwLock<State>,
    /// One tick at a time (held across the tick's awaits: that is its
    /// point).
    tick_lock: tokio::sync::Mutex<()>,
    /// One model change at a time on this node (held across the change's
    /// awaits: its order on the catalog partition is the catalog's).
    pub(crate) catalog_changes: tokio::sync::Mutex<()>,
    pub(crate) http: reqwest::Client,
    /// What the nodes prove their gate calls to each other with
    /// (`gates.rs`).
    pub(crate) node_secret: String,
    closed: AtomicBool,
    ticker: Mutex<Option<JoinHandle<()>>>,
    /// Counts the partitions taken (numbers each [`Held::holding`]).
    pub(crate) takings: std::sync::atomic::AtomicU64,
}

/// One engine node of a cluster. Cheap to clone.
#[derive(Clone)]
pub struct ClusterNode {
    pub(crate) inner: Arc<Inner>,
}

impl ClusterNode {
    /// Joins the cluster kept in `family` (creating it with
    /// `config.partitions` if it does not exist), heartbeats, takes the
    /// partitions this node should own whose leases are free, and (with
    /// `config.background`) keeps doing so every third of the TTL.
    /// Requests act for the principals of `server`'s tokens, and the
    /// live streams of every partition this node serves share
    /// `server`'s one stream budget.
    pub async fn join(
        config: ClusterConfig,
        family: StoreFamily,
        server: impl Into<ServerOptions>,
    ) -> Result<Self, ClusterError> {
        let server = server.into();
        config.check()?;
        let meta = Meta::new(family.member("meta").await?);
        let now = config.clock.now_millis();
        let info = meta.join(config.partitions, now).await?;
        if let Some(other) = meta
            .members()
            .await?
            .into_iter()
            .find(|m| m.node == config.node && m.until > now && m.addr != config.advertise)
        {
            return Err(ClusterError::NodeInUse {
                node: other.node,
                addr: other.addr,
                remaining_ms: other.until - now,
            });
        }
        let node_secret = meta.node_secret().await?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| ClusterError::Config(format!("the HTTP client: {e}")))?;
        let node = Self {
            inner: Arc::new(Inner {
                state: RwLock::new(State {
                    owners: vec![None; info.partitions as usize],
                    ..State::default()
                }),
                info,
                family,
                meta,
                server,
                started_at: now,
                tick_lock: tokio::sync::Mutex::new(()),
                catalog_changes: tokio::sync::Mutex::new(()),
                http,
                node_secret,
                closed: AtomicBool::new(false),
                ticker: Mutex::new(None),
                takings: std::sync::atomic::AtomicU64::new(0),
                config,
            }),
        };
        node.tick().await?;
        if node.inner.config.background {
            let every = node.inner.config.lease_ttl / 3;
            let weak = Arc::downgrade(&node.inner);
            let handle = tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let Some(inner) = weak.upgrade() else { return };
                    let node = ClusterNode { inner };
                    if node.inner.closed.load(Ordering::Acquire) {
                        return;
                    }
                    if let Err(e) = node.tick().await {
                        warn!(error = %e, "cluster tick failed; trying again");
                    }
                }
            });
            *node.inner.ticker.lock() = Some(handle);
        }
        Ok(node)
    }

    /// This node's id.
    pub fn id(&self) -> &str {
        &self.inner.config.node
    }

    /// How many partitions the cluster has.
    pub fn partitions(&self) -> u32 {
        self.inner.info.partitions
    }

    /// The partition process `pid` belongs to.
    pub fn partition_of(&self, pid: &str) -> u32 {
        partition_of(pid, self.inner.info.partitions)
    }

    /// The engine of partition `p`, if this node holds it.
    pub fn engine(&self, p: u32) -> Option<Engine> {
        self.inner
            .state
            .read()
            .held
            .get(&p)
            .map(|h| h.engine.clone())
    }

    /// The node this node routes a call about partition `p` to now:
    /// itself while it holds `p`, else the owner the members' heartbeats
    /// named at its last tick (`None`: no live owner it knows of).
    pub fn owner(&self, p: u32) -> Option<String> {
        let state = self.inner.state.read();
        if state.held.contains_key(&p) {
            return Some(self.inner.config.node.clone());
        }
        state
            .owners
            .get(p as usize)
            .cloned()
            .flatten()
            .map(|o| o.node)
    }

    /// Which holding of partition `p` this node has now (`None`: it does
    /// not hold it).
    pub(crate) fn holding(&self, p: u32) -> Option<u64> {
        self.inner.state.read().held.get(&p).map(|h| h.holding)
    }

    /// The store traffic of the node itself (the metadata: membership,
    /// leases, the catalog; the connection's settings checks), apart from
    /// its partitions', if the store counts it.
    pub(crate) fn own_store_io(&self) -> Option<acts_store::StoreIo> {
        let meta = self.inner.meta.io()?;
        Some(meta + self.inner.family.io().unwrap_or_default())
    }

    /// The partitions this node holds, in order.
    pub fn held(&self) -> Vec<u32> {
        self.inner.state.read().held.keys().copied().collect()
    }

    fn member_record(&self, now: i64) -> Member {
        let state = self.inner.state.read();
        Member {
            node: self.inner.config.node.clone(),
            addr: self.inner.config.advertise.clone(),
            until: now + ttl_ms(&self.inner.config),
            started_at: self.inner.started_at,
            partitions: state
                .held
                .iter()
                .map(|(p, h)| HeldPartition {
                    partition: *p,
                    epoch: h.epoch,
                })
                .collect(),
        }
    }

    /// One round of membership and ownership: renews this node's
    /// heartbeat and its partitions' leases (dropping a partition whose
    /// engine was fenced off), reads the live members, takes every
    /// partition it should own whose lease is free and hands over every
    /// one it should no longer own, applies new catalog changes, and
    /// refreshes its map of owners.
    pub async fn tick(&self) -> Result<(), ClusterError> {
        let _one = self.inner.tick_lock.lock().await;
        if self.inner.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        let config = &self.inner.config;
        self.drop_lost_partitions().await;
        let now = config.clock.now_millis();
        self.inner.meta.heartbeat(&self.member_record(now)).await?;
        let members = self.inner.meta.members().await?;
        let live: Vec<Member> = members.into_iter().filter(|m| m.until > now).collect();
        let mut ids: Vec<String> = live.iter().map(|m| m.node.clone()).collect();
        if !ids.contains(&config.node) {
            ids.push(config.node.clone());
        }
        let mut changed = false;
        for p in 0..self.inner.info.partitions {
            let mine = owner_of(p, &ids) == Some(config.node.as_str());
            let held = self.inner.state.read().held.contains_key(&p);
            if mine && !held {
                match self.take(p).await {
                    Ok(true) => changed = true,
                    Ok(false) => {}
                    Err(e) => {
                        warn!(partition = p, error = %e, "taking the partition failed; trying again")
                    }
                }
            } else if !mine && held {
                self.hand_over(p).await;
                changed = true;
            }
        }
        self.sync_catalog().await?;
        let now = config.clock.now_millis();
        if changed {
            self.inner.meta.heartbeat(&self.member_record(now)).await?;
        }
        self.refresh_owners(live, now);
        Ok(())
    }

    /// Applies the catalog changes each held partition has not applied.
    pub(crate) async fn sync_catalog(&self) -> Result<(), ClusterError> {
        let seq = self.inner.meta.catalog_seq().await?;
        let behind: Vec<(u32, Held)> = self
            .inner
            .state
            .read()
            .held
            .iter()
            .filter(|(_, h)| h.synced < seq)
            .map(|(p, h)| (*p, h.clone()))
            .collect();
        let Some(oldest) = behind.iter().map(|(_, h)| h.synced).min() else {
            return Ok(());
        };
        let since = self.inner.meta.changes_since(oldest, seq).await?;
        for (p, held) in behind {
            let exec = held.engine.executor();
            let mut done = held.synced;
            if since.whole {
                // Behind the snapshot: caught up as a takeover is.
                match catalog::catch_up(&exec, p, &since.changes).await {
                    Ok(()) => done = seq,
                    Err(source) => {
                        warn!(partition = p, error = %source, "applying the catalog failed; trying again")
                    }
                }
            } else {
                for (s, op) in since.changes.iter().filter(|(s, _)| *s > held.synced) {
                    if let Err(source) = catalog::apply(&exec, p, op).await {
                        warn!(partition = p, error = %source, "applying the catalog failed; trying again");
                        break;
                    }
                    done = *s;
                }
            }
            if let Some(h) = self.inner.state.write().held.get_mut(&p) {
                h.synced = h.synced.max(done);
            }
        }
        Ok(())
    }

    fn refresh_owners(&self, live: Vec<Member>, now: i64) {
        let me = &self.inner.config.node;
        let mut state = self.inner.state.write();
        let mut owners: Vec<Option<Owner>> = vec![None; self.inner.info.partitions as usize];
        for m in live.iter().filter(|m| &m.node != me) {
            for h in &m.partitions {
                let Some(slot) = owners.get_mut(h.partition as usize) else {
                    continue;
                };
                if slot.as_ref().is_none_or(|o| o.epoch < h.epoch) {
                    *slot = Some(Owner {
                        node: m.node.clone(),
                        addr: m.addr.clone(),
                        epoch: h.epoch,
                    });
                }
            }
        }
        for (p, h) in &state.held {
            owners[*p as usize] = Some(Owner {
                node: me.clone(),
                addr: self.inner.config.advertise.clone(),
                epoch: h.epoch,
            });
        }
        state.owners = owners;
        state.live = live;
        state.last_tick = now;
    }

    /// Leaves the cluster cleanly: stops ticking, removes the heartbeat
    /// and hands every partition over at once (each engine finishes its
    /// writes and lets its lease expire now), so the other nodes take them
    /// on their next tick.
    pub async fn leave(&self) {
        let _one = self.inner.tick_lock.lock().await;
        self.inner.closed.store(true, Ordering::Release);
        if let Some(t) = self.inner.ticker.lock().take() {
            t.abort();
        }
        if let Err(e) = self.inner.meta.leave(&self.inner.config.node).await {
            warn!(error = %e, "removing this node's heartbeat failed; it expires by itself");
        }
        let held = std::mem::take(&mut self.inner.state.write().held);
        for (p, h) in held {
            debug!(partition = p, "closing the partition");
            h.engine.close().await;
        }
    }

    /// Stops this node without handing anything over, as if it died: the
    /// heartbeat stays until it expires and the partitions stay leased
    /// until their leases expire (tests).
    pub async fn halt(&self) {
        self.inner.closed.store(true, Ordering::Release);
        if let Some(t) = self.inner.ticker.lock().take() {
            t.abort();
        }
        let held = std::mem::take(&mut self.inner.state.write().held);
        for (_, h) in held {
            h.engine.storage().close_without_handover().await;
        }
    }
}

/// The lease TTL in ms.
pub(crate) fn ttl_ms(config: &ClusterConfig) -> i64 {
    i64::try_from(config.lease_ttl.as_millis()).unwrap_or(i64::MAX)
}
