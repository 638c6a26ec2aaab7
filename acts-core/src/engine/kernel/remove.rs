//! Removing a process and every row of it, with no way for a write of an
//! older instance to bring any back.

use acts_store::BatchOp;

use crate::scheduler::TaskState;

use crate::engine::kernel::shared::Kernel;
use crate::engine::persist;
use crate::engine::types::error::EngineError;

impl Kernel {
    /// Removes process `pid` and every row of it. Writes of it still
    /// queued, and any written later, are skipped (never applied, so the
    /// rows cannot come back). Returns whether it existed.
    pub(crate) async fn remove_process(&self, pid: &str) -> Result<bool, EngineError> {
        self.remove_process_with(pid, Vec::new()).await
    }

    /// [`remove_process`](Self::remove_process) with `extra` ops in the
    /// batch of the deletes (not written when the process did not exist).
    pub(crate) async fn remove_process_with(
        &self,
        pid: &str,
        extra: Vec<BatchOp>,
    ) -> Result<bool, EngineError> {
        self.check_open()?;
        self.writer.mark_removed(pid);
        let mut released = false;
        if let Some(h) = self.cache.resident_handle(pid) {
            let mut slot = h.lane.lock().await;
            slot.process = None;
            self.cache.forget(pid, &h);
            if h.give_place_back() {
                self.cache.release(pid);
                released = true;
            }
        }
        self.arm_timer(pid, None);
        self.gates.release_all(pid);
        self.cache.evict(pid);
        self.cache.unpark(pid);
        let queued = self.cache.unqueue(pid);
        // Its slot is free for queued work.
        self.refill();
        // Everything queued before the removal is settled (skipped) first.
        self.writer
            .flush()
            .await
            .map_err(|source| EngineError::Commit {
                pid: pid.to_owned(),
                source,
            })?;
        let Some(stored) = persist::read_process(&self.store, pid).await? else {
            return Ok(false);
        };
        let in_flight = !stored.row.state.is_terminal() && stored.row.state != TaskState::None;
        // Its messages and deliveries go with it (nothing is owed to a
        // client about a process that no longer exists).
        let mut ops = persist::delete_ops(&stored);
        ops.extend(self.hooks.process_message_ops(self, pid).await?);
        ops.extend(extra);
        self.write(None, ops).await?;
        if in_flight && !released && !queued {
            // Admitted and not resident (unloaded): its place is free.
            self.cache.release(pid);
            self.refill();
        }
        // An instance loaded while the rows were being deleted is older
        // than this second mark: none of its writes can bring them back. An
        // instance born from now on (the pid used again) writes as usual.
        self.writer.mark_removed(pid);
        Ok(true)
    }
}
