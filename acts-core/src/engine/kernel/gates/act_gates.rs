//! [`ActGates`]: the slots of the steps' and acts' concurrency keys and
//! the token buckets of their rate keys, across processes.
//!
//! A gated task ([`TaskGate`]) passes two stages: its concurrency key's
//! slot (if it has one: oldest waiter first, each against its own limit),
//! then its rate key's token (if it has one: oldest first; a bucket of
//! `burst` tokens refilled at `per_second`). Then it is *open*: it runs,
//! holding its slot until it ends. Everything here is memory: the open and
//! waiting tasks are in the process rows (`ProcRow::gates`), which a start
//! reads back ([`restore`](ActGates::restore)) before anything runs.
//!
//! A bucket is never restored: a new one holds what it would hold had it
//! been emptied when the engine started (a restart never hands out a
//! fresh burst on top of the one spent just before it).
//!
//! Pure bookkeeping (no I/O, no clock): the kernel keeps it under a mutex
//! and opens the tasks it lets through.

use std::collections::{BTreeSet, HashMap};

use super::token_bucket::Bucket;
use crate::engine::kernel::fair_queue::FairQueue;
use crate::engine::persist::rows::QueueOrder;
use crate::scheduler::{GateUse, TaskGate};

/// Why an engine that keeps only some keys (`key_home`) but has no
/// courier to ask the others refuses a step's or act's gate.
pub(crate) const NOT_ON_A_CLUSTER: &str = "`concurrency:` and `rate:` on steps and acts need a gate courier on engines that split one store (EngineConfig::key_home without EngineConfig::gate_courier: each engine would count only its own processes, letting a key past its limit); `acts serve --cluster` sets one";

/// A gated task: `(pid, tid)`.
pub(crate) type GateId = (String, String);

/// Where a task is at its gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Waits for a slot of its key.
    Slot,
    /// Waits for a token (holding its slot, if it has a key).
    Token,
    /// Let through: it runs (holding its slot, if it has a key).
    Open,
}

/// A task here: its gate, its stage, its process's queue order.
#[derive(Debug)]
struct Entry {
    gate: TaskGate,
    stage: Stage,
    order: QueueOrder,
}

/// Waiters in the order they leave: their processes' priorities first,
/// fairness keys in turn, then when they began to wait (and arrival:
/// one transition asks in creation order, a start in queue order).
type Queue = FairQueue;

/// A task's name in a queue, and the task a name in a queue names.
fn queued(id: &GateId) -> String {
    format!("{}\u{0}{}", id.0, id.1)
}
fn unqueued(name: &str) -> Option<GateId> {
    let (pid, tid) = name.split_once('\u{0}')?;
    Some((pid.to_owned(), tid.to_owned()))
}

/// The order found waiters are queued again in at a start: when they
/// began to wait, then pid, then creation order in the process.
fn place(id: &GateId, gate: &TaskGate) -> (i64, String, u32, String) {
    (gate.since, id.0.clone(), gate.seq, id.1.clone())
}

#[derive(Debug, Default)]
struct SlotGroup {
    holders: usize,
    waiting: Queue,
}

/// A key's figures ([`ActGates::keys`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateKeyUse {
    /// `concurrency` or `rate`.
    pub kind: &'static str,
    /// The key.
    pub key: String,
    /// Tasks holding a slot (always 0 for a rate key).
    pub holders: usize,
    /// Tasks waiting.
    pub waiting: usize,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct ActGates {
    entries: HashMap<GateId, Entry>,
    by_pid: HashMap<String, BTreeSet<String>>,
    slots: HashMap<String, SlotGroup>,
    buckets: HashMap<String, Bucket>,
    /// When the engine started (ms): a new bucket fills from then.
    started: i64,
}

impl ActGates {
    /// An empty table for an engine started at `started` (ms).
    pub(crate) fn new(started: i64) -> Self {
        Self {
            entries: HashMap::new(),
            by_pid: HashMap::new(),
            slots: HashMap::new(),
            buckets: HashMap::new(),
            started,
        }
    }

    /// Task `tid` of `pid` asks to pass `gate` at `now`: `true` when it
    /// may run now (it holds its slot and spent a token), else it waits in
    /// order. Asking again (a restored process) changes nothing.
    pub(crate) fn ask(
        &mut self,
        pid: &str,
        tid: &str,
        gate: &TaskGate,
        order: &QueueOrder,
        now: i64,
    ) -> bool {
        let id = (pid.to_owned(), tid.to_owned());
        if let Some(e) = self.entries.get(&id) {
            return e.stage == Stage::Open;
        }
        self.entries.insert(
            id.clone(),
            Entry {
                gate: gate.clone(),
                stage: Stage::Slot,
                order: order.clone(),
            },
        );
        self.by_pid
            .entry(pid.to_owned())
            .or_default()
            .insert(tid.to_owned());
        self.enter(&id, now);
        self.stage(&id) == Some(Stage::Open)
    }

