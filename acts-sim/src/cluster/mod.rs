//! The cluster simulation (`acts-sim --cluster N`): N real cluster nodes
//! (engines and the cluster's ownership logic: membership, leases,
//! takeovers, the catalog) in one deterministic run on a simulated shared
//! store with a replica (`store.rs`), each on its own skewed manual clock
//! (`nodes.rs`), driven by seeded events and client calls sent through
//! any node (`run.rs`), with the workload of `work.rs`.
//!
//! Checked: after every event, that no batch is applied to a partition
//! under an epoch other than the partition's own or under an epoch
//! another node raised (the fence); at the end, once every fault healed,
//! that every process ended as in the single-node fault-free run, that
//! every call that returned `Ok` is in its task's history exactly once
//! (without `wait_replicas` a failover may lose some: counted and
//! reported, not failed — the runs that must show the window), and that
//! ownership converged (each partition held by exactly the node
//! rendezvous hashing names among the live nodes, and every node's map
//! says so).
//!
//! May use: the cluster (`acts-cluster`, the facade `acts` and
//! `acts-server` for a node's API), acts-core, the store contract, and of
//! the simulator `check`, `sim` and `rows`.

mod nodes;
mod plan;
mod run;
pub mod store;
mod work;

use std::collections::BTreeMap;
use std::sync::Arc;

use acts_cluster::placement::owner_of;
use acts_core::scheduler::Action;
use rand::SeedableRng;
use rand::rngs::StdRng;

pub use store::Plant;

use crate::check::{Failure, Outcome};
pub use plan::{ClusterPlan, ClusterReport, PARTITIONS};
use run::World;
use work::{Acted, Work};

/// The processes of a run.
const PROCESSES: usize = 6;

/// Checks cluster seed `seed` under `plan` on a single-threaded runtime.
pub fn run_cluster_seed(seed: u64, plan: ClusterPlan) -> Result<ClusterReport, Failure> {
    crate::runtime()?.block_on(check_cluster(seed, plan))
}

fn run_name(plan: &ClusterPlan) -> String {
    let replicas = if plan.wait_replicas {
        "wait_replicas"
    } else {
        "async replicas"
    };
    format!("cluster of {} ({replicas})", plan.nodes)
}

async fn check_cluster(seed: u64, plan: ClusterPlan) -> Result<ClusterReport, Failure> {
    let name = run_name(&plan);
    let fail = |trace: &crate::sim::Trace, what: String| Failure {
        run: name.clone(),
        what,
        trace: trace.clone(),
    };
    let work = Arc::new(Work::draw(seed, PROCESSES));
    let expected = work
        .fault_free()
        .await
        .map_err(|e| fail(&Default::default(), e))?;
    let mut world = run::setup(seed, &plan, work.clone())
        .await
        .map_err(|e| fail(&Default::default(), format!("setup: {e}")))?;
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..plan.events {
        run::event(&mut world, &mut rng, &plan)
            .await
            .map_err(|e| fail(&world.trace, e))?;
        if let Some(v) = world.store.violations().first() {
            return Err(fail(&world.trace, format!("the fence failed: {v}")));
        }
    }
    world.heal().await.map_err(|e| fail(&world.trace, e))?;
    let finished = world.finish(&mut rng).await;
    world.converge().await;
    if let Some(v) = world.store.violations().first() {
        return Err(fail(&world.trace, format!("the fence failed: {v}")));
    }
    converged(&world).map_err(|e| fail(&world.trace, e))?;
    let mut report = ClusterReport {
        failovers: world.failovers,
        dropped: world.dropped,
        acked: world.acks.values().map(Vec::len).sum(),
        trace: world.trace.lines.clone(),
        ..ClusterReport::default()
    };
    let ended = ends(&mut world, &expected, finished, &mut report).await;
    match ended {
        Err(e) => Err(fail(&world.trace, e)),
        Ok(()) if plan.wait_replicas && (report.lost > 0 || report.diverged > 0) => Err(fail(
            &world.trace,
            format!(
                "{} acknowledged calls lost, {} processes ended otherwise, with wait_replicas",
                report.lost, report.diverged
            ),
        )),
        Ok(()) => Ok(report),
    }
}

