//! [`Engine`] and [`EngineBuilder`]: building an engine over a store, and
//! what the running engine offers (executor, channels, housekeeping,
//! close).

use std::collections::HashMap;
use std::sync::Arc;

use acts_store::{KvStore, MemoryStore};

use crate::durable::WriterConfig;
use crate::engine::api::channel::Channel;
use crate::engine::api::executor::Executor;
use crate::engine::kernel::cache::Cache;
#[cfg(feature = "testing")]
use crate::engine::kernel::cache::ProcHandle;
use crate::engine::kernel::config::EngineConfig;
use crate::engine::kernel::hooks::ServiceHooks;
use crate::engine::kernel::shared::Kernel;
use crate::engine::persist::format;
use crate::engine::services::sealed::{SealOptions, SealedData};
use crate::engine::services::{On, Services};
use crate::engine::types::error::EngineError;
use crate::engine::types::filter::ChannelOptions;
use crate::engine::types::package::ActPackage;
use crate::package::{PackageRegistry, RunAs};
use crate::script::{ScriptEngine, ScriptLimits};
use crate::time::{Clock, SystemClock, TimerService};

/// Builds an [`Engine`].
pub struct EngineBuilder {
    store: Option<Arc<dyn KvStore>>,
    config: EngineConfig,
    clock: Arc<dyn Clock>,
    limits: ScriptLimits,
    packages: Vec<Arc<dyn ActPackage>>,
    sealed: Vec<(String, SealOptions)>,
    resume: bool,
}

impl std::fmt::Debug for EngineBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineBuilder")
            .field("config", &self.config)
            .field("packages", &self.packages.len())
            .finish_non_exhaustive()
    }
}

