//! Admission and the resident set: two limits, kept apart.
//!
//! - **Admission** (the cap, the reference's cache limit) counts the
//!   processes in flight that this engine admitted, resident or not. It is
//!   decided synchronously: [`Cache::admit`] runs under a plain mutex, with
//!   no store I/O and no `.await`: the pid is claimed (a second start of it
//!   is `Duplicated`), or, at the cap, the process is parked (its durable
//!   row waits in state `none`). Nothing admitted is ever evicted from
//!   admission to make room. An admitted process needs no instance in
//!   memory: the count is a number, not a set.
//! - **Residency** (`max_resident`, the memory limit) bounds how many
//!   processes are held in memory. A process that waits (for an interrupt,
//!   a timer or a subflow: nothing queued, no application package running)
//!   is *idle*; when more than `max_resident` processes are resident, the
//!   least recently idle ones are unloaded (under their lane, so never in
//!   the middle of a transition) and reloaded on demand.
//! - **One instance per pid.** Every resident process is one
//!   [`ProcHandle`]; concurrent misses for a pid share one load (a
//!   `OnceCell` per loading pid), including a miss that overlaps a load in
//!   flight. An unloaded handle is marked so under its lane: a caller that
//!   still holds it finds the mark and looks the pid up again.
//! - **Refill.** A finished process leaves admission; the freed places go
//!   first to in-flight processes that did not fit at boot, then to parked
//!   ones, oldest first, never above the cap. Places are claimed before any
//!   store I/O, so two refills never load the same row twice.
//! - **The boot count.** A restarted engine counts the processes in flight
//!   (their keys in the state index, no row) in the background. While it
//!   counts, starts wait and nothing is refilled; a process that ends
//!   meanwhile is noted, and left out of the count if the scan saw it, so
//!   the count is exact. All of them are admitted, unless there are more
//!   than the cap: then the newest wait in a queue, as the reference's
//!   restore does, and take places as they free.
//!
//! The cache only keeps handles, counts and queues; loading and running
//! processes is the runtime's job.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::engine::kernel::fair_queue::FairQueue;
pub use crate::engine::kernel::handle::ProcHandle;
pub(crate) use crate::engine::kernel::handle::{LoadCell, Slot};
use crate::engine::kernel::handle::{loading, waiting_load};
pub use crate::engine::kernel::key_slots::KeyUse;
use crate::engine::kernel::key_slots::{KeySlots, LetThrough};
use crate::engine::persist::rows::{ConcurrencySlot, QueueOrder};

pub(super) enum Entry {
    Resident(Arc<ProcHandle>),
    Loading(LoadCell),
}

/// The outcome of [`Cache::admit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// A slot was claimed for the pid.
    Admitted,
    /// The cap is reached: the process must be parked.
    Parked,
    /// Its concurrency key has no free slot: the process must be parked,
    /// and waits for its key before it waits for the cap.
    Waiting,
    /// The boot count runs: wait for it ([`Cache::counted`]) and ask
    /// again.
    Counting,
}

/// The idle resident processes, least recently idle first.
#[derive(Default)]
pub(super) struct IdleOrder {
    seq: u64,
    by_pid: HashMap<String, u64>,
    order: BTreeMap<u64, String>,
}

impl IdleOrder {
    fn touch(&mut self, pid: &str) {
        self.forget(pid);
        self.seq += 1;
        self.by_pid.insert(pid.to_owned(), self.seq);
        self.order.insert(self.seq, pid.to_owned());
    }

    fn forget(&mut self, pid: &str) {
        if let Some(seq) = self.by_pid.remove(pid) {
            self.order.remove(&seq);
        }
    }

    fn pop_oldest(&mut self) -> Option<String> {
        let (_, pid) = self.order.pop_first()?;
        self.by_pid.remove(&pid);
        Some(pid)
    }
}

