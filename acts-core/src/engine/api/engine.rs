//! [`Engine`]: a running engine and what it offers (executor, channels,
//! housekeeping, close); built by [`EngineBuilder`](super::builder::EngineBuilder).

use std::sync::Arc;

use acts_store::KvStore;

use crate::engine::api::channel::Channel;
use crate::engine::api::executor::Executor;
use crate::engine::kernel::cache::Cache;
#[cfg(feature = "testing")]
use crate::engine::kernel::cache::ProcHandle;
use crate::engine::kernel::hooks::ServiceHooks;
use crate::engine::kernel::shared::Kernel;
use crate::engine::services::sealed::SealedData;
use crate::engine::services::{On, Services};
use crate::engine::types::error::EngineError;
use crate::engine::types::filter::ChannelOptions;
use crate::time::Clock;

/// What an engine has done since it started and holds now
/// ([`Engine::stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EngineStats {
    /// Transitions committed.
    pub transitions: u64,
    /// The group-commit writer's commits, batches, failures and time.
    pub writer: crate::durable::WriterStats,
    /// Processes in flight (admitted).
    pub admitted: usize,
    /// Processes held in memory.
    pub resident: usize,
    /// Parked processes this engine knows of.
    pub parked: usize,
    /// Write batches waiting for a commit.
    pub queued_writes: usize,
    /// Script evaluations and the limits they hit.
    pub scripts: crate::script::ScriptStats,
    /// Processes the stuck detector found stuck at its last check.
    pub stuck: usize,
    /// Processes whose automatic transition (a resume, a continuation, a
    /// timer's tick) failed on the store and waits for the housekeeping
    /// tick to run again.
    pub stalled: usize,
}

/// A running engine. Cheap to clone; [`close`](Self::close) stops it.
#[derive(Clone)]
pub struct Engine {
    /// The kernel (the builder makes both).
    pub(super) rt: Arc<Kernel>,
    pub(super) services: Arc<Services>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("cache", &self.rt.cache())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// The client API.
    pub fn executor(&self) -> Executor {
        Executor::new(self.rt.clone(), self.services.clone())
    }

    /// A new channel with `options`' filters.
    pub fn channel(&self, options: ChannelOptions) -> Channel {
        Channel::open(
            self.rt.emitter(),
            &options,
            None,
            Arc::downgrade(&self.rt),
            Arc::downgrade(&self.services),
        )
    }

    /// A durable channel with the stable id `id`: every message that
    /// passes its filters is recorded as a delivery (in the batch of the
    /// transition that produced it) until the client acks it
    /// ([`Channel::ack`]); unacked deliveries are re-sent on the retry
    /// timer, up to the configured tries, then marked failed (see
    /// [`DeliveryOps::list`]). The registration survives restarts:
    /// deliveries keep being recorded while the client is away, and
    /// [`Channel::resend_pending`] hands them over when it is back.
    pub async fn durable_channel(
        &self,
        id: &str,
        options: ChannelOptions,
    ) -> Result<Channel, EngineError> {
        On::new(&self.rt, &self.services)
            .register_channel(id, &options)
            .await?;
        Ok(Channel::open(
            self.rt.emitter(),
            &options,
            Some(id.to_owned()),
            Arc::downgrade(&self.rt),
            Arc::downgrade(&self.services),
        ))
    }

    /// What the engine has done since it started and holds now (for
    /// metrics): transitions, the writer's commits, admission and memory.
    pub fn stats(&self) -> EngineStats {
        let cache = &self.rt.cache();
        EngineStats {
            transitions: self.rt.transitions(),
            writer: self.rt.writer().stats(),
            admitted: cache.count(),
            resident: cache.resident_count(),
            parked: cache.parked().len(),
            queued_writes: self.rt.writer().queued(),
            scripts: self.rt.scripts().stats(),
            stuck: self.services.stuck_reported().len(),
            stalled: self.rt.stalled_pids().len(),
        }
    }

    /// Whether one instance per pid held (feature `testing`, a hook for
    /// tests and the simulator, not API): the doubles noted as instances
    /// were built, and — call it when the engine is idle — any pid with
    /// more than one live instance or a live one outside the resident set.
    /// Empty when the rule held.
    #[cfg(feature = "testing")]
    pub fn instance_faults(&self) -> Vec<String> {
        self.rt.instances().faults(self.rt.cache())
    }

