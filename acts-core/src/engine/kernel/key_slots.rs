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

use std::collections::HashMap;

use crate::engine::kernel::fair_queue::FairQueue;
use crate::engine::persist::rows::{ConcurrencySlot, QueueOrder};

/// A parked start let through, with its admission time and queue order.
pub(crate) type LetThrough = (i64, String, QueueOrder);

/// How a pid relates to its key.
#[derive(Debug, Clone)]
struct Hold {
    key: String,
    limit: u32,
    /// Holds a slot (else waits for one).
    holding: bool,
    /// Its place in the queues (priority, fairness).
    order: QueueOrder,
}

/// One key's holders and waiters.
#[derive(Debug, Default)]
struct KeyGroup {
    holders: usize,
    /// The waiters whose rows are written (not while a row is being
    /// written, or a migration holds it back), in the order they leave.
    waiting: FairQueue,
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
}

impl KeySlots {
    /// Lets `pid` hold a slot of `slot.key` if one is free (`true`), else
    /// records it as a waiter whose row is about to be written
    /// ([`waiter_written`](Self::waiter_written) queues it).
    pub(crate) fn take(&mut self, pid: &str, slot: &ConcurrencySlot, order: &QueueOrder) -> bool {
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
                order: order.clone(),
            },
        );
        holding
    }

    /// The row of waiter `pid` (admitted at `timestamp`) is written: it
    /// joins its key's queue, and the waiters the key has room for now are
    /// let through (a slot may have freed while the row was written; then
    /// it may be `pid` itself). `None` when `pid` is no waiter.
    pub(crate) fn waiter_written(&mut self, pid: &str, timestamp: i64) -> Option<Vec<LetThrough>> {
        let hold = self.pids.get(pid)?;
        if hold.holding {
            return None;
        }
        let key = hold.key.clone();
        let group = self.groups.entry(key.clone()).or_default();
        group.waiting.push(pid, timestamp, &hold.order);
        Some(self.let_through(&key))
    }

    /// A parked row with a slot found in the store: it holds a slot if its
    /// key has room and nobody waits, else it joins its key's queue.
    /// Returns the parked starts that may start now (it, or waiters its
    /// queueing let through); `None` when it is known already.
    pub(crate) fn found_parked(
        &mut self,
        pid: &str,
        timestamp: i64,
        slot: &ConcurrencySlot,
        order: &QueueOrder,
    ) -> Option<Vec<LetThrough>> {
        if self.pids.contains_key(pid) {
            return None;
        }
        if self.take(pid, slot, order) {
            return Some(vec![(timestamp, pid.to_owned(), order.clone())]);
        }
        Some(self.waiter_written(pid, timestamp).unwrap_or_default())
    }

    /// In-flight holders found in the store by a successful boot count
    /// (`(key, pid)`), except the ones in `ended` (they ended while it ran)
    /// and ones known already; then lets waiters through where room is.
    /// Returns the waiters let through, with their admission order.
    pub(crate) fn counted(
        &mut self,
        holders: Vec<(String, String)>,
        ended: impl Fn(&str) -> bool,
    ) -> Vec<LetThrough> {
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
                    order: QueueOrder::default(),
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
    pub(crate) fn free(&mut self, pid: &str) -> Vec<LetThrough> {
        let Some(hold) = self.pids.remove(pid) else {
            return Vec::new();
        };
        let Some(group) = self.groups.get_mut(&hold.key) else {
            return Vec::new();
        };
        if hold.holding {
            group.holders = group.holders.saturating_sub(1);
        } else {
            group.waiting.remove(pid);
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
        let Some(hold) = self.pids.get(pid) else {
            return false;
        };
        if hold.holding {
            return false;
        }
        if let Some(group) = self.groups.get_mut(&hold.key) {
            group.waiting.remove(pid);
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
    fn let_through(&mut self, key: &str) -> Vec<LetThrough> {
        let mut out = Vec::new();
        if self.uncounted {
            return out;
        }
        let Some(group) = self.groups.get_mut(key) else {
            return out;
        };
        while let Some(next) = group.waiting.peek() {
            let next = next.to_owned();
            let Some(hold) = self.pids.get_mut(&next) else {
                group.waiting.remove(&next);
                continue;
            };
            if group.holders >= hold.limit as usize {
                break;
            }
            let Some((ts, pid)) = group.waiting.pop() else {
                break;
            };
            group.holders += 1;
            hold.holding = true;
            out.push((ts, pid, hold.order.clone()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pids and times let through, without their queue order.
    fn ids(through: Option<Vec<LetThrough>>) -> Option<Vec<(i64, String)>> {
        through.map(|v| v.into_iter().map(|(ts, pid, _)| (ts, pid)).collect())
    }

    /// What freeing `pid` lets through, without queue orders.
    fn freed(k: &mut KeySlots, pid: &str) -> Vec<(i64, String)> {
        ids(Some(k.free(pid))).unwrap_or_default()
    }

    fn slot(key: &str, limit: u32) -> ConcurrencySlot {
        ConcurrencySlot {
            key: key.into(),
            limit,
        }
    }

    #[test]
    fn a_full_key_queues_and_frees_in_order() {
        let mut k = KeySlots::default();
        assert!(k.take("a", &slot("c1", 1), &QueueOrder::default()));
        assert!(!k.take("b", &slot("c1", 1), &QueueOrder::default()));
        assert!(!k.take("c", &slot("c1", 1), &QueueOrder::default()));
        // Another key is independent.
        assert!(k.take("x", &slot("c2", 1), &QueueOrder::default()));
        assert_eq!(ids(k.waiter_written("b", 3)), Some(vec![]));
        assert_eq!(ids(k.waiter_written("c", 5)), Some(vec![]));
        assert_eq!(ids(k.waiter_written("x", 3)), None, "a holder is no waiter");
        assert_eq!(k.holds("b"), Some(false));
        assert_eq!(freed(&mut k, "a"), vec![(3, "b".to_owned())]);
        assert_eq!(k.holds("b"), Some(true));
        // Removing a waiter frees nothing.
        assert!(freed(&mut k, "c").is_empty());
        assert!(freed(&mut k, "b").is_empty());
        assert!(k.groups().iter().all(|g| g.key != "c1"));
    }

    #[test]
    fn a_waiter_is_not_passed_by_a_later_start() {
        let mut k = KeySlots::default();
        assert!(k.take("a", &slot("c", 2), &QueueOrder::default()));
        assert!(k.take("b", &slot("c", 2), &QueueOrder::default()));
        assert!(!k.take("w", &slot("c", 2), &QueueOrder::default()));
        assert_eq!(ids(k.waiter_written("w", 1)), Some(vec![]));
        // A later start while someone waits waits too, even if its own
        // limit is higher.
        assert!(!k.take("late", &slot("c", 5), &QueueOrder::default()));
        assert_eq!(ids(k.waiter_written("late", 2)), Some(vec![]));
        // Each is let through against its own limit, in order.
        assert_eq!(
            freed(&mut k, "a"),
            vec![(1, "w".to_owned()), (2, "late".to_owned())]
        );
    }

    #[test]
    fn a_higher_priority_waiter_goes_first_and_tenants_take_turns() {
        let mut k = KeySlots::default();
        let order = |priority, fairness: &str| QueueOrder {
            priority,
            fairness: fairness.into(),
        };
        assert!(k.take("h", &slot("c", 1), &QueueOrder::default()));
        for (pid, o) in [
            ("low", order(1, "")),
            ("a1", order(3, "a")),
            ("a2", order(3, "a")),
            ("b1", order(3, "b")),
            ("vip", order(5, "")),
        ] {
            assert!(!k.take(pid, &slot("c", 1), &o));
            assert_eq!(ids(k.waiter_written(pid, 1)), Some(vec![]));
        }
        let mut out = Vec::new();
        let mut holder = "h".to_owned();
        for _ in 0..5 {
            let next = freed(&mut k, &holder);
            holder = next[0].1.clone();
            out.push(holder.clone());
        }
        assert_eq!(out, ["vip", "a1", "b1", "a2", "low"]);
    }

    #[test]
    fn ties_within_a_millisecond_keep_their_arrival_order() {
        let mut k = KeySlots::default();
        assert!(k.take("z", &slot("c", 1), &QueueOrder::default()));
        for pid in ["m", "b", "x"] {
            assert!(!k.take(pid, &slot("c", 1), &QueueOrder::default()));
            assert_eq!(ids(k.waiter_written(pid, 5)), Some(vec![]));
        }
        assert_eq!(freed(&mut k, "z"), vec![(5, "m".to_owned())]);
        assert_eq!(freed(&mut k, "m"), vec![(5, "b".to_owned())]);
        assert_eq!(freed(&mut k, "b"), vec![(5, "x".to_owned())]);
    }

    #[test]
    fn keyed_starts_wait_until_the_holders_are_counted() {
        let mut k = KeySlots::default();
        k.begin_count();
        assert!(!k.take("new", &slot("c", 1), &QueueOrder::default()));
        assert_eq!(ids(k.waiter_written("new", 10)), Some(vec![]));
        let through = k.counted(
            vec![("c".into(), "old".into()), ("d".into(), "gone".into())],
            |pid| pid == "gone",
        );
        assert!(through.is_empty(), "the counted holder keeps the slot");
        assert_eq!(freed(&mut k, "old"), vec![(10, "new".to_owned())]);
        assert!(k.groups().iter().all(|g| g.key != "d"));
    }

    #[test]
    fn found_parked_rows_fill_a_key_oldest_first() {
        let mut k = KeySlots::default();
        let o = QueueOrder::default();
        assert_eq!(
            ids(k.found_parked("p1", 1, &slot("c", 1), &o)),
            Some(vec![(1, "p1".to_owned())])
        );
        assert_eq!(
            ids(k.found_parked("p2", 2, &slot("c", 1), &o)),
            Some(vec![])
        );
        assert_eq!(ids(k.found_parked("p2", 2, &slot("c", 1), &o)), None);
        assert!(k.hold_back("p2"));
        assert!(
            freed(&mut k, "p1").is_empty(),
            "a held-back waiter is not let through"
        );
        // Back in the queue, it finds the room.
        assert_eq!(
            ids(k.waiter_written("p2", 2)),
            Some(vec![(2, "p2".to_owned())])
        );
        assert_eq!(k.holds("p2"), Some(true));
    }

    #[test]
    fn a_slot_freed_while_a_waiter_row_is_written_goes_to_it() {
        let mut k = KeySlots::default();
        assert!(k.take("a", &slot("c", 1), &QueueOrder::default()));
        assert!(!k.take("b", &slot("c", 1), &QueueOrder::default()));
        // `a` ends before `b`'s row is written: nobody is queued yet.
        assert!(freed(&mut k, "a").is_empty());
        assert_eq!(
            ids(k.waiter_written("b", 7)),
            Some(vec![(7, "b".to_owned())])
        );
    }
}
