//! `acts-sim`: checks a range of seeds (see the crate docs); a failing
//! seed is shrunk and printed with the command that replays it.
//!
//! ```sh
//! cargo run --release -p acts-sim -- --seeds 0..1000
//! cargo run --release -p acts-sim -- --seeds 0..50 --redb --rocksdb
//! cargo run --release -p acts-sim -- --seeds 0..100000 --jobs 2
//! cargo run --release -p acts-sim -- --seed 4711 --trace   # replay one
//! cargo run --release -p acts-sim -- --cluster 3 --seeds 0..1000
//! ```

use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use acts_sim::cluster::{ClusterPlan, Plant, run_cluster_seed, shrink_cluster};
use acts_sim::{Grammar, Plan, generate_with, run_seed, shrink};
use clap::Parser;

#[derive(Debug, Parser)]
#[command(
    name = "acts-sim",
    about = "Deterministic simulation of the acts engine"
)]
struct Args {
    /// Seeds to check, START..END (END excluded).
    #[arg(long, default_value = "0..100", conflicts_with = "seed")]
    seeds: String,
    /// One seed to check (with its model and trace printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Crash points tried per seed.
    #[arg(long, default_value_t = 3)]
    cuts: usize,
    /// Also run each seed on a redb file, reopened every few actions.
    #[arg(long)]
    redb: bool,
    /// Also run each seed on a RocksDB folder, reopened every few actions.
    #[arg(long)]
    rocksdb: bool,
    /// Also run each seed on PostgreSQL (a private server, or the one
    /// ACTS_TEST_POSTGRES_URL names), disconnected and connected again
    /// every few actions.
    #[arg(long)]
    postgres: bool,
    /// Skip the run on a failing store.
    #[arg(long)]
    no_store_faults: bool,
    /// Skip the run on a store with slow calls.
    #[arg(long)]
    no_slow_store: bool,
    /// Check seeds on this many threads (each seed still runs alone on a
    /// single-threaded runtime: the result does not depend on it).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    jobs: u16,
    /// Print the model and the client's trace of every seed checked.
    #[arg(long)]
    trace: bool,
    /// Stop at the first failing seed.
    #[arg(long)]
    fail_fast: bool,
    /// The workflow grammar: 1 (set, code, interrupts with timeouts and
    /// catches, parallel, branches, subflows), 2 (also sequences, while
    /// loops, a backward next; the client's and operator's other actions)
    /// 3 (also blocks, branches with needs; answers at random virtual
    /// times), 4 (also concurrency keys on the model and its subflow
    /// children; the operator pauses and terminates through bulk jobs) or
    /// 5 (4's workflows with keys and rates on their steps and acts).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=5))]
    grammar: u8,
    /// Simulate a cluster of this many nodes instead (and a spare that
    /// joins and leaves): each seed runs twice, with the store's replica
    /// waited for (nothing acknowledged may be lost) and without (what a
    /// failover loses is reported).
    #[arg(long, value_parser = clap::value_parser!(u8).range(2..=8))]
    cluster: Option<u8>,
    /// Seeded events of a cluster run before every fault heals.
    #[arg(long, default_value_t = 150, requires = "cluster")]
    events: usize,
    /// Plant a fault the cluster checks must find: `fence` (the store
    /// ignores the epoch a batch is conditioned on).
    #[arg(long, value_parser = ["fence"], requires = "cluster")]
    plant: Option<String>,
}

/// `START..END` with START < END.
fn parse_range(s: &str) -> Option<std::ops::Range<u64>> {
    let (a, b) = s.split_once("..")?;
    let r: std::ops::Range<u64> = a.trim().parse().ok()?..b.trim().parse().ok()?;
    (!r.is_empty()).then_some(r)
}