/// Each partition is held by exactly the node rendezvous hashing names
/// among the running nodes, and every running node's map says so.
fn converged(world: &World) -> Result<(), String> {
    let live: Vec<String> = world.running().map(|n| n.id.clone()).collect();
    for p in 0..PARTITIONS {
        let holders: Vec<&str> = world
            .running()
            .filter(|n| n.node.as_ref().is_some_and(|x| x.held().contains(&p)))
            .map(|n| n.id.as_str())
            .collect();
        let want = owner_of(p, &live);
        if holders.len() != 1 || Some(holders[0]) != want {
            return Err(format!(
                "ownership did not converge: partition {p} is held by {holders:?}, should be {want:?}"
            ));
        }
        for n in world.running() {
            let seen = n.node.as_ref().and_then(|x| x.owner(p));
            if seen.as_deref() != want {
                return Err(format!(
                    "node {} routes partition {p} to {seen:?}, its owner is {want:?}",
                    n.id
                ));
            }
        }
    }
    Ok(())
}

/// Every process ended as fault-free, and every `Ok` is in the history
/// exactly once (without `wait_replicas`, what a failover lost is
/// counted instead).
async fn ends(
    world: &mut World,
    expected: &BTreeMap<String, Outcome>,
    finished: bool,
    report: &mut ClusterReport,
) -> Result<(), String> {
    let complete = Action::Complete.as_str();
    for (pid, want) in expected {
        let engine = world.running().find_map(|n| {
            let node = n.node.as_ref()?;
            node.engine(node.partition_of(pid))
        });
        let Some(engine) = engine else {
            return Err(format!("no node holds the partition of {pid}"));
        };
        let exec = engine.executor();
        let (info, tasks) = match (exec.proc().get(pid).await, exec.task().list(pid).await) {
            (Ok(i), Ok(t)) => (i, t),
            (Err(e), _) | (_, Err(e)) => {
                if world.store_lost_something() {
                    report.diverged += 1;
                    continue;
                }
                return Err(format!("{pid}: {e}"));
            }
        };
        let got = Outcome::from(&info);
        if &got != want {
            if world.store_lost_something() {
                report.diverged += 1;
                continue;
            }
            let why = if finished {
                "ended"
            } else {
                "did not end and is"
            };
            return Err(format!("{pid} {why} {got:?}, fault-free {want:?}"));
        }
        let mut acked: BTreeMap<&str, usize> = BTreeMap::new();
        for a in world.acks.get(pid).into_iter().flatten() {
            if let Acted::Completed { tid, .. } = a {
                *acked.entry(tid.as_str()).or_default() += 1;
            }
        }
        for (tid, n) in acked {
            let h = tasks
                .iter()
                .filter(|t| t.tid == tid)
                .flat_map(|t| t.history.iter())
                .filter(|e| e.action == complete)
                .count();
            if h > 1 {
                return Err(format!(
                    "{pid}: task {tid} was completed {h} times (returned Ok {n} times)"
                ));
            }
            if h < n {
                if !world.store_lost_something() {
                    return Err(format!(
                        "{pid}: completing task {tid} returned Ok {n} time(s), its history has it {h} time(s)"
                    ));
                }
                report.lost += n - h;
            }
        }
    }
    Ok(())
}

impl World {
    /// Whether a failover dropped batches in this run.
    fn store_lost_something(&self) -> bool {
        self.dropped > 0
    }
}

/// The shortest prefix of seed `seed`'s events (at most `budget` runs
/// tried) that still fails under `plan`, and its failure.
pub fn shrink_cluster(seed: u64, plan: ClusterPlan, budget: usize) -> (usize, Failure) {
    let failing = |events: usize| run_cluster_seed(seed, ClusterPlan { events, ..plan }).err();
    let Some(mut failure) = failing(plan.events) else {
        let f = Failure {
            run: run_name(&plan),
            what: "the seed passes: nothing to shrink".into(),
            trace: crate::sim::Trace::default(),
        };
        return (plan.events, f);
    };
    // Bisect for the shortest failing prefix: `hi` fails, `lo` passed.
    let (mut lo, mut hi) = (0usize, plan.events);
    for _ in 0..budget {
        if hi - lo <= 1 {
            break;
        }
        let mid = lo + (hi - lo) / 2;
        match failing(mid) {
            Some(f) => {
                hi = mid;
                failure = f;
            }
            None => lo = mid,
        }
    }
    (hi, failure)
}
