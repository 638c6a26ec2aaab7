//! One cluster run: the nodes join and the model is deployed, then
//! seeded events — client calls through any node, ticks, time passing,
//! clock skew, freezes (before a commit reaches the store or before its
//! answer comes back), cuts from the store or from the clients, crashes
//! and restarts, joins and clean leaves, replication and store failovers
//! — with the fence watched after every event; then every fault heals,
//! the clients finish their processes, and the ownership must converge
//! (`check.rs` judges the end).
//!
//! May use: the cluster, acts-core, and this room's `nodes`, `plan`, `store`
//! and `work`.

use std::collections::BTreeMap;
use std::sync::Arc;

use acts_core::engine::EngineError;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::task::JoinHandle;

use super::nodes::{SimNode, TTL};
use super::store::SharedStore;
use super::work::{Acted, Work};
use super::{ClusterPlan, PARTITIONS};
use crate::sim::Trace;

/// A client call on its way: which process, through which node.
struct InFlight {
    pid: String,
    via: String,
    call: JoinHandle<Result<Acted, EngineError>>,
}

/// What a run did, for the checks.
pub struct World {
    pub store: Arc<SharedStore>,
    pub nodes: Vec<SimNode>,
    pub work: Arc<Work>,
    pub now: i64,
    pub trace: Trace,
    /// Every call that returned `Ok`, by process, in order.
    pub acks: BTreeMap<String, Vec<Acted>>,
    /// The processes a client saw ended.
    pub ended: BTreeMap<String, bool>,
    /// Batches a failover lost.
    pub dropped: usize,
    /// Failovers.
    pub failovers: usize,
    in_flight: Vec<InFlight>,
}

impl World {
    /// The nodes that run (not crashed, not left).
    pub fn running(&self) -> impl Iterator<Item = &SimNode> {
        self.nodes.iter().filter(|n| n.node.is_some())
    }

    fn set_time(&mut self, by: i64) {
        self.now += by;
        for n in &self.nodes {
            n.set_time(self.now);
        }
    }

    /// Lets every node's engines run until they rest (bounded: a frozen
    /// node's engine never rests, and need not).
    pub async fn settle(&mut self) {
        for _ in 0..32 {
            tokio::task::yield_now().await;
        }
        for _ in 0..4000 {
            let busy = self
                .nodes
                .iter()
                .filter(|n| !n.frozen)
                .filter_map(|n| n.node.as_ref())
                .any(|node| {
                    node.held()
                        .into_iter()
                        .filter_map(|p| node.engine(p))
                        .any(|e| !e.runtime().is_idle())
                });
            if !busy && self.in_flight.iter().all(|c| c.call.is_finished()) {
                break;
            }
            tokio::task::yield_now().await;
        }
        self.collect().await;
    }

    /// Takes the answers of the calls that finished.
    async fn collect(&mut self) {
        let (done, open): (Vec<InFlight>, Vec<InFlight>) = std::mem::take(&mut self.in_flight)
            .into_iter()
            .partition(|c| c.call.is_finished());
        self.in_flight = open;
        for c in done {
            match c.call.await {
                Ok(Ok(acted)) => {
                    self.trace
                        .note(format!("{} via {}: {acted:?}", c.pid, c.via));
                    if acted == Acted::Ended {
                        self.ended.insert(c.pid.clone(), true);
                    }
                    if matches!(acted, Acted::Started | Acted::Completed { .. }) {
                        self.acks.entry(c.pid).or_default().push(acted);
                    }
                }
                Ok(Err(e)) => self.trace.note(format!("{} via {}: {e}", c.pid, c.via)),
                Err(e) => self
                    .trace
                    .note(format!("{} via {}: the call died: {e}", c.pid, c.via)),
            }
        }
    }

    /// A client sends the next call for `pid` through node `via`, which
    /// runs it on its engine of the partition or forwards it to the node
    /// its map names (once; a node that does not hold the partition, is
    /// frozen or cut from clients answers nothing).
    fn send(&mut self, pid: &str, via: usize) {
        let Some(entry) = self.nodes[via].reachable() else {
            self.trace
                .note(format!("{pid} via {}: no answer", self.nodes[via].id));
            return;
        };
        let p = entry.partition_of(pid);
        let target = entry.owner(p);
        let engine = target
            .and_then(|t| self.nodes.iter().find(|n| n.id == t))
            .and_then(SimNode::reachable)
            .and_then(|n| n.engine(p));
        let Some(engine) = engine else {
            self.trace.note(format!(
                "{pid} via {}: partition {p} has no reachable owner",
                self.nodes[via].id
            ));
            return;
        };
        let work = self.work.clone();
        let pid_owned = pid.to_owned();
        let call = tokio::spawn(async move { work.act(&engine.executor(), &pid_owned).await });
        self.in_flight.push(InFlight {
            pid: pid.to_owned(),
            via: self.nodes[via].id.clone(),
            call,
        });
    }

