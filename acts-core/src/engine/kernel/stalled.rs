//! [`Stalled`]: an automatic transition that failed on a store fault and
//! waits for the housekeeping tick to run again (see
//! `Kernel::retry_stalled`).

use std::sync::Arc;

use crate::engine::kernel::cache::ProcHandle;

/// An automatic transition that failed on a store fault, to retry.
pub(crate) enum Stalled {
    /// The resume of a loaded in-flight process.
    Resume(Arc<ProcHandle>),
    /// The continuation of a process with work left.
    Continue(Arc<ProcHandle>),
    /// A fired timer's transition.
    Tick,
}

/// The processes whose automatic transition failed on a store fault,
/// each with what to run again on the housekeeping tick.
#[derive(Default)]
pub(crate) struct StalledSet {
    by_pid: parking_lot::Mutex<std::collections::HashMap<String, Stalled>>,
}

impl StalledSet {
    /// Notes (or replaces) what to retry for `pid`.
    pub(crate) fn insert(&self, pid: String, what: Stalled) {
        self.by_pid.lock().insert(pid, what);
    }

    /// Everything noted, taken out.
    pub(crate) fn take_all(&self) -> Vec<(String, Stalled)> {
        self.by_pid.lock().drain().collect()
    }

    /// The pids noted.
    pub(crate) fn pids(&self) -> Vec<String> {
        self.by_pid.lock().keys().cloned().collect()
    }
}
