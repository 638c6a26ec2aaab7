//! The services built on the kernel: durable deliveries (ack, retry,
//! dead letters) and housekeeping (the sweeper, outbox retries), triggers
//! (manual, hook, cron), sealed data (the reference's snapshots), the
//! stuck detector, the store's lease (fenced ownership by one node), and
//! readiness (whether the next transition can commit).
//!
//! Each service is a set of methods of [`On`] (the services acting on one
//! kernel, `on.rs`: the one file that holds the kernel, handing out the
//! few capabilities the services use); the kernel calls them only through the
//! [`ServiceHooks`](crate::engine::kernel::hooks::ServiceHooks) that
//! [`Services`] implements (`hooks.rs`), which the builder passes in.
//!
//! May use: `kernel`, `persist` and `types`.

pub(crate) mod bulk_runs;
pub(crate) mod delivery;
mod hooks;
pub(crate) mod lease;
mod on;
pub(crate) mod readiness;
pub(crate) mod sealed;
pub(crate) mod stuck;
pub(crate) mod trigger;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::sync::{Arc, Weak};

use crate::time::TimerId;

use crate::engine::kernel::config::HeldLease;

pub use lease::{LeaseConfig, LeaseInfo};
pub(crate) use on::On;
pub use sealed::{MAX_TTL_SECS, SealOptions, SealedData, SealedEntry};

/// The services of one engine: what they keep beyond the kernel (the
/// sealed-data registry, the lease held, the housekeeping and schedule
/// timers' state, the stuck processes reported) and the hooks the kernel
/// calls. Its fields are private to the services' room.
pub(crate) struct Services {
    sealed: Arc<SealedData>,
    /// The store's lease this node holds (with `EngineConfig::lease`).
    lease: parking_lot::Mutex<Option<HeldLease>>,
    /// The timer of the next due schedule.
    schedule_timer: parking_lot::Mutex<Option<TimerId>>,
    /// When (engine clock, ms) the housekeeping pass last swept.
    last_sweep: AtomicI64,
    /// The order of deliveries created by this engine.
    delivery_seq: AtomicU64,
    /// Stuck processes reported so far: pid → the quiet time reported.
    stuck_reported: parking_lot::Mutex<HashMap<String, i64>>,
    /// The bulk jobs being worked on here.
    bulk_runs: bulk_runs::BulkRuns,
    me: Weak<Services>,
}

impl Services {
    pub(crate) fn new(sealed: Arc<SealedData>) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            sealed,
            lease: Default::default(),
            schedule_timer: Default::default(),
            last_sweep: AtomicI64::new(i64::MIN),
            delivery_seq: AtomicU64::new(0),
            stuck_reported: Default::default(),
            bulk_runs: Default::default(),
            me: me.clone(),
        })
    }

    /// How many stuck processes are reported now, and which.
    pub(crate) fn stuck_reported(&self) -> Vec<String> {
        self.stuck_reported.lock().keys().cloned().collect()
    }

    /// The epoch of the lease this node holds (`None`: none).
    pub(crate) fn lease_epoch(&self) -> Option<u64> {
        self.lease.lock().as_ref().map(|l| l.epoch)
    }

    /// Forgets the lease held, without handing it over (a node that
    /// froze: its lease runs out on its own).
    pub(crate) fn drop_lease(&self) {
        self.lease.lock().take();
    }

    /// The sealed-data registry.
    pub(crate) fn sealed(&self) -> &SealedData {
        &self.sealed
    }

    /// The bulk jobs being worked on here.
    pub(crate) fn bulk_runs(&self) -> &bulk_runs::BulkRuns {
        &self.bulk_runs
    }
}
