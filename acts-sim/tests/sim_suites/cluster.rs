//! The cluster simulation in CI (`acts-sim --cluster 3`): a bounded set
//! of seeds, each run with the store's replica waited for (nothing
//! acknowledged may be lost, every check strict) and without (a failover
//! drops the unreplicated batches: the loss must show, or the check could
//! not fail); and a planted fault — the store ignoring the fence — that
//! the checks must find within the same seeds.

use acts_sim::cluster::{ClusterPlan, Plant, run_cluster_seed};

/// The seeds CI checks.
const SEEDS: std::ops::Range<u64> = 0..48;

fn plan(wait_replicas: bool, plant: Plant) -> ClusterPlan {
    ClusterPlan {
        wait_replicas,
        plant,
        ..ClusterPlan::default()
    }
}

#[test]
fn three_nodes_lose_nothing_acknowledged_with_wait_replicas() {
    let mut failures = Vec::new();
    let mut acked = 0;
    for seed in SEEDS {
        match run_cluster_seed(seed, plan(true, Plant::None)) {
            Ok(r) => acked += r.acked,
            Err(f) => failures.push(format!(
                "seed {seed}: run '{}': {}\n  replay: cargo run --release -p acts-sim -- --seed {seed} --cluster 3",
                f.run, f.what
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(acked > 0, "no call was acknowledged: the run did nothing");
}

#[test]
fn without_wait_replicas_a_failover_loses_acknowledged_calls_and_it_shows() {
    let mut failures = Vec::new();
    let (mut lost, mut dropped) = (0, 0);
    for seed in SEEDS {
        match run_cluster_seed(seed, plan(false, Plant::None)) {
            Ok(r) => {
                lost += r.lost + r.diverged;
                dropped += r.dropped;
            }
            Err(f) => failures.push(format!(
                "seed {seed}: run '{}': {}\n  replay: cargo run --release -p acts-sim -- --seed {seed} --cluster 3",
                f.run, f.what
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(dropped > 0, "no failover dropped a batch in {SEEDS:?}");
    assert!(
        lost > 0,
        "failovers dropped {dropped} batches, yet no acknowledged call was lost: the check cannot fail"
    );
}

#[test]
fn a_store_that_ignores_the_fence_is_caught() {
    let caught: Vec<u64> = SEEDS
        .filter(|seed| {
            run_cluster_seed(*seed, plan(true, Plant::NoFence))
                .is_err_and(|f| f.what.contains("the fence failed"))
        })
        .collect();
    assert!(
        !caught.is_empty(),
        "no seed of {SEEDS:?} found the planted fault"
    );
}
