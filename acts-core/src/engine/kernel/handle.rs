//! A process in memory ([`ProcHandle`]: its lane and what the lane guards)
//! and a load in flight ([`Loading`]), which every caller that misses the
//! pid meanwhile joins.

use std::sync::Arc;

use tokio::sync::OnceCell;

use crate::scheduler::Process;

use crate::engine::persist::Persisted;

/// A resident process and its lane: the async mutex every transition of
/// the process holds from running the core until its batch is durable, so
/// the transitions of one process are applied and committed in order.
pub struct ProcHandle {
    pid: String,
    /// The writer epoch this instance was created at (its batches carry
    /// it, so a write of an instance from before a removal is skipped).
    pub(crate) born: u64,
    pub(crate) lane: Arc<tokio::sync::Mutex<Slot>>,
    /// How many transitions of this instance committed (bumped under the
    /// lane): what is read before taking the lane is still current when
    /// this has not moved meanwhile.
    pub(crate) commits: std::sync::atomic::AtomicU64,
    /// Whether this instance holds a place in admission (a started,
    /// refilled or in-flight process; not one only read): its end gives
    /// the place back, once.
    pub(crate) admitted: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for ProcHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcHandle")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl ProcHandle {
    pub(crate) fn new(process: Process, persisted: Persisted, born: u64) -> Arc<Self> {
        Arc::new(Self {
            pid: process.pid.clone(),
            born,
            lane: Arc::new(tokio::sync::Mutex::new(Slot {
                process: Some(process),
                persisted,
            })),
            commits: std::sync::atomic::AtomicU64::new(0),
            admitted: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Marks this instance as holding a place in admission.
    pub(crate) fn hold_place(&self) {
        self.admitted
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Gives this instance's place back: `true` the first time (the caller
    /// then releases it in the cache).
    pub(crate) fn give_place_back(&self) -> bool {
        self.admitted
            .swap(false, std::sync::atomic::Ordering::AcqRel)
    }

    /// The process id.
    pub fn pid(&self) -> &str {
        &self.pid
    }
}

/// What a lane guards.
pub(crate) struct Slot {
    /// The process; `None` once this instance is gone from memory
    /// (unloaded, discarded after a failed commit, removed): the store is
    /// the truth and the next use loads it again.
    pub process: Option<Process>,
    /// What is stored for it.
    pub persisted: Persisted,
}

/// A load in flight: every caller that misses the pid meanwhile joins it.
pub(crate) struct Loading {
    /// The outcome of the one load: the handle (`None`: no such process)
    /// or the error every joined caller gets. Set once; a failed load is
    /// never retried on the same cell (a later miss starts a new load), so
    /// two loads of one pid can never both install an instance.
    pub cell: OnceCell<Result<Option<Arc<ProcHandle>>, crate::engine::types::error::EngineError>>,
    /// Whether the load starts the process (a refill) rather than only
    /// fetching it (a demand load).
    pub start: bool,
    /// Set when a slot was claimed for the load (a caller that waits for a
    /// slot loads only then).
    claimed: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

impl Loading {
    /// Resolves once a slot is claimed for this load.
    pub(crate) async fn wait_claimed(&self) {
        use std::sync::atomic::Ordering;
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.claimed.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }

    pub(crate) fn mark_claimed(&self) {
        self.claimed
            .store(true, std::sync::atomic::Ordering::Release);
        self.notify.notify_waiters();
    }
}

pub(crate) type LoadCell = Arc<Loading>;

pub(crate) fn loading(start: bool) -> LoadCell {
    Arc::new(Loading {
        cell: OnceCell::new(),
        start,
        claimed: std::sync::atomic::AtomicBool::new(true),
        notify: tokio::sync::Notify::new(),
    })
}

/// A load that waits for a slot before it runs.
pub(crate) fn waiting_load() -> LoadCell {
    Arc::new(Loading {
        cell: OnceCell::new(),
        start: true,
        claimed: std::sync::atomic::AtomicBool::new(false),
        notify: tokio::sync::Notify::new(),
    })
}

/// A pid's fingerprint in the boot count (the count keeps 8 bytes per
/// process it saw, not the pids).
pub(crate) fn pid_hash(pid: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    // `DefaultHasher::new()` has fixed keys: equal pids hash alike.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    pid.hash(&mut h);
    h.finish()
}
