//! `acts-sim`: checks a range of seeds (see the crate docs); a failing
//! seed is shrunk and printed with the command that replays it.
//!
//! ```sh
//! cargo run --release -p acts-sim -- --seeds 0..1000
//! cargo run --release -p acts-sim -- --seeds 0..50 --redb
//! cargo run --release -p acts-sim -- --seed 4711 --trace   # replay one
//! ```

use std::process::ExitCode;
use std::time::Instant;

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
    /// Skip the run on a failing store.
    #[arg(long)]
    no_store_faults: bool,
    /// Print the model and the client's trace of every seed checked.
    #[arg(long)]
    trace: bool,
    /// Stop at the first failing seed.
    #[arg(long)]
    fail_fast: bool,
    /// The workflow grammar: 1 (set, code, interrupts with timeouts and
    /// catches, parallel, branches, subflows) or 2 (also sequences, while
    /// loops, a backward next).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    grammar: u8,
}

fn parse_range(s: &str) -> Option<std::ops::Range<u64>> {
    let (a, b) = s.split_once("..")?;
    Some(a.trim().parse().ok()?..b.trim().parse().ok()?)
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
        redb: args.redb,
        grammar: if args.grammar == 2 {
            Grammar::V2
        } else {
            Grammar::V1
        },
    };
    let seeds = match args.seed {
        Some(s) => s..s + 1,
        None => match parse_range(&args.seeds) {
            Some(r) => r,
            None => {
                eprintln!("acts-sim: --seeds must be START..END, e.g. 0..1000");
                return ExitCode::from(2);
            }
        },
    };
    let trace = args.trace || args.seed.is_some();
    let started = Instant::now();
    let (mut passed, mut failed, mut runs) = (0u64, Vec::new(), 0usize);
    for seed in seeds.clone() {
        let spec = generate_with(seed, plan.grammar);
        if trace {
            println!("seed {seed}: model {}", spec.model());
        }
        match run_seed(seed, plan) {
            Ok(report) => {
                passed += 1;
                runs += report.runs;
                if trace {
                    println!(
                        "seed {seed}: ok: {:?} after {} batches, {} runs",
                        report.outcome, report.batches, report.runs
                    );
                }
            }
            Err(f) => {
                println!("seed {seed}: FAILED in run '{}': {}", f.run, f.what);
                let (small, sf) = shrink(seed, &spec, plan, 200);
                println!(
                    "seed {seed}: shrunk from {} to {} steps: {}\n  fails in '{}': {}",
                    spec.size(),
                    small.size(),
                    small.model(),
                    sf.run,
                    sf.what
                );
                for line in &sf.trace.0 {
                    println!("    {line}");
                }
                println!(
                    "replay: cargo run --release -p acts-sim -- --seed {seed}{}{}",
                    if plan.redb { " --redb" } else { "" },
                    if plan.grammar == Grammar::V2 {
                        " --grammar 2"
                    } else {
                        ""
                    }
                );
                failed.push(seed);
                if args.fail_fast {
                    break;
                }
            }
        }
    }
    println!(
        "acts-sim: seeds {}..{}: {passed} passed, {} failed ({runs} runs) in {:.1} s",
        seeds.start,
        seeds.end,
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        println!("failed seeds: {failed:?}");
        ExitCode::from(1)
    }
}