impl EngineBuilder {
    /// The store (default: a new in-memory store).
    pub fn store(mut self, store: Arc<dyn KvStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Most processes in flight at once (the admission cap, default
    /// 10,000,000); starts beyond it are parked until a place frees.
    pub fn cache_cap(mut self, cap: usize) -> Self {
        self.config.cache_cap = cap;
        self
    }

    /// Most processes held in memory while they wait (the memory limit,
    /// default 4096); idle ones beyond it are unloaded, least recently
    /// idle first, and loaded again when something happens to them.
    pub fn max_resident(mut self, max: usize) -> Self {
        self.config.max_resident = max;
        self
    }

    /// The store writer's settings (group size, commit delay, queue).
    pub fn writer(mut self, config: WriterConfig) -> Self {
        self.config.writer = config;
        self
    }

    /// The clock (default: the system clock). Tests pass a
    /// [`ManualClock`](crate::time::ManualClock) to drive timeouts.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// All settings at once (cache cap, writer, timers, retention).
    pub fn config(mut self, config: EngineConfig) -> Self {
        self.config = config;
        self
    }

    /// How long finished processes are kept once their deliveries settled
    /// (default: until removed).
    pub fn retention(mut self, retention: std::time::Duration) -> Self {
        self.config.retention = Some(retention);
        self
    }

    /// Registers a sealed-data target before start.
    pub fn sealed_data(mut self, name: &str, options: SealOptions) -> Self {
        self.sealed.push((name.to_owned(), options));
        self
    }

    /// Script time, memory and stack limits.
    pub fn script_limits(mut self, limits: ScriptLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Registers an application package.
    pub fn package(mut self, package: impl ActPackage) -> Self {
        self.packages.push(Arc::new(package));
        self
    }

    /// Whether `start` resumes the processes found in the store (default
    /// true): after one bounded read, in the background, so the engine is
    /// ready at once and loads any process an action names on demand. Off,
    /// nothing runs until [`Engine::resume`] is called.
    pub fn resume_on_start(mut self, resume: bool) -> Self {
        self.resume = resume;
        self
    }

    /// Starts the engine on the current tokio runtime: the writer, the
    /// timer service, and (unless turned off) the resumption of every
    /// in-flight and parked process in the store, in the background (the
    /// engine returned is ready at once; a store that cannot answer fails
    /// the start).
    pub async fn start(self) -> Result<Engine, EngineError> {
        let store = self
            .store
            .unwrap_or_else(|| Arc::new(MemoryStore::new()) as Arc<dyn KvStore>);
        // A newer acts's store: refused before anything is written.
        let format = format::check(&store).await?;
        let mut registry = PackageRegistry::with_builtins();
        let mut app = HashMap::new();
        for p in self.packages {
            let mut def = p.definition();
            def.run_as = RunAs::Func;
            registry.register(def.clone())?;
            app.insert(def.id.clone(), p);
        }
        let (timers, mut fired) = TimerService::start(self.clock.clone());
        let scripts = ScriptEngine::new(self.limits);
        // One runtime per core up front: a burst of first processes does
        // not wait for runtimes to be built.
        scripts.warm(std::thread::available_parallelism().map_or(2, |n| n.get()));
        let sealed = Arc::new(SealedData::new(self.clock.clone()));
        let services = Services::new(sealed.clone());
        let rt = Kernel::new(
            store,
            &self.config,
            scripts,
            registry,
            app,
            self.clock,
            timers,
            sealed,
            services.clone(),
        );
        let weak = Arc::downgrade(&rt);
        tokio::spawn(async move {
            while let Some(f) = fired.recv().await {
                let Some(rt) = weak.upgrade() else {
                    return;
                };
                let rt2 = rt.clone();
                rt.spawn(async move {
                    rt2.on_timer(f.payload).await;
                    rt2.timer_handled();
                });
            }
        });
        for (name, options) in self.sealed {
            services.sealed().register(&name, options)?;
        }
        let engine = Engine { rt, services };
        // A shared store is taken (and fenced) before anything is written.
        match &self.config.lease {
            Some(lease) => {
                On::new(&engine.rt, &engine.services)
                    .acquire_lease(lease)
                    .await?;
                On::new(&engine.rt, &engine.services).spawn_lease_renewal();
            }
            // An engine without a lease writes unfenced: not on a store a
            // node owns.
            None => {
                On::new(&engine.rt, &engine.services)
                    .refuse_if_owned()
                    .await?
            }
        }
        // The format recorded with the indexes' facts, after what they
        // vouch for.
        engine.rt.fill_indexes(format.record_op()).await?;
        format.log_upgrade();
        engine.rt.publish_packages().await?;
        engine.rt.load_models().await?;
        On::new(&engine.rt, &engine.services)
            .load_channels()
            .await?;
        // Before any process runs: the slots and queues of steps' and
        // acts' concurrency keys, from the processes in flight.
        engine.rt.count_gates().await?;
        if self.resume {
            // Ready at once: a bounded read proves the store answers (a
            // down store fails the start, never looks like "nothing to
            // resume"); the in-flight processes are counted (starts wait
            // for the count), their timers armed from the wake index, and
            // the ones with work to resume resumed in the background, with
            // the parked ones and the outbox; any process is loaded on
            // demand meanwhile (one instance per pid, as always).
            engine.rt.probe_resume().await?;
            engine.rt.cache().begin_count();
            let rt = engine.rt.clone();
            let jobs = engine.executor();
            engine.rt.spawn(async move {
                // Then the bulk jobs go on where they were.
                if until_done(&rt, "resuming stored processes", || rt.resume_all()).await {
                    until_done(&rt, "resuming bulk jobs", || jobs.resume_bulk_jobs()).await;
                }
            });
        } else {
            // Nothing is resumed, but a keyed start must still find the
            // slots its key's processes in flight hold.
            engine.rt.count_key_holders().await?;
        }
        engine.services.arm_schedules(&engine.rt).await?;
        engine.rt.arm_housekeeping();
        Ok(engine)
    }
}

/// Runs `f` until it succeeds (a store that fails is tried again, the
/// waits growing to 30 s); `false` when the engine closed first.
async fn until_done<Fut>(rt: &Kernel, what: &str, mut f: impl FnMut() -> Fut) -> bool
where
    Fut: std::future::Future<Output = Result<(), EngineError>>,
{
    let mut wait = std::time::Duration::from_millis(100);
    while let Err(e) = f().await {
        if rt.is_closed() {
            return false;
        }
        tracing::warn!(error = %e, "{what} failed; retrying");
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(std::time::Duration::from_secs(30));
    }
    true
}

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
    rt: Arc<Kernel>,
    services: Arc<Services>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("cache", &self.rt.cache())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// A builder with the defaults: in-memory store, system clock.
    pub fn builder() -> EngineBuilder {
        EngineBuilder {
            store: None,
            config: EngineConfig::default(),
            clock: Arc::new(SystemClock),
            limits: ScriptLimits::default(),
            packages: Vec::new(),
            sealed: Vec::new(),
            resume: true,
        }
    }

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
    /// [`Executor::deliveries`]). The registration survives restarts:
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
        self.rt.gate_keys()
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
        self.rt.gate_call(call).await
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
        self.rt.resume_all().await?;
        self.executor().resume_bulk_jobs().await
    }

    /// Starts parked processes into free slots, oldest first (reads the
    /// store for parked rows; a pass already running or a full set makes
    /// this return at once).
    pub async fn start_parked(&self) -> Result<(), EngineError> {
        self.rt.start_parked().await
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
