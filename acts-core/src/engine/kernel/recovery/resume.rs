//! Counting and resuming what the store holds: the processes in flight
//! (counted from the state index, exact while processes end), their timers
//! from the wake index, the ones with work to resume, the parked ones.

use crate::durable::CollectionError;
use crate::scheduler::TaskState;

use super::{IN_FLIGHT, RESUMES_AT_ONCE, Recovery};
use crate::engine::kernel::handle::pid_hash;
use crate::engine::persist::boot_rows::BootRows;
use crate::engine::persist::proc_rows::ProcRows;
use crate::engine::types::error::EngineError;
use tracing::warn;

impl Recovery {
    /// Reads parked rows from the store into the parked queue (one scan at
    /// a time; none when the set is full), then refills.
    pub(crate) async fn start_parked(&self) -> Result<(), EngineError> {
        let host = self.host()?;
        if !host.cache().begin_scan() {
            return Ok(());
        }
        let rows = ProcRows::new(&self.store).in_state(TaskState::None).await;
        host.cache().end_scan(rows.is_ok());
        let rows = rows?;
        host.cache().note_parked(
            rows.into_iter()
                .map(|r| (r.timestamp, r.id, r.slot, r.order)),
        );
        host.refill();
        Ok(())
    }

    /// One bounded read of the rows [`resume_all`](Self::resume_all)
    /// reads, so that a store that cannot answer fails the start.
    pub(crate) async fn probe_resume(&self) -> Result<(), EngineError> {
        Ok(ProcRows::new(&self.store).probe(TaskState::Running).await?)
    }

    /// Counts the processes in flight in the store (from the state index:
    /// no process row is read) and admits them all; more than the cap are
    /// admitted up to the cap by [`resume_all`](Self::resume_all), which
    /// queues the newest. Starts wait while it counts; processes that end
    /// meanwhile are left out, so the count is exact.
    pub(crate) async fn count_in_flight(&self) -> Result<(), EngineError> {
        let host = self.host()?;
        host.cache().begin_count();
        let procs = ProcRows::new(&self.store);
        let mut seen = Vec::new();
        let mut scanned = Ok(());
        for state in IN_FLIGHT {
            scanned = procs
                .ids_in_state(state, |ids| {
                    seen.extend(ids.iter().map(|id| pid_hash(id)));
                })
                .await;
            if scanned.is_err() {
                break;
            }
        }
        // The holders of concurrency slots, in the same count.
        let mut holders = Vec::new();
        if scanned.is_ok() {
            scanned = self.key_holders().await.map(|h| holders = h);
        }
        match scanned {
            Ok(()) => {
                host.cache().end_count(Some(seen), holders);
                Ok(())
            }
            Err(e) => {
                host.cache().end_count(None, Vec::new());
                Err(e.into())
            }
        }
    }

    /// The processes in flight that hold a slot of a concurrency key,
    /// `(key, pid)`: their entries in the sparse `slot` index.
    async fn key_holders(&self) -> Result<Vec<(String, String)>, CollectionError> {
        ProcRows::new(&self.store).slot_holders().await
    }

    /// An engine that resumes nothing (`resume_on_start(false)`) still
    /// counts the slots of the concurrency keys before its first start
    /// (nothing runs yet, so nothing ends while it counts).
    pub(crate) async fn count_key_holders(&self) -> Result<(), EngineError> {
        let host = self.host()?;
        let holders = self.key_holders().await?;
        host.cache().begin_count();
        host.cache().end_count(Some(Vec::new()), holders);
        Ok(())
    }

    /// Boot: counts the processes in flight; when more
    /// processes are in flight than the cap, the newest wait for places;
    /// timers of in-flight processes are armed from the wake index without
    /// loading them; the processes with work to resume are loaded and
    /// resumed (a store written before the wake index existed: every
    /// in-flight one, once); then the parked ones start in free places,
    /// and outbox records are replayed.
    pub(crate) async fn resume_all(&self) -> Result<(), EngineError> {
        let host = self.host()?;
        // Starts wait for the count, and the wake index of an older store
        // is filled before it ends: a process started meanwhile would
        // have its fresh wake row overwritten by the fill's "resume" and
        // be loaded again at the next start (found on PostgreSQL under
        // load: the fill ran behind the first starts of a fresh store).
        host.cache().begin_count();
        if let Err(e) = self.fill_wake_index().await {
            host.cache().end_count(None, Vec::new());
            return Err(e);
        }
        self.count_in_flight().await?;
        let procs = ProcRows::new(&self.store);
        if host.cache().count() > host.cache().cap() {
            // Over the cap: the oldest are admitted, as the reference's
            // restore does (this reads the rows: only when over the cap).
            let mut in_flight = Vec::new();
            for state in IN_FLIGHT {
                in_flight.extend(procs.in_state(state).await?);
            }
            in_flight.sort_by(|a, b| (a.timestamp, &a.id).cmp(&(b.timestamp, &b.id)));
            let admitted = host.cache().cap();
            host.cache()
                .queue_resume(in_flight.into_iter().skip(admitted).map(|r| r.id));
        }
        let mut resume = Vec::new();
        host.begin_touch();
        let wakes = BootRows::new(&self.store).wakes().await;
        let touched = host.end_touch();
        for wake in wakes? {
            if touched.contains(&wake.id) {
                // A transition since the scan began set its timer (and
                // resumed it, if it was loaded): the row may be older.
                continue;
            }
            if let Some(due) = wake.due {
                host.arm_timer(&wake.id, due);
            }
            if wake.resume {
                resume.push(wake.id);
            }
        }
        // A few at a time: each resumes, then (idle) may be unloaded
        // again, so memory stays within its limit however many there are.
        for pid in resume {
            let mut spins = 0u32;
            while host.resumes_in_flight() >= RESUMES_AT_ONCE && !host.is_closed() {
                spins += 1;
                if spins < 64 {
                    tokio::task::yield_now().await;
                } else {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
            }
            if host.is_closed() {
                return Ok(());
            }
            if host.cache().is_queued(&pid) {
                continue; // it resumes when it gets a place
            }
            if let Err(e) = host.load(&pid).await {
                warn!(pid = %pid, error = %e, "cannot resume a process; retried at the next start");
            }
        }
        host.refill();
        self.start_parked().await?;
        self.retry_outbox().await
    }
}
