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