    async fn tick(&mut self, i: usize) {
        let n = &self.nodes[i];
        if n.frozen {
            return;
        }
        if let Some(node) = &n.node
            && let Err(e) = node.tick().await
        {
            self.trace.note(format!("tick {}: {e}", n.id));
        }
    }

    /// Ticks every running node that is not frozen.
    pub async fn tick_all(&mut self) {
        for i in 0..self.nodes.len() {
            self.tick(i).await;
        }
    }

    /// Every fault ends: thawed, reconnected, the crashed restarted, all
    /// replicated.
    pub async fn heal(&mut self) -> Result<(), String> {
        self.trace.note("heal");
        for n in &mut self.nodes {
            n.thaw();
            n.cut_store(false);
            n.unreachable = false;
        }
        self.settle().await;
        for i in 0..self.nodes.len() {
            if self.nodes[i].crashed {
                let store = self.store.clone();
                self.nodes[i]
                    .join(&store, PARTITIONS)
                    .await
                    .map_err(|e| format!("{} does not restart: {e}", self.nodes[i].id))?;
            }
        }
        self.store.replicate(1.0).await.map_err(|e| e.to_string())
    }

    /// The clients finish every process (through random nodes, as time
    /// passes and the nodes tick); `false` if one did not end.
    pub async fn finish(&mut self, rng: &mut StdRng) -> bool {
        for _ in 0..200 {
            self.settle().await;
            let open: Vec<String> = self
                .work
                .pids
                .iter()
                .filter(|p| !self.ended.get(*p).copied().unwrap_or(false))
                .cloned()
                .collect();
            if open.is_empty() && self.in_flight.is_empty() {
                return true;
            }
            self.set_time(500);
            self.tick_all().await;
            for pid in open {
                let via = rng.random_range(0..self.nodes.len());
                self.send(&pid, via);
            }
        }
        false
    }

    /// Time passes by three TTLs, every node ticking every third of it
    /// (as their background tickers would).
    pub async fn converge(&mut self) {
        for _ in 0..9 {
            self.set_time(i64::try_from(TTL.as_millis() / 3).unwrap_or(1666));
            self.tick_all().await;
            self.settle().await;
        }
    }
}

/// Sets up the run: the nodes, the model deployed through the first
/// (alone, holding every partition), then the others joining.
pub async fn setup(seed: u64, plan: &ClusterPlan, work: Arc<Work>) -> Result<World, String> {
    let store = SharedStore::new(plan.wait_replicas, plan.plant);
    let now = crate::rows::START;
    let mut nodes: Vec<SimNode> = (0..=plan.nodes)
        .map(|i| SimNode::new(format!("n{}", i + 1), now))
        .collect();
    let mut rng = StdRng::seed_from_u64(seed ^ 0x736b_6577);
    for n in &mut nodes {
        n.skew = rng.random_range(-plan.max_skew_ms..=plan.max_skew_ms);
        n.set_time(now);
    }
    nodes[0].join(&store, PARTITIONS).await?;
    if let Some(first) = &nodes[0].node {
        deploy(first, &work.model).await?;
    }
    // The last node is the spare that joins and leaves during the run.
    for n in nodes.iter_mut().take(plan.nodes).skip(1) {
        n.join(&store, PARTITIONS).await?;
    }
    store.replicate(1.0).await.map_err(|e| e.to_string())?;
    let mut world = World {
        store,
        nodes,
        ended: work.pids.iter().map(|p| (p.clone(), false)).collect(),
        work,
        now,
        trace: Trace::default(),
        acks: BTreeMap::new(),
        dropped: 0,
        failovers: 0,
        in_flight: Vec::new(),
    };
    world.set_time(TTL.as_millis() as i64 * 2);
    world.tick_all().await;
    world.settle().await;
    Ok(world)
}

