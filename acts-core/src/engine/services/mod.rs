//! The services built on the kernel: durable deliveries (ack, retry,
//! dead letters) and housekeeping (the sweeper, outbox retries), triggers
//! (manual, hook, cron), sealed data (the reference's snapshots), the
//! stuck detector, the store's lease (fenced ownership by one node), and
//! readiness (whether the next transition can commit).
//!
//! Each service is a set of methods of [`On`] (the services acting on one
//! kernel); the kernel calls them only through the
//! [`ServiceHooks`](crate::engine::kernel::hooks::ServiceHooks) that
//! [`Services`] implements, which the builder passes in.
//!
//! May use: `kernel`, `persist` and `types`.

pub(crate) mod bulk_runs;
pub(crate) mod delivery;
pub(crate) mod lease;
pub(crate) mod readiness;
pub(crate) mod sealed;
pub(crate) mod stuck;
pub(crate) mod trigger;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::sync::{Arc, Weak};

use acts_store::BatchOp;
use async_trait::async_trait;

use crate::model::Workflow;
use crate::scheduler::Message;
use crate::time::TimerId;

use crate::engine::kernel::config::HeldLease;
use crate::engine::kernel::hooks::ServiceHooks;
use crate::engine::kernel::shared::Kernel;
use crate::engine::persist::rows::DeliveryRow;
use crate::engine::types::error::EngineError;

pub use lease::{LeaseConfig, LeaseInfo};
pub use sealed::{MAX_TTL_SECS, SealOptions, SealedData, SealedEntry};

/// The services acting on one kernel (`On::new(&kernel,
/// &services).ack_delivery(..)`): they use the kernel through its API
/// (runs of transitions, its store, its settings) and keep their own state
/// in [`Services`]; the kernel knows them only through [`ServiceHooks`].
pub(crate) struct On<'k> {
    kernel: &'k Kernel,
    services: &'k Services,
}

impl<'k> On<'k> {
    pub(crate) fn new(kernel: &'k Kernel, services: &'k Services) -> Self {
        Self { kernel, services }
    }
}

impl std::ops::Deref for On<'_> {
    type Target = Kernel;

    fn deref(&self) -> &Kernel {
        self.kernel
    }
}

/// The services of one engine: what they keep beyond the kernel (the
/// sealed-data registry, the lease held, the housekeeping and schedule
/// timers' state, the stuck processes reported) and the hooks the kernel
/// calls. Its fields are private to the services' room.
pub(crate) struct Services {
    sealed: Arc<SealedData>,
    /// The store's lease this node holds (with `EngineConfig::lease`).
    lease: parking_lot::Mutex<Option<HeldLease>>,
    /// The timer of the next due schedule.
    schedule_timer: parking_lot::Mutex<Option<TimerId>>,
    /// When (engine clock, ms) the housekeeping pass last swept.
    last_sweep: AtomicI64,
    /// The order of deliveries created by this engine.
    delivery_seq: AtomicU64,
    /// Stuck processes reported so far: pid → the quiet time reported.
    stuck_reported: parking_lot::Mutex<HashMap<String, i64>>,
    /// The bulk jobs being worked on here.
    bulk_runs: bulk_runs::BulkRuns,
    me: Weak<Services>,
}

impl Services {
    pub(crate) fn new(sealed: Arc<SealedData>) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            sealed,
            lease: Default::default(),
            schedule_timer: Default::default(),
            last_sweep: AtomicI64::new(i64::MIN),
            delivery_seq: AtomicU64::new(0),
            stuck_reported: Default::default(),
            bulk_runs: Default::default(),
            me: me.clone(),
        })
    }

    /// How many stuck processes are reported now, and which.
    pub(crate) fn stuck_reported(&self) -> Vec<String> {
        self.stuck_reported.lock().keys().cloned().collect()
    }

    /// The epoch of the lease this node holds (`None`: none).
    pub(crate) fn lease_epoch(&self) -> Option<u64> {
        self.lease.lock().as_ref().map(|l| l.epoch)
    }

    /// Forgets the lease held, without handing it over (a node that
    /// froze: its lease runs out on its own).
    pub(crate) fn drop_lease(&self) {
        self.lease.lock().take();
    }

    /// The sealed-data registry.
    pub(crate) fn sealed(&self) -> &SealedData {
        &self.sealed
    }

    /// The bulk jobs being worked on here.
    pub(crate) fn bulk_runs(&self) -> &bulk_runs::BulkRuns {
        &self.bulk_runs
    }
}

#[async_trait]
impl ServiceHooks<Kernel> for Services {
    async fn deliveries_of(&self, k: &Kernel, pid: &str) -> Result<Vec<DeliveryRow>, EngineError> {
        On::new(k, self).deliveries_of(pid).await
    }

    async fn delivery_ops(
        &self,
        k: &Kernel,
        messages: &[Message],
        known_pending: Option<Vec<DeliveryRow>>,
    ) -> Result<Vec<BatchOp>, EngineError> {
        On::new(k, self).delivery_ops(messages, known_pending).await
    }

    async fn process_message_ops(
        &self,
        k: &Kernel,
        pid: &str,
    ) -> Result<Vec<BatchOp>, EngineError> {
        On::new(k, self).process_message_ops(pid).await
    }

    async fn trigger_ops(
        &self,
        k: &Kernel,
        workflow: &Workflow,
    ) -> Result<Vec<BatchOp>, EngineError> {
        On::new(k, self).trigger_ops(workflow).await
    }

    async fn trigger_delete_ops(&self, k: &Kernel, mid: &str) -> Result<Vec<BatchOp>, EngineError> {
        On::new(k, self).trigger_delete_ops(mid).await
    }

    async fn arm_schedules(&self, k: &Kernel) -> Result<(), EngineError> {
        On::new(k, self).arm_schedules().await
    }

    async fn fire_schedules(&self, k: &Kernel) {
        On::new(k, self).fire_schedules().await
    }

    async fn housekeeping(&self, k: &Kernel, force: bool) {
        self.sealed.sweep(k.now());
        On::new(k, self).housekeeping(force).await
    }

    async fn release_lease(&self, k: &Kernel) {
        On::new(k, self).release_lease().await
    }
}
