//! [`Work`]: what the engine has done and has in progress — transitions
//! committed since start, background tasks not finished, resume
//! transitions in flight — counted, each behind a small API.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The engine's work counters (see the module docs).
#[derive(Default)]
pub(crate) struct Work {
    transitions: AtomicU64,
    inflight: Arc<AtomicUsize>,
    resuming: Arc<AtomicUsize>,
}

/// A count held while some work runs; dropped, it counts down.
pub(crate) struct Held(Arc<AtomicUsize>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Work {
    /// A transition committed.
    pub(crate) fn committed(&self) {
        self.transitions.fetch_add(1, Ordering::Relaxed);
    }

    /// Transitions committed since start.
    pub(crate) fn transitions(&self) -> u64 {
        self.transitions.load(Ordering::Relaxed)
    }

    /// Runs `work` as a background task, counted until it ends.
    pub(crate) fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        self.inflight.fetch_add(1, Ordering::SeqCst);
        let held = Held(self.inflight.clone());
        tokio::spawn(async move {
            let _held = held;
            work.await;
        });
    }

    /// Background tasks not finished.
    pub(crate) fn inflight(&self) -> usize {
        self.inflight.load(Ordering::SeqCst)
    }

    /// A resume transition begins; counted until the value is dropped.
    pub(crate) fn resuming(&self) -> Held {
        self.resuming.fetch_add(1, Ordering::AcqRel);
        Held(self.resuming.clone())
    }

    /// Resume transitions in flight.
    pub(crate) fn resumes_in_flight(&self) -> usize {
        self.resuming.load(Ordering::Acquire)
    }
}
