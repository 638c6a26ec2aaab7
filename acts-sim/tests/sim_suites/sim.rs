//! The simulator in CI: a few hundred seeds on memory (each fault-free,
//! cut at random committed batches, on a failing store and on a store with
//! slow calls), the seeds that found bugs (each a regression test: it fails
//! without its fix), a few dozen seeds on a redb file and a RocksDB folder
//! closed and reopened every few actions.
//! A failing seed is reported with the command that replays it.

use acts_sim::{Plan, run_seed};

/// Checks `seeds` under `plan`; panics with every failure and its replay
/// command.
fn check_all(seeds: impl IntoIterator<Item = u64>, plan: Plan, flag: &str) {
    let mut failures = Vec::new();
    let mut runs = 0;
    for seed in seeds {
        match run_seed(seed, plan) {
            Ok(r) => runs += r.runs,
            Err(f) => failures.push(format!(
                "seed {seed}: run '{}': {}\n  replay: cargo run --release -p acts-sim -- --seed {seed}{flag}",
                f.run, f.what
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs > 0);
}

#[test]
fn two_hundred_seeds_on_memory() {
    check_all(0..200, Plan::default(), "");
}

/// The seeds that found the bugs listed in `docs/TESTING.md` (each fails
/// when its fix is taken out).
#[test]
fn the_seeds_that_found_bugs() {
    check_all(
        [0, 11, 13, 14, 15, 22, 23, 40, 73, 113, 1404],
        Plan {
            cuts: 6,
            ..Plan::default()
        },
        "",
    );
}

#[test]
fn thirty_seeds_on_a_reopened_redb_file() {
    check_all(
        0..30,
        Plan {
            cuts: 1,
            store_faults: false,
            redb: true,
            ..Plan::default()
        },
        " --redb --cuts 1 --no-store-faults",
    );
}

#[test]
fn twenty_seeds_on_a_reconnected_postgres_namespace() {
    let server = acts_testkit::postgres_server::PostgresServer::shared_or_start()
        .unwrap_or_else(|e| panic!("{e}"));
    acts_sim::check::use_postgres(server.url());
    check_all(
        0..20,
        Plan {
            cuts: 1,
            store_faults: false,
            postgres: true,
            ..Plan::default()
        },
        " --postgres --cuts 1 --no-store-faults",
    );
}

/// Grammar 2's seeds that found bugs (see `docs/TESTING.md`): a
/// retried process's earlier end lost for a durable client (179, 199,
/// 272).
#[test]
fn the_grammar_two_seeds_that_found_bugs() {
    check_all(
        [179, 199, 272],
        Plan {
            grammar: acts_sim::Grammar::V2,
            cuts: 8,
            ..Plan::default()
        },
        " --grammar 2",
    );
}

#[test]
fn fifteen_seeds_on_a_reopened_rocksdb_folder() {
    check_all(
        0..15,
        Plan {
            cuts: 0,
            store_faults: false,
            slow_store: false,
            rocksdb: true,
            grammar: acts_sim::Grammar::V2,
            ..Plan::default()
        },
        " --rocksdb --grammar 2 --cuts 0 --no-store-faults --no-slow-store",
    );
}

#[test]
fn a_hundred_seeds_of_grammar_two() {
    check_all(
        0..100,
        Plan {
            grammar: acts_sim::Grammar::V2,
            ..Plan::default()
        },
        " --grammar 2",
    );
}

/// Grammar 3's seeds that found something (see `docs/TESTING.md`): an
/// answer accepted for a process a timeout had aborted (3002); and the
/// simulator's own races, fixed in the harness — an answer overtaking a
/// timer tick that failed on the store (952, 2563, 4461).
#[test]
fn the_grammar_three_seeds_that_found_bugs() {
    check_all(
        [952, 2563, 3002, 4461],
        Plan {
            grammar: acts_sim::Grammar::V3,
            cuts: 8,
            ..Plan::default()
        },
        " --grammar 3",
    );
}

#[test]
fn a_hundred_seeds_of_grammar_three() {
    check_all(
        0..100,
        Plan {
            grammar: acts_sim::Grammar::V3,
            ..Plan::default()
        },
        " --grammar 3",
    );
}

/// Grammar 4: concurrency keys on the model and its subflow children
/// (limit 1: children that run at once wait for each other), and the
/// operator's pauses and terminations through bulk jobs — cut at random
/// batches too, so a bulk job is interrupted and resumed by the next
/// engine (each process at most once).
#[test]
fn a_hundred_seeds_of_grammar_four() {
    check_all(
        0..100,
        Plan {
            grammar: acts_sim::Grammar::V4,
            ..Plan::default()
        },
        " --grammar 4",
    );
}

/// Grammar 4's seeds that found something (see `docs/TESTING.md`): a bulk
/// job through a store failing one call in eight outlived the settle
/// guard (2876, 3614).
#[test]
fn the_grammar_four_seeds_that_found_bugs() {
    check_all(
        [2876, 3614],
        Plan {
            grammar: acts_sim::Grammar::V4,
            ..Plan::default()
        },
        " --grammar 4",
    );
}

/// Grammar 5: grammar 4's workflows with keys and rates on their steps
/// and acts — a parallel's acts queue for their key in turn, interrupts
/// of parallel branches for theirs, code steps for tokens — through the
/// same cuts, outages and reopens (a crash never lets a key past its
/// limit, never loses a waiter).
#[test]
fn a_hundred_seeds_of_grammar_five() {
    check_all(
        0..100,
        Plan {
            grammar: acts_sim::Grammar::V5,
            ..Plan::default()
        },
        " --grammar 5",
    );
}

/// Grammar 5's seeds past the first hundred that found something (see
/// `docs/TESTING.md`): waiters found at a start took free slots in row
/// order (292); a gated act skipped before it ran was heard or not
/// depending on timing (113).
#[test]
fn the_grammar_five_seeds_that_found_bugs() {
    check_all(
        [113, 292],
        Plan {
            grammar: acts_sim::Grammar::V5,
            ..Plan::default()
        },
        " --grammar 5",
    );
}
