//! [`Kernel`]: the engine's shared state — its parts (the store and the
//! writer, admission and residency, timers, channels, the catalog, gates,
//! package runs) — and its lifecycle: building, spawning background work,
//! idleness, closing, and the one write path (`write`). The transition
//! protocol is in `transition.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use acts_store::{BatchOp, KvStore};

use crate::durable::{GroupCommitWriter, WriteBatch, WriteOutcome};
use crate::model::Vars;
use crate::package::PackageRegistry;
use crate::scheduler::Services;
use crate::script::ScriptEngine;
use crate::time::{Clock, TimerService};

use crate::engine::kernel::cache::Cache;
use crate::engine::kernel::catalog::{Catalog, CatalogHost};
use crate::engine::kernel::config::EngineConfig;
use crate::engine::kernel::emitter::Emitter;
use crate::engine::kernel::gates::{GateHost, Gates};
use crate::engine::kernel::hooks::ServiceHooks;
use crate::engine::kernel::recovery::{Recovery, RecoveryHost};
use crate::engine::kernel::stalled::StalledSet;
use crate::engine::kernel::timers::{EngineTimers, TimerKey};
use crate::engine::kernel::work::Work;
use crate::engine::types::error::EngineError;
use crate::engine::types::package::ActPackage;
use crate::scheduler::seal::Seals;

/// The engine's shared state (see the module docs; a transition: `transition.rs`). Its fields belong to
/// the kernel's room (`pub(in crate::engine::kernel)`, none public to the
/// crate); the other rooms use the small API below (`store()`,
/// `config()`, `cache()`, ...) and the kernel's operations.
pub(crate) struct Kernel {
    pub(in crate::engine::kernel) store: Arc<dyn KvStore>,
    /// The group-commit writer and its fence.
    pub(in crate::engine::kernel) writer: GroupCommitWriter,
    /// Admission and the resident set.
    pub(in crate::engine::kernel) cache: Cache,
    pub(in crate::engine::kernel) scripts: ScriptEngine,
    pub(in crate::engine::kernel) packages: PackageRegistry,
    pub(in crate::engine::kernel) clock: Arc<dyn Clock>,
    /// The timer service, processes' timeouts, the housekeeping timer.
    pub(in crate::engine::kernel) timers: EngineTimers,
    /// Channels and the fan-out of committed messages.
    pub(in crate::engine::kernel) emitter: Arc<Emitter>,
    pub(in crate::engine::kernel) config: EngineConfig,
    /// Sealed data a transition seals into tasks (the registry is the
    /// services').
    seals: Arc<dyn Seals>,
    /// The services, as the kernel calls them.
    pub(in crate::engine::kernel) hooks: Arc<dyn ServiceHooks<Kernel>>,
    /// What the engine has done and has in progress.
    pub(in crate::engine::kernel) work: Work,
    /// Processes whose automatic transition (a resume, a continuation, a
    /// timer) failed on the store: retried on the housekeeping tick.
    pub(in crate::engine::kernel) stalled: StalledSet,
    /// The deployed models and the versions processes run on.
    pub(in crate::engine::kernel) models: Catalog,
    /// The gates of steps and acts, here or at their keys' homes.
    pub(in crate::engine::kernel) gates: Gates,
    /// Bringing back what the store holds (boot, outbox, parked rows).
    pub(in crate::engine::kernel) recovery: Recovery,
    /// Every process instance built (tracked with feature `testing`).
    pub(in crate::engine::kernel) instances: crate::engine::kernel::instances::Instances,
    closed: AtomicBool,
    /// Set once at close: application packages still running give up (a
    /// restart runs them again, as after a crash).
    pub(in crate::engine::kernel) closing: tokio::sync::watch::Sender<bool>,
    /// The application packages running now (given up when their act ends).
    pub(in crate::engine::kernel) package_runs: crate::engine::kernel::package_runs::PackageRuns,
    me: Weak<Kernel>,
}

