//! [`EngineTimers`]: the engine's timers as one part of the kernel — the
//! timer service, every in-flight process's armed timeout (resident or
//! not: the in-memory side of the wake index), the processes whose timer
//! a transition set while the boot resume reads the wake index, and the
//! periodic housekeeping timer.

use std::collections::{HashMap, HashSet};

use parking_lot::Mutex;

use crate::time::{TimerId, TimerService};

/// What an engine timer is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TimerKey {
    /// A process's next timeout.
    Process(String),
    /// The next due cron schedule.
    Schedules,
    /// Dropping expired sealed-data entries and sweeping settled processes.
    Housekeeping,
    /// The next token a task waiting at its gate (`rate:`) gets.
    Gates,
}

/// The engine's timers (see the module docs).
pub(crate) struct EngineTimers {
    service: TimerService<TimerKey>,
    /// pid → its armed timeout timer and when it is due.
    per_process: Mutex<HashMap<String, (TimerId, i64)>>,
    /// While the boot resume reads the wake index: the processes whose
    /// timer a transition set meanwhile (the row it read may be older).
    touched: Mutex<Option<HashSet<String>>>,
    housekeeping: Mutex<Option<TimerId>>,
    /// The armed gate timer and when it is due.
    gates: Mutex<Option<(TimerId, i64)>>,
}

impl EngineTimers {
    pub(crate) fn new(service: TimerService<TimerKey>) -> Self {
        Self {
            service,
            per_process: Mutex::default(),
            touched: Mutex::default(),
            housekeeping: Mutex::default(),
            gates: Mutex::default(),
        }
    }

    /// Arms (or re-arms, or cancels with `None`) the timeout timer of
    /// process `pid`.
    pub(crate) fn arm_process(&self, pid: &str, due: Option<i64>) {
        if let Some(touched) = self.touched.lock().as_mut() {
            touched.insert(pid.to_owned());
        }
        let mut timers = self.per_process.lock();
        match (timers.get(pid).copied(), due) {
            (Some((_, d)), Some(due)) if d == due => {}
            (current, due) => {
                if let Some((id, _)) = current {
                    self.service.cancel(id);
                }
                match due {
                    Some(d) => {
                        let id = self.service.schedule(d, TimerKey::Process(pid.to_owned()));
                        timers.insert(pid.to_owned(), (id, d));
                    }
                    None => {
                        timers.remove(pid);
                    }
                }
            }
        }
    }

    /// Process `pid`'s timer fired at `now`: it is armed no more (a stale
    /// entry would make a later arm at the same due a no-op).
    pub(crate) fn fired(&self, pid: &str, now: i64) {
        let mut timers = self.per_process.lock();
        if timers.get(pid).is_some_and(|(_, due)| *due <= now) {
            timers.remove(pid);
        }
    }

    /// Starts noting the processes whose timer is set (the boot resume's
    /// scan of the wake index begins).
    pub(crate) fn begin_touch(&self) {
        *self.touched.lock() = Some(HashSet::new());
    }

    /// The processes whose timer was set since [`begin_touch`](Self::begin_touch);
    /// stops noting.
    pub(crate) fn end_touch(&self) -> HashSet<String> {
        self.touched.lock().take().unwrap_or_default()
    }

    /// Arms the periodic housekeeping timer at `due` (replacing the armed one).
    pub(crate) fn arm_housekeeping(&self, due: i64) {
        let mut slot = self.housekeeping.lock();
        if let Some(id) = slot.take() {
            self.service.cancel(id);
        }
        *slot = Some(self.service.schedule(due, TimerKey::Housekeeping));
    }

    /// Arms the gate timer at `due`, unless it is armed for then or
    /// earlier (an earlier timer arms the next one when it fires).
    pub(crate) fn arm_gates(&self, due: i64) {
        let mut slot = self.gates.lock();
        if slot.is_some_and(|(_, d)| d <= due) {
            return;
        }
        if let Some((id, _)) = slot.take() {
            self.service.cancel(id);
        }
        *slot = Some((self.service.schedule(due, TimerKey::Gates), due));
    }

    /// The gate timer fired: it is armed no more.
    pub(crate) fn gate_timer_fired(&self) {
        *self.gates.lock() = None;
    }

    /// Arms a timer for `key` at `due`.
    pub(crate) fn schedule(&self, due: i64, key: TimerKey) -> TimerId {
        self.service.schedule(due, key)
    }

    /// Cancels timer `id`.
    pub(crate) fn cancel(&self, id: TimerId) {
        self.service.cancel(id);
    }

    /// A fired timer was handled.
    pub(crate) fn handled(&self) {
        self.service.handled();
    }

    /// Fired timers not handled yet.
    pub(crate) fn unhandled(&self) -> usize {
        self.service.unhandled()
    }

    /// When the earliest timer whose key passes `f` is due.
    pub(crate) fn next_due_matching(&self, f: impl Fn(&TimerKey) -> bool) -> Option<i64> {
        self.service.next_due_matching(f)
    }

    /// The processes with a timeout armed.
    #[cfg(feature = "testing")]
    pub(crate) fn process_pids(&self) -> Vec<String> {
        self.per_process.lock().keys().cloned().collect()
    }

    /// Stops the timer service (no timer fires any more).
    pub(crate) fn close(&self) {
        self.service.close();
    }
}
