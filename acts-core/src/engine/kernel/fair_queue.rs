//! The order queued starts leave in: priority, fairness, aging.
//!
//! A parked start waits in a [`FairQueue`] (the admission cap's, or its
//! concurrency key's). Each has a *priority* (1 to 5, higher first) and a
//! *fairness key* (a tenant, a customer; empty: none):
//!
//! - the highest priority goes first;
//! - inside one priority, the fairness keys take turns (round robin), and
//!   one key's starts leave oldest first (by admission time, then
//!   arrival);
//! - **aging**: a priority whose oldest start has waited while
//!   [`AGING_STEP`] others left counts one priority higher, and so on (up
//!   to the top); between priorities that count the same, the one whose
//!   oldest start waited longest goes first. So a low-priority start
//!   behind a steady stream of high-priority ones leaves after at most
//!   `(5 - its priority) * AGING_STEP` others, plus the ones queued before
//!   it at its priority and key: none waits forever.
//!
//! Waiting is counted in starts that left this queue, not in time: the
//! order is the same on any clock, and a test can count it. The queue is
//! in memory only; a restart queues the parked rows again (their waiting
//! starts from there).

use std::collections::{BTreeSet, HashMap, VecDeque};

use crate::engine::persist::rows::QueueOrder;

/// How many starts leave the queue while a priority's oldest start waits
/// before that priority counts one higher.
pub const AGING_STEP: u64 = 64;

/// The number of priorities (1 to 5).
const LEVELS: usize = 5;

/// Where a queued pid is.
#[derive(Debug, Clone)]
struct Place {
    level: usize,
    fairness: String,
    /// When it was queued, in starts that had left the queue then.
    since: u64,
    /// Arrival order (ties within `since`).
    seq: u64,
    /// Its admission time (ms), handed back when it leaves.
    timestamp: i64,
}

/// One priority's starts.
#[derive(Debug, Default)]
struct Level {
    /// The fairness keys with starts queued, in the order they take turns.
    turns: VecDeque<String>,
    /// Each fairness key's starts, oldest first (admission time, arrival,
    /// pid: a start queued again — a migration holds it back — keeps its
    /// place among its key's).
    by_key: HashMap<String, BTreeSet<(i64, u64, String)>>,
    /// All its starts by how long they wait (since, arrival, pid).
    oldest: BTreeSet<(u64, u64, String)>,
}

/// Queued starts (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct FairQueue {
    levels: [Level; LEVELS],
    places: HashMap<String, Place>,
    /// How many starts have left.
    left: u64,
    arrivals: u64,
}

impl FairQueue {
    /// Queues `pid` (admitted at `timestamp`) with `order`; a pid queued
    /// already keeps its place.
    pub(crate) fn push(&mut self, pid: &str, timestamp: i64, order: &QueueOrder) {
        if self.places.contains_key(pid) {
            return;
        }
        let level = usize::from(order.priority.clamp(1, LEVELS as u8) - 1);
        self.arrivals += 1;
        let place = Place {
            level,
            fairness: order.fairness.clone(),
            since: self.left,
            seq: self.arrivals,
            timestamp,
        };
        let l = &mut self.levels[level];
        let key_queue = l.by_key.entry(place.fairness.clone()).or_default();
        if key_queue.is_empty() {
            l.turns.push_back(place.fairness.clone());
        }
        key_queue.insert((place.timestamp, place.seq, pid.to_owned()));
        l.oldest.insert((place.since, place.seq, pid.to_owned()));
        self.places.insert(pid.to_owned(), place);
    }

    /// Takes `pid` out of the queue: its admission time, if it was queued.
    pub(crate) fn remove(&mut self, pid: &str) -> Option<i64> {
        let place = self.places.remove(pid)?;
        let l = &mut self.levels[place.level];
        l.oldest.remove(&(place.since, place.seq, pid.to_owned()));
        if let Some(q) = l.by_key.get_mut(&place.fairness) {
            q.remove(&(place.timestamp, place.seq, pid.to_owned()));
            if q.is_empty() {
                l.by_key.remove(&place.fairness);
                l.turns.retain(|k| *k != place.fairness);
            }
        }
        Some(place.timestamp)
    }

    /// The pid that leaves next, without taking it out.
    pub(crate) fn peek(&self) -> Option<&str> {
        let level = self.next_level()?;
        let l = &self.levels[level];
        let key = l.turns.front()?;
        l.by_key.get(key)?.first().map(|(_, _, pid)| pid.as_str())
    }

