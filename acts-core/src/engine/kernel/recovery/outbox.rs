//! The outbox: records one process's transition left for another (a
//! subflow child's return), applied to it in a transition of its own —
//! right after the commit, on every housekeeping tick and at boot.

use tracing::{debug, warn};

use crate::scheduler::Action;

use super::{ProcChange, Recovery};
use crate::engine::persist::boot_rows::BootRows;
use crate::engine::persist::rows::OpRow;
use crate::engine::types::error::EngineError;

impl Recovery {
    /// Applies every outbox record still stored, oldest first (at boot, and
    /// on every housekeeping tick: a record whose first application failed
    /// on a transient store error is retried then, not only at the next
    /// boot). Applying a record twice is harmless: the second finds its act
    /// settled and only deletes the record. A record that fails again stays
    /// for the next try.
    pub(crate) async fn retry_outbox(&self) -> Result<(), EngineError> {
        let ops = BootRows::new(&self.store).outbox().await?;
        for op in ops {
            if let Err(e) = self.apply_op(op).await {
                warn!(error = %e, "outbox record not applied yet; retried on the next tick");
            }
        }
        Ok(())
    }

    pub(crate) async fn replay_op(&self, id: &str) -> Result<(), EngineError> {
        match BootRows::new(&self.store).outbox_record(id).await? {
            Some(op) => self.apply_op(op).await,
            None => Ok(()),
        }
    }

    /// Applies an outbox record to its process; the record is deleted in
    /// the same batch (or alone, when the act was already settled).
    pub(crate) async fn apply_op(&self, op: OpRow) -> Result<(), EngineError> {
        let host = self.host()?;
        let delete = BootRows::delete_outbox_ops(&op);
        let Ok(action) = op.action.parse::<Action>() else {
            return host.write(delete).await;
        };
        let (tid, options) = (op.tid.clone(), op.options.clone());
        let change: ProcChange = Box::new(move |p, svc| p.act(&tid, action, options, svc));
        let r = host.transition_of(&op.pid, delete.clone(), change).await;
        match r {
            Ok(Some(())) => Ok(()),
            // The parent is gone: nothing left to tell.
            Ok(None) => host.write(delete).await,
            Err(EngineError::Action(e)) => {
                debug!(error = %e, "outbox record already settled");
                host.write(delete).await
            }
            Err(e) => Err(e),
        }
    }
}
