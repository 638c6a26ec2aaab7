//! The admission side of [`Cache`] that is not one start: the boot count
//! (exact while processes end during it), the queue of in-flight processes
//! that did not fit at boot, parked rows, and claiming free places for
//! them.

use std::collections::HashSet;

use crate::engine::kernel::cache::{Cache, Entry, let_in};
use crate::engine::kernel::handle::{LoadCell, loading, pid_hash};
use crate::engine::persist::rows::{ConcurrencySlot, QueueOrder};

/// A parked row the engine learns of: its admission time, pid, concurrency
/// slot and queue order.
pub(crate) type FoundParked = (i64, String, Option<ConcurrencySlot>, Option<QueueOrder>);

impl Cache {
    /// Begins the boot count (see the module docs): starts wait and
    /// nothing is refilled until [`end_count`](Self::end_count).
    pub(crate) fn begin_count(&self) {
        let mut s = self.state.lock();
        if s.counting.is_none() {
            s.counting = Some(HashSet::new());
        }
        s.slots.begin_count();
    }
    /// Ends the boot count with the pids the scan found in flight (as
    /// [`pid_hash`]es; `None` when the scan failed: the figure stays as it
    /// was, and the count runs again later). The processes that ended
    /// while it ran are left out. When the count is above the cap,
    /// [`queue_resume`](Self::queue_resume) then takes the newest out of
    /// admission. `holders` are the in-flight processes holding a slot of
    /// a concurrency key, `(key, pid)`, read in the same count (ignored
    /// when `seen` is `None`: keyed starts keep waiting).
    pub(crate) fn end_count(&self, seen: Option<Vec<u64>>, holders: Vec<(String, String)>) {
        let mut s = self.state.lock();
        let ended = s.counting.take().unwrap_or_default();
        if seen.is_some() {
            let through = s.slots.counted(holders, |pid| ended.contains(pid));
            let_in(&mut s, through);
        }
        if let Some(mut seen) = seen {
            seen.sort_unstable();
            seen.dedup();
            let counted = |pid: &String| seen.binary_search(&pid_hash(pid)).is_ok();
            let gone = ended.iter().filter(|p| counted(p)).count();
            // In flight but waiting for a place (an earlier count queued
            // them): not admitted.
            let waiting = s
                .queued
                .iter()
                .filter(|p| counted(p) && !ended.contains(*p))
                .count();
            s.admitted = seen.len().saturating_sub(gone + waiting);
        } else {
            // No count: the ends it held back apply now.
            s.admitted = s.admitted.saturating_sub(ended.len());
        }
        drop(s);
        self.counted.notify_waiters();
    }
    /// Resolves once no boot count runs.
    pub(crate) async fn counted(&self) {
        loop {
            let notified = self.counted.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.state.lock().counting.is_none() {
                return;
            }
            notified.await;
        }
    }
    /// Queues in-flight pids that did not fit at boot, taking each out of
    /// admission (queued and resident ones are skipped: resident ones are
    /// admitted).
    pub(crate) fn queue_resume(&self, pids: impl IntoIterator<Item = String>) {
        let mut s = self.state.lock();
        for pid in pids {
            if s.entries.contains_key(&pid) {
                continue;
            }
            if s.queued.insert(pid.clone()) {
                s.resume_queue.push_back(pid);
                s.admitted = s.admitted.saturating_sub(1);
            }
        }
    }
    /// Holds parked process `pid` (admitted at `timestamp`) back from
    /// being started while a migration rewrites its row: `false` when it
    /// is being started or read right now. Scans of parked rows do not add
    /// it meanwhile (its pid counts as parked). Undone by
    /// [`release_parked`](Self::release_parked).
    pub(crate) fn hold_parked(&self, pid: &str) -> bool {
        let mut s = self.state.lock();
        if s.entries.contains_key(pid) {
            return false;
        }
        s.parked.remove(pid);
        s.parked_ids.insert(pid.to_owned());
        s.slots.hold_back(pid);
        true
    }
    /// Lets a parked process held by [`hold_parked`](Self::hold_parked)
    /// start when a place frees (unless it was removed meanwhile).
    pub(crate) fn release_parked(&self, pid: &str, timestamp: i64, order: &QueueOrder) {
        // As if its row were written now: startable, or back in its key's
        // queue.
        self.parked_written(pid, timestamp, order);
    }
    /// Records parked rows found in the store: startable when a place
    /// frees (in their queue order), or — a keyed one whose key is full —
    /// waiting for its key.
    pub(crate) fn note_parked(&self, rows: impl IntoIterator<Item = FoundParked>) {
        let mut s = self.state.lock();
        for (ts, pid, slot, order) in rows {
            if s.entries.contains_key(&pid) || !s.parked_ids.insert(pid.clone()) {
                continue;
            }
            let order = order.unwrap_or_default();
            let startable = match &slot {
                Some(slot) => match s.slots.found_parked(&pid, ts, slot, &order) {
                    // It, or the waiters its queueing let through.
                    Some(through) => through,
                    // Known: it holds its slot (a claim whose load failed
                    // and was given back), or waits.
                    None if s.slots.holds(&pid) == Some(true) => vec![(ts, pid, order)],
                    None => Vec::new(),
                },
                None => vec![(ts, pid, order)],
            };
            let_in(&mut s, startable);
        }
    }
    /// Claims free places for queued work: in-flight pids first, then
    /// parked ones oldest first. Each claimed pid is admitted and entered
    /// as loading, so nobody else loads it; the caller loads and starts
    /// them.
    pub(crate) fn claim_refill(&self) -> Vec<(String, LoadCell, bool)> {
        let mut s = self.state.lock();
        let mut out = Vec::new();
        while s.counting.is_none() && s.admitted < self.cap {
            let (pid, parked) = if let Some(pid) = s.resume_queue.pop_front() {
                s.queued.remove(&pid);
                (pid, false)
            } else if let Some((_, pid)) = s.parked.pop() {
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
            s.admitted += 1;
            s.entries.insert(pid.clone(), Entry::Loading(cell.clone()));
            cell.mark_claimed();
            out.push((pid, cell, parked));
        }
        out
    }
    /// Takes back a claim whose load failed (the store could not answer):
    /// an in-flight pid waits in the queue again; a parked one is found
    /// again by the next scan of parked rows. Neither is retried at once
    /// (the store just failed): the housekeeping tick refills.
    pub(crate) fn unclaim_failed(&self, pid: &str, parked: bool) {
        let mut s = self.state.lock();
        if s.entries.contains_key(pid) {
            return; // loaded meanwhile by someone else
        }
        if parked {
            s.parked_unknown = true;
        } else if s.queued.insert(pid.to_owned()) {
            s.resume_queue.push_back(pid.to_owned());
        }
    }
    /// Starts a scan for parked rows unless one is running or the cap is
    /// reached; returns whether the caller should scan.
    pub(crate) fn begin_scan(&self) -> bool {
        let mut s = self.state.lock();
        if s.scanning {
            return false;
        }
        if s.admitted >= self.cap {
            // Nothing could start now; a freed place scans later.
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
    /// Whether free places are waiting for a scan of parked rows the engine
    /// has not read yet.
    pub(crate) fn wants_scan(&self) -> bool {
        let s = self.state.lock();
        s.parked_unknown
            && !s.scanning
            && s.admitted < self.cap
            && s.resume_queue.is_empty()
            && s.parked.is_empty()
    }
}