    /// Takes out the pid that leaves next, with its admission time.
    pub(crate) fn pop(&mut self) -> Option<(i64, String)> {
        let level = self.next_level()?;
        let l = &mut self.levels[level];
        let key = l.turns.pop_front()?;
        let pid = l.by_key.get(&key)?.first()?.2.clone();
        // Its key takes its next turn at the back (if it has more).
        l.turns.push_back(key);
        let timestamp = self.remove(&pid)?;
        self.left += 1;
        Some((timestamp, pid))
    }

    /// How many are queued.
    pub(crate) fn len(&self) -> usize {
        self.places.len()
    }

    /// Whether nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    /// The queued pids, highest priority first, oldest first within one
    /// (a listing: not the exact order they leave in).
    pub(crate) fn pids(&self) -> Vec<String> {
        self.levels
            .iter()
            .rev()
            .flat_map(|l| l.oldest.iter().map(|(_, _, pid)| pid.clone()))
            .collect()
    }

    /// The priority that goes next: the highest it counts as with aging,
    /// ties to the one whose oldest start waited longest.
    fn next_level(&self) -> Option<usize> {
        self.levels
            .iter()
            .enumerate()
            .filter_map(|(i, l)| {
                let (since, seq, _) = l.oldest.first()?;
                let aged = (self.left - since) / AGING_STEP;
                let counts = (i as u64 + aged).min(LEVELS as u64 - 1);
                // Highest count first, then the longest wait.
                Some((counts, std::cmp::Reverse((*since, *seq)), i))
            })
            .max()
            .map(|(_, _, i)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(priority: u8, fairness: &str) -> QueueOrder {
        QueueOrder {
            priority,
            fairness: fairness.into(),
        }
    }

    #[test]
    fn higher_priority_first_then_oldest() {
        let mut q = FairQueue::default();
        q.push("low", 1, &order(1, ""));
        q.push("mid", 2, &order(3, ""));
        q.push("high", 3, &order(5, ""));
        q.push("high2", 4, &order(5, ""));
        let out: Vec<String> = std::iter::from_fn(|| q.pop().map(|(_, p)| p)).collect();
        assert_eq!(out, ["high", "high2", "mid", "low"]);
        assert!(q.is_empty());
    }

    #[test]
    fn fairness_keys_take_turns_inside_a_priority() {
        let mut q = FairQueue::default();
        for i in 0..3 {
            q.push(&format!("a{i}"), i, &order(3, "tenant-a"));
        }
        q.push("b0", 10, &order(3, "tenant-b"));
        q.push("c0", 11, &order(3, "tenant-c"));
        let out: Vec<String> = std::iter::from_fn(|| q.pop().map(|(_, p)| p)).collect();
        assert_eq!(out, ["a0", "b0", "c0", "a1", "a2"]);
    }

    #[test]
    fn a_start_queued_again_keeps_its_place_by_admission_time() {
        let mut q = FairQueue::default();
        q.push("b", 1, &order(3, ""));
        q.push("c", 2, &order(3, ""));
        // Held back and queued again in another order (a migration).
        q.remove("c");
        q.remove("b");
        q.push("c", 2, &order(3, ""));
        q.push("b", 1, &order(3, ""));
        assert_eq!(q.pop(), Some((1, "b".to_owned())));
    }

    #[test]
    fn a_removed_start_leaves_no_trace() {
        let mut q = FairQueue::default();
        q.push("a", 1, &order(3, "x"));
        q.push("b", 2, &order(3, "y"));
        assert_eq!(q.remove("a"), Some(1));
        assert_eq!(q.remove("a"), None);
        assert_eq!(q.peek(), Some("b"));
        assert_eq!(q.pop(), Some((2, "b".to_owned())));
        assert_eq!(q.len(), 0);
    }

    /// The aging rule's bound, counted: 1,000 low-priority starts queued
    /// behind a steady stream of top-priority ones (one arrives each time
    /// one leaves, forever) all leave, the last within the bound.
    #[test]
    fn low_priority_starts_behind_a_steady_high_stream_all_get_through() {
        let mut q = FairQueue::default();
        for i in 0..1000 {
            q.push(&format!("low{i}"), 0, &order(1, ""));
        }
        let mut high = 0;
        let mut lows_out = 0;
        let mut first_low = None;
        let mut steps = 0u64;
        let bound = 4 * AGING_STEP + 1000;
        while lows_out < 1000 {
            q.push(&format!("high{high}"), 0, &order(5, ""));
            high += 1;
            let (_, pid) = q.pop().expect("something is queued");
            steps += 1;
            if pid.starts_with("low") {
                lows_out += 1;
                first_low.get_or_insert(steps);
            }
            assert!(
                steps <= bound,
                "{lows_out} of 1000 low starts out after {steps}"
            );
        }
        // Priority held until the lows had aged to the top.
        assert_eq!(first_low, Some(4 * AGING_STEP + 1));
    }
}
