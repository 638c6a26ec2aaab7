//! [`Clock`]: where the engine gets the time from. Production uses
//! [`SystemClock`]; tests drive a [`ManualClock`] so timeouts, retries and
//! schedules are tested without waiting for wall time.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

/// A boxed future that resolves when a clock reaches a time.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A source of time in epoch milliseconds.
pub trait Clock: Send + Sync + 'static {
    /// Now, in milliseconds since the Unix epoch.
    fn now_millis(&self) -> i64;

    /// A future that resolves once [`now_millis`](Self::now_millis) is at
    /// least `at`.
    fn sleep_until(&self, at: i64) -> Sleep;
}

/// The operating system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }

    fn sleep_until(&self, at: i64) -> Sleep {
        let wait = (at - self.now_millis()).max(0) as u64;
        Box::pin(tokio::time::sleep(Duration::from_millis(wait)))
    }
}

/// A clock that only moves when told to. Sleepers wake as soon as the clock
/// is moved past their time, so a test decides exactly when timers fire.
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<AtomicI64>,
    moved: watch::Sender<i64>,
}

impl ManualClock {
    /// A clock standing at `start` (epoch milliseconds).
    pub fn new(start: i64) -> Self {
        Self {
            now: Arc::new(AtomicI64::new(start)),
            moved: watch::channel(start).0,
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let to = self.now.load(Ordering::SeqCst) + by.as_millis() as i64;
        self.set(to);
    }

    /// Sets the clock to `to` (never backwards: an earlier time is ignored).
    pub fn set(&self, to: i64) {
        let now = self.now.fetch_max(to, Ordering::SeqCst).max(to);
        self.moved.send_replace(now);
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> i64 {
        self.now.load(Ordering::SeqCst)
    }

    fn sleep_until(&self, at: i64) -> Sleep {
        let mut moved = self.moved.subscribe();
        Box::pin(async move {
            // The sender lives in the clock; if every clock handle is gone
            // the sleep never ends, like time that no longer moves.
            if moved.wait_for(|now| *now >= at).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn manual_sleepers_wake_only_when_moved_past_their_time() {
        let clock = ManualClock::new(1_000);
        let sleep = clock.sleep_until(1_500);
        let waiter = tokio::spawn(sleep);
        clock.advance(Duration::from_millis(400));
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        clock.advance(Duration::from_millis(100));
        tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(clock.now_millis(), 1_500);
        clock.set(10);
        assert_eq!(clock.now_millis(), 1_500, "the clock never goes back");
    }

    #[tokio::test]
    async fn a_time_already_passed_does_not_wait() {
        let clock = ManualClock::new(5_000);
        tokio::time::timeout(Duration::from_secs(10), clock.sleep_until(4_000))
            .await
            .unwrap();
        let system = SystemClock;
        let now = system.now_millis();
        tokio::time::timeout(Duration::from_secs(10), system.sleep_until(now - 1))
            .await
            .unwrap();
    }
}
