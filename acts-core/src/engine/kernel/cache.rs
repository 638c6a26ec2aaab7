//! The resident set: the live processes, capped.
//!
//! - **One instance per pid.** Every resident process is one
//!   [`ProcHandle`]; concurrent misses for a pid share one load (a
//!   `OnceCell` per loading pid), including a miss that overlaps a load in
//!   flight.
//! - **Admission is synchronous.** [`Cache::admit`] decides under a plain
//!   mutex, with no store I/O and no `.await`: the pid is claimed (a second
//!   start of it is `Duplicated`), or, over the cap, the process is parked
//!   (its durable row waits in state `none`). Nothing resident is evicted
//!   to make room.
//! - **Refill.** A finished process is evicted; the freed slots go first to
//!   in-flight processes queued at boot, then to parked ones, oldest first,
//!   never above the cap. Slots are claimed before any store I/O, so two
//!   refills never load the same row twice.
//!
//! The cache only keeps handles and queues; loading and running processes
//! is the runtime's job.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::OnceCell;

use crate::scheduler::Process;
use crate::time::TimerId;

use crate::engine::persist::Persisted;

/// A resident process and its lane: the async mutex every transition of
/// the process holds from running the core until its batch is durable, so
/// the transitions of one process are applied and committed in order.
pub struct ProcHandle {
    pid: String,
    /// The writer epoch this instance was created at (its batches carry
    /// it, so a write of an instance from before a removal is skipped).
    pub(crate) born: u64,
    pub(crate) lane: Arc<tokio::sync::Mutex<Slot>>,
    /// How many transitions of this instance committed (bumped under the
    /// lane): what is read before taking the lane is still current when
    /// this has not moved meanwhile.
    pub(crate) commits: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for ProcHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcHandle")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl ProcHandle {
    pub(crate) fn new(process: Process, persisted: Persisted, born: u64) -> Arc<Self> {
        Arc::new(Self {
            pid: process.pid.clone(),
            born,
            lane: Arc::new(tokio::sync::Mutex::new(Slot {
                process: Some(process),
                persisted,
                timer: None,
            })),
            commits: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The process id.
    pub fn pid(&self) -> &str {
        &self.pid
    }
}

/// What a lane guards.
pub(crate) struct Slot {
    /// The process; `None` once discarded (a failed commit, a removal):
    /// the store is the truth and the next use reloads it.
    pub process: Option<Process>,
    /// What is stored for it.
    pub persisted: Persisted,
    /// Its armed timeout timer and when it is due.
    pub timer: Option<(TimerId, i64)>,
}

/// A load in flight: every caller that misses the pid meanwhile joins it.
pub(crate) struct Loading {
    /// The outcome of the one load: the handle (`None`: no such process)
    /// or the error every joined caller gets. Set once; a failed load is
    /// never retried on the same cell (a later miss starts a new load), so
    /// two loads of one pid can never both install an instance.
    pub cell: OnceCell<Result<Option<Arc<ProcHandle>>, crate::engine::api::error::EngineError>>,
    /// Whether the load starts the process (a refill) rather than only
    /// fetching it (a demand load).
    pub start: bool,
    /// Set when a slot was claimed for the load (a caller that waits for a
    /// slot loads only then).
    claimed: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

impl Loading {
    /// Resolves once a slot is claimed for this load.
    pub(crate) async fn wait_claimed(&self) {
        use std::sync::atomic::Ordering;
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.claimed.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }

    fn mark_claimed(&self) {
        self.claimed
            .store(true, std::sync::atomic::Ordering::Release);
        self.notify.notify_waiters();
    }
}

pub(crate) type LoadCell = Arc<Loading>;

fn loading(start: bool) -> LoadCell {
    Arc::new(Loading {
        cell: OnceCell::new(),
        start,
        claimed: std::sync::atomic::AtomicBool::new(true),
        notify: tokio::sync::Notify::new(),
    })
}

/// A load that waits for a slot before it runs.
fn waiting_load() -> LoadCell {
    Arc::new(Loading {
        cell: OnceCell::new(),
        start: true,
        claimed: std::sync::atomic::AtomicBool::new(false),
        notify: tokio::sync::Notify::new(),
    })
}

enum Entry {
    Resident(Arc<ProcHandle>),
    Loading(LoadCell),
}

/// The outcome of [`Cache::admit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// A slot was claimed for the pid.
    Admitted,
    /// The set is full: the process must be parked.
    Parked,
}

#[derive(Default)]
struct State {
    /// Resident and loading pids (an admitted pid is `Loading` until its
    /// handle is installed).
    entries: HashMap<String, Entry>,
    /// Parked processes known to this engine (their rows are stored),
    /// oldest first.
    parked: BTreeSet<(i64, String)>,
    /// The pids of `parked`, and of processes being parked (their rows
    /// not written yet: not startable).
    parked_ids: HashSet<String>,
    /// In-flight processes found at boot that did not fit, oldest first
    /// (ones a caller waits for at the front).
    resume_queue: VecDeque<String>,
    /// The loads callers wait on for queued in-flight pids (run when a
    /// slot is claimed for them).
    waiting: HashMap<String, LoadCell>,
    /// Whether a store scan for parked rows is in progress.
    scanning: bool,
    /// Whether the store may hold parked rows not in `parked` (true until
    /// a scan has read them all; set again when a scan was skipped).
    parked_unknown: bool,
}

impl State {
    fn count(&self) -> usize {
        self.entries.len()
    }
}

/// Enters a demand load of `pid` into a free slot: the load a caller waits
/// for, when there is one (claimed now), else a new one.
fn enter_load(s: &mut State, pid: &str) -> LoadCell {
    let cell = match s.waiting.remove(pid) {
        Some(cell) => {
            s.resume_queue.retain(|p| p != pid);
            cell.mark_claimed();
            cell
        }
        None => loading(false),
    };
    s.entries
        .insert(pid.to_owned(), Entry::Loading(cell.clone()));
    cell
}

/// The resident set (see the module docs).
pub struct Cache {
    cap: usize,
    state: Mutex<State>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("cap", &self.cap)
            .field("count", &self.count())
            .finish()
    }
}

/// What [`Cache::lookup`] found.
pub(crate) enum Lookup {
    /// The resident handle.
    Resident(Arc<ProcHandle>),
    /// A load to join (or to run, for the first caller).
    Load(LoadCell),
    /// The set is full and the pid is not in it: no load was started.
    Full,
}

impl Cache {
    /// An empty set holding at most `cap` processes (at least one).
    pub fn new(cap: usize) -> Self {
        Self {
            cap: cap.max(1),
            state: Mutex::new(State {
                parked_unknown: true,
                ..State::default()
            }),
        }
    }

    /// The cap.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// How many slots are taken (resident, loading or claimed).
    pub fn count(&self) -> usize {
        self.state.lock().count()
    }

    /// How many loads are in flight (claimed slots not yet resident).
    pub fn loading(&self) -> usize {
        self.state
            .lock()
            .entries
            .values()
            .filter(|e| matches!(e, Entry::Loading(_)))
            .count()
    }

    /// How many callers wait on the in-flight load of `pid` (0 when it is
    /// not loading). A test hook (feature `testing`) for tests that prove a
    /// caller joined a load before letting it finish.
    #[cfg(feature = "testing")]
    pub fn load_callers(&self, pid: &str) -> usize {
        match self.state.lock().entries.get(pid) {
            // The entry itself holds one reference; each caller another.
            Some(Entry::Loading(cell)) => Arc::strong_count(cell) - 1,
            _ => 0,
        }
    }

    /// The pids of the resident processes.
    pub fn resident(&self) -> Vec<String> {
        self.state
            .lock()
            .entries
            .iter()
            .filter(|(_, e)| matches!(e, Entry::Resident(_)))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Whether `pid` is resident (or loading).
    pub fn contains(&self, pid: &str) -> bool {
        self.state.lock().entries.contains_key(pid)
    }

    /// The in-flight pids waiting for a slot, in the order they will load.
    pub fn pending_resume(&self) -> Vec<String> {
        self.state.lock().resume_queue.iter().cloned().collect()
    }

    /// The parked pids this engine knows of, oldest first.
    pub fn parked(&self) -> Vec<String> {
        self.state
            .lock()
            .parked
            .iter()
            .map(|(_, p)| p.clone())
            .collect()
    }

    /// Decides synchronously whether the process of `handle` may start
    /// now: it becomes resident (`Admitted`; the caller holds its lane until
    /// its first transition is durable), or must be parked. `Err(())` when
    /// the pid is resident, loading or parked already.
    pub(crate) fn admit(&self, handle: &Arc<ProcHandle>) -> Result<Admission, ()> {
        let pid = handle.pid();
        let mut s = self.state.lock();
        if s.entries.contains_key(pid) || s.parked_ids.contains(pid) {
            return Err(());
        }
        if s.count() < self.cap {
            s.entries
                .insert(pid.to_owned(), Entry::Resident(handle.clone()));
            Ok(Admission::Admitted)
        } else {
            // Claimed, not startable until its row is written
            // ([`parked_written`](Self::parked_written)).
            s.parked_ids.insert(pid.to_owned());
            Ok(Admission::Parked)
        }
    }

    /// A process admitted as parked has its row stored: it may start when
    /// a slot frees.
    pub(crate) fn parked_written(&self, pid: &str, timestamp: i64) {
        let mut s = self.state.lock();
        if s.parked_ids.contains(pid) {
            s.parked.insert((timestamp, pid.to_owned()));
        }
    }

    /// Forgets a parked pid (its start was refused, its row not written, or
    /// the process removed).
    pub(crate) fn unpark(&self, pid: &str) {
        let mut s = self.state.lock();
        if s.parked_ids.remove(pid) {
            s.parked.retain(|(_, p)| p != pid);
        }
    }

    /// The resident handle of `pid`, if it is resident.
    pub fn resident_handle(&self, pid: &str) -> Option<Arc<ProcHandle>> {
        match self.state.lock().entries.get(pid) {
            Some(Entry::Resident(h)) => Some(h.clone()),
            _ => None,
        }
    }

    /// The resident handle of `pid`, or the load to join.
    pub(crate) fn lookup(&self, pid: &str) -> Lookup {
        let mut s = self.state.lock();
        match s.entries.get(pid) {
            Some(Entry::Resident(h)) => Lookup::Resident(h.clone()),
            Some(Entry::Loading(cell)) => Lookup::Load(cell.clone()),
            None if s.count() < self.cap => Lookup::Load(enter_load(&mut s, pid)),
            None => Lookup::Full,
        }
    }

    /// For a caller that needs in-flight process `pid` resident while the
    /// set is full: the resident handle or a load to join when one
    /// appeared meanwhile; else a load that runs once a slot is claimed
    /// for it (`pid` goes to the front of the queue, so it is the next to
    /// get a slot).
    pub(crate) fn wait_slot(&self, pid: &str) -> Lookup {
        let mut s = self.state.lock();
        match s.entries.get(pid) {
            Some(Entry::Resident(h)) => return Lookup::Resident(h.clone()),
            Some(Entry::Loading(cell)) => return Lookup::Load(cell.clone()),
            None => {}
        }
        if s.count() < self.cap {
            return Lookup::Load(enter_load(&mut s, pid));
        }
        if let Some(cell) = s.waiting.get(pid) {
            return Lookup::Load(cell.clone());
        }
        let cell = waiting_load();
        s.waiting.insert(pid.to_owned(), cell.clone());
        s.resume_queue.retain(|p| p != pid);
        s.resume_queue.push_front(pid.to_owned());
        Lookup::Load(cell)
    }

    /// Ends a load of `pid`: the loaded handle becomes resident (`keep`),
    /// or the entry is dropped (no process, a parked or finished one that
    /// is only read).
    pub(crate) fn finish_load(
        &self,
        pid: &str,
        cell: &LoadCell,
        handle: Option<&Arc<ProcHandle>>,
        keep: bool,
    ) {
        let mut s = self.state.lock();
        // Only this load's own entry is replaced or dropped.
        if !matches!(s.entries.get(pid), Some(Entry::Loading(c)) if Arc::ptr_eq(c, cell)) {
            return;
        }
        match (handle, keep) {
            (Some(h), true) => {
                s.entries.insert(pid.to_owned(), Entry::Resident(h.clone()));
            }
            _ => {
                s.entries.remove(pid);
            }
        }
    }

    /// Evicts `pid` (its rows stay in the store). Returns whether it was
    /// resident.
    pub fn evict(&self, pid: &str) -> bool {
        self.state.lock().entries.remove(pid).is_some()
    }

    /// Queues in-flight pids that did not fit at boot (skipping queued,
    /// resident ones).
    pub(crate) fn queue_resume(&self, pids: impl IntoIterator<Item = String>) {
        let mut s = self.state.lock();
        for pid in pids {
            if !s.entries.contains_key(&pid) && !s.resume_queue.contains(&pid) {
                s.resume_queue.push_back(pid);
            }
        }
    }

    /// Records parked rows found in the store.
    pub(crate) fn note_parked(&self, rows: impl IntoIterator<Item = (i64, String)>) {
        let mut s = self.state.lock();
        for (ts, pid) in rows {
            if !s.entries.contains_key(&pid) && s.parked_ids.insert(pid.clone()) {
                s.parked.insert((ts, pid));
            }
        }
    }

    /// Claims free slots for queued work: in-flight pids first, then parked
    /// ones oldest first. Each claimed pid is entered as loading, so nobody
    /// else loads it; the caller loads and starts them.
    pub(crate) fn claim_refill(&self) -> Vec<(String, LoadCell, bool)> {
        let mut s = self.state.lock();
        let mut out = Vec::new();
        while s.count() < self.cap {
            let (pid, parked) = if let Some(pid) = s.resume_queue.pop_front() {
                (pid, false)
            } else if let Some((_, pid)) = s.parked.pop_first() {
                s.parked_ids.remove(&pid);
                (pid, true)
            } else {
                break;
            };
            let waited = s.waiting.remove(&pid);
            if s.entries.contains_key(&pid) {
                continue;
            }
            let cell = waited.unwrap_or_else(|| loading(true));
            s.entries.insert(pid.clone(), Entry::Loading(cell.clone()));
            cell.mark_claimed();
            out.push((pid, cell, parked));
        }
        out
    }

    /// Starts a scan for parked rows unless one is running or the set is
    /// full; returns whether the caller should scan.
    pub(crate) fn begin_scan(&self) -> bool {
        let mut s = self.state.lock();
        if s.scanning {
            return false;
        }
        if s.count() >= self.cap {
            // Nothing could start now; a freed slot scans later.
            s.parked_unknown = true;
            return false;
        }
        s.scanning = true;
        true
    }

    /// Ends the scan begun by [`begin_scan`](Self::begin_scan); `complete`
    /// when it read every parked row.
    pub(crate) fn end_scan(&self, complete: bool) {
        let mut s = self.state.lock();
        s.scanning = false;
        if complete {
            s.parked_unknown = false;
        }
    }

    /// Whether free slots are waiting for a scan of parked rows the engine
    /// has not read yet.
    pub(crate) fn wants_scan(&self) -> bool {
        let s = self.state.lock();
        s.parked_unknown
            && !s.scanning
            && s.count() < self.cap
            && s.resume_queue.is_empty()
            && s.parked.is_empty()
    }
}
