//! Loading processes, refilling free slots, and recovery on start: the
//! resident set's I/O side (the cache itself decides without I/O).

use std::sync::Arc;

use tracing::{debug, warn};

use crate::durable::{CollectionError, Row};
use crate::scheduler::{Action, TaskState};

use crate::engine::kernel::cache::{LoadCell, Lookup, ProcHandle};
use crate::engine::kernel::handle::pid_hash;
use crate::engine::kernel::shared::Kernel;
use crate::engine::persist;
use crate::engine::persist::boot_rows::BootRows;
use crate::engine::persist::delivery_rows::{
    DELIVERY_INDEX, DELIVERY_INDEX_GENERATION, DeliveryRow,
};
use crate::engine::persist::proc_rows::ProcRows;
use crate::engine::persist::rows::{
    OpRow, PROC_INDEX, PROC_INDEX_ENTRIES_SINCE, PROC_INDEX_GENERATION, ProcRow,
    WAKE_INDEX_COMPLETE,
};
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
                if let Err(e) = rt2.start_parked().await {
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

    /// Reads parked rows from the store into the parked queue (one scan at
    /// a time; none when the set is full), then refills.
    pub(crate) async fn start_parked(&self) -> Result<(), EngineError> {
        if !self.cache.begin_scan() {
            return Ok(());
        }
        let rows = ProcRows::new(&self.store).in_state(TaskState::None).await;
        self.cache.end_scan(rows.is_ok());
        let rows = rows?;
        self.cache.note_parked(
            rows.into_iter()
                .map(|r| (r.timestamp, r.id, r.slot, r.order)),
        );
        self.refill();
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
        self.cache.begin_count();
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
                self.cache.end_count(Some(seen), holders);
                Ok(())
            }
            Err(e) => {
                self.cache.end_count(None, Vec::new());
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
        let holders = self.key_holders().await?;
        self.cache.begin_count();
        self.cache.end_count(Some(Vec::new()), holders);
        Ok(())
    }

    /// Boot, before anything else touches process or delivery rows: on a
    /// store whose rows were written before an index of [`ProcRow`] or
    /// [`DeliveryRow`] existed (its fact below the generation), writes
    /// every such row's index entries (idempotent puts, a batch per chunk
    /// of rows) and deletes the entries of indexes retired since
    /// ([`Row::RETIRED`]), then the facts in one batch, with `also` (the
    /// store format's fact). Once per store.
    pub(crate) async fn fill_indexes(
        &self,
        also: Option<acts_store::BatchOp>,
    ) -> Result<(), EngineError> {
        let mut facts: Vec<_> = also.into_iter().collect();
        facts.extend(
            self.fill_index::<ProcRow>(PROC_INDEX, PROC_INDEX_GENERATION, PROC_INDEX_ENTRIES_SINCE)
                .await?,
        );
        facts.extend(
            self.fill_index::<DeliveryRow>(
                DELIVERY_INDEX,
                DELIVERY_INDEX_GENERATION,
                DELIVERY_INDEX_GENERATION,
            )
            .await?,
        );
        // The facts together, after every entry they vouch for.
        if !facts.is_empty() {
            self.write(None, facts).await?;
        }
        Ok(())
    }

    /// Fills in `R`'s index entries unless fact `fact` says `generation`
    /// is stored (only the retired ones' are deleted when it says
    /// `entries_since` or later); the op that then records the fact.
    async fn fill_index<R: Row>(
        &self,
        fact: &str,
        generation: u64,
        entries_since: u64,
    ) -> Result<Option<acts_store::BatchOp>, EngineError> {
        let boot = BootRows::new(&self.store);
        let stored = boot.fact(fact).await?.and_then(|v| v.as_u64()).unwrap_or(0);
        if stored >= generation {
            return Ok(None);
        }
        let mut filled = 0usize;
        // Written since `entries_since`, with every row: nothing to fill.
        if stored < entries_since {
            let mut after = None;
            loop {
                let page = boot.fill_page::<R>(after).await?;
                filled += page.rows;
                if !page.ops.is_empty() {
                    self.write(None, page.ops).await?;
                }
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
        }
        // Entries of indexes the rows no longer keep: deleted, a batch per
        // chunk (nothing reads them; left, they would go stale).
        let mut retired = 0usize;
        loop {
            let ops = boot.retired_entries::<R>().await?;
            if ops.is_empty() {
                break;
            }
            retired += ops.len();
            self.write(None, ops).await?;
        }
        if filled > 0 || retired > 0 {
            tracing::info!(
                rows = filled,
                retired_entries = retired,
                collection = R::COLLECTION,
                "filled in the indexes of an older store"
            );
        }
        Ok(Some(BootRows::fact_op(
            fact,
            serde_json::Value::from(generation),
        )))
    }

    /// A store written before the wake index existed (or a fresh one):
    /// every in-flight process gets a wake row that says "resume" (its
    /// resume transition then writes what it really needs), and the index
    /// is marked complete in the last batch. (A process loaded on demand
    /// meanwhile may have its row overwritten: it is resumed once more,
    /// which writes its row again.)
    async fn fill_wake_index(&self) -> Result<(), EngineError> {
        if BootRows::new(&self.store)
            .fact(WAKE_INDEX_COMPLETE)
            .await?
            .is_some()
        {
            return Ok(());
        }
        let procs = ProcRows::new(&self.store);
        let mut ids = Vec::new();
        for state in IN_FLIGHT {
            procs.ids_in_state(state, |chunk| ids.extend(chunk)).await?;
        }
        for chunk in ids.chunks(1024) {
            let ops = chunk.iter().map(|id| BootRows::resume_op(id)).collect();
            self.write(None, ops).await?;
        }
        self.write(
            None,
            vec![BootRows::fact_op(
                WAKE_INDEX_COMPLETE,
                serde_json::Value::Bool(true),
            )],
        )
        .await?;
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
        // Starts wait for the count, and the wake index of an older store
        // is filled before it ends: a process started meanwhile would
        // have its fresh wake row overwritten by the fill's "resume" and
        // be loaded again at the next start (found on PostgreSQL under
        // load: the fill ran behind the first starts of a fresh store).
        self.cache.begin_count();
        if let Err(e) = self.fill_wake_index().await {
            self.cache.end_count(None, Vec::new());
            return Err(e);
        }
        self.count_in_flight().await?;
        let procs = ProcRows::new(&self.store);
        if self.cache.count() > self.cache.cap() {
            // Over the cap: the oldest are admitted, as the reference's
            // restore does (this reads the rows: only when over the cap).
            let mut in_flight = Vec::new();
            for state in IN_FLIGHT {
                in_flight.extend(procs.in_state(state).await?);
            }
            in_flight.sort_by(|a, b| (a.timestamp, &a.id).cmp(&(b.timestamp, &b.id)));
            let admitted = self.cache.cap();
            self.cache
                .queue_resume(in_flight.into_iter().skip(admitted).map(|r| r.id));
        }
        let mut resume = Vec::new();
        self.timers.begin_touch();
        let wakes = BootRows::new(&self.store).wakes().await;
        let touched = self.timers.end_touch();
        for wake in wakes? {
            if touched.contains(&wake.id) {
                // A transition since the scan began set its timer (and
                // resumed it, if it was loaded): the row may be older.
                continue;
            }
            if let Some(due) = wake.due {
                self.arm_timer(&wake.id, Some(due));
            }
            if wake.resume {
                resume.push(wake.id);
            }
        }
        // A few at a time: each resumes, then (idle) may be unloaded
        // again, so memory stays within its limit however many there are.
        for pid in resume {
            let mut spins = 0u32;
            while self.work.resumes_in_flight() >= RESUMES_AT_ONCE && !self.is_closed() {
                spins += 1;
                if spins < 64 {
                    tokio::task::yield_now().await;
                } else {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
            }
            if self.is_closed() {
                return Ok(());
            }
            if self.cache.is_queued(&pid) {
                continue; // it resumes when it gets a place
            }
            if let Err(e) = self.handle(&pid).await {
                warn!(pid = %pid, error = %e, "cannot resume a process; retried at the next start");
            }
        }
        self.refill();
        self.start_parked().await?;
        self.retry_outbox().await
    }

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
        let delete = BootRows::delete_outbox_ops(&op);
        let Ok(action) = op.action.parse::<Action>() else {
            return self.write(None, delete).await;
        };
        let Some(handle) = self.handle(&op.pid).await? else {
            // The parent is gone: nothing left to tell.
            return self.write(None, delete).await;
        };
        let r = self
            .transition(&handle, delete.clone(), |p, svc| {
                p.act(&op.tid, action, op.options.clone(), svc)
            })
            .await;
        match r {
            Ok(()) => Ok(()),
            Err(EngineError::Action(e)) => {
                debug!(error = %e, "outbox record already settled");
                self.write(None, delete).await
            }
            Err(e) => Err(e),
        }
    }
}
