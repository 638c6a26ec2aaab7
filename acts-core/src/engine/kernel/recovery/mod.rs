//! [`Recovery`]: the kernel's part that brings back what a store holds —
//! at boot (the indexes of an older store filled in, the processes in
//! flight counted and resumed, their timers armed from the wake index,
//! the parked ones started) and on every housekeeping tick (the outbox
//! applied again, the parked rows read when places are free).
//!
//! It reads the store's rows itself (through `persist`) and reaches the
//! rest of the engine only through [`RecoveryHost`]: admission's count
//! and queues, loading a process, running a transition of a process,
//! writing a batch, arming a process's timer, refilling free places.
//!
//! May use: `cache` (admission's count and queues), `handle` (a pid's
//! hash).

mod indexes;
mod outbox;
mod resume;

use std::collections::HashSet;
use std::sync::{Arc, Weak};

use acts_store::{BatchOp, KvStore};
use async_trait::async_trait;

use crate::scheduler::{ActionError, Process, Services, TaskState};

use crate::engine::kernel::cache::Cache;
use crate::engine::types::error::EngineError;

/// How many loaded processes the boot resume lets resume at once.
const RESUMES_AT_ONCE: usize = 64;

/// The states of a process in flight (started, not ended).
const IN_FLIGHT: [TaskState; 4] = [
    TaskState::Ready,
    TaskState::Running,
    TaskState::Pending,
    TaskState::Interrupt,
];

/// A change recovery makes to a process (an outbox record's action), run
/// as one transition of it.
pub(crate) type ProcChange =
    Box<dyn FnOnce(&mut Process, Services<'_>) -> Result<(), ActionError> + Send>;

/// What recovery needs of the engine (the kernel implements it).
#[async_trait]
pub(crate) trait RecoveryHost: Send + Sync + 'static {
    /// Admission and the resident set: the boot count, the queues.
    fn cache(&self) -> &Cache;
    /// Whether the engine closed.
    fn is_closed(&self) -> bool;
    /// Fills free places with queued and parked processes.
    fn refill(&self);
    /// Arms the timeout timer of process `pid` at `due`.
    fn arm_timer(&self, pid: &str, due: i64);
    /// Begins noting the processes whose timer a transition sets.
    fn begin_touch(&self);
    /// The processes whose timer was set since `begin_touch`.
    fn end_touch(&self) -> HashSet<String>;
    /// How many loaded processes are resuming now.
    fn resumes_in_flight(&self) -> usize;
    /// Writes `ops` as one batch of no process, durable when this returns.
    async fn write(&self, ops: Vec<BatchOp>) -> Result<(), EngineError>;
    /// Loads process `pid` (an in-flight one becomes resident and
    /// resumes).
    async fn load(&self, pid: &str) -> Result<(), EngineError>;
    /// Runs `change` on process `pid` as one transition, `extra` joining
    /// its batch (`None`: the process does not exist).
    async fn transition_of(
        &self,
        pid: &str,
        extra: Vec<BatchOp>,
        change: ProcChange,
    ) -> Result<Option<()>, EngineError>;
}

/// Brings back what the store holds (see the module docs).
pub(crate) struct Recovery {
    store: Arc<dyn KvStore>,
    host: Weak<dyn RecoveryHost>,
}

impl Recovery {
    /// Recovery of the engine on `store`, reaching it through `host`.
    pub(crate) fn new(store: Arc<dyn KvStore>, host: Weak<dyn RecoveryHost>) -> Self {
        Self { store, host }
    }

    /// The engine (closed once it is dropped).
    fn host(&self) -> Result<Arc<dyn RecoveryHost>, EngineError> {
        self.host.upgrade().ok_or(EngineError::Closed)
    }
}
