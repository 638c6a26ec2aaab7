//! [`EngineBuilder`]: building an engine over a store — its store,
//! settings, clock, packages and sealed data — and starting it (the lease,
//! the store's format and indexes, models, channels, gates, resuming).

use std::collections::HashMap;
use std::sync::Arc;

use acts_store::{KvStore, MemoryStore};

use crate::durable::WriterConfig;
use crate::engine::api::engine::Engine;
use crate::engine::kernel::config::EngineConfig;
use crate::engine::kernel::hooks::ServiceHooks;
use crate::engine::kernel::shared::Kernel;
use crate::engine::persist::format;
use crate::engine::services::sealed::{SealOptions, SealedData};
use crate::engine::services::{On, Services};
use crate::engine::types::error::EngineError;
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
    /// nothing runs until [`RuntimeOps::resume`] is called.
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
        engine
            .rt
            .recovery()
            .fill_indexes(format.record_op())
            .await?;
        format.log_upgrade();
        engine.rt.catalog().publish_packages().await?;
        engine.rt.catalog().load().await?;
        On::new(&engine.rt, &engine.services)
            .load_channels()
            .await?;
        // Before any process runs: the slots and queues of steps' and
        // acts' concurrency keys, from the processes in flight.
        engine.rt.gates().restore().await?;
        if self.resume {
            // Ready at once: a bounded read proves the store answers (a
            // down store fails the start, never looks like "nothing to
            // resume"); the in-flight processes are counted (starts wait
            // for the count), their timers armed from the wake index, and
            // the ones with work to resume resumed in the background, with
            // the parked ones and the outbox; any process is loaded on
            // demand meanwhile (one instance per pid, as always).
            engine.rt.recovery().probe_resume().await?;
            engine.rt.cache().begin_count();
            let rt = engine.rt.clone();
            let jobs = engine.executor();
            engine.rt.spawn(async move {
                // Then the bulk jobs go on where they were.
                if until_done(&rt, "resuming stored processes", || {
                    rt.recovery().resume_all()
                })
                .await
                {
                    until_done(&rt, "resuming bulk jobs", || jobs.resume_bulk_jobs()).await;
                }
            });
        } else {
            // Nothing is resumed, but a keyed start must still find the
            // slots its key's processes in flight hold.
            engine.rt.recovery().count_key_holders().await?;
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
}
