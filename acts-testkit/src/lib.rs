//! # acts-testkit: stores that misbehave on purpose, and the conformance suite
//!
//! Test support for every acts crate — a dev-dependency only: no crate
//! that ships (the engine, the facade, the server, the cluster, the `acts`
//! binary) depends on it outside its tests. It may depend on `acts-store`
//! (and on test-only crates: tokio, proptest, tonic and the OpenTelemetry
//! protocol types); never on a backend or on the
//! engine, so backends and the engine can both use it from their
//! dev-dependencies. (The simulator and the benchmarks, which are test
//! tools themselves, use it as a normal dependency.)
//!
//! ## What is here
//!
//! - [`GatedStore`]: wraps any store with a read gate and a write gate that a
//!   test arms, waits on ("N callers parked") and releases, so concurrency
//!   interleavings are decided by the test, never by sleeps.
//! - [`FailingStore`]: fails chosen operation kinds (always, after N calls, or
//!   pseudo-randomly from a seed) with a chosen [`ErrorKind`](acts_store::ErrorKind),
//!   as an unreachable or broken backend does.
//! - [`CountingStore`]: counts the reads, scans and commits that reach a
//!   store (commits per operation, counted, for benchmarks and tests).
//! - [`SlowStore`]: every call yields to the runtime a seeded number of
//!   times first, so the engine's other work interleaves with commits in an
//!   order the seed decides (slow-commit schedules that replay).
//! - [`CrashStore`]: records committed batches in order; `crash_after(n)` kills
//!   it at the (n+1)-th write; `recover()` returns exactly the durable prefix.
//! - [`conformance`]: the suite every backend runs with one macro call,
//!   [`conformance_tests!`]. It includes model-based property tests, scan
//!   bounds at the edges of the key space, batch atomicity under concurrent
//!   readers, error-not-empty checks and persistence across reopen.
//! - [`models`]: model texts tests and benchmarks share (a linear chain of
//!   `n` steps).
//! - [`redis_server`]: starts a private `redis-server` on a free loopback port
//!   for the Redis backend's tests; [`redis_cluster`]: a private Redis
//!   Cluster (3 masters, 3 replicas) on loopback ports; [`redis_sentinel`]:
//!   a master, its replica and three Sentinels that fail it over.
//! - [`patroni`]: a PostgreSQL pair managed by Patroni with etcd
//!   (synchronous mode), whose leader a test kills.
//! - [`postgres_server`]: a private PostgreSQL server (`initdb`, `pg_ctl`,
//!   `fsync=on`); [`postgres_pair`]: a primary and a streaming standby
//!   (synchronous or not) a failover test can cut off, kill and promote.
//! - [`layout`]: the workspace's layout rules (no import cycles, rooms that
//!   use only what their `May use:` line names), checked on a crate's
//!   sources read with a Rust parser.
//! - [`OtlpReceiver`]: a real OTLP/gRPC trace receiver on loopback (the
//!   trace tests assert on what it got; benchmarks export to it).
//!
//! ## Where to start reading
//!
//! `conformance/mod.rs` for the suite's shape, then `gated.rs`.

pub mod conformance;
mod counting;
mod crash;
mod failing;
mod gated;
pub mod layout;
pub mod models;
mod otlp_receiver;
pub mod patroni;
pub mod postgres_pair;
pub mod postgres_server;
mod process_tree;
pub mod redis_cluster;
pub mod redis_sentinel;
pub mod redis_server;
mod slow;

pub use conformance::{MemoryFactory, StoreFactory, TempLocations};
pub use counting::{CountingStore, StoreCounts};
pub use crash::CrashStore;
pub use failing::{FailPlan, FailWhen, FailingStore, OpSet};
pub use gated::{GateKind, GatedStore};
pub use otlp_receiver::{OtlpReceiver, Span as OtlpSpan};
pub use slow::SlowStore;

/// Cases per property test: `PROPTEST_CASES` when it is set (a long run:
/// `PROPTEST_CASES=100000`), else `default` (what CI runs).
pub fn proptest_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default)
}