    /// What the engine still holds for processes (feature `testing`, a
    /// hook for tests and the simulator, not API): admitted, resident,
    /// parked and queued pids, stalled transitions, armed timers, stuck
    /// reports and instances anyone still holds. Empty when nothing is in
    /// flight and every held thing was let go — memory back at its
    /// baseline.
    #[cfg(feature = "testing")]
    pub fn residue(&self) -> Vec<String> {
        let rt = &self.rt;
        let mut out = Vec::new();
        let admitted = rt.cache().count();
        if admitted > 0 {
            out.push(format!("{admitted} admitted"));
        }
        let mut note = |what: &str, pids: Vec<String>| {
            if !pids.is_empty() {
                out.push(format!("{what}: {}", pids.join(", ")));
            }
        };
        note("resident", rt.cache().resident());
        note("parked", rt.cache().parked());
        note("waiting for a place", rt.cache().pending_resume());
        note("stalled", rt.stalled_pids());
        note("timers", rt.timer_pids());
        note("stuck reports", self.services.stuck_reported());
        note("instances held", rt.instances().held());
        out
    }

    /// Acknowledges message `msg_id` on durable channel `channel` without
    /// a handle on it (for stateless clients, e.g. over HTTP), as
    /// [`Channel::ack`] does.
    pub async fn ack(&self, channel: &str, msg_id: &str) -> Result<(), EngineError> {
        On::new(&self.rt, &self.services)
            .ack_delivery(channel, msg_id)
            .await
    }

    /// Forgets durable channel `id` and its deliveries.
    pub async fn remove_channel(&self, id: &str) -> Result<bool, EngineError> {
        On::new(&self.rt, &self.services).remove_channel(id).await
    }

    /// The sealed-data registry (external data sealed into tasks).
    pub fn sealed_data(&self) -> &SealedData {
        self.services.sealed()
    }

    /// Runs the housekeeping pass now (re-send due deliveries, drop
    /// expired sealed-data entries, sweep settled processes), as the timer
    /// does every `tick`.
    pub async fn housekeeping(&self) {
        self.services.housekeeping(&self.rt, true).await;
    }

    /// Renews the store's lease now (with [`EngineConfig::lease`]; the
    /// engine renews it on its own too). Fails with
    /// [`EngineError::Fenced`] once another node has taken the store.
    pub async fn renew_lease(&self) -> Result<(), EngineError> {
        self.rt.check_open()?;
        On::new(&self.rt, &self.services).renew_lease().await
    }

    /// Who owns the store, as stored (`None`: no node ever took it).
    pub async fn lease(&self) -> Result<Option<crate::engine::LeaseInfo>, EngineError> {
        Ok(On::new(&self.rt, &self.services)
            .read_lease()
            .await?
            .map(Into::into))
    }

    /// The concurrency and rate keys of steps and acts in use: how many
    /// tasks of each hold a slot and how many wait.
    pub fn gate_keys(&self) -> Vec<crate::engine::api::GateKeyUse> {
        self.rt.gates().keys()
    }

    /// Answers a call of the gate protocol another engine of this store
    /// sent through its [`GateCourier`](crate::engine::GateCourier) (a
    /// cluster's nodes carry them between partitions; see
    /// [`EngineConfig::gate_courier`](crate::engine::EngineConfig)).
    pub async fn gate_call(
        &self,
        call: serde_json::Value,
    ) -> Result<serde_json::Value, EngineError> {
        self.rt.check_open()?;
        self.rt.gates().call(call).await
    }

    /// The resident set.
    pub fn cache(&self) -> &Cache {
        self.rt.cache()
    }

    /// The one instance of process `pid`: resident, or loaded from the
    /// store (concurrent callers share one load). `None` when no such
    /// process exists. A test hook (feature `testing`); clients use the
    /// [`Executor`].
    #[cfg(feature = "testing")]
    pub async fn process_handle(&self, pid: &str) -> Result<Option<Arc<ProcHandle>>, EngineError> {
        self.rt.handle(pid).await
    }