#[derive(Default)]
pub(super) struct State {
    /// Resident and loading pids.
    pub(super) entries: HashMap<String, Entry>,
    /// How many in-flight processes are admitted (resident or not).
    pub(super) admitted: usize,
    /// The resident processes that wait, least recently idle first.
    pub(super) idle: IdleOrder,
    /// While the boot count runs: the pids that ended meanwhile. `None`
    /// when no count runs.
    pub(super) counting: Option<HashSet<String>>,
    /// The pids of `resume_queue` (in flight, not admitted yet).
    pub(super) queued: HashSet<String>,
    /// Parked processes known to this engine (their rows are stored),
    /// startable when a place frees, in the order they leave (priority,
    /// fairness, aging: [`FairQueue`]).
    pub(super) parked: FairQueue,
    /// The pids of `parked`, and of processes being parked (their rows
    /// not written yet: not startable).
    pub(super) parked_ids: HashSet<String>,
    /// In-flight processes found at boot that did not fit, oldest first
    /// (ones a caller waits for at the front).
    pub(super) resume_queue: VecDeque<String>,
    /// The loads callers wait on for queued in-flight pids (run when a
    /// slot is claimed for them).
    pub(super) waiting: HashMap<String, LoadCell>,
    /// Whether a store scan for parked rows is in progress.
    pub(super) scanning: bool,
    /// Whether the store may hold parked rows not in `parked` (true until
    /// a scan has read them all; set again when a scan was skipped).
    pub(super) parked_unknown: bool,
    /// The slots of the concurrency keys: who holds one, who waits.
    pub(super) slots: KeySlots,
}

/// Makes the parked waiters a key let through startable (they wait for a
/// place now).
pub(super) fn let_in(s: &mut State, through: Vec<LetThrough>) {
    for (ts, pid, order) in through {
        if s.parked_ids.contains(&pid) {
            s.parked.push(&pid, ts, &order);
        }
    }
}

/// Frees what `pid` holds of its concurrency key (a slot, or a place in
/// its queue) and makes the waiters that lets through startable.
fn free_key_slot(s: &mut State, pid: &str) {
    let through = s.slots.free(pid);
    let_in(s, through);
}

/// Enters a load of queued in-flight `pid` into a free place: the load a
/// caller waits for, when there is one (claimed now), else a new one.
fn enter_queued_load(s: &mut State, pid: &str) -> LoadCell {
    s.queued.remove(pid);
    s.resume_queue.retain(|p| p != pid);
    let cell = match s.waiting.remove(pid) {
        Some(cell) => {
            cell.mark_claimed();
            cell
        }
        None => loading(true),
    };
    s.admitted += 1;
    s.entries
        .insert(pid.to_owned(), Entry::Loading(cell.clone()));
    cell
}

/// Admission and the resident set (see the module docs).
pub struct Cache {
    pub(super) cap: usize,
    max_resident: usize,
    pub(super) state: Mutex<State>,
    pub(super) counted: tokio::sync::Notify,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("cap", &self.cap)
            .field("max_resident", &self.max_resident)
            .field("count", &self.count())
            .field("resident", &self.resident_count())
            .finish()
    }
}

/// What [`Cache::lookup`] found.
pub(crate) enum Lookup {
    /// The resident handle.
    Resident(Arc<ProcHandle>),
    /// A load to join (or to run, for the first caller).
    Load(LoadCell),
    /// The pid is in flight but was not admitted (it did not fit at
    /// boot) and the cap is reached: no load was started.
    Full,
}

impl Cache {
    /// Nothing admitted yet: at most `cap` processes in flight (at least
    /// one), at most `max_resident` held in memory while they wait (at
    /// least one).
    pub fn new(cap: usize, max_resident: usize) -> Self {
        Self {
            cap: cap.max(1),
            max_resident: max_resident.max(1),
            state: Mutex::new(State {
                parked_unknown: true,
                ..State::default()
            }),
            counted: tokio::sync::Notify::new(),
        }
    }

    /// The admission cap.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// The memory limit: most processes resident while they wait.
    pub fn max_resident(&self) -> usize {
        self.max_resident
    }

    /// How many in-flight processes are admitted (resident or not).
    pub fn count(&self) -> usize {
        self.state.lock().admitted
    }

