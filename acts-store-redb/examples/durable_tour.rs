//! A tour of the durable store layer: each run appends one "run" with 100
//! task rows to a redb file in one atomic batch, then reads everything back
//! with ordered prefix scans. Run it twice: the second run finds the first.
//!
//! `cargo run -p acts-store-redb --example durable_tour -- acts.db`

use std::time::Instant;

use acts_store::keys::{KeyBuilder, KeyReader};
use acts_store::{BatchOp, KvStore};
use acts_store_redb::{RedbOptions, RedbStore};

const TASKS_PER_RUN: u64 = 100;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "acts.db".into());
    let store = RedbStore::open(&path, RedbOptions::default())?;

    let runs_prefix = KeyBuilder::new().str("tour").str("run").finish();
    let last = store.scan_prefix(&runs_prefix, Some(1), true).await?;
    let run = match last.first() {
        Some(pair) => {
            let mut r = KeyReader::new(&pair.key[runs_prefix.len()..]);
            r.u64().ok_or("a run key in the file is malformed")? + 1
        }
        None => 1,
    };

    let started = Instant::now();
    let mut ops = vec![BatchOp::put(
        KeyBuilder::new().str("tour").str("run").u64(run).finish(),
        format!("{{\"run\":{run},\"tasks\":{TASKS_PER_RUN}}}"),
    )];
    for task in 0..TASKS_PER_RUN {
        ops.push(BatchOp::put(
            KeyBuilder::new()
                .str("tour")
                .str("task")
                .u64(run)
                .u64(task)
                .finish(),
            format!("{{\"state\":\"completed\",\"task\":{task}}}"),
        ));
    }
    store.batch(ops).await?;
    let wrote = started.elapsed();

    let tasks_of_run = KeyBuilder::new().str("tour").str("task").u64(run).finish();
    let tasks = store.scan_prefix(&tasks_of_run, None, false).await?;
    if tasks.len() as u64 != TASKS_PER_RUN {
        return Err(format!("expected {TASKS_PER_RUN} task rows, read {}", tasks.len()).into());
    }
    let runs = store.scan_prefix(&runs_prefix, None, false).await?;
    let recent = store.scan_prefix(&runs_prefix, Some(3), true).await?;

    println!("store: {path} (redb, fsync on every commit)");
    println!(
        "run #{run}: committed 1 run row + {TASKS_PER_RUN} task rows in one batch in {:.2} ms",
        wrote.as_secs_f64() * 1e3
    );
    println!(
        "read back {} task rows of run #{run} in key order",
        tasks.len()
    );
    let plural = if runs.len() == 1 { "run" } else { "runs" };
    println!("the file holds {} {plural}; newest first:", runs.len());
    for pair in recent {
        println!("  {}", String::from_utf8_lossy(&pair.value));
    }
    Ok(())
}
