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
//! once), `run_auto_seq` (2,000 one after another), `irq_roundtrip` (1,000
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
//! `all`, run it alone). `peak_rss_kib` is the process's peak; run
//! one scenario per process to read it. `commits` counts the store commits
//! of the timed part (each one fsync on a store that syncs every commit);
//! `commits_per_op` divides them by `n`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use acts::{ChannelOptions, Engine, KvStore, Vars, Workflow};
use acts_benches::percentile;
use acts_testkit::CountingStore;
use acts_testkit::models::{LinearStep, THREE_STEPS, linear_model};
use clap::Parser;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

/// The allocator of the harness (what a server embedding acts would pick;
/// the engine itself leaves the choice to the application). With the
/// feature `system-alloc`, the system's allocator instead.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ONE_IRQ: &str = r#"
id: one_irq
ver: "1"
steps:
  - id: ask
    uses: acts.core.irq
    params: { key: ask }
"#;

/// One interrupt with a timeout rule an hour later: a process that waits
/// for a client and a timer.
const IRQ_WITH_TIMER: &str = r#"
id: irq_timer
ver: "1"
steps:
  - id: ask
    uses: acts.core.irq
    params: { key: ask }
    timeouts:
      - id: give_up
        if: $cost_in("1h")
        uses: acts.core.action
        params: { action: abort }
"#;

const WIDE: &str = r#"
id: wide
ver: "1"
steps:
  - id: fan
    uses: acts.core.parallel
    params:
      in: ${{ items }}
      acts:
        - uses: acts.core.irq
          params: { key: item }
"#;

const SCENARIOS: [&str; 9] = [
    "yaml_load",
    "deploy",
    "run_auto_burst",
    "run_auto_seq",
    "irq_roundtrip",
    "irq_roundtrip_durable",
    "wide",
    "long_linear",
    "long_linear_irq",
];

/// Scenarios `all` leaves out (minutes and gigabytes at their default
/// size): run each alone.
const HEAVY: [&str; 2] = ["restart", "waiting_million"];

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
}

struct Outcome {
    n: usize,
    secs: f64,
    latencies_us: Vec<u64>,
    /// Store commits during the timed part.
    commits: u64,
    /// Scenario-specific numbers, added to its line.
    extra: serde_json::Map<String, Value>,
}

fn rss_kib() -> u64 {
    status_kib("VmRSS:")
}

/// The peak resident set of this process so far (KiB).
fn peak_rss_kib() -> u64 {
    status_kib("VmHWM:")
}

