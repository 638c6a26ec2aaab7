//! Concurrency keys: at most `limit` processes of one key in flight.
//!
//! A process whose model has `concurrency:` carries its evaluated key and
//! limit in its row ([`ConcurrencySlot`]) for its whole life. It *holds* a
//! slot of its key from the moment it is let through (at its start, or
//! when a slot frees for it) until it leaves flight — its terminal state
//! is durable, it is removed, or its start is refused. A start that finds
//! its key full is parked like a start over the cap, but *waits for its
//! key*: it is not startable until a holder of the key leaves, and then
//! the oldest waiter of the key (admission order) takes the slot and
//! becomes an ordinary parked process (it starts when the cap has room).
//!
//! Nothing here is stored: the holders are the in-flight rows with a
//! `slot` index entry plus the parked rows let through, and the waiters
//! the other parked rows with a slot. A restart counts the holders from
//! the index while the boot count runs, and the scan of parked rows lets
//! the oldest waiters of each key through up to its limit. Until a count
//! succeeded (it may fail on a store fault and be retried), a keyed start
//! waits rather than risk a key over its limit.
//!
//! [`KeySlots`] is the bookkeeping alone; the cache keeps it under its
//! admission lock, so admission and key slots change
//! together and no store I/O happens under that lock.

use std::collections::{BTreeSet, HashMap};

use crate::engine::persist::rows::ConcurrencySlot;

/// How a pid relates to its key.
#[derive(Debug, Clone)]
struct Hold {
    key: String,
    limit: u32,
    /// Holds a slot (else waits for one).
    holding: bool,
    /// Place of a waiter whose row is written in its key's queue
    /// (admission time, then arrival); `None` while its row is being
    /// written, or held back.
    queued_at: Option<(i64, u64)>,
}

/// One key's holders and waiters.
#[derive(Debug, Default)]
struct KeyGroup {
    holders: usize,
    /// Admission time (ms), arrival (ties within a millisecond keep the
    /// order in which the rows were written, or found), pid.
    waiting: BTreeSet<(i64, u64, String)>,
}

/// A key's figures ([`KeySlots::groups`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyUse {
    /// The key.
    pub key: String,
    /// Processes holding one of its slots.
    pub holders: usize,
    /// Processes waiting for one.
    pub waiting: usize,
}

/// The slots of every concurrency key (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct KeySlots {
    groups: HashMap<String, KeyGroup>,
    pids: HashMap<String, Hold>,
    /// Whether the holders found in the store are counted (no count ran,
    /// or the last one succeeded); while not, every keyed start waits.
    uncounted: bool,
    /// The arrival number of the next waiter queued.
    arrivals: u64,
}

impl KeySlots {
    /// Lets `pid` hold a slot of `slot.key` if one is free (`true`), else
    /// records it as a waiter whose row is about to be written
    /// ([`waiter_written`](Self::waiter_written) queues it).
    pub(crate) fn take(&mut self, pid: &str, slot: &ConcurrencySlot) -> bool {
        let group = self.groups.entry(slot.key.clone()).or_default();
        let holding =
            !self.uncounted && group.waiting.is_empty() && group.holders < slot.limit as usize;
        if holding {
            group.holders += 1;
        }
        self.pids.insert(
            pid.to_owned(),
            Hold {
                key: slot.key.clone(),
                limit: slot.limit,
                holding,
                queued_at: None,
            },
        );
        holding
    }

    /// The row of waiter `pid` (admitted at `timestamp`) is written: it
    /// joins its key's queue, and the waiters the key has room for now are
    /// let through (a slot may have freed while the row was written; then
    /// it may be `pid` itself). `None` when `pid` is no waiter.
    pub(crate) fn waiter_written(
        &mut self,
        pid: &str,
        timestamp: i64,
    ) -> Option<Vec<(i64, String)>> {
        let hold = self.pids.get_mut(pid)?;
        if hold.holding {
            return None;
        }
        self.arrivals += 1;
        let place = (timestamp, self.arrivals);
        hold.queued_at = Some(place);
        let key = hold.key.clone();
        self.groups.entry(key.clone()).or_default().waiting.insert((
            place.0,
            place.1,
            pid.to_owned(),
        ));
        Some(self.let_through(&key))
    }

