//! The end-to-end benchmark harness: the same scenarios on every store,
//! one JSON object per scenario and run.
//!
//! ```sh
//! cargo run --release -p acts-benches --bin e2e -- --store memory: --scenario all --json
//! cargo run --release -p acts-benches --bin e2e -- --store memory: --scenario run_auto_burst --runs 5 --json
//! cargo run --release -p acts-benches --bin e2e -- --store 'redb:/tmp/e2e.db' --scenario irq_roundtrip
//! ```
//!
//! Scenarios (see `benches/README.md` for the numbers):
//! `yaml_load` (parse the 3-step model 10,000 times), `deploy` (2,000
//! models), `run_auto_burst` (2,000 processes of the 3-step model started at
//! once), `run_auto_burst_keyed` (the same with a concurrency key per
//! process: what a key costs), `run_auto_seq` (2,000 one after another), `irq_roundtrip` (1,000
//! sequential one-irq processes), `irq_roundtrip_durable` (the same through
//! a durable channel, each delivery acked), `wide` (20 processes of a parallel step
//! over 100 irq acts; reported per act), `long_linear` (one process of a
//! 10,000-step chain of `set` steps, deploy included; `--n` sets the
//! length), `long_linear_irq` (one process of 2,000 interrupt steps, each
//! answered as it is announced), `restart` (100,000 processes waiting in
//! an interrupt with a timeout timer armed, default settings; the engine is
//! closed and started again: `ready_secs` until it accepts actions,
//! `first_action_us` for completing one of them, p50/p99 over 100
//! completions made while the background resume runs, `resumed_secs` until
//! the resume (counting, arming timers from the wake index) is done,
//! `resident_after`, `rss_kib_after`, `sampled_timers_armed`),
//! `waiting_million` (1,000,000 one-interrupt processes with default
//! settings: `announced` interrupts, `rss_kib_waiting`,
//! `resident_waiting`, then 1,000 completions spread over them; not in
//! `all`, run it alone), `bulk_retry` / `bulk_retry_fast` (100,000 failed
//! processes retried by one bulk job at its default pace / at 100,000 a
//! second, with interrupt round trips made meanwhile: `secs` is the job's
//! time, p50/p99 the round trips', `irq_p99_before_us` theirs before the
//! job; not in `all`). `peak_rss_kib` is the process's peak; run
//! one scenario per process to read it. `commits` counts the store commits
//! of the timed part (each one fsync on a store that syncs every commit);
//! `commits_per_op` divides them by `n`. On a store that counts its
//! traffic (Redis), `round_trips_per_op`, `commands_per_op`,
//! `bytes_out_per_op`, `bytes_in_per_op` and `round_trips_per_commit` say
//! what the timed part cost on the wire. `idle` (not in `all`) keeps an
//! engine with nothing to do for `--n` seconds (default 10): its
//! `*_per_op` figures are per idle second.
//!
//! `main.rs` runs the scenarios and prints their lines; `scenarios.rs` holds
//! each scenario; `support.rs` what they share (opening an engine on a
//! fresh store, starting and answering waiting processes, memory readings).

mod bulk;
mod scenarios;
mod support;

use acts_benches::percentile;
use clap::Parser;
use serde_json::{Value, json};

use scenarios::{SCENARIOS, scenario};
use support::{peak_rss_kib, rss_kib, status_kib};

