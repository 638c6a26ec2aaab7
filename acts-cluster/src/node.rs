//! [`ClusterNode`]: one engine node of a cluster — its membership, the
//! partitions it owns (one leased, fenced engine each), and the periodic
//! [`tick`](ClusterNode::tick) that keeps both in step with the cluster.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use acts::{Engine, EngineError, LeaseConfig, PidFilter, StoreFamily};
use acts_server::ServerOptions;
use axum::Router;
use parking_lot::{Mutex, RwLock};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::catalog;
use crate::config::ClusterConfig;
use crate::error::ClusterError;
use crate::meta::{ClusterInfo, HeldPartition, Member, Meta};
use crate::placement::{key_partition, owner_of, partition_of};

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
    family: StoreFamily,
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
    takings: std::sync::atomic::AtomicU64,
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

    /// Drops the partitions whose engine was fenced off (another node took
    /// them while this one was frozen or cut off) or lost its lease.
    async fn drop_lost_partitions(&self) {
        let held: Vec<(u32, Engine)> = self
            .inner
            .state
            .read()
            .held
            .iter()
            .map(|(p, h)| (*p, h.engine.clone()))
            .collect();
        for (p, engine) in held {
            let lost = if engine.is_fenced() {
                true
            } else if self.inner.config.background {
                false
            } else {
                matches!(
                    engine.renew_lease().await,
                    Err(EngineError::Fenced(_) | EngineError::LeaseHeld { .. })
                )
            };
            if lost {
                warn!(
                    partition = p,
                    "another node took this partition over; stepping down from it"
                );
                self.inner.state.write().held.remove(&p);
                engine.close().await;
            }
        }
    }

    /// Takes partition `p` if its lease is free: starts its engine (which
    /// takes the lease, raising the epoch, and resumes the partition's
    /// in-flight processes as a restart does) and brings its models up to
    /// the catalog. `Ok(false)`: another node's lease still runs.
    async fn take(&self, p: u32) -> Result<bool, ClusterError> {
        let config = &self.inner.config;
        let store = self.inner.family.member(&format!("p{p}")).await?;
        let mut engine_config = config.engine.clone();
        engine_config.lease = Some({
            let mut v = LeaseConfig::new(&config.node);
            v.ttl = config.lease_ttl;
            v.background_renewal = config.background;
            v
        });
        // Schedules fire once per cluster: on partition 0's owner.
        engine_config.run_schedules = config.engine.run_schedules && p == 0;
        let partitions = self.inner.info.partitions;
        engine_config.pid_filter = Some(PidFilter::new(move |pid| {
            partition_of(pid, partitions) == p
        }));
        // The concurrency keys hashing here are counted here only.
        engine_config.key_home = Some(PidFilter::new(move |key| {
            key_partition(key, partitions) == p
        }));
        // A step's or act's key is kept by the partition it hashes to;
        // the others ask it (`gates.rs`).
        engine_config.gate_courier = Some(courier(&self.inner));
        let started = config
            .packages
            .iter()
            .fold(Engine::builder(), |b, p| b.package(p.clone()))
            .store(store)
            .clock(config.clock.clone())
            .config(engine_config)
            .start()
            .await;
        let engine = match started {
            Ok(engine) => engine,
            Err(EngineError::LeaseHeld {
                owner,
                remaining_ms,
                ..
            }) => {
                debug!(partition = p, owner = %owner, remaining_ms, "partition still leased");
                return Ok(false);
            }
            Err(source) => {
                return Err(ClusterError::Engine {
                    partition: p,
                    source,
                });
            }
        };
        // Until it is held, nothing else closes this engine: on any error
        // it is closed here (handing its lease over), never left running.
        let catalog = async {
            let seq = self.inner.meta.catalog_seq().await?;
            // (the compacted catalog: its snapshot and what came after)
            let changes = self.inner.meta.changes_since(0, seq).await?.changes;
            catalog::catch_up(&engine.executor(), p, &changes)
                .await
                .map_err(|source| ClusterError::Engine {
                    partition: p,
                    source,
                })?;
            Ok::<_, ClusterError>((seq, changes))
        };
        let (seq, changes) = match catalog.await {
            Ok(c) => c,
            Err(e) => {
                engine.close().await;
                return Err(e);
            }
        };
        let synced = changes.last().map_or(seq, |(s, _)| (*s).max(seq));
        let epoch = engine.lease_epoch().unwrap_or(0);
        let router = acts_server::router_with(engine.clone(), self.inner.server.clone());
        info!(partition = p, epoch, "took the partition");
        let holding = self.inner.takings.fetch_add(1, Ordering::Relaxed);
        self.inner.state.write().held.insert(
            p,
            Held {
                engine,
                router,
                epoch,
                synced,
                holding,
            },
        );
        Ok(true)
    }

    /// Hands partition `p` over: closes its engine (the writes in flight
    /// finish; the lease expires at once, so its new owner takes it on its
    /// next tick).
    async fn hand_over(&self, p: u32) {
        let held = self.inner.state.write().held.remove(&p);
        if let Some(held) = held {
            info!(partition = p, "handing the partition over");
            held.engine.close().await;
        }
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
            h.engine.close_without_handover().await;
        }
    }
}

/// The lease TTL in ms.
pub(crate) fn ttl_ms(config: &ClusterConfig) -> i64 {
    i64::try_from(config.lease_ttl.as_millis()).unwrap_or(i64::MAX)
}

/// The courier of the engines of `node`'s partitions.
fn courier(node: &Arc<Inner>) -> acts::GateCourier {
    acts::GateCourier::new(Arc::new(Route {
        node: Arc::downgrade(node),
    }))
}

struct Route {
    node: Weak<Inner>,
}

impl acts::GateRoute for Route {
    fn to_key_home(&self, key: &str, call: serde_json::Value) -> acts::GateReply {
        let node = self.node.clone();
        let key = key.to_owned();
        Box::pin(async move {
            let node = alive(&node)?;
            let p = key_partition(&key, node.partitions());
            node.gate_call(p, call).await
        })
    }

    fn to_process(&self, pid: &str, call: serde_json::Value) -> acts::GateReply {
        let node = self.node.clone();
        let pid = pid.to_owned();
        Box::pin(async move {
            let node = alive(&node)?;
            let p = partition_of(&pid, node.partitions());
            node.gate_call(p, call).await
        })
    }
}

fn alive(node: &Weak<Inner>) -> Result<ClusterNode, String> {
    node.upgrade()
        .map(|inner| ClusterNode { inner })
        .ok_or_else(|| "the node has left the cluster".to_owned())
}
