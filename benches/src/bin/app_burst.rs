//! The durable burst as an application sees it: a program on the public
//! API only (`acts::open_store`, `Engine::builder`, `exec.proc().start`, a
//! channel for the completions) starts `--n` processes of the three-step
//! model at once on a redb file and reports processes per second — on a
//! fresh file, and on the same file again after a warm-up (a used file,
//! as a running application's is). No wrapper, no wipe between the
//! phases: what `e2e --scenario run_auto_burst` measures on a fresh file,
//! next to what an application that has been running gets.
//!
//! ```sh
//! cargo run --release -p acts-benches --bin app_burst -- --path /tmp/app.db
//! ```

use std::time::{Duration, Instant};

use acts::{ChannelOptions, Engine, Vars};
use acts_testkit::models::THREE_STEPS;
use clap::Parser;
use serde_json::Value;

/// The allocator the e2e harness uses (what a server would pick).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Args {
    /// The redb file (removed first: the first burst is on a fresh file).
    #[arg(long, default_value = "/tmp/acts-app-burst.db")]
    path: String,
    /// Processes started at once in each burst.
    #[arg(long, default_value_t = 2_000)]
    n: usize,
    /// Processes run one burst before the measured burst on the used file.
    #[arg(long, default_value_t = 200)]
    warmup: usize,
    /// Measured bursts on the used file (each after the previous).
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

/// Starts `n` processes at once (pids `{prefix}{i}`) and waits until all
/// completed; processes per second from the first start to the last
/// completion.
async fn burst(engine: &Engine, prefix: &str, n: usize) -> Result<f64, String> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let listener = engine.channel(
        ChannelOptions::default()
            .with_type("workflow")
            .with_state("completed"),
    );
    let wanted = prefix.to_owned();
    listener.on_message(move |m| {
        if m.pid.starts_with(&wanted) {
            let _ = tx.send(());
        }
    });
    let exec = engine.executor();
    let t0 = Instant::now();
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let exec = exec.clone();
        let pid = format!("{prefix}{i}");
        handles.push(tokio::spawn(async move {
            let mut v = Vars::new();
            v.insert("pid".into(), Value::String(pid));
            exec.proc().start("three", v).await.map(|_| ())
        }));
    }
    for h in handles {
        h.await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
    }
    for _ in 0..n {
        tokio::time::timeout(Duration::from_secs(120), rx.recv())
            .await
            .map_err(|_| "a process did not complete in 2 minutes".to_owned())?
            .ok_or("the channel closed")?;
    }
    Ok(n as f64 / t0.elapsed().as_secs_f64())
}

async fn open(path: &str) -> Result<Engine, String> {
    let store = acts::open_store(&format!("redb:{path}"))
        .await
        .map_err(|e| e.to_string())?;
    Engine::builder()
        .store(store)
        .start()
        .await
        .map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let args = Args::parse();
    let _ = std::fs::remove_file(&args.path);
    let engine = open(&args.path).await?;
    engine
        .executor()
        .model()
        .deploy_yaml(THREE_STEPS)
        .await
        .map_err(|e| e.to_string())?;
    let fresh = burst(&engine, "fresh", args.n).await?;
    println!("fresh file: {} processes at once: {fresh:.0}/s", args.n);
    engine.close().await;
    // The file is let go of with the last handle.
    drop(engine);

    // The application restarts on its file, warms up, and bursts again.
    let engine = open(&args.path).await?;
    burst(&engine, "warm", args.warmup).await?;
    for run in 0..args.runs {
        let per_sec = burst(&engine, &format!("used{run}x"), args.n).await?;
        let size = std::fs::metadata(&args.path).map_or(0, |m| m.len());
        println!(
            "used file (run {run}, {} MiB): {} processes at once: {per_sec:.0}/s",
            size >> 20,
            args.n
        );
    }
    engine.close().await;
    Ok(())
}