/// The allocator of the harness (what a server embedding acts would pick;
/// the engine itself leaves the choice to the application). With the
/// feature `system-alloc`, the system's allocator instead.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// acts end-to-end benchmarks.
#[derive(Debug, Parser)]
struct Args {
    /// Store URL (memory:, redb:PATH[?fsync=false], rocksdb:PATH[?sync=false],
    /// redis://HOST:PORT/NAMESPACE). File stores are wiped before each
    /// scenario.
    #[arg(long, default_value = "memory:")]
    store: String,
    /// A scenario, or `all`.
    #[arg(long, default_value = "all")]
    scenario: String,
    /// Override the scenario's size.
    #[arg(long)]
    n: Option<usize>,
    /// Print JSON lines only (no text).
    #[arg(long)]
    json: bool,
    /// Runs of each scenario (each on a fresh engine); with more than one,
    /// a last line per scenario gives the medians.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// The tokio runtime: `multi` (a worker per core) or `current` (one
    /// thread; no cross-thread wake-ups).
    #[arg(long, default_value = "multi")]
    runtime: String,
    /// Export every task's span over OTLP/gRPC (as `acts serve
    /// --otlp-endpoint` does) to a receiver in this process: what tracing
    /// costs. The spans received are reported at the end.
    #[arg(long)]
    trace: bool,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let rt = match args.runtime.as_str() {
        "multi" => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
        "current" => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        other => {
            eprintln!("e2e: unknown runtime '{other}' (multi or current)");
            return std::process::ExitCode::from(2);
        }
    };
    match rt {
        // The scenario runs as a task on the runtime (not on the main thread
        // outside it), as a server embedding acts would.
        Ok(rt) => rt.block_on(async move {
            tokio::spawn(run(args))
                .await
                .unwrap_or(std::process::ExitCode::from(1))
        }),
        Err(e) => {
            eprintln!("e2e: cannot start the runtime: {e}");
            std::process::ExitCode::from(1)
        }
    }
}

async fn run(args: Args) -> std::process::ExitCode {
    let traced = if args.trace {
        match support::trace_to_receiver().await {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("e2e: --trace: {e}");
                return std::process::ExitCode::from(1);
            }
        }
    } else {
        None
    };
    let code = run_scenarios(&args).await;
    if let Some((telemetry, receiver)) = traced {
        telemetry.shutdown();
        eprintln!("e2e: {} spans received", receiver.count());
    }
    code
}

async fn run_scenarios(args: &Args) -> std::process::ExitCode {
    let names: Vec<&str> = if args.scenario == "all" {
        SCENARIOS.to_vec()
    } else {
        vec![args.scenario.as_str()]
    };
    for name in names {
        let mut results: Vec<(f64, u64, u64)> = Vec::new();
        for run in 0..args.runs.max(1) {
            match scenario(name, &args.store, args.n).await {
                Ok(mut o) => {
                    o.latencies_us.sort_unstable();
                    let ops = (o.n as f64 / o.secs).round();
                    let (p50, p99) = (
                        percentile(&o.latencies_us, 0.50),
                        percentile(&o.latencies_us, 0.99),
                    );
                    results.push((ops, p50, p99));
                    let mut line = json!({
                        "scenario": name,
                        "store": args.store,
                        "n": o.n,
                        "secs": (o.secs * 1000.0).round() / 1000.0,
                        "ops_per_sec": ops,
                        "p50_us": p50,
                        "p99_us": p99,
                        "commits": o.commits,
                        "commits_per_op": ((o.commits as f64 / o.n as f64) * 100.0).round() / 100.0,
                        "rss_kib": rss_kib(),
                        "peak_rss_kib": peak_rss_kib(),
                        // Of the resident set now: the heap and stacks, and
                        // the pages of the binary and its libraries.
                        "rss_anon_kib": status_kib("RssAnon:"),
                        "rss_file_kib": status_kib("RssFile:"),
                        "runtime": args.runtime,
                        "run": run + 1,
                    });
                    if let Value::Object(m) = &mut line {
                        m.extend(std::mem::take(&mut o.extra));
                    }
                    println!("{line}");
                }
                Err(e) => {
                    eprintln!("e2e: scenario '{name}' on '{}' failed: {e}", args.store);
                    return std::process::ExitCode::from(1);
                }
            }
        }
        if results.len() > 1 {
            let median = |mut v: Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let line = json!({
                "scenario": name,
                "store": args.store,
                "median_of": results.len(),
                "ops_per_sec": median(results.iter().map(|r| r.0).collect()),
                "p50_us": median(results.iter().map(|r| r.1 as f64).collect()),
                "p99_us": median(results.iter().map(|r| r.2 as f64).collect()),
                "runtime": args.runtime,
            });
            println!("{line}");
        }
    }
    std::process::ExitCode::SUCCESS
}
