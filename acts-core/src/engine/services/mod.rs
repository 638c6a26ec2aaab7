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

pub(crate) mod delivery;
pub(crate) mod lease;
pub(crate) mod readiness;
pub(crate) mod sealed;
pub(crate) mod stuck;
pub(crate) mod trigger;

use std::sync::Arc;

use acts_store::BatchOp;
use async_trait::async_trait;

use crate::model::Workflow;
use crate::scheduler::Message;

use crate::engine::kernel::hooks::ServiceHooks;
use crate::engine::kernel::shared::Kernel;
use crate::engine::persist::rows::DeliveryRow;
use crate::engine::types::error::EngineError;

pub use lease::{LeaseConfig, LeaseInfo};
pub use sealed::{MAX_TTL_SECS, SealOptions, SealedData, SealedEntry};

/// The services acting on kernel `k` (`On(&kernel).ack_delivery(..)`): it
/// reads the kernel's state and runs its transitions; the kernel knows the
/// services only through [`ServiceHooks`].
pub(crate) struct On<'k>(pub(crate) &'k Kernel);

impl std::ops::Deref for On<'_> {
    type Target = Kernel;

    fn deref(&self) -> &Kernel {
        self.0
    }
}

/// The services of one engine: what they keep beyond the kernel (the
/// sealed-data registry) and the hooks the kernel calls.
pub(crate) struct Services {
    sealed: Arc<SealedData>,
}

impl Services {
    pub(crate) fn new(sealed: Arc<SealedData>) -> Self {
        Self { sealed }
    }

    /// The sealed-data registry.
    pub(crate) fn sealed(&self) -> &SealedData {
        &self.sealed
    }
}

#[async_trait]
impl ServiceHooks<Kernel> for Services {
    async fn deliveries_of(&self, k: &Kernel, pid: &str) -> Result<Vec<DeliveryRow>, EngineError> {
        On(k).deliveries_of(pid).await
    }

    async fn delivery_ops(
        &self,
        k: &Kernel,
        messages: &[Message],
        known_pending: Option<Vec<DeliveryRow>>,
    ) -> Result<Vec<BatchOp>, EngineError> {
        On(k).delivery_ops(messages, known_pending).await
    }

    async fn process_message_ops(
        &self,
        k: &Kernel,
        pid: &str,
    ) -> Result<Vec<BatchOp>, EngineError> {
        On(k).process_message_ops(pid).await
    }

    async fn trigger_ops(
        &self,
        k: &Kernel,
        workflow: &Workflow,
    ) -> Result<Vec<BatchOp>, EngineError> {
        On(k).trigger_ops(workflow).await
    }

    async fn trigger_delete_ops(&self, k: &Kernel, mid: &str) -> Result<Vec<BatchOp>, EngineError> {
        On(k).trigger_delete_ops(mid).await
    }

    async fn arm_schedules(&self, k: &Kernel) -> Result<(), EngineError> {
        On(k).arm_schedules().await
    }

    async fn fire_schedules(&self, k: &Kernel) {
        On(k).fire_schedules().await
    }

    async fn housekeeping(&self, k: &Kernel, force: bool) {
        self.sealed.sweep(k.now());
        On(k).housekeeping(force).await
    }

    async fn release_lease(&self, k: &Kernel) {
        On(k).release_lease().await
    }
}
