//! The services built on the kernel: durable deliveries (ack, retry,
//! dead letters) and housekeeping (the sweeper, outbox retries), triggers
//! (manual, hook, cron), sealed data (the reference's snapshots), the
//! stuck detector, the store's lease (fenced ownership by one node), and
//! readiness (whether the next transition can commit).
//!
//! May use: the kernel, `persist`, and the API's error and info types.

pub(crate) mod delivery;
pub(crate) mod lease;
pub(crate) mod readiness;
pub(crate) mod sealed;
pub(crate) mod stuck;
pub(crate) mod trigger;

pub use lease::{LeaseConfig, LeaseInfo};
pub use sealed::{MAX_TTL_SECS, SealOptions, SealedData, SealedEntry};