    /// A parked row with a slot found in the store: it holds a slot if its
    /// key has room and nobody older waits (`Some(true)`), else waits in
    /// its key's queue (`Some(false)`); `None` when it is known already.
    pub(crate) fn found_parked(
        &mut self,
        pid: &str,
        timestamp: i64,
        slot: &ConcurrencySlot,
    ) -> Option<bool> {
        if self.pids.contains_key(pid) {
            return None;
        }
        if self.take(pid, slot) {
            return Some(true);
        }
        // Nobody frees a slot between these two calls: it stays a waiter.
        let through = self.waiter_written(pid, timestamp).unwrap_or_default();
        Some(!through.is_empty())
    }

    /// In-flight holders found in the store by a successful boot count
    /// (`(key, pid)`), except the ones in `ended` (they ended while it ran)
    /// and ones known already; then lets waiters through where room is.
    /// Returns the waiters let through, with their admission order.
    pub(crate) fn counted(
        &mut self,
        holders: Vec<(String, String)>,
        ended: impl Fn(&str) -> bool,
    ) -> Vec<(i64, String)> {
        self.uncounted = false;
        for (key, pid) in holders {
            if ended(&pid) || self.pids.contains_key(&pid) {
                continue;
            }
            self.groups.entry(key.clone()).or_default().holders += 1;
            self.pids.insert(
                pid,
                Hold {
                    key,
                    // A holder's own limit is only read while it waits.
                    limit: 0,
                    holding: true,
                    queued_at: None,
                },
            );
        }
        let keys: Vec<String> = self.groups.keys().cloned().collect();
        keys.iter().flat_map(|k| self.let_through(k)).collect()
    }

    /// A boot count begins: keyed starts wait until one succeeds.
    pub(crate) fn begin_count(&mut self) {
        self.uncounted = true;
    }

    /// `pid` left flight, or its parked row went: its slot (or its place
    /// in the queue) is free. Returns the waiters its key lets through now.
    pub(crate) fn free(&mut self, pid: &str) -> Vec<(i64, String)> {
        let Some(hold) = self.pids.remove(pid) else {
            return Vec::new();
        };
        let Some(group) = self.groups.get_mut(&hold.key) else {
            return Vec::new();
        };
        if hold.holding {
            group.holders = group.holders.saturating_sub(1);
        } else if let Some((ts, n)) = hold.queued_at {
            group.waiting.remove(&(ts, n, pid.to_owned()));
        }
        let through = self.let_through(&hold.key);
        if self
            .groups
            .get(&hold.key)
            .is_some_and(|g| g.holders == 0 && g.waiting.is_empty())
        {
            self.groups.remove(&hold.key);
        }
        through
    }

    /// Takes waiter `pid` out of its key's queue while a migration
    /// rewrites its row (`true` when it is a waiter).
    pub(crate) fn hold_back(&mut self, pid: &str) -> bool {
        let Some(hold) = self.pids.get_mut(pid) else {
            return false;
        };
        if hold.holding {
            return false;
        }
        if let Some((ts, n)) = hold.queued_at.take()
            && let Some(group) = self.groups.get_mut(&hold.key)
        {
            group.waiting.remove(&(ts, n, pid.to_owned()));
        }
        true
    }

    /// Whether `pid` holds a slot of its key (`Some(false)`: it waits;
    /// `None`: it has no key here).
    pub(crate) fn holds(&self, pid: &str) -> Option<bool> {
        self.pids.get(pid).map(|h| h.holding)
    }