    /// The store.
    pub fn store(&self) -> Arc<dyn KvStore> {
        self.rt.store().clone()
    }

    /// The clock.
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.rt.clock().clone()
    }

    /// Resumes what the store holds: in-flight processes oldest first up to
    /// the cap (the rest queued for free slots), then parked ones, then
    /// outbox records; returns when that is done. `start` does the same in
    /// the background unless turned off.
    ///
    /// It counts the in-flight processes afresh: call it on an engine built
    /// with `resume_on_start(false)` before that engine takes work. The
    /// running bulk jobs go on too (in the background).
    pub async fn resume(&self) -> Result<(), EngineError> {
        self.rt.recovery().resume_all().await?;
        self.executor().resume_bulk_jobs().await
    }

    /// Starts parked processes into free slots, oldest first (reads the
    /// store for parked rows; a pass already running or a full set makes
    /// this return at once).
    pub async fn start_parked(&self) -> Result<(), EngineError> {
        self.rt.recovery().start_parked().await
    }

    /// Whether the engine has nothing in progress: no background work
    /// (loads, application packages, subflow returns, timer handlers), no
    /// write queued, and no timer due now. Tools that drive processes step
    /// by step (the CLI's scripted runs) wait for this between steps.
    pub fn is_idle(&self) -> bool {
        self.rt.is_idle()
    }

    /// How many write batches wait in the writer's queue (not yet taken
    /// into a commit). A test hook (feature `testing`) for tests that order
    /// a write behind a held commit.
    #[cfg(feature = "testing")]
    pub fn queued_writes(&self) -> usize {
        self.rt.writer().queued()
    }

    /// The writer's epoch: it moves when a process is marked removed. A
    /// test hook (feature `testing`) for tests that must know a removal
    /// has begun before they release a write held behind it.
    #[cfg(feature = "testing")]
    pub fn writer_epoch(&self) -> u64 {
        self.rt.writer().epoch()
    }

    /// When the earliest timer of process `pid` is due (a step timeout).
    pub fn next_timer_of(&self, pid: &str) -> Option<i64> {
        self.rt.next_timer_of(pid)
    }

    /// Whether the engine can acknowledge work now: `Err` saying why while
    /// it is closed or fenced, the store refuses writes (a Redis that
    /// evicts keys, a file broken by an I/O error that cannot be reopened
    /// yet), or its last commit failed and a probe commit fails too. What
    /// `/readyz` answers.
    pub async fn readiness(&self) -> Result<(), EngineError> {
        On::new(&self.rt, &self.services).readiness().await
    }

    /// What an acknowledged write survives on this engine's store, as it
    /// is set up now.
    pub fn persistence(&self) -> acts_store::Persistence {
        self.rt.store().persistence()
    }

    /// The traffic of this engine's store so far, if it counts it
    /// ([`KvStore::io`](acts_store::KvStore::io): Redis).
    pub fn store_io(&self) -> Option<acts_store::StoreIo> {
        self.rt.store().io()
    }

    /// Resolves once every write queued so far is durable.
    pub async fn flush(&self) -> Result<(), EngineError> {
        self.rt
            .writer()
            .flush()
            .await
            .map_err(|source| EngineError::Commit {
                pid: String::new(),
                source,
            })
    }

    /// Whether this engine was fenced off its store: another node took
    /// the store's lease, the store refused a commit on the old epoch, and
    /// every later call fails with [`EngineError::Fenced`]. A cluster node
    /// drops such an engine (see `docs/CLUSTER.md`).
    pub fn is_fenced(&self) -> bool {
        self.rt.writer().fenced().is_some()
    }

    /// The epoch of the store's lease this engine holds (`None` without
    /// [`EngineConfig::lease`](crate::engine::EngineConfig::lease)).
    pub fn lease_epoch(&self) -> Option<u64> {
        self.services.lease_epoch()
    }

    /// Closes like [`close`](Self::close) but keeps the store's lease
    /// until it expires, as if this node had died (no other node may take
    /// the store before then): for tests of a node's death.
    pub async fn close_without_handover(&self) {
        self.services.drop_lease();
        self.rt.close().await;
    }

    /// Stops timers and new work, and waits for the writes in flight.
    pub async fn close(&self) {
        self.rt.close().await;
    }
}