/// One seeded event.
pub async fn event(world: &mut World, rng: &mut StdRng, plan: &ClusterPlan) -> Result<(), String> {
    let i = rng.random_range(0..world.nodes.len());
    let id = world.nodes[i].id.clone();
    let roll = rng.random_range(0..100);
    match roll {
        0..45 => {
            let pid = world.work.pids[rng.random_range(0..world.work.pids.len())].clone();
            world.send(&pid, i);
        }
        45..58 => {
            world.tick(i).await;
        }
        58..70 => {
            // Time passes; mostly the nodes' tickers run (each every
            // third of the TTL), in a seeded order.
            let by = rng.random_range(100..=2500);
            world.trace.note(format!("time +{by} ms"));
            world.set_time(by);
            if rng.random_bool(0.7) {
                let first = rng.random_range(0..world.nodes.len());
                for k in 0..world.nodes.len() {
                    world.tick((first + k) % world.nodes.len()).await;
                }
            }
        }
        70..75 if world.nodes[i].node.is_some() && !world.nodes[i].frozen => {
            let answers = rng.random_bool(0.5);
            world.trace.note(format!(
                "freeze {id} ({})",
                if answers {
                    "answers held"
                } else {
                    "sends held"
                }
            ));
            world.nodes[i].freeze(answers);
        }
        75..81 if world.nodes[i].frozen => {
            world.trace.note(format!("thaw {id}"));
            world.nodes[i].thaw();
        }
        81..84 => {
            let cut = !world.nodes[i].link.state().cut;
            world.trace.note(format!(
                "{id} store link {}",
                if cut { "cut" } else { "healed" }
            ));
            world.nodes[i].cut_store(cut);
        }
        84..87 => {
            let n = &mut world.nodes[i];
            n.unreachable = !n.unreachable;
            world
                .trace
                .note(format!("{id} reachable by clients: {}", !n.unreachable));
        }
        87..89 if world.nodes[i].node.is_some() => {
            world.trace.note(format!("crash {id}"));
            world.nodes[i].crash().await;
        }
        89..92 if world.nodes[i].crashed || (i == plan.nodes && world.nodes[i].node.is_none()) => {
            world.trace.note(format!("start {id}"));
            let store = world.store.clone();
            if let Err(e) = world.nodes[i].join(&store, PARTITIONS).await {
                world.trace.note(format!("{id} does not start: {e}"));
            }
        }
        92..93
            if world.nodes[i].node.is_some()
                && !world.nodes[i].frozen
                && !world.nodes[i].link.state().cut =>
        {
            world.trace.note(format!("{id} leaves"));
            world.nodes[i].leave().await;
            world.nodes[i].crashed = i < plan.nodes;
        }
        93..97 if !plan.wait_replicas => {
            let share = rng.random_range(0.0..=1.0);
            world
                .store
                .replicate(share)
                .await
                .map_err(|e| e.to_string())?;
        }
        97..99 => {
            let keep = if plan.wait_replicas {
                1.0
            } else {
                rng.random_range(0.0..=1.0)
            };
            let lost = world
                .store
                .failover(keep)
                .await
                .map_err(|e| e.to_string())?;
            world.failovers += 1;
            world.dropped += lost;
            world
                .trace
                .note(format!("store failover: {lost} unreplicated batches lost"));
        }
        99 => {
            let skew = rng.random_range(-plan.max_skew_ms..=plan.max_skew_ms);
            world.trace.note(format!("{id} clock skew {skew} ms"));
            world.nodes[i].skew = skew;
        }
        _ => {}
    }
    world.settle().await;
    Ok(())
}

/// Deploys `model` through `node`'s API (the catalog's own path).
async fn deploy(node: &acts_cluster::ClusterNode, model: &str) -> Result<(), String> {
    use tower::ServiceExt;
    let req = axum::http::Request::post("/api/v1/models")
        .header("host", "127.0.0.1")
        .header("content-type", "application/yaml")
        .body(axum::body::Body::from(model.to_owned()))
        .map_err(|e| e.to_string())?;
    let resp = node
        .router(None)
        .oneshot(req)
        .await
        .map_err(|e| e.to_string())?;
    if resp.status().is_success() {
        Ok(())
    } else {
        let body = axum::body::to_bytes(resp.into_body(), 64 * 1024)
            .await
            .unwrap_or_default();
        Err(format!("the deploy: {}", String::from_utf8_lossy(&body)))
    }
}