    /// Every key in use, by key.
    pub(crate) fn groups(&self) -> Vec<KeyUse> {
        let mut out: Vec<KeyUse> = self
            .groups
            .iter()
            .map(|(key, g)| KeyUse {
                key: key.clone(),
                holders: g.holders,
                waiting: g.waiting.len(),
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }

    /// Lets the oldest waiters of `key` through while it has room (each
    /// against its own limit; the queue's order is kept: a waiter never
    /// passes an older one).
    fn let_through(&mut self, key: &str) -> Vec<(i64, String)> {
        let mut out = Vec::new();
        if self.uncounted {
            return out;
        }
        let Some(group) = self.groups.get_mut(key) else {
            return out;
        };
        while let Some((ts, _, pid)) = group.waiting.first().cloned() {
            let Some(hold) = self.pids.get_mut(&pid) else {
                group.waiting.pop_first();
                continue;
            };
            if group.holders >= hold.limit as usize {
                break;
            }
            group.waiting.pop_first();
            group.holders += 1;
            hold.holding = true;
            hold.queued_at = None;
            out.push((ts, pid));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(key: &str, limit: u32) -> ConcurrencySlot {
        ConcurrencySlot {
            key: key.into(),
            limit,
        }
    }

    #[test]
    fn a_full_key_queues_and_frees_in_order() {
        let mut k = KeySlots::default();
        assert!(k.take("a", &slot("c1", 1)));
        assert!(!k.take("b", &slot("c1", 1)));
        assert!(!k.take("c", &slot("c1", 1)));
        // Another key is independent.
        assert!(k.take("x", &slot("c2", 1)));
        assert_eq!(k.waiter_written("c", 5), Some(vec![]));
        assert_eq!(k.waiter_written("b", 3), Some(vec![]));
        assert_eq!(k.waiter_written("x", 3), None, "a holder is no waiter");
        assert_eq!(k.holds("b"), Some(false));
        assert_eq!(k.free("a"), vec![(3, "b".to_owned())]);
        assert_eq!(k.holds("b"), Some(true));
        // Removing a waiter frees nothing.
        assert!(k.free("c").is_empty());
        assert!(k.free("b").is_empty());
        assert!(k.groups().iter().all(|g| g.key != "c1"));
    }

    #[test]
    fn a_waiter_is_not_passed_by_a_later_start() {
        let mut k = KeySlots::default();
        assert!(k.take("a", &slot("c", 2)));
        assert!(k.take("b", &slot("c", 2)));
        assert!(!k.take("w", &slot("c", 2)));
        assert_eq!(k.waiter_written("w", 1), Some(vec![]));
        // A later start while someone waits waits too, even if its own
        // limit is higher.
        assert!(!k.take("late", &slot("c", 5)));
        assert_eq!(k.waiter_written("late", 2), Some(vec![]));
        // Each is let through against its own limit, in order.
        assert_eq!(
            k.free("a"),
            vec![(1, "w".to_owned()), (2, "late".to_owned())]
        );
    }

    #[test]
    fn ties_within_a_millisecond_keep_their_arrival_order() {
        let mut k = KeySlots::default();
        assert!(k.take("z", &slot("c", 1)));
        for pid in ["m", "b", "x"] {
            assert!(!k.take(pid, &slot("c", 1)));
            assert_eq!(k.waiter_written(pid, 5), Some(vec![]));
        }
        assert_eq!(k.free("z"), vec![(5, "m".to_owned())]);
        assert_eq!(k.free("m"), vec![(5, "b".to_owned())]);
        assert_eq!(k.free("b"), vec![(5, "x".to_owned())]);
    }

    #[test]
    fn keyed_starts_wait_until_the_holders_are_counted() {
        let mut k = KeySlots::default();
        k.begin_count();
        assert!(!k.take("new", &slot("c", 1)));
        assert_eq!(k.waiter_written("new", 10), Some(vec![]));
        let through = k.counted(
            vec![("c".into(), "old".into()), ("d".into(), "gone".into())],
            |pid| pid == "gone",
        );
        assert!(through.is_empty(), "the counted holder keeps the slot");
        assert_eq!(k.free("old"), vec![(10, "new".to_owned())]);
        assert!(k.groups().iter().all(|g| g.key != "d"));
    }

    #[test]
    fn found_parked_rows_fill_a_key_oldest_first() {
        let mut k = KeySlots::default();
        assert_eq!(k.found_parked("p1", 1, &slot("c", 1)), Some(true));
        assert_eq!(k.found_parked("p2", 2, &slot("c", 1)), Some(false));
        assert_eq!(k.found_parked("p2", 2, &slot("c", 1)), None);
        assert!(k.hold_back("p2"));
        assert!(
            k.free("p1").is_empty(),
            "a held-back waiter is not let through"
        );
        // Back in the queue, it finds the room.
        assert_eq!(k.waiter_written("p2", 2), Some(vec![(2, "p2".to_owned())]));
        assert_eq!(k.holds("p2"), Some(true));
    }

    #[test]
    fn a_slot_freed_while_a_waiter_row_is_written_goes_to_it() {
        let mut k = KeySlots::default();
        assert!(k.take("a", &slot("c", 1)));
        assert!(!k.take("b", &slot("c", 1)));
        // `a` ends before `b`'s row is written: nobody is queued yet.
        assert!(k.free("a").is_empty());
        assert_eq!(k.waiter_written("b", 7), Some(vec![(7, "b".to_owned())]));
    }
}