    /// How many processes are held in memory (resident or loading).
    pub fn resident_count(&self) -> usize {
        self.state.lock().entries.len()
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

    /// Whether `pid` is resident (or loading): held in memory.
    pub fn contains(&self, pid: &str) -> bool {
        self.state.lock().entries.contains_key(pid)
    }

    /// The in-flight pids waiting for a slot, in the order they will load.
    pub fn pending_resume(&self) -> Vec<String> {
        self.state.lock().resume_queue.iter().cloned().collect()
    }

    /// Whether in-flight `pid` waits for a place (it did not fit at boot).
    pub fn is_queued(&self, pid: &str) -> bool {
        self.state.lock().queued.contains(pid)
    }

    /// The startable parked pids this engine knows of, highest priority
    /// first, oldest first within one.
    pub fn parked(&self) -> Vec<String> {
        self.state.lock().parked.pids()
    }

    /// Decides synchronously whether the process of `handle` may start
    /// now: it becomes resident (`Admitted`; the caller holds its lane until
    /// its first transition is durable), or must be parked (for a place,
    /// or — `slot` given and its key full — for its key). `Err(())` when
    /// the pid is resident, loading or parked already.
    pub(crate) fn admit(
        &self,
        handle: &Arc<ProcHandle>,
        slot: Option<&ConcurrencySlot>,
        order: &QueueOrder,
    ) -> Result<Admission, ()> {
        let pid = handle.pid();
        let mut s = self.state.lock();
        if s.entries.contains_key(pid) || s.parked_ids.contains(pid) || s.queued.contains(pid) {
            return Err(());
        }
        if s.counting.is_some() {
            return Ok(Admission::Counting);
        }
        if let Some(slot) = slot
            && !s.slots.take(pid, slot, order)
        {
            // Claimed, not startable: its row is written, then it waits
            // in its key's queue.
            s.parked_ids.insert(pid.to_owned());
            return Ok(Admission::Waiting);
        }
        if s.admitted < self.cap {
            s.admitted += 1;
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
    /// a place frees (one that waits for its key: when its key lets it
    /// through).
    pub(crate) fn parked_written(&self, pid: &str, timestamp: i64, order: &QueueOrder) {
        let mut s = self.state.lock();
        if !s.parked_ids.contains(pid) {
            return;
        }
        match s.slots.waiter_written(pid, timestamp) {
            Some(through) => let_in(&mut s, through),
            None => s.parked.push(pid, timestamp, order),
        }
    }

    /// Forgets a parked pid (its start was refused, its row not written, or
    /// the process removed); a slot of its key it held is free.
    pub(crate) fn unpark(&self, pid: &str) {
        let mut s = self.state.lock();
        if s.parked_ids.remove(pid) {
            s.parked.remove(pid);
            free_key_slot(&mut s, pid);
        }
    }

    /// Whether `pid` holds a slot of its concurrency key.
    pub fn holds_key_slot(&self, pid: &str) -> bool {
        self.state.lock().slots.holds(pid) == Some(true)
    }

    /// Every concurrency key in use: how many processes hold one of its
    /// slots and how many wait, by key.
    pub fn keys_in_use(&self) -> Vec<KeyUse> {
        self.state.lock().slots.groups()
    }

    /// The resident handle of `pid`, if it is resident.
    pub fn resident_handle(&self, pid: &str) -> Option<Arc<ProcHandle>> {
        match self.state.lock().entries.get(pid) {
            Some(Entry::Resident(h)) => Some(h.clone()),
            _ => None,
        }
    }

    /// The resident handle of `pid`, or the load to join (or to run, for
    /// the first caller). Loading an admitted process that was unloaded,
    /// or reading a parked or finished one, admits nothing; only an
    /// in-flight process that did not fit at boot needs a place.
    pub(crate) fn lookup(&self, pid: &str) -> Lookup {
        let mut s = self.state.lock();
        match s.entries.get(pid) {
            Some(Entry::Resident(h)) => return Lookup::Resident(h.clone()),
            Some(Entry::Loading(cell)) => return Lookup::Load(cell.clone()),
            None => {}
        }
        if s.queued.contains(pid) {
            if s.admitted < self.cap {
                return Lookup::Load(enter_queued_load(&mut s, pid));
            }
            return Lookup::Full;
        }
        let cell = loading(false);
        s.entries
            .insert(pid.to_owned(), Entry::Loading(cell.clone()));
        Lookup::Load(cell)
    }

    /// For a caller that needs queued in-flight process `pid` while the
    /// cap is reached: the resident handle or a load to join when one
    /// appeared meanwhile; else a load that runs once a place is claimed
    /// for it (`pid` goes to the front of the queue, so it is the next to
    /// get one).
    pub(crate) fn wait_slot(&self, pid: &str) -> Lookup {
        let mut s = self.state.lock();
        match s.entries.get(pid) {
            Some(Entry::Resident(h)) => return Lookup::Resident(h.clone()),
            Some(Entry::Loading(cell)) => return Lookup::Load(cell.clone()),
            None => {}
        }
        if !s.queued.contains(pid) {
            // Admitted meanwhile (and unloaded again): load it.
            let cell = loading(false);
            s.entries
                .insert(pid.to_owned(), Entry::Loading(cell.clone()));
            return Lookup::Load(cell);
        }
        if s.admitted < self.cap {
            return Lookup::Load(enter_queued_load(&mut s, pid));
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
    /// is only read). A load that was to start the process (a refill) and
    /// kept nothing gives its place back.
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
                if cell.start {
                    s.admitted = s.admitted.saturating_sub(1);
                }
            }
        }
    }

    /// Drops `pid` from memory (its rows stay in the store; it stays
    /// admitted if it is in flight). The instance is marked gone under its
    /// lane when the lane is free, so a caller still holding it loads the
    /// pid again; a busy instance is only dropped from the set. Returns
    /// whether it was resident.
    pub fn evict(&self, pid: &str) -> bool {
        let entry = {
            let mut s = self.state.lock();
            s.idle.forget(pid);
            s.entries.remove(pid)
        };
        match entry {
            Some(Entry::Resident(h)) => {
                if let Ok(mut slot) = h.lane.try_lock() {
                    slot.process = None;
                }
                true
            }
            Some(Entry::Loading(_)) => true,
            None => false,
        }
    }

    /// Forgets the entry of `pid` if it is `handle` (its instance is gone:
    /// unloaded, discarded, removed or finished; admission is the caller's
    /// business).
    pub(crate) fn forget(&self, pid: &str, handle: &Arc<ProcHandle>) {
        let mut s = self.state.lock();
        if matches!(s.entries.get(pid), Some(Entry::Resident(h)) if Arc::ptr_eq(h, handle)) {
            s.entries.remove(pid);
        }
        s.idle.forget(pid);
    }

    /// An admitted process left flight (its terminal state is durable, or
    /// it was removed, or its start was refused before anything was
    /// stored): its place is free, and so is the slot of its key.
    pub(crate) fn release(&self, pid: &str) {
        let mut s = self.state.lock();
        s.idle.forget(pid);
        free_key_slot(&mut s, pid);
        match &mut s.counting {
            // The count decides whether it still counts.
            Some(ended) => {
                ended.insert(pid.to_owned());
            }
            None => s.admitted = s.admitted.saturating_sub(1),
        }
    }

    /// Takes `pid` out of the queue of in-flight processes waiting for a
    /// place (it was removed); `true` when it was queued (never admitted).
    pub(crate) fn unqueue(&self, pid: &str) -> bool {
        let mut s = self.state.lock();
        if s.queued.remove(pid) {
            s.resume_queue.retain(|p| p != pid);
            s.waiting.remove(pid);
            free_key_slot(&mut s, pid);
            true
        } else {
            false
        }
    }

    /// Notes whether resident `pid` now waits (idle: it may be unloaded)
    /// or has work in hand.
    pub(crate) fn note_idle(&self, pid: &str, idle: bool) {
        let mut s = self.state.lock();
        if idle {
            s.idle.touch(pid);
        } else {
            s.idle.forget(pid);
        }
    }

    /// While more processes are held than `max_resident`: the least
    /// recently idle ones, to unload (the caller checks each under its
    /// lane and calls [`unloaded`](Self::unloaded)).
    pub(crate) fn over_limit(&self) -> Vec<Arc<ProcHandle>> {
        let mut s = self.state.lock();
        let mut excess = s.entries.len().saturating_sub(self.max_resident);
        let mut out = Vec::new();
        while excess > 0 {
            let Some(pid) = s.idle.pop_oldest() else {
                break;
            };
            if let Some(Entry::Resident(h)) = s.entries.get(&pid) {
                out.push(h.clone());
                excess -= 1;
            }
        }
        out
    }
}
