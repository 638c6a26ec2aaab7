//! [`TimerService`]: one timer wheel for the engine (retries, schedules,
//! snapshot TTL, task timeouts), driven by a [`Clock`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::sync::{Notify, mpsc};

use super::clock::Clock;

/// Identifies a scheduled timer (to cancel it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimerId(u64);

/// A timer that came due: when it was due, and what it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired<K> {
    /// The timer.
    pub id: TimerId,
    /// The time it was scheduled for (epoch milliseconds).
    pub due: i64,
    /// What the scheduler attached to it.
    pub payload: K,
}

struct Shared<K> {
    /// Pending timers by (due time, id): the first entry is the next due.
    pending: Mutex<BTreeMap<(i64, TimerId), K>>,
    /// Wakes the driver when a timer earlier than its current wait is added,
    /// or on close.
    changed: Notify,
    closed: std::sync::atomic::AtomicBool,
    next_id: AtomicU64,
    /// Timers fired and not yet reported handled ([`TimerService::handled`]).
    unhandled: std::sync::atomic::AtomicUsize,
}

/// Timers fired in due order on a channel, by one driver task.
///
/// Schedule with [`schedule`](Self::schedule), cancel with
/// [`cancel`](Self::cancel); fired timers arrive on the receiver returned by
/// [`start`](Self::start), earliest first (ties in scheduling order).
/// [`close`](Self::close) stops the driver; the receiver then ends.
pub struct TimerService<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for TimerService<K> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<K: Send + 'static> TimerService<K> {
    /// Starts the driver on the current tokio runtime.
    pub fn start(clock: Arc<dyn Clock>) -> (Self, mpsc::UnboundedReceiver<Fired<K>>) {
        let shared = Arc::new(Shared {
            pending: Mutex::new(BTreeMap::new()),
            changed: Notify::new(),
            closed: std::sync::atomic::AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            unhandled: std::sync::atomic::AtomicUsize::new(0),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(drive(shared.clone(), clock, tx));
        (Self { shared }, rx)
    }

    /// Fires `payload` once the clock reaches `due` (at once if it already
    /// has).
    pub fn schedule(&self, due: i64, payload: K) -> TimerId {
        let id = TimerId(self.shared.next_id.fetch_add(1, Ordering::SeqCst));
        self.shared.pending.lock().insert((due, id), payload);
        self.shared.changed.notify_one();
        id
    }

    /// Cancels a timer that has not fired; returns its payload.
    pub fn cancel(&self, id: TimerId) -> Option<K> {
        let mut pending = self.shared.pending.lock();
        let key = pending.keys().find(|(_, i)| *i == id).copied()?;
        pending.remove(&key)
    }

    /// When the next timer is due, if any (a test clock can jump there).
    pub fn next_due(&self) -> Option<i64> {
        self.shared
            .pending
            .lock()
            .keys()
            .next()
            .map(|(due, _)| *due)
    }

    /// When the earliest pending timer whose payload passes `f` is due.
    pub fn next_due_matching(&self, f: impl Fn(&K) -> bool) -> Option<i64> {
        self.shared
            .pending
            .lock()
            .iter()
            .find(|(_, k)| f(k))
            .map(|((due, _), _)| *due)
    }

    /// Reports a fired timer as handled (see [`unhandled`](Self::unhandled)).
    pub fn handled(&self) {
        let _ = self
            .shared
            .unhandled
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }

    /// How many fired timers were not reported handled yet: with
    /// [`next_due`](Self::next_due), what tells a caller that everything
    /// due has been dealt with.
    pub fn unhandled(&self) -> usize {
        self.shared.unhandled.load(Ordering::SeqCst)
    }

    /// How many timers are pending.
    pub fn pending(&self) -> usize {
        self.shared.pending.lock().len()
    }

    /// Stops the driver; pending timers never fire.
    pub fn close(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.changed.notify_one();
    }
}

async fn drive<K: Send + 'static>(
    shared: Arc<Shared<K>>,
    clock: Arc<dyn Clock>,
    tx: mpsc::UnboundedSender<Fired<K>>,
) {
    loop {
        if shared.closed.load(Ordering::SeqCst) {
            return;
        }
        // Fire everything due now, earliest first.
        let now = clock.now_millis();
        loop {
            let fired = {
                let mut pending = shared.pending.lock();
                match pending.first_key_value() {
                    Some((&(due, id), _)) if due <= now => pending
                        .remove(&(due, id))
                        .map(|payload| Fired { id, due, payload }),
                    _ => None,
                }
            };
            match fired {
                Some(f) => {
                    shared.unhandled.fetch_add(1, Ordering::SeqCst);
                    if tx.send(f).is_err() {
                        return; // nobody listens any more
                    }
                }
                None => break,
            }
        }
        let next = shared.pending.lock().keys().next().map(|(due, _)| *due);
        // Register for changes before sleeping, so a timer scheduled in
        // between is not missed.
        let changed = shared.changed.notified();
        match next {
            Some(due) => {
                tokio::select! {
                    _ = clock.sleep_until(due) => {}
                    _ = changed => {}
                }
            }
            None => changed.await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::ManualClock;
    use std::time::Duration;

    const GUARD: Duration = Duration::from_secs(10);

    async fn next<K>(rx: &mut mpsc::UnboundedReceiver<Fired<K>>) -> Fired<K> {
        tokio::time::timeout(GUARD, rx.recv())
            .await
            .expect("a timer fires")
            .expect("open")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn timers_fire_in_due_order_when_the_clock_gets_there() {
        let clock = ManualClock::new(0);
        let (timers, mut rx) = TimerService::start(Arc::new(clock.clone()));
        timers.schedule(2_000, "second");
        timers.schedule(1_000, "first");
        let late = timers.schedule(3_000, "cancelled");
        assert_eq!(timers.next_due(), Some(1_000));
        clock.set(1_500);
        assert_eq!(next(&mut rx).await.payload, "first");
        assert!(rx.try_recv().is_err(), "the 2s timer is not due yet");
        assert_eq!(timers.cancel(late), Some("cancelled"));
        clock.set(5_000);
        let f = next(&mut rx).await;
        assert_eq!((f.payload, f.due), ("second", 2_000));
        assert_eq!(timers.pending(), 0);
        timers.schedule(4_000, "already due");
        assert_eq!(next(&mut rx).await.payload, "already due");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_virtual_clock_can_jump_to_the_next_timer() {
        let clock = ManualClock::new(0);
        let (timers, mut rx) = TimerService::start(Arc::new(clock.clone()));
        timers.schedule(3_600_000, "one hour");
        clock.set(timers.next_due().expect("a timer"));
        assert_eq!(next(&mut rx).await.payload, "one hour");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn close_stops_the_driver() {
        let clock = ManualClock::new(0);
        let (timers, mut rx) = TimerService::<u32>::start(Arc::new(clock.clone()));
        timers.schedule(10, 1);
        timers.close();
        let end = tokio::time::timeout(GUARD, rx.recv())
            .await
            .expect("the driver stops");
        assert_eq!(
            end, None,
            "the channel closes; the pending timer never fires"
        );
    }
}
