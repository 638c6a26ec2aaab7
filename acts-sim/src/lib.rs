//! Deterministic simulation of the acts engine.
//!
//! From one seed, [`run_seed`] draws a workflow ([`generate::generate`]:
//! sequences, if/else branches and branches with `needs`, parallel,
//! sequence and block fan-outs of interrupts, interrupts with step
//! timeouts and catches, subflows, `while` loops, a backward `next`, set
//! and code acts — by [`Grammar`]) and a client ([`client::answer`]:
//! complete, submit, skip, error, back, cancel, abort, remove, push,
//! set_vars or wait for the timeout; as an operator pause, resume, rewind,
//! terminate, retry and migrate — decided by the seed, the act's key and
//! its occurrence, never by timing), runs it fault-free on a recording
//! store, and then again cut after random committed batches (a crash,
//! then a restart on the durable prefix), on a store that fails calls at
//! random until it heals, on a store whose calls are slow, and
//! (optionally) on a redb file or a RocksDB folder closed and reopened
//! every few actions, or on a PostgreSQL namespace disconnected and
//! connected again every few actions. Every run must end as the fault-free one did
//! (state, outputs, error code), the durable client must hear every end
//! message, every call that returned `Ok` must be in the history exactly
//! once, one instance per pid must hold after every round, the engine
//! must hold nothing once the process ended, no row may belong to nothing,
//! and removing the processes and the channel must leave nothing behind.
//! A failing seed is shrunk to a smaller workflow that still fails
//! ([`shrink`]) and reported with the command that replays it.
//!
//! With `--cluster N` ([`cluster`]), it runs N real cluster nodes on a
//! simulated shared store with a replica, through freezes, cuts, crashes,
//! skewed clocks, joins, leaves and store failovers.
//!
//! May depend on: `acts-core` (with its `testing` rows and hooks), the
//! store contract, the redb, RocksDB and PostgreSQL backends,
//! `acts-testkit` (crash, failing and slow stores, a private PostgreSQL),
//! and for [`cluster`] only: `acts-cluster`, the facade `acts` and
//! `acts-server` (what a node is built of).
//! Start reading at [`run_seed`]; `docs/TESTING.md` says how to run it.
//! One run's engine, trace and fault riding are in `sim.rs`; driving a
//! process to its end in `drive.rs`, one client turn in `turn.rs`, the
//! checks in `check.rs`, row checks in `rows.rs`; the workflows in
//! `workflow.rs` (drawn by `generate.rs`).

pub mod check;
pub mod client;
pub mod cluster;
pub mod drive;
pub mod generate;
pub mod grammar;
pub mod rows;
pub mod sim;
mod turn;
pub mod workflow;

pub use check::{Failure, Outcome, Plan, Report, check};
pub use generate::{generate, generate_with};
pub use workflow::{Grammar, Spec};

/// Checks seed `seed` under `plan` on a single-threaded runtime.
pub fn run_seed(seed: u64, plan: Plan) -> Result<Report, Failure> {
    run_spec(seed, &generate_with(seed, plan.grammar), plan)
}

/// Checks `spec` with the client of `seed` under `plan` on a
/// single-threaded runtime.
pub fn run_spec(seed: u64, spec: &Spec, plan: Plan) -> Result<Report, Failure> {
    runtime()?.block_on(check(seed, spec, plan))
}

/// The single-threaded runtime one seed runs on.
fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure {
            run: "setup".into(),
            what: format!("cannot build the runtime: {e}"),
            trace: sim::Trace::default(),
        })
}

/// The smallest workflow reachable from `spec` by removing steps that
/// still fails with the client of `seed` (each accepted removal is tried
/// again from the smaller spec; at most `budget` checks).
pub fn shrink(seed: u64, spec: &Spec, plan: Plan, budget: usize) -> (Spec, Failure) {
    let mut best = spec.clone();
    let mut failure = match run_spec(seed, spec, plan) {
        Err(f) => f,
        Ok(_) => {
            return (
                best,
                Failure {
                    run: "shrink".into(),
                    what: "the spec passes: nothing to shrink".into(),
                    trace: sim::Trace::default(),
                },
            );
        }
    };
    let mut tries = 0;
    'outer: loop {
        for smaller in best.shrinks() {
            if tries >= budget {
                break 'outer;
            }
            tries += 1;
            if let Err(f) = run_spec(seed, &smaller, plan) {
                best = smaller;
                failure = f;
                continue 'outer;
            }
        }
        break;
    }
    (best, failure)
}
