//! [`Engine::channels`], [`Engine::storage`], [`Engine::runtime`]: the
//! engine's handles by concern. `Engine`'s own methods are the
//! reference's — `builder`, `executor`, `channel`, `close` — and these
//! accessors.

use std::sync::Arc;

use acts_store::KvStore;

use crate::engine::api::channel::Channel;
use crate::engine::api::engine::{Engine, EngineStats};
use crate::engine::kernel::cache::Cache;
#[cfg(feature = "testing")]
use crate::engine::kernel::cache::ProcHandle;
use crate::engine::services::sealed::SealedData;
use crate::engine::types::error::EngineError;
use crate::engine::types::filter::ChannelOptions;
use crate::time::Clock;

impl Engine {
    /// Durable channels: opening one, acknowledging a message, removing one.
    pub fn channels(&self) -> ChannelOps<'_> {
        ChannelOps { engine: self }
    }
}

/// Durable channels: opening one, acknowledging a message, removing one. From [`Engine::channels`].
#[derive(Debug, Clone, Copy)]
pub struct ChannelOps<'a> {
    engine: &'a Engine,
}

impl<'a> ChannelOps<'a> {
    /// A durable channel with the stable id `id`: every message that
    /// passes its filters is recorded as a delivery (in the batch of the
    /// transition that produced it) until the client acks it
    /// ([`Channel::ack`]); unacked deliveries are re-sent on the retry
    /// timer, up to the configured tries, then marked failed (see
    /// [`DeliveryOps::list`]). The registration survives restarts:
    /// deliveries keep being recorded while the client is away, and
    /// [`Channel::resend_pending`] hands them over when it is back.
    pub async fn durable(self, id: &str, options: ChannelOptions) -> Result<Channel, EngineError> {
        self.engine.durable_channel(id, options).await
    }

    /// Acknowledges message `msg_id` on durable channel `channel` without
    /// a handle on it (for stateless clients, e.g. over HTTP), as
    /// [`Channel::ack`] does.
    pub async fn ack(self, channel: &str, msg_id: &str) -> Result<(), EngineError> {
        self.engine.ack(channel, msg_id).await
    }

    /// Forgets durable channel `id` and its deliveries.
    pub async fn remove(self, id: &str) -> Result<bool, EngineError> {
        self.engine.remove_channel(id).await
    }
}

impl Engine {
    /// The store under the engine: what it keeps, its lease and fence, flushing, readiness.
    pub fn storage(&self) -> StorageOps<'_> {
        StorageOps { engine: self }
    }
}

/// The store under the engine: what it keeps, its lease and fence, flushing, readiness. From [`Engine::storage`].
#[derive(Debug, Clone, Copy)]
pub struct StorageOps<'a> {
    engine: &'a Engine,
}

impl<'a> StorageOps<'a> {
    /// The store.
    pub fn store(self) -> Arc<dyn KvStore> {
        self.engine.store()
    }

    /// What an acknowledged write survives on this engine's store, as it
    /// is set up now.
    pub fn persistence(self) -> acts_store::Persistence {
        self.engine.persistence()
    }

    /// The traffic of this engine's store so far, if it counts it
    /// ([`KvStore::io`](acts_store::KvStore::io): Redis).
    pub fn store_io(self) -> Option<acts_store::StoreIo> {
        self.engine.store_io()
    }

    /// Resolves once every write queued so far is durable.
    pub async fn flush(self) -> Result<(), EngineError> {
        self.engine.flush().await
    }

    /// Whether the engine can acknowledge work now: `Err` saying why while
    /// it is closed or fenced, the store refuses writes (a Redis that
    /// evicts keys, a file broken by an I/O error that cannot be reopened
    /// yet), or its last commit failed and a probe commit fails too. What
    /// `/readyz` answers.
    pub async fn readiness(self) -> Result<(), EngineError> {
        self.engine.readiness().await
    }

    /// How many write batches wait in the writer's queue (not yet taken
    /// into a commit). A test hook (feature `testing`) for tests that order
    /// a write behind a held commit.
    #[cfg(feature = "testing")]
    pub fn queued_writes(self) -> usize {
        self.engine.queued_writes()
    }

    /// The writer's epoch: it moves when a process is marked removed. A
    /// test hook (feature `testing`) for tests that must know a removal
    /// has begun before they release a write held behind it.
    #[cfg(feature = "testing")]
    pub fn writer_epoch(self) -> u64 {
        self.engine.writer_epoch()
    }

    /// Whether this engine was fenced off its store: another node took
    /// the store's lease, the store refused a commit on the old epoch, and
    /// every later call fails with [`EngineError::Fenced`]. A cluster node
    /// drops such an engine (see `docs/CLUSTER.md`).
    pub fn is_fenced(self) -> bool {
        self.engine.is_fenced()
    }

    /// Who owns the store, as stored (`None`: no node ever took it).
    pub async fn lease(self) -> Result<Option<crate::engine::LeaseInfo>, EngineError> {
        self.engine.lease().await
    }

    /// Renews the store's lease now (with [`EngineConfig::lease`]; the
    /// engine renews it on its own too). Fails with
    /// [`EngineError::Fenced`] once another node has taken the store.
    pub async fn renew_lease(self) -> Result<(), EngineError> {
        self.engine.renew_lease().await
    }

