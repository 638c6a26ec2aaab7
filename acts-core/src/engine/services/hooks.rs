//! The services as the kernel calls them: [`ServiceHooks`] for
//! [`Services`], each hook the services acting on the kernel it is
//! handed ([`On`]).

use acts_store::BatchOp;
use async_trait::async_trait;

use crate::model::Workflow;
use crate::scheduler::Message;

use crate::engine::kernel::hooks::ServiceHooks;
use crate::engine::kernel::shared::Kernel;
use crate::engine::persist::delivery_rows::DeliveryRow;
use crate::engine::services::{On, Services};
use crate::engine::types::error::EngineError;

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
        let on = On::new(k, self);
        self.sealed.sweep(on.now());
        on.housekeeping(force).await
    }

    async fn release_lease(&self, k: &Kernel) {
        On::new(k, self).release_lease().await
    }
}
