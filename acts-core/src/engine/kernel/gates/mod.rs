//! [`Gates`]: the kernel's part that keeps the gates of steps and acts
//! (their `concurrency:` and `rate:`) — the slots and buckets of the keys
//! this engine keeps ([`ActGates`](act_gates::ActGates)), and, on a
//! cluster's engines, both sides of the protocol that asks a key's home
//! for a place (`courier.rs`, `remote.rs`). `local.rs` is the part's side
//! of one engine's gates: asking inside a transition, releasing what a
//! committed transition ended, opening the tasks let through, the rate
//! timer and the count of gated tasks at a start.
//!
//! The part holds its own state (private) and reaches the engine only
//! through the capability it is built with, [`GateHost`]: run a
//! transition of process P (to open a task let through), read P, write
//! a seat row, arm the gate timer, spawn counted work; it holds the
//! engine's clock itself. It never names the kernel.
//!
//! May use: `fair_queue` (the waiters' order).

pub(crate) mod act_gates;
pub(crate) mod courier;
mod local;
mod remote;
mod token_bucket;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

use acts_store::{BatchOp, KvStore};
use async_trait::async_trait;

use crate::scheduler::{GatePass, Process, Services};
use crate::time::Clock;

use crate::engine::types::error::EngineError;

use act_gates::{ActGates, GateKeyUse};
use courier::{GateCourier, RemoteGates};

pub(crate) use act_gates::NOT_ON_A_CLUSTER;

/// A change a gate makes to a process, run as one transition of it: what
/// the task is then.
pub(crate) type GateChange = Box<dyn FnOnce(&mut Process, Services<'_>) -> GatePass + Send>;

/// A look a gate takes at a process, under its lane.
pub(crate) type GateRead = Box<dyn FnOnce(&Process) -> GatePass + Send>;

/// Work the gates start in the background (counted as the engine's).
pub(crate) type GateWork = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What the gates need of the engine (the kernel implements it).
#[async_trait]
pub(crate) trait GateHost: Send + Sync + 'static {
    /// The gates themselves (for work spawned with an owned host).
    fn gates(&self) -> &Gates;
    /// Whether the engine closed (retries end; a restart carries on from
    /// the rows).
    fn is_closed(&self) -> bool;
    /// Runs `work` in the background, counted until it ends.
    fn spawn(&self, work: GateWork);
    /// Arms the gate timer at `due` (unless armed earlier; not once closed).
    fn arm_gate_timer(&self, due: i64);
    /// Writes `ops` (a seat row) as one batch of no process, durable when
    /// this returns.
    async fn write(&self, ops: Vec<BatchOp>) -> Result<(), EngineError>;
    /// Runs `change` on process `pid` as one transition (`None`: the
    /// process is gone).
    async fn transition_of(
        &self,
        pid: &str,
        change: GateChange,
    ) -> Result<Option<GatePass>, EngineError>;
    /// Reads process `pid` under its lane (`None`: it does not exist).
    async fn read_of(&self, pid: &str, read: GateRead) -> Result<Option<GatePass>, EngineError>;
}

/// The gates of steps and acts (see the module docs).
pub(crate) struct Gates {
    /// The slots and buckets of the keys kept here.
    table: parking_lot::Mutex<ActGates>,
    /// With a courier: the task's side's and the home's side's state.
    remote: RemoteGates,
    courier: Option<GateCourier>,
    /// This engine keeps only some keys and has no courier: gates are
    /// refused (each engine would count only its own processes).
    refused: bool,
    /// The store, for the rows the part reads back at a start.
    store: Arc<dyn KvStore>,
    /// The engine clock (read on the transition's path: held, not asked
    /// of the host).
    clock: Arc<dyn Clock>,
    host: Weak<dyn GateHost>,
}

impl Gates {
    /// The gates of an engine on `store` with `clock` (`courier`: its
    /// keys' homes may be other engines; `splits_store`: it keeps only
    /// some keys), reaching the engine through `host`.
    pub(crate) fn new(
        store: Arc<dyn KvStore>,
        clock: Arc<dyn Clock>,
        courier: Option<GateCourier>,
        splits_store: bool,
        host: Weak<dyn GateHost>,
    ) -> Self {
        Self {
            table: parking_lot::Mutex::new(ActGates::new(clock.now_millis())),
            clock,
            remote: RemoteGates::default(),
            refused: splits_store && courier.is_none(),
            courier,
            store,
            host,
        }
    }

    /// Whether gates are refused on this engine (it keeps only some keys
    /// and has no courier: [`NOT_ON_A_CLUSTER`] says why).
    pub(crate) fn refuses(&self) -> bool {
        self.refused
    }

    /// Whether gates are kept by their keys' homes (a courier is set).
    pub(crate) fn remote(&self) -> bool {
        self.courier.is_some()
    }

    /// Whether a task of `pid` is counted at a gate kept here.
    pub(crate) fn holds(&self, pid: &str) -> bool {
        self.table.lock().has(pid)
    }

    /// Every concurrency and rate key of steps and acts in use.
    pub(crate) fn keys(&self) -> Vec<GateKeyUse> {
        self.table.lock().keys()
    }

    /// The engine, while it lives.
    fn host(&self) -> Option<Arc<dyn GateHost>> {
        self.host.upgrade()
    }

    /// Runs `work` of the gates in the background, with the engine.
    fn spawn_with<F, Fut>(&self, work: F)
    where
        F: FnOnce(Arc<dyn GateHost>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        if let Some(host) = self.host() {
            let fut = work(host.clone());
            host.spawn(Box::pin(fut));
        }
    }

    /// Arms the gate timer for the next token a task waits for.
    fn arm_timer(&self) {
        let next = self.table.lock().next_token_at();
        if let (Some(due), Some(host)) = (next, self.host()) {
            host.arm_gate_timer(due);
        }
    }

    fn now(&self) -> i64 {
        self.clock.now_millis()
    }

    fn is_closed(&self) -> bool {
        self.host().is_none_or(|h| h.is_closed())
    }
}