    /// The epoch of the store's lease this engine holds (`None` without
    /// [`EngineConfig::lease`](crate::engine::EngineConfig::lease)).
    pub fn lease_epoch(self) -> Option<u64> {
        self.engine.lease_epoch()
    }

    /// Closes like [`close`](Engine::close) but keeps the store's lease
    /// until it expires, as if this node had died (no other node may take
    /// the store before then): for tests of a node's death.
    pub async fn close_without_handover(self) {
        self.engine.close_without_handover().await
    }
}

impl Engine {
    /// What the engine is doing and its own work: figures, idleness, resuming, housekeeping, sealed data, gates.
    pub fn runtime(&self) -> RuntimeOps<'_> {
        RuntimeOps { engine: self }
    }
}

/// What the engine is doing and its own work: figures, idleness, resuming, housekeeping, sealed data, gates. From [`Engine::runtime`].
#[derive(Debug, Clone, Copy)]
pub struct RuntimeOps<'a> {
    engine: &'a Engine,
}

impl<'a> RuntimeOps<'a> {
    /// What the engine has done since it started and holds now (for
    /// metrics): transitions, the writer's commits, admission and memory.
    pub fn stats(self) -> EngineStats {
        self.engine.stats()
    }

    /// Whether the engine has nothing in progress: no background work
    /// (loads, application packages, subflow returns, timer handlers), no
    /// write queued, and no timer due now. Tools that drive processes step
    /// by step (the CLI's scripted runs) wait for this between steps.
    pub fn is_idle(self) -> bool {
        self.engine.is_idle()
    }

    /// Whether one instance per pid held (feature `testing`, a hook for
    /// tests and the simulator, not API): the doubles noted as instances
    /// were built, and — call it when the engine is idle — any pid with
    /// more than one live instance or a live one outside the resident set.
    /// Empty when the rule held.
    #[cfg(feature = "testing")]
    pub fn instance_faults(self) -> Vec<String> {
        self.engine.instance_faults()
    }

    /// What the engine still holds for processes (feature `testing`, a
    /// hook for tests and the simulator, not API): admitted, resident,
    /// parked and queued pids, stalled transitions, armed timers, stuck
    /// reports and instances anyone still holds. Empty when nothing is in
    /// flight and every held thing was let go — memory back at its
    /// baseline.
    #[cfg(feature = "testing")]
    pub fn residue(self) -> Vec<String> {
        self.engine.residue()
    }

    /// The resident set.
    pub fn cache(self) -> &'a Cache {
        self.engine.cache()
    }

    /// The one instance of process `pid`: resident, or loaded from the
    /// store (concurrent callers share one load). `None` when no such
    /// process exists. A test hook (feature `testing`); clients use the
    /// [`Executor`].
    #[cfg(feature = "testing")]
    pub async fn process_handle(self, pid: &str) -> Result<Option<Arc<ProcHandle>>, EngineError> {
        self.engine.process_handle(pid).await
    }

    /// When the earliest timer of process `pid` is due (a step timeout).
    pub fn next_timer_of(self, pid: &str) -> Option<i64> {
        self.engine.next_timer_of(pid)
    }

    /// The clock.
    pub fn clock(self) -> Arc<dyn Clock> {
        self.engine.clock()
    }

    /// Resumes what the store holds: in-flight processes oldest first up to
    /// the cap (the rest queued for free slots), then parked ones, then
    /// outbox records; returns when that is done. `start` does the same in
    /// the background unless turned off.
    ///
    /// It counts the in-flight processes afresh: call it on an engine built
    /// with `resume_on_start(false)` before that engine takes work. The
    /// running bulk jobs go on too (in the background).
    pub async fn resume(self) -> Result<(), EngineError> {
        self.engine.resume().await
    }

    /// Starts parked processes into free slots, oldest first (reads the
    /// store for parked rows; a pass already running or a full set makes
    /// this return at once).
    pub async fn start_parked(self) -> Result<(), EngineError> {
        self.engine.start_parked().await
    }

    /// Runs the housekeeping pass now (re-send due deliveries, drop
    /// expired sealed-data entries, sweep settled processes), as the timer
    /// does every `tick`.
    pub async fn housekeeping(self) {
        self.engine.housekeeping().await
    }

    /// The sealed-data registry (external data sealed into tasks).
    pub fn sealed_data(self) -> &'a SealedData {
        self.engine.sealed_data()
    }

    /// The concurrency and rate keys of steps and acts in use: how many
    /// tasks of each hold a slot and how many wait.
    pub fn gate_keys(self) -> Vec<crate::engine::api::GateKeyUse> {
        self.engine.gate_keys()
    }

    /// Answers a call of the gate protocol another engine of this store
    /// sent through its [`GateCourier`](crate::engine::GateCourier) (a
    /// cluster's nodes carry them between partitions; see
    /// [`EngineConfig::gate_courier`](crate::engine::EngineConfig)).
    pub async fn gate_call(
        self,
        call: serde_json::Value,
    ) -> Result<serde_json::Value, EngineError> {
        self.engine.gate_call(call).await
    }
}