fn main() -> ExitCode {
    let args = Args::parse();
    // The engine's own logs, when asked for (RUST_LOG=warn, ...).
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let plan = Plan {
        cuts: args.cuts,
        store_faults: !args.no_store_faults,
        slow_store: !args.no_slow_store,
        redb: args.redb,
        rocksdb: args.rocksdb,
        postgres: args.postgres,
        // The value parser allows 1 to 3 only.
        grammar: Grammar::from_number(args.grammar).unwrap_or_default(),
    };
    // The PostgreSQL server of the --postgres runs, kept for the whole check.
    let _postgres = if args.postgres {
        match acts_testkit::postgres_server::PostgresServer::shared_or_start() {
            Ok(server) => {
                acts_sim::check::use_postgres(server.url());
                Some(server)
            }
            Err(e) => {
                eprintln!("acts-sim: --postgres: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        None
    };
    let seeds = match args.seed {
        Some(s) => s..s + 1,
        None => match parse_range(&args.seeds) {
            Some(r) => r,
            None => {
                eprintln!(
                    "acts-sim: --seeds must be START..END with START < END, e.g. 0..1000 (got '{}')",
                    args.seeds
                );
                return ExitCode::from(2);
            }
        },
    };
    let trace = args.trace || args.seed.is_some();
    let cluster = args.cluster.map(|n| ClusterPlan {
        nodes: usize::from(n),
        events: args.events,
        plant: if args.plant.is_some() {
            Plant::NoFence
        } else {
            Plant::None
        },
        ..ClusterPlan::default()
    });
    let check = |seed: u64| match cluster {
        Some(c) => check_cluster_seed(seed, c, trace),
        None => check_one(seed, plan, trace),
    };
    let started = Instant::now();
    let (mut passed, mut failed, mut runs) = (0u64, Vec::new(), 0usize);
    let mut lost = Lost::default();
    let next = AtomicU64::new(seeds.start);
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<Checked>();
    std::thread::scope(|scope| {
        for _ in 0..args.jobs {
            let tx = tx.clone();
            let (next, stop, end, check) = (&next, &stop, seeds.end, &check);
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= end || tx.send(check(seed)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for checked in rx {
            print!("{}", checked.output);
            let done = passed + failed.len() as u64 + 1;
            if done.is_multiple_of(PROGRESS_EVERY) {
                eprintln!(
                    "acts-sim: {done} seeds checked, {} failed, {:.0} s",
                    failed.len() + usize::from(checked.runs.is_none()),
                    started.elapsed().as_secs_f64()
                );
            }
            lost.add(&checked.lost);
            match checked.runs {
                Some(n) => {
                    passed += 1;
                    runs += n;
                }
                None => {
                    failed.push(checked.seed);
                    if args.fail_fast {
                        stop.store(true, Ordering::Relaxed);
                    }
                }
            }
        }
    });
    failed.sort_unstable();
    println!(
        "acts-sim: seeds {}..{}: {passed} passed, {} failed ({runs} runs) in {:.1} s",
        seeds.start,
        seeds.end,
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    if cluster.is_some() {
        println!(
            "acts-sim: without wait_replicas, {} store failovers dropped {} unreplicated batches: \
             {} of {} acknowledged calls lost, {} processes ended otherwise, in {} seeds \
             (the window WAIT closes; with it, none may be lost)",
            lost.failovers, lost.dropped, lost.lost, lost.acked, lost.diverged, lost.seeds
        );
    }
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        println!("failed seeds: {failed:?}");
        ExitCode::from(1)
    }
}

/// How often (in seeds) a long run says how far it got, on stderr.
const PROGRESS_EVERY: u64 = 5000;

/// One seed's result: its runs when it passed, and what to print.
struct Checked {
    seed: u64,
    runs: Option<usize>,
    output: String,
    /// A cluster seed's run without `wait_replicas`: what its failovers
    /// lost.
    lost: Lost,
}

/// What the failovers of cluster runs without `wait_replicas` lost.
#[derive(Debug, Default, Clone)]
struct Lost {
    seeds: u64,
    failovers: usize,
    dropped: usize,
    acked: usize,
    lost: usize,
    diverged: usize,
}

impl Lost {
    fn add(&mut self, other: &Lost) {
        self.seeds += other.seeds;
        self.failovers += other.failovers;
        self.dropped += other.dropped;
        self.acked += other.acked;
        self.lost += other.lost;
        self.diverged += other.diverged;
    }
}

/// Checks cluster seed `seed` with the replica waited for, then without;
/// a failure is shrunk to the shortest prefix of its events that still
/// fails and reported with its replay command.
fn check_cluster_seed(seed: u64, plan: ClusterPlan, trace: bool) -> Checked {
    let mut out = String::new();
    let mut lost = Lost::default();
    for wait_replicas in [true, false] {
        let plan = ClusterPlan {
            wait_replicas,
            ..plan
        };
        match run_cluster_seed(seed, plan) {
            Ok(r) => {
                if trace {
                    let _ = writeln!(
                        out,
                        "seed {seed}: ok ({}): {} calls acknowledged, {} lost, {} processes ended \
                         otherwise, {} failovers dropping {} batches",
                        if wait_replicas {
                            "wait_replicas"
                        } else {
                            "async replicas"
                        },
                        r.acked,
                        r.lost,
                        r.diverged,
                        r.failovers,
                        r.dropped
                    );
                    for line in &r.trace {
                        let _ = writeln!(out, "    {line}");
                    }
                }
                if !wait_replicas {
                    lost.add(&Lost {
                        seeds: 1,
                        failovers: r.failovers,
                        dropped: r.dropped,
                        acked: r.acked,
                        lost: r.lost,
                        diverged: r.diverged,
                    });
                }
            }
            Err(f) => {
                let _ = writeln!(out, "seed {seed}: FAILED in run '{}': {}", f.run, f.what);
                let (events, sf) = shrink_cluster(seed, plan, 40);
                let _ = writeln!(
                    out,
                    "seed {seed}: shrunk to {events} events; fails in '{}': {}",
                    sf.run, sf.what
                );
                for line in &sf.trace.lines {
                    let _ = writeln!(out, "    {line}");
                }
                let mut flags = format!(" --cluster {} --events {events}", plan.nodes);
                if plan.plant != Plant::None {
                    flags.push_str(" --plant fence");
                }
                let _ = writeln!(
                    out,
                    "replay: cargo run --release -p acts-sim -- --seed {seed}{flags}"
                );
                return Checked {
                    seed,
                    runs: None,
                    output: out,
                    lost,
                };
            }
        }
    }
    Checked {
        seed,
        runs: Some(2),
        output: out,
        lost,
    }
}

/// The flags that replay `plan` (beyond `--seed`).
fn replay_flags(plan: Plan) -> String {
    let mut f = String::new();
    if plan.cuts != Plan::default().cuts {
        let _ = write!(f, " --cuts {}", plan.cuts);
    }
    for (on, flag) in [
        (plan.redb, " --redb"),
        (plan.rocksdb, " --rocksdb"),
        (plan.postgres, " --postgres"),
        (!plan.store_faults, " --no-store-faults"),
        (!plan.slow_store, " --no-slow-store"),
    ] {
        if on {
            f.push_str(flag);
        }
    }
    if plan.grammar != Grammar::V1 {
        let _ = write!(f, " --grammar {}", plan.grammar.number());
    }
    f
}

/// Checks `seed`; a failure is shrunk and reported with its replay
/// command.
fn check_one(seed: u64, plan: Plan, trace: bool) -> Checked {
    let spec = generate_with(seed, plan.grammar);
    let mut out = String::new();
    if trace {
        let _ = writeln!(out, "seed {seed}: model {}", spec.model());
    }
    match run_seed(seed, plan) {
        Ok(report) => {
            if trace {
                let _ = writeln!(
                    out,
                    "seed {seed}: ok: {:?} after {} batches, {} runs",
                    report.outcome, report.batches, report.runs
                );
                for line in &report.trace.lines {
                    let _ = writeln!(out, "    {line}");
                }
            }
            Checked {
                seed,
                runs: Some(report.runs),
                output: out,
                lost: Lost::default(),
            }
        }
        Err(f) => {
            let _ = writeln!(out, "seed {seed}: FAILED in run '{}': {}", f.run, f.what);
            let (small, sf) = shrink(seed, &spec, plan, 200);
            let _ = writeln!(
                out,
                "seed {seed}: shrunk from {} to {} steps: {}\n  fails in '{}': {}",
                spec.size(),
                small.size(),
                small.model(),
                sf.run,
                sf.what
            );
            for line in &sf.trace.lines {
                let _ = writeln!(out, "    {line}");
            }
            let _ = writeln!(
                out,
                "replay: cargo run --release -p acts-sim -- --seed {seed}{}",
                replay_flags(plan)
            );
            Checked {
                seed,
                runs: None,
                output: out,
                lost: Lost::default(),
            }
        }
    }
}
