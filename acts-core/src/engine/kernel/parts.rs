//! The kernel's small API for the other rooms: its parts, each a struct
//! with its own API (the store, the writer and its fence, admission and
//! residency, channels and the emitter, the settings, the clock, the
//! scripts), read-only views of its bookkeeping, and arming an engine
//! timer. The kernel's fields themselves are its room's alone.

use std::sync::Arc;

use acts_store::KvStore;

use crate::durable::GroupCommitWriter;
use crate::model::Workflow;
use crate::script::ScriptEngine;
use crate::time::{Clock, TimerId};

use crate::engine::kernel::cache::Cache;
use crate::engine::kernel::catalog::DeployedModel;
use crate::engine::kernel::config::EngineConfig;
use crate::engine::kernel::emitter::Emitter;
use crate::engine::kernel::gates::Gates;
#[cfg(feature = "testing")]
use crate::engine::kernel::instances::Instances;
use crate::engine::kernel::placement::Placement;
use crate::engine::kernel::recovery::Recovery;
use crate::engine::kernel::shared::Kernel;
use crate::engine::kernel::timers::TimerKey;
use crate::engine::persist::reads::Reads;
use crate::engine::types::error::EngineError;
use crate::engine::types::info::WaitingFor;
use crate::scheduler::TaskState;

impl Kernel {
    /// The store.
    pub(crate) fn store(&self) -> &Arc<dyn KvStore> {
        &self.store
    }

    /// The group-commit writer (and its fence).
    pub(crate) fn writer(&self) -> &GroupCommitWriter {
        &self.writer
    }

    /// Admission and the resident set.
    pub(crate) fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The gates of steps and acts.
    pub(crate) fn gates(&self) -> &Gates {
        &self.gates
    }

    /// Bringing back what the store holds: boot, the outbox, parked rows.
    pub(crate) fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// Channels and the fan-out of committed messages.
    pub(crate) fn emitter(&self) -> &Arc<Emitter> {
        &self.emitter
    }

    /// Where a start goes: its key's slot, its place in the queue.
    pub(crate) fn placement(&self) -> Placement<'_> {
        Placement::new(&self.scripts, self.config.key_home.as_ref())
    }

    /// The settings.
    pub(crate) fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The engine's clock.
    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The script runtimes.
    pub(crate) fn scripts(&self) -> &ScriptEngine {
        &self.scripts
    }

    /// Every process instance built (feature `testing`).
    #[cfg(feature = "testing")]
    pub(crate) fn instances(&self) -> &Instances {
        &self.instances
    }

    /// What process `pid` in `state` (`keyed`: it has a concurrency key;
    /// `gated`: a task of it waits at a gate) waits for, as
    /// `ProcInfo::waiting_for` says it: while it is parked a slot of its
    /// key until it holds one (its key's queue, or — in an engine that has
    /// not read the parked rows yet — the check against its key), then a
    /// place under the cap; once it started, its gated task's gate.
    pub(crate) fn waiting_for(
        &self,
        pid: &str,
        state: TaskState,
        keyed: bool,
        gated: bool,
    ) -> Option<String> {
        if state != TaskState::None {
            return (gated && !state.is_terminal()).then(|| WaitingFor::Gate.as_str().to_owned());
        }
        let what = if keyed && !self.cache.holds_key_slot(pid) {
            WaitingFor::Concurrency
        } else {
            WaitingFor::Admission
        };
        Some(what.as_str().to_owned())
    }

    /// Transitions committed since start.
    pub(crate) fn transitions(&self) -> u64 {
        self.work.transitions()
    }

    /// The processes whose automatic transition failed and waits for the
    /// next housekeeping tick.
    pub(crate) fn stalled_pids(&self) -> Vec<String> {
        self.stalled.pids()
    }

    /// The processes with a timeout timer armed (feature `testing`).
    #[cfg(feature = "testing")]
    pub(crate) fn timer_pids(&self) -> Vec<String> {
        self.timers.process_pids()
    }

    /// Returns once the engine closes (long waits of background work
    /// end with it).
    pub(crate) async fn until_closed(&self) {
        let mut closing = self.closing.subscribe();
        // The sender lives as long as the kernel: no error can happen.
        let _ = closing.wait_for(|c| *c).await;
    }

    /// The reads of the queries and listings, on the engine's store.
    pub(crate) fn reads(&self) -> Reads<'_> {
        Reads::new(&self.store)
    }

    /// The whole definition of deployed model version `m` (read from its
    /// version row when the catalog does not hold it).
    pub(crate) async fn definition(&self, m: &DeployedModel) -> Result<Workflow, EngineError> {
        m.workflow(&self.store).await
    }

    /// Arms an engine timer for `key` at `due` (ms on the engine clock).
    pub(crate) fn arm(&self, due: i64, key: TimerKey) -> TimerId {
        self.timers.schedule(due, key)
    }

    /// When the earliest timer of process `pid` is due (a step timeout).
    pub(crate) fn next_timer_of(&self, pid: &str) -> Option<i64> {
        // A task of it waiting for a token waits for the gate timer.
        let gated = self.gates.holds(pid);
        self.timers.next_due_matching(|k| match k {
            TimerKey::Process(p) => p == pid,
            TimerKey::Gates => gated,
            _ => false,
        })
    }

    /// A fired timer was handled (the timer service counts what is in
    /// flight).
    pub(crate) fn timer_handled(&self) {
        self.timers.handled();
    }

    /// Cancels timer `id`.
    pub(crate) fn disarm(&self, id: TimerId) {
        self.timers.cancel(id);
    }
}
