//! [`On`]: the services acting on one kernel, and the one place they reach
//! it. The kernel is a private field here: the services use what the
//! methods below hand out — the store (for persist's row stores) and the
//! commit path, the clock and engine timers, the settings and channels,
//! starting a process, and the kernel's own housekeeping — and nothing
//! else of it (no `Deref` to the kernel; `acts-core/tests/core_suites/layout.rs` keeps
//! the kernel's name out of the other files of the room).

use std::sync::{Arc, Weak};

use acts_store::{BatchOp, KvStore};

use crate::durable::GroupCommitWriter;
use crate::model::Vars;
use crate::time::{Clock, TimerId};

use crate::engine::kernel::config::EngineConfig;
use crate::engine::kernel::emitter::Emitter;
use crate::engine::kernel::shared::Kernel;
use crate::engine::kernel::timers::TimerKey;
use crate::engine::services::Services;
use crate::engine::types::error::EngineError;
use crate::engine::types::info::ProcInfo;

/// The services acting on one kernel (`On::new(&kernel,
/// &services).ack_delivery(..)`): the kernel's capabilities below, and
/// their own state in [`Services`].
pub(crate) struct On<'k> {
    kernel: &'k Kernel,
    pub(super) services: &'k Services,
}

impl<'k> On<'k> {
    pub(crate) fn new(kernel: &'k Kernel, services: &'k Services) -> Self {
        Self { kernel, services }
    }

    // ---- the store and the commit path ------------------------------------

    /// The store, for persist's row stores.
    pub(super) fn store(&self) -> &'k Arc<dyn KvStore> {
        self.kernel.store()
    }

    /// The group-commit writer: its fence and whether it fails.
    pub(super) fn writer(&self) -> &'k GroupCommitWriter {
        self.kernel.writer()
    }

    /// Fails once the engine is closed or fenced off.
    pub(super) fn check_open(&self) -> Result<(), EngineError> {
        self.kernel.check_open()
    }

    /// Commits `ops` as one batch (of process `owner`, skipped if it was
    /// removed), durable when this returns.
    pub(super) async fn write(
        &self,
        owner: Option<(&str, u64)>,
        ops: Vec<BatchOp>,
    ) -> Result<(), EngineError> {
        self.kernel.write(owner, ops).await
    }

    // ---- time -------------------------------------------------------------

    /// Now on the engine clock (ms).
    pub(super) fn now(&self) -> i64 {
        self.kernel.now()
    }

    /// The engine clock.
    pub(super) fn clock(&self) -> &'k Arc<dyn Clock> {
        self.kernel.clock()
    }

    /// Arms an engine timer for `key` at `due` (ms).
    pub(super) fn arm(&self, due: i64, key: TimerKey) -> TimerId {
        self.kernel.arm(due, key)
    }

    /// Cancels timer `id`.
    pub(super) fn disarm(&self, id: TimerId) {
        self.kernel.disarm(id)
    }

    // ---- settings and channels ----------------------------------------------

    /// The engine's settings.
    pub(super) fn config(&self) -> &'k EngineConfig {
        self.kernel.config()
    }

    /// The channels and the fan-out of committed messages.
    pub(super) fn emitter(&self) -> &'k Arc<Emitter> {
        self.kernel.emitter()
    }

    // ---- what the services ask the kernel to do ------------------------------

    /// Starts a process of model `model` (a trigger's start).
    pub(super) async fn start(
        &self,
        model: &str,
        revision: Option<u32>,
        vars: Vars,
        by: Option<&str>,
    ) -> Result<ProcInfo, EngineError> {
        self.kernel.start(model, revision, vars, by).await
    }

    /// The kernel's share of a housekeeping pass: queued and parked work
    /// whose load failed gets its place, outbox records are applied again,
    /// processes whose automatic transition failed run again; then the
    /// next pass is armed (`rearm`).
    pub(super) async fn kernel_housekeeping(&self) -> Result<(), EngineError> {
        let outbox = self.kernel.recovery().retry_outbox().await;
        self.kernel.refill();
        if let Some(k) = self.kernel.this() {
            k.retry_stalled().await;
        }
        outbox
    }

    /// Arms the next housekeeping pass.
    pub(super) fn rearm_housekeeping(&self) {
        self.kernel.arm_housekeeping();
    }

    /// A handle to run the services later, in the background (it keeps
    /// neither the kernel nor the services alive).
    pub(super) fn background(&self) -> Background {
        Background {
            kernel: self
                .kernel
                .this()
                .as_ref()
                .map_or_else(Weak::new, Arc::downgrade),
            services: self.services.me.clone(),
        }
    }
}

/// The services of one engine as background work holds them: gone once
/// the engine is dropped.
pub(super) struct Background {
    kernel: Weak<Kernel>,
    services: Weak<Services>,
}

impl Background {
    /// Runs `f` on the services while the engine is open; `None` once it
    /// closed or was dropped.
    pub(super) async fn run<R>(&self, f: impl AsyncFnOnce(On<'_>) -> R) -> Option<R> {
        let (kernel, services) = (self.kernel.upgrade()?, self.services.upgrade()?);
        if kernel.is_closed() {
            return None;
        }
        Some(f(On::new(&kernel, &services)).await)
    }
}