impl Kernel {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        store: Arc<dyn KvStore>,
        config: &EngineConfig,
        scripts: ScriptEngine,
        packages: PackageRegistry,
        app_packages: HashMap<String, Arc<dyn ActPackage>>,
        clock: Arc<dyn Clock>,
        timers: TimerService<TimerKey>,
        seals: Arc<dyn Seals>,
        hooks: Arc<dyn ServiceHooks<Kernel>>,
    ) -> Arc<Self> {
        let writer = GroupCommitWriter::start(store.clone(), config.writer);
        let store_for_gates = store.clone();
        let store_for_recovery = store.clone();
        let store_for_catalog = store.clone();
        Arc::new_cyclic(|me| Self {
            store,
            writer,
            cache: Cache::new(config.cache_cap, config.max_resident),
            instances: Default::default(),
            scripts,
            packages,
            clock: clock.clone(),
            timers: EngineTimers::new(timers),
            emitter: Arc::new(Emitter::default()),
            config: config.clone(),
            seals,
            hooks,
            work: Work::default(),
            stalled: StalledSet::default(),
            models: Catalog::new(store_for_catalog, me.clone() as Weak<dyn CatalogHost>),
            gates: Gates::new(
                store_for_gates,
                clock.clone(),
                config.gate_courier.clone(),
                config.key_home.is_some(),
                me.clone() as Weak<dyn GateHost>,
            ),
            recovery: Recovery::new(store_for_recovery, me.clone() as Weak<dyn RecoveryHost>),
            closed: AtomicBool::new(false),
            closing: tokio::sync::watch::Sender::new(false),
            package_runs: crate::engine::kernel::package_runs::PackageRuns::new(app_packages),
            me: me.clone(),
        })
    }

    /// The deployed models: what starts, loads and migrations read.
    pub(crate) fn catalog(&self) -> &Catalog {
        &self.models
    }

    pub(crate) fn this(&self) -> Option<Arc<Kernel>> {
        self.me.upgrade()
    }

    pub(crate) fn services(&self) -> Services<'_> {
        Services {
            scripts: &self.scripts,
            packages: &self.packages,
            seals: Some(&*self.seals),
            models: Some(&self.models),
            limits: self.config.run_limits,
            interest: self.emitter.interest(),
        }
    }

    pub(crate) fn now(&self) -> i64 {
        self.clock.now_millis()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Spawns engine work, counted until it ends (see [`is_idle`](Self::is_idle)).
    pub(crate) fn spawn(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        self.work.spawn(work);
    }

    /// Whether the engine has nothing in progress: no background work, no
    /// load, no write queued, no fired timer unhandled, no timer due now.
    pub(crate) fn is_idle(&self) -> bool {
        self.work.inflight() == 0
            && self.cache.loading() == 0
            && self.writer.queued() == 0
            && self.timers.unhandled() == 0
            && self
                .timers
                .next_due_matching(|k| !matches!(k, TimerKey::Housekeeping))
                .is_none_or(|d| d > self.now())
    }

    /// Arms the periodic housekeeping timer (once).
    pub(crate) fn arm_housekeeping(&self) {
        if self.is_closed() {
            return;
        }
        let due = self.now() + self.config.tick.as_millis() as i64;
        self.timers.arm_housekeeping(due);
    }

    pub(crate) async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.closing.send_replace(true);
        self.timers.close();
        // Background work started before the close ends on its own (new
        // work is refused); wait for it so that nothing holds the engine
        // — and its store — once the caller drops it.
        let mut spins = 0u32;
        while self.work.inflight() > 0 && spins < 5_000 {
            spins += 1;
            if spins < 64 {
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        // Everything acknowledged is already durable; this only waits for
        // the writes in flight, hands the store's lease over, then lets go
        // of the store.
        self.hooks.release_lease(self).await;
        self.writer.close().await;
    }

    /// Refuses vars larger than [`EngineConfig::max_vars_bytes`].
    pub(crate) fn check_vars_size(&self, what: &str, vars: &Vars) -> Result<(), EngineError> {
        let size = crate::scheduler::json_len(vars);
        if size > self.config.max_vars_bytes {
            return Err(EngineError::TooLarge {
                what: what.to_owned(),
                size,
                limit: self.config.max_vars_bytes,
                setting: "max_vars_bytes",
            });
        }
        Ok(())
    }

    pub(crate) fn check_open(&self) -> Result<(), EngineError> {
        if let Some(why) = self.writer.fenced() {
            return Err(EngineError::Fenced(why));
        }
        if self.is_closed() {
            Err(EngineError::Closed)
        } else {
            Ok(())
        }
    }

    /// Writes `ops` as one batch of process `owner` (skipped if it was
    /// removed), durable when this returns.
    pub(crate) async fn write(
        &self,
        owner: Option<(&str, u64)>,
        ops: Vec<BatchOp>,
    ) -> Result<(), EngineError> {
        if ops.is_empty() {
            return Ok(());
        }
        let outcome = self
            .writer
            .write(WriteBatch {
                owner: owner.map(|(pid, _)| pid.to_owned()),
                born: owner.map_or(0, |(_, born)| born),
                ops,
            })
            .await
            .map_err(|source| match source {
                crate::durable::WriteError::Fenced(why) => EngineError::Fenced(why),
                source => EngineError::Commit {
                    pid: owner.map(|(pid, _)| pid).unwrap_or_default().to_owned(),
                    source,
                },
            })?;
        match (outcome, owner) {
            (WriteOutcome::Committed, _) | (WriteOutcome::Skipped, None) => Ok(()),
            // A skipped write is never an `Ok`: the caller's change is gone.
            (WriteOutcome::Skipped, Some((pid, _))) => Err(EngineError::Removed(pid.to_owned())),
        }
    }
}
