//! What the kernel needs from the services, as one narrow interface the
//! engine's builder passes in ([`ServiceHooks`]): the rows a transition
//! writes for durable channels, the trigger rows of a deploy, what the
//! engine's own timers set off (schedules, housekeeping) and handing the
//! store's lease over on close. The kernel never names a service; the
//! services (`engine/services/`) implement this on top of the kernel.

use acts_store::BatchOp;
use async_trait::async_trait;

use crate::model::Workflow;
use crate::scheduler::Message;

use crate::engine::persist::delivery_rows::DeliveryRow;
use crate::engine::types::error::EngineError;

/// The services as the kernel calls them (each call gets the kernel `K`
/// it is about: the engine's `Kernel`, which holds them).
#[async_trait]
pub(crate) trait ServiceHooks<K: Sync + ?Sized>: Send + Sync {
    /// Every delivery of process `pid` (read before a transition's lane is
    /// taken, to close the pending ones of tasks that end).
    async fn deliveries_of(&self, k: &K, pid: &str) -> Result<Vec<DeliveryRow>, EngineError>;

    /// The rows that make `messages` durable for the durable channels
    /// they pass, in the batch of the transition that produced them.
    async fn delivery_ops(
        &self,
        k: &K,
        messages: &[Message],
        known_pending: Option<Vec<DeliveryRow>>,
    ) -> Result<Vec<BatchOp>, EngineError>;

    /// The deletes of a removed process's messages and deliveries.
    async fn process_message_ops(&self, k: &K, pid: &str) -> Result<Vec<BatchOp>, EngineError>;

    /// The trigger rows of a deployed `workflow` (replacing its old ones).
    async fn trigger_ops(&self, k: &K, workflow: &Workflow) -> Result<Vec<BatchOp>, EngineError>;

    /// The deletes of model `mid`'s trigger rows.
    async fn trigger_delete_ops(&self, k: &K, mid: &str) -> Result<Vec<BatchOp>, EngineError>;

    /// Arms the timer of the next due schedule.
    async fn arm_schedules(&self, k: &K) -> Result<(), EngineError>;

    /// The schedule timer fired: start what is due, arm the next.
    async fn fire_schedules(&self, k: &K);

    /// The housekeeping pass (`force`: sweep now, not only when due).
    async fn housekeeping(&self, k: &K, force: bool);

    /// Hands the store's lease over (on close).
    async fn release_lease(&self, k: &K);
}