    /// Whether task `tid` of `pid` is here.
    pub(crate) fn knows(&self, pid: &str, tid: &str) -> bool {
        self.by_pid.get(pid).is_some_and(|t| t.contains(tid))
    }

    /// Whether `pid` has tasks here.
    pub(crate) fn has(&self, pid: &str) -> bool {
        self.by_pid.contains_key(pid)
    }

    /// The tasks of `pid` here.
    pub(crate) fn tids_of(&self, pid: &str) -> Vec<String> {
        self.by_pid
            .get(pid)
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The gate task `tid` of `pid` asked to pass, its order, and whether
    /// it is open.
    pub(crate) fn gate_of(&self, pid: &str, tid: &str) -> Option<(TaskGate, QueueOrder, bool)> {
        let id = (pid.to_owned(), tid.to_owned());
        let e = self.entries.get(&id)?;
        Some((e.gate.clone(), e.order.clone(), e.stage == Stage::Open))
    }

    /// The open tasks holding a slot of a concurrency key.
    pub(crate) fn slot_holders(&self) -> Vec<GateId> {
        let mut out: Vec<GateId> = self
            .entries
            .iter()
            .filter(|(_, e)| e.stage != Stage::Slot && e.gate.key.is_some())
            .map(|(id, _)| id.clone())
            .collect();
        out.sort();
        out
    }

    /// Task `tid` of `pid` ended (or will never run: it went, its process
    /// went): its slot or its place is free. Returns the tasks that may
    /// run now.
    pub(crate) fn ended(&mut self, pid: &str, tid: &str, now: i64) -> Vec<GateId> {
        let id = (pid.to_owned(), tid.to_owned());
        let Some(entry) = self.entries.remove(&id) else {
            return Vec::new();
        };
        if let Some(tids) = self.by_pid.get_mut(pid) {
            tids.remove(tid);
            if tids.is_empty() {
                self.by_pid.remove(pid);
            }
        }
        let name = queued(&id);
        if let (Some(r), Stage::Token) = (&entry.gate.rate, entry.stage)
            && let Some(b) = self.buckets.get_mut(&r.key)
        {
            b.waiting.remove(&name);
        }
        let mut opened = Vec::new();
        if let Some(key) = &entry.gate.key
            && let Some(group) = self.slots.get_mut(key)
        {
            if entry.stage == Stage::Slot {
                group.waiting.remove(&name);
            } else {
                group.holders = group.holders.saturating_sub(1);
                opened = self.let_through(key, now);
            }
            if self
                .slots
                .get(key)
                .is_some_and(|g| g.holders == 0 && g.waiting.is_empty())
            {
                self.slots.remove(key);
            }
        }
        opened
    }

    /// Every task of `pid` ended (its process ended or went).
    pub(crate) fn ended_all(&mut self, pid: &str, now: i64) -> Vec<GateId> {
        let mut opened = Vec::new();
        for tid in self.tids_of(pid) {
            opened.extend(self.ended(pid, &tid, now));
        }
        opened.retain(|(p, _)| p != pid);
        opened
    }

    /// The tasks whose token came by `now`.
    pub(crate) fn refill(&mut self, now: i64) -> Vec<GateId> {
        let mut opened = Vec::new();
        for bucket in self.buckets.values_mut() {
            bucket.refill(now);
            while !bucket.waiting.is_empty() && bucket.take() {
                if let Some((_, name)) = bucket.waiting.pop() {
                    opened.extend(unqueued(&name));
                }
            }
        }
        // A full bucket nobody waits for is what a new one would be (it
        // fills from the engine's start): dropped, so keys used once do
        // not pile up.
        self.buckets
            .retain(|_, b| !b.waiting.is_empty() || !b.is_full());
        for id in &opened {
            if let Some(e) = self.entries.get_mut(id) {
                e.stage = Stage::Open;
            }
        }
        opened
    }

    /// When the next waiting task's token comes (`None`: nobody waits
    /// for one).
    pub(crate) fn next_token_at(&self) -> Option<i64> {
        self.buckets
            .values()
            .filter(|b| !b.waiting.is_empty())
            .map(Bucket::next_token_at)
            .min()
    }

    /// The gated tasks found in the stored processes at a start (`(pid,
    /// use)`), before anything runs: the open ones hold their slots, the
    /// others wait in order. Returns the tasks that may run now.
    pub(crate) fn restore(
        &mut self,
        found: Vec<(String, GateUse, QueueOrder)>,
        now: i64,
    ) -> Vec<GateId> {
        let (open, mut waiting): (Vec<_>, Vec<_>) = found.into_iter().partition(|(_, u, _)| u.open);
        // The waiters queue again in their order (the rows come in any).
        waiting.sort_by_cached_key(|(pid, u, _)| place(&(pid.clone(), u.tid.clone()), &u.gate));
        for (pid, u, order) in open {
            let id = (pid.clone(), u.tid.clone());
            if self.entries.contains_key(&id) {
                continue;
            }
            if let Some(key) = &u.gate.key {
                self.slots.entry(key.clone()).or_default().holders += 1;
            }
            self.by_pid.entry(pid).or_default().insert(u.tid);
            self.entries.insert(
                id,
                Entry {
                    gate: u.gate,
                    stage: Stage::Open,
                    order,
                },
            );
        }
        let mut opened = Vec::new();
        for (pid, u, order) in waiting {
            if self.ask(&pid, &u.tid, &u.gate, &order, now) {
                opened.push((pid, u.tid));
            }
        }
        opened
    }

    /// Every key in use, by kind and key.
    pub(crate) fn keys(&self) -> Vec<GateKeyUse> {
        let mut out: Vec<GateKeyUse> = self
            .slots
            .iter()
            .map(|(key, g)| GateKeyUse {
                kind: "concurrency",
                key: key.clone(),
                holders: g.holders,
                waiting: g.waiting.len(),
            })
            .chain(self.buckets.iter().map(|(key, b)| GateKeyUse {
                kind: "rate",
                key: key.clone(),
                holders: 0,
                waiting: b.waiting.len(),
            }))
            .collect();
        out.sort_by(|a, b| (a.kind, &a.key).cmp(&(b.kind, &b.key)));
        out
    }

    fn stage(&self, id: &GateId) -> Option<Stage> {
        self.entries.get(id).map(|e| e.stage)
    }

    /// Moves a new entry as far as it can go.
    fn enter(&mut self, id: &GateId, now: i64) {
        let Some(entry) = self.entries.get(id) else {
            return;
        };
        let (gate, order) = (entry.gate.clone(), entry.order.clone());
        if let Some(key) = &gate.key {
            let group = self.slots.entry(key.clone()).or_default();
            if !group.waiting.is_empty() || group.holders >= gate.limit as usize {
                group.waiting.push(&queued(id), gate.since, &order);
                return;
            }
            group.holders += 1;
        }
        self.take_token(id, &gate, &order, now);
    }

    /// Holding its slot (or needing none): a token, or a place in the
    /// bucket's queue.
    fn take_token(&mut self, id: &GateId, gate: &TaskGate, order: &QueueOrder, now: i64) {
        let stage = match &gate.rate {
            None => Stage::Open,
            Some(r) => {
                let started = self.started;
                let bucket = self
                    .buckets
                    .entry(r.key.clone())
                    .or_insert_with(|| Bucket::empty_at(started, r.per_second, r.burst));
                // The latest model's figures count.
                bucket.set_rate(r.per_second, r.burst);
                bucket.refill(now);
                if bucket.waiting.is_empty() && bucket.take() {
                    Stage::Open
                } else {
                    bucket.waiting.push(&queued(id), gate.since, order);
                    Stage::Token
                }
            }
        };
        if let Some(e) = self.entries.get_mut(id) {
            e.stage = stage;
        }
    }

    /// Lets the oldest waiters of `key` take the slots it has free (each
    /// against its own limit; a waiter never passes an older one).
    fn let_through(&mut self, key: &str, now: i64) -> Vec<GateId> {
        let mut opened = Vec::new();
        while let Some(group) = self.slots.get_mut(key) {
            let Some(name) = group.waiting.peek().map(str::to_owned) else {
                break;
            };
            let Some((id, entry)) = unqueued(&name).and_then(|id| {
                let entry = self.entries.get(&id)?;
                Some((id, entry))
            }) else {
                group.waiting.remove(&name);
                continue;
            };
            if group.holders >= entry.gate.limit as usize {
                break;
            }
            // Popped (not removed): its fairness key takes its next turn
            // at the back, and the queue counts it for aging.
            group.waiting.pop();
            group.holders += 1;
            let (gate, order) = (entry.gate.clone(), entry.order.clone());
            self.take_token(&id, &gate, &order, now);
            if self.stage(&id) == Some(Stage::Open) {
                opened.push(id);
            }
        }
        opened
    }
}

#[cfg(test)]
#[path = "act_gates_tests.rs"]
mod tests;
