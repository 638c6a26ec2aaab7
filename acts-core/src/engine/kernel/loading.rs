//! Loading processes and refilling free places: the resident set's I/O
//! side (the cache itself decides without I/O; what a store holds at boot
//! is `recovery/`'s).

use std::sync::Arc;

use tracing::warn;

use crate::scheduler::TaskState;

use crate::engine::kernel::cache::{LoadCell, Lookup, ProcHandle};
use crate::engine::kernel::shared::Kernel;
use crate::engine::persist;
use crate::engine::types::error::EngineError;

impl Kernel {
    // ---- loading and refilling ----------------------------------------------

    /// The process `pid`: resident, or loaded from the store (concurrent
    /// misses share one load). An in-flight process becomes resident and
    /// continues; a parked or finished one is returned for reading only.
    ///
    /// Loading an admitted process (one that was unloaded) admits nothing.
    /// An in-flight process that did not fit at boot needs a place: when
    /// the cap is reached it waits (first in line) for one, at most
    /// [`EngineConfig::admission_wait`](super::EngineConfig::admission_wait).
    pub(crate) async fn handle(&self, pid: &str) -> Result<Option<Arc<ProcHandle>>, EngineError> {
        match self.cache.lookup(pid) {
            Lookup::Resident(h) => Ok(Some(h)),
            Lookup::Load(cell) => Box::pin(self.join_load(pid, &cell)).await,
            Lookup::Full => Box::pin(self.handle_when_full(pid, false)).await,
        }
    }

    /// [`handle`](Self::handle) for reading only: an in-flight process that
    /// waits for a place is read from the store without taking one (never
    /// changed, dropped after the read).
    pub(crate) async fn handle_to_read(
        &self,
        pid: &str,
    ) -> Result<Option<Arc<ProcHandle>>, EngineError> {
        match self.cache.lookup(pid) {
            Lookup::Resident(h) => Ok(Some(h)),
            Lookup::Load(cell) => Box::pin(self.join_load(pid, &cell)).await,
            Lookup::Full => Box::pin(self.handle_when_full(pid, true)).await,
        }
    }

    async fn handle_when_full(
        &self,
        pid: &str,
        read_only: bool,
    ) -> Result<Option<Arc<ProcHandle>>, EngineError> {
        if read_only {
            return Ok(self.load(pid).await?.map(|(handle, _)| handle));
        }
        // Only an in-flight process needs a slot: its row says so without
        // loading its tasks (they load once, when the slot is claimed).
        let Some(row) = self.proc_row(pid).await? else {
            return Ok(None);
        };
        if row.state.is_terminal() || row.state == TaskState::None {
            return Ok(self.load(pid).await?.map(|(handle, _)| handle));
        }
        let cell = match self.cache.wait_slot(pid) {
            Lookup::Resident(h) => return Ok(Some(h)),
            Lookup::Load(cell) => cell,
            Lookup::Full => unreachable!("wait_slot never answers Full"),
        };
        let wait = self.config.admission_wait;
        if tokio::time::timeout(wait, cell.wait_claimed())
            .await
            .is_err()
        {
            return Err(EngineError::Busy {
                pid: pid.to_owned(),
                cap: self.cache.cap(),
                waited: wait,
            });
        }
        self.join_load(pid, &cell).await
    }

    pub(crate) async fn join_load(
        &self,
        pid: &str,
        cell: &LoadCell,
    ) -> Result<Option<Arc<ProcHandle>>, EngineError> {
        let start = cell.start;
        let res = cell
            .cell
            .get_or_init(|| async {
                let loaded = self.load(pid).await;
                let loaded = match loaded {
                    Ok(l) => l,
                    Err(e) => {
                        // Every caller joined to this load gets the error;
                        // the next miss starts a new load.
                        self.cache.finish_load(pid, cell, None, false);
                        return Err(e);
                    }
                };
                let Some((handle, state)) = loaded else {
                    self.cache.finish_load(pid, cell, None, false);
                    return Ok(None);
                };
                let in_flight = !state.is_terminal() && state != TaskState::None;
                let keep = start || in_flight;
                if keep {
                    // Started by a refill, or in flight (admitted at boot
                    // or when it started, unloaded since).
                    handle.hold_place();
                }
                self.cache.finish_load(pid, cell, Some(&handle), keep);
                if keep && let Some(rt) = self.this() {
                    self.spawn(rt.resume_process(handle.clone()));
                }
                Ok(Some(handle))
            })
            .await;
        res.clone()
    }

    pub(crate) async fn load(
        &self,
        pid: &str,
    ) -> Result<Option<(Arc<ProcHandle>, TaskState)>, EngineError> {
        // Taken before the read: an instance built from rows read before a
        // removal is older than that removal, and its writes are skipped.
        let born = self.writer.epoch();
        let Some(stored) = persist::read_process(&self.store, pid).await? else {
            return Ok(None);
        };
        let state = stored.row.state;
        let model = self.models.tree_of(&stored.row).await?;
        let (process, persisted) = persist::rebuild(stored, model).map_err(EngineError::Corrupt)?;
        let handle = ProcHandle::new(process, persisted, born);
        self.instances.track(&handle);
        Ok(Some((handle, state)))
    }

    /// Fills free slots with queued in-flight processes, then parked ones,
    /// oldest first.
    pub(crate) fn refill(&self) {
        if self.is_closed() {
            return;
        }
        let Some(rt) = self.this() else {
            return;
        };
        if self.cache.wants_scan() {
            // Free slots, nothing queued, and parked rows this engine has
            // not read (left from before a restart): read them.
            let rt2 = rt.clone();
            self.spawn(async move {
                if let Err(e) = rt2.recovery.start_parked().await {
                    warn!(error = %e, "cannot read parked processes");
                }
            });
        }
        for (pid, cell, parked) in self.cache.claim_refill() {
            let rt = rt.clone();
            self.spawn(async move {
                match rt.join_load(&pid, &cell).await {
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        warn!(pid = %pid, "queued process has no row any more");
                        rt.refill();
                    }
                    Err(e) => {
                        // Not dropped: it waits again and the housekeeping
                        // tick retries it (found by the simulator: a
                        // subflow child whose first load failed on a store
                        // fault was never started).
                        warn!(pid = %pid, error = %e, "cannot load a queued process; retried on the next housekeeping tick");
                        rt.cache.unclaim_failed(&pid, parked);
                    }
                }
            });
        }
    }
}