/// A size field of `/proc/self/status` (KiB; 0 where there is none).
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Wipes a file store's data so each scenario starts empty.
fn wipe(url: &str) {
    for prefix in ["redb:", "rocksdb:"] {
        if let Some(rest) = url.strip_prefix(prefix) {
            let path = rest.split('?').next().unwrap_or(rest);
            let _ = std::fs::remove_file(path);
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

/// The store of the scenario running now, counting the commits that reach
/// it (one fsync each on a store that syncs every commit).
static COUNTED: std::sync::Mutex<Option<Arc<Counted>>> = std::sync::Mutex::new(None);

/// A store that counts its commits.
type Counted = CountingStore<Arc<dyn KvStore>>;

fn commits() -> u64 {
    COUNTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map_or(0, |c| c.counts().commits)
}

async fn engine(url: &str, fresh_ns: &str) -> Result<Engine, String> {
    wipe(url);
    open_engine(url, fresh_ns, None).await
}

/// An engine on the store at `url` as it is (not wiped); `cap` overrides
/// the cache cap.
async fn open_engine(url: &str, fresh_ns: &str, cap: Option<usize>) -> Result<Engine, String> {
    let url = if url.starts_with("redis://") {
        format!("{}{fresh_ns}", url.trim_end_matches('/'))
    } else {
        url.to_owned()
    };
    let store = acts::open_store(&url).await.map_err(|e| e.to_string())?;
    let counted = Arc::new(CountingStore::from_arc(Arc::new(store)));
    *COUNTED.lock().unwrap_or_else(|e| e.into_inner()) = Some(counted.clone());
    let mut b = Engine::builder().store(counted);
    if let Some(cap) = cap {
        b = b.cache_cap(cap);
    }
    b.start().await.map_err(|e| e.to_string())
}

/// What [`start_waiting`] saw: how many processes started, how many
/// announced their interrupt, and a sample of the announcements (pid, task
/// id), about 1,000 spread over them (the harness keeps no map of a
/// million, so its own memory stays out of the engine's figure).
struct Waiting {
    started: usize,
    announced: usize,
    sample: Vec<(String, String)>,
}

/// How many announcements arrived, and the sampled ones.
type Seen = (usize, Vec<(String, String)>);

/// Starts `n` processes of `model` (id `id`, each waiting in an
/// interrupt), at most 256 at a time, waiting for announcements until the
/// engine is idle.
async fn start_waiting(e: &Engine, n: usize, model: &str, id: &str) -> Result<Waiting, String> {
    let exec = e.executor();
    exec.deploy_yaml(model).await.map_err(|e| e.to_string())?;
    let every = (n / 1_000).max(1);
    let seen: Arc<parking_mutex::Mutex<Seen>> = Arc::default();
    {
        let seen = seen.clone();
        e.channel(
            ChannelOptions::default()
                .with_type("act")
                .with_state("created"),
        )
        .on_message(move |m| {
            let mut s = seen.lock();
            s.0 += 1;
            if s.0.is_multiple_of(every) {
                s.1.push((m.pid.clone(), m.tid.clone()));
            }
        });
    }
    let mut started = 0;
    let mut i = 0;
    while i < n {
        let chunk = (n - i).min(256);
        let mut handles = Vec::with_capacity(chunk);
        for _ in 0..chunk {
            let exec = exec.clone();
            let id = id.to_owned();
            handles.push(tokio::spawn(
                async move { exec.start(&id, Vars::new()).await },
            ));
        }
        for h in handles {
            h.await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            started += 1;
        }
        i += chunk;
    }
    // Announcements of what was admitted arrive as their transitions end.
    let settle = Instant::now();
    while !e.is_idle() && settle.elapsed() < Duration::from_secs(120) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (announced, sample) = seen.lock().clone();
    Ok(Waiting {
        started,
        announced,
        sample,
    })
}

/// Completes up to `k` of the sampled interrupts, spread over them;
/// returns each completion's latency (µs).
async fn complete_some(
    e: &Engine,
    sample: &[(String, String)],
    k: usize,
) -> Result<Vec<u64>, String> {
    let exec = e.executor();
    let step = (sample.len() / k.max(1)).max(1);
    let mut lat = Vec::new();
    for (pid, tid) in sample.iter().step_by(step).take(k) {
        let t = Instant::now();
        exec.complete(pid, tid, Vars::new())
            .await
            .map_err(|e| e.to_string())?;
        lat.push(t.elapsed().as_micros() as u64);
    }
    Ok(lat)
}

/// Ends a scenario's timing and closes its engine; `commits_before` is the
/// commit count when the timed part began.
async fn finish(
    e: Engine,
    n: usize,
    t0: Instant,
    latencies_us: Vec<u64>,
    commits_before: u64,
) -> Outcome {
    let secs = t0.elapsed().as_secs_f64();
    e.flush().await.ok();
    let commits = commits() - commits_before;
    // How long the writer spent in its store's commits (since the engine
    // started): next to `secs`, whether a run waited on the store.
    let writer = e.stats().writer;
    e.close().await;
    let mut extra = serde_json::Map::new();
    extra.insert(
        "writer_busy_ms".into(),
        json!(writer.commit_micros as f64 / 1000.0),
    );
    extra.insert("writer_groups".into(), json!(writer.commits));
    Outcome {
        n,
        secs,
        latencies_us,
        commits,
        extra,
    }
}

async fn next<T>(rx: &mut UnboundedReceiver<T>) -> Result<T, String> {
    match tokio::time::timeout(Duration::from_secs(120), rx.recv()).await {
        Ok(Some(m)) => Ok(m),
        Ok(None) => Err("the channel closed".into()),
        Err(_) => Err("no message for 120 s".into()),
    }
}

async fn scenario(name: &str, url: &str, n: Option<usize>) -> Result<Outcome, String> {
    let ns = format!("_e2e_{name}_{}", std::process::id());
    match name {
        "yaml_load" => {
            let n = n.unwrap_or(10_000);
            let mut lat = Vec::with_capacity(n);
            let t0 = Instant::now();
            for _ in 0..n {
                let t = Instant::now();
                let w = Workflow::from_yaml(THREE_STEPS).map_err(|e| e.to_string())?;
                std::hint::black_box(w);
                lat.push(t.elapsed().as_micros() as u64);
            }
            Ok(Outcome {
                n,
                secs: t0.elapsed().as_secs_f64(),
                latencies_us: lat,
                commits: 0,
                extra: Default::default(),
            })
        }
        "deploy" => {
            let n = n.unwrap_or(2_000);
            let e = engine(url, &ns).await?;
            let exec = e.executor();
            let base = Workflow::from_yaml(THREE_STEPS).map_err(|e| e.to_string())?;
            let mut lat = Vec::with_capacity(n);
            let (t0, c0) = (Instant::now(), commits());
            for i in 0..n {
                let w = base.clone().with_id(format!("m{i}"));
                let t = Instant::now();
                exec.deploy(&w).await.map_err(|e| e.to_string())?;
                lat.push(t.elapsed().as_micros() as u64);
            }
            Ok(finish(e, n, t0, lat, c0).await)
        }
        "run_auto_burst" | "run_auto_seq" => {
            let n = n.unwrap_or(2_000);
            let e = engine(url, &ns).await?;
            let exec = e.executor();
            exec.deploy_yaml(THREE_STEPS)
                .await
                .map_err(|e| e.to_string())?;
            let started: Arc<parking_mutex::Mutex<HashMap<String, Instant>>> = Arc::default();
            // Completion is stamped where the engine announces it, not when
            // this task gets around to reading it.
            let (done_tx, mut done) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
            e.channel(
                ChannelOptions::default()
                    .with_type("workflow")
                    .with_state("completed"),
            )
            .on_message(move |m| {
                let _ = done_tx.send((m.pid.clone(), Instant::now()));
            });
            let (t0, c0) = (Instant::now(), commits());
            let mut lat = Vec::with_capacity(n);
            if name == "run_auto_burst" {
                let mut handles = Vec::with_capacity(n);
                for i in 0..n {
                    let exec = exec.clone();
                    let started = started.clone();
                    handles.push(tokio::spawn(async move {
                        let pid = format!("b{i}");
                        started.lock().insert(pid.clone(), Instant::now());
                        let mut v = Vars::new();
                        v.insert("pid".into(), Value::String(pid));
                        exec.start("three", v).await.map(|_| ())
                    }));
                }
                for h in handles {
                    h.await
                        .map_err(|e| e.to_string())?
                        .map_err(|e| e.to_string())?;
                }
                while lat.len() < n {
                    let (pid, at) = next(&mut done).await?;
                    if let Some(s) = started.lock().get(&pid) {
                        lat.push(at.duration_since(*s).as_micros() as u64);
                    }
                }
            } else {
                for i in 0..n {
                    let pid = format!("s{i}");
                    let mut v = Vars::new();
                    v.insert("pid".into(), Value::String(pid.clone()));
                    let t = Instant::now();
                    exec.start("three", v).await.map_err(|e| e.to_string())?;
                    loop {
                        let (done_pid, at) = next(&mut done).await?;
                        if done_pid == pid {
                            lat.push(at.duration_since(t).as_micros() as u64);
                            break;
                        }
                    }
                }
            }
            Ok(finish(e, n, t0, lat, c0).await)
        }
        "irq_roundtrip" | "irq_roundtrip_durable" => {
            // `_durable`: the interrupts reach the client through a durable
            // channel, and each is acked once answered.
            let durable = name == "irq_roundtrip_durable";
            let n = n.unwrap_or(1_000);
            let e = engine(url, &ns).await?;
            let exec = e.executor();
            exec.deploy_yaml(ONE_IRQ).await.map_err(|e| e.to_string())?;
            let mut rx = e.channel(ChannelOptions::default()).subscribe();
            let app = if durable {
                Some(
                    e.durable_channel(
                        "app",
                        ChannelOptions::default()
                            .with_type("act")
                            .with_state("created"),
                    )
                    .await
                    .map_err(|e| e.to_string())?,
                )
            } else {
                None
            };
            let mut lat = Vec::with_capacity(n);
            let (t0, c0) = (Instant::now(), commits());
            for _ in 0..n {
                let t = Instant::now();
                let p = exec
                    .start("one_irq", Vars::new())
                    .await
                    .map_err(|e| e.to_string())?;
                let irq = loop {
                    let m = next(&mut rx).await?;
                    if m.pid == p.pid && m.r#type == "act" && m.state == "created" {
                        break m;
                    }
                };
                exec.complete(&p.pid, &irq.tid, Vars::new())
                    .await
                    .map_err(|e| e.to_string())?;
                if let Some(app) = &app {
                    app.ack(&irq.id).await.map_err(|e| e.to_string())?;
                }
                loop {
                    let m = next(&mut rx).await?;
                    if m.pid == p.pid && m.r#type == "workflow" && m.state == "completed" {
                        break;
                    }
                }
                lat.push(t.elapsed().as_micros() as u64);
            }
            Ok(finish(e, n, t0, lat, c0).await)
        }
        "wide" => {
            let procs = n.unwrap_or(20);
            let width = 100;
            let e = engine(url, &ns).await?;
            let exec = e.executor();
            exec.deploy_yaml(WIDE).await.map_err(|e| e.to_string())?;
            let mut rx = e
                .channel(
                    ChannelOptions::default()
                        .with_key("item")
                        .with_state("created"),
                )
                .subscribe();
            let mut ends = e
                .channel(
                    ChannelOptions::default()
                        .with_type("workflow")
                        .with_state("completed"),
                )
                .subscribe();
            let items: Vec<Value> = (0..width).map(|i| Value::String(format!("i{i}"))).collect();
            let (t0, c0) = (Instant::now(), commits());
            let mut lat = Vec::with_capacity(procs * width);
            for _ in 0..procs {
                let mut v = Vars::new();
                v.insert("items".into(), Value::Array(items.clone()));
                exec.start("wide", v).await.map_err(|e| e.to_string())?;
            }
            for _ in 0..procs * width {
                let m = next(&mut rx).await?;
                let t = Instant::now();
                exec.complete(&m.pid, &m.tid, Vars::new())
                    .await
                    .map_err(|e| e.to_string())?;
                lat.push(t.elapsed().as_micros() as u64);
            }
            for _ in 0..procs {
                next(&mut ends).await?;
            }
            Ok(finish(e, procs * width, t0, lat, c0).await)
        }
        "long_linear" | "long_linear_irq" => {
            // One process of a long linear model, run to its end (each
            // interrupt answered as it is announced); latencies are the
            // round trips of the interrupts.
            let irq = name == "long_linear_irq";
            let n = n.unwrap_or(if irq { 2_000 } else { 10_000 });
            let e = engine(url, &ns).await?;
            let exec = e.executor();
            let step = if irq {
                LinearStep::Irq
            } else {
                LinearStep::Set
            };
            let model = linear_model("linear", n, step);
            let (t0, c0) = (Instant::now(), commits());
            exec.deploy_yaml(&model).await.map_err(|e| e.to_string())?;
            // Only the interrupt run listens for its acts: a channel nobody
            // reads would hold every message of the run.
            let mut asks = irq.then(|| {
                e.channel(
                    ChannelOptions::default()
                        .with_type("act")
                        .with_state("created"),
                )
                .subscribe()
            });
            let mut ends = e
                .channel(ChannelOptions::default().with_type("workflow"))
                .subscribe();
            let p = exec
                .start("linear", Vars::new())
                .await
                .map_err(|e| e.to_string())?;
            let mut lat = Vec::new();
            if let Some(asks) = asks.as_mut() {
                for _ in 0..n {
                    let m = next(asks).await?;
                    let t = Instant::now();
                    exec.complete(&p.pid, &m.tid, Vars::new())
                        .await
                        .map_err(|e| e.to_string())?;
                    lat.push(t.elapsed().as_micros() as u64);
                }
            }
            loop {
                let m = next(&mut ends).await?;
                if m.state != "created" {
                    if m.state != "completed" {
                        return Err(format!("the process ended {}", m.state));
                    }
                    break;
                }
            }
            lat.push(t0.elapsed().as_micros() as u64);
            Ok(finish(e, n, t0, lat, c0).await)
        }
        "restart" => {
            // n processes waiting in an interrupt with a timeout timer
            // armed (default settings: all are admitted); the engine closes
            // and starts again on the same store: how long until it accepts
            // actions, and how long the first action on one of them takes.
            let n = n.unwrap_or(100_000);
            wipe(url);
            let e = open_engine(url, &ns, None).await?;
            let w = start_waiting(&e, n, IRQ_WITH_TIMER, "irq_timer").await?;
            e.close().await;
            // Every handle on the store goes (a file store opens once).
            drop(e);
            COUNTED.lock().unwrap_or_else(|e| e.into_inner()).take();
            let (t0, c0) = (Instant::now(), 0);
            let e = open_engine(url, &ns, None).await?;
            let ready = t0.elapsed();
            // The first action, then 99 more spread over the processes,
            // while the background resume arms their timers.
            let first = complete_some(&e, &w.sample, 100).await?;
            let resumed = Instant::now();
            while !e.is_idle() && resumed.elapsed() < Duration::from_secs(600) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let resumed_secs = t0.elapsed().as_secs_f64();
            let resident = e.cache().resident_count();
            let timers = w
                .sample
                .iter()
                .skip(1)
                .filter(|(pid, _)| e.next_timer_of(pid).is_some())
                .count();
            let rss_after = rss_kib();
            let mut o = finish(e, w.started, t0, first.clone(), c0).await;
            o.extra.insert("resumed_secs".into(), json!(resumed_secs));
            o.extra.insert("in_flight".into(), json!(w.announced));
            o.extra
                .insert("ready_secs".into(), json!(ready.as_secs_f64()));
            o.extra.insert(
                "first_action_us".into(),
                json!(first.first().copied().unwrap_or(0)),
            );
            o.extra.insert("resident_after".into(), json!(resident));
            o.extra.insert("rss_kib_after".into(), json!(rss_after));
            o.extra.insert("sampled_timers_armed".into(), json!(timers));
            Ok(o)
        }
        "waiting_million" => {
            // n processes of a one-interrupt model started with default
            // settings: how many announced their interrupt, the memory it
            // takes, and completing 1,000 of them spread over the set.
            let n = n.unwrap_or(1_000_000);
            let e = engine(url, &ns).await?;
            let (t0, c0) = (Instant::now(), commits());
            let w = start_waiting(&e, n, ONE_IRQ, "one_irq").await?;
            let start_secs = t0.elapsed().as_secs_f64();
            let rss_waiting = rss_kib();
            let resident = e.cache().resident_count();
            let lat = complete_some(&e, &w.sample, 1_000).await?;
            let mut o = finish(e, w.started, t0, lat, c0).await;
            o.extra.insert("announced".into(), json!(w.announced));
            o.extra.insert("start_secs".into(), json!(start_secs));
            o.extra.insert("rss_kib_waiting".into(), json!(rss_waiting));
            o.extra.insert("resident_waiting".into(), json!(resident));
            Ok(o)
        }
        other => Err(format!(
            "unknown scenario '{other}' (one of: {}, {}, all)",
            SCENARIOS.join(", "),
            HEAVY.join(", ")
        )),
    }
}

/// A tiny alias so the harness reads clearly; std's mutex is enough here.
mod parking_mutex {
    /// A mutex whose `lock` cannot fail (a poisoned lock still holds data).
    #[derive(Default)]
    pub struct Mutex<T>(std::sync::Mutex<T>);

    impl<T> Mutex<T> {
        /// Locks it.
        pub fn lock(&self) -> std::sync::MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(|e| e.into_inner())
        }
    }
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
