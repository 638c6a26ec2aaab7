//! What the scenarios share: memory readings, wiping and opening a store,
//! starting processes that wait in an interrupt and answering them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use acts::{ChannelOptions, Engine, KvStore, Vars};
use acts_testkit::CountingStore;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

/// One interrupt (id `one_irq`): the round trips' model.
pub(crate) const ONE_IRQ: &str = r#"
id: one_irq
ver: "1"
steps:
  - id: ask
    uses: acts.core.irq
    params: { key: ask }
"#;

/// What one run of a scenario measured.
pub(crate) struct Outcome {
    pub(crate) n: usize,
    pub(crate) secs: f64,
    pub(crate) latencies_us: Vec<u64>,
    /// Store commits during the timed part.
    pub(crate) commits: u64,
    /// Scenario-specific numbers, added to its line.
    pub(crate) extra: serde_json::Map<String, Value>,
}

pub(crate) fn rss_kib() -> u64 {
    status_kib("VmRSS:")
}

/// The peak resident set of this process so far (KiB).
pub(crate) fn peak_rss_kib() -> u64 {
    status_kib("VmHWM:")
}

/// A size field of `/proc/self/status` (KiB; 0 where there is none).
pub(crate) fn status_kib(field: &str) -> u64 {
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
pub(crate) fn wipe(url: &str) {
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
pub(crate) static COUNTED: std::sync::Mutex<Option<Arc<Counted>>> = std::sync::Mutex::new(None);

/// A store that counts its commits.
type Counted = CountingStore<Arc<dyn KvStore>>;

/// Where the store's counters stood when a scenario's measured part
/// began: its commits, and its traffic when the store counts it
/// ([`KvStore::io`]: Redis).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark {
    commits: u64,
    io: Option<acts_store::StoreIo>,
}

impl Mark {
    /// The counters of a store just opened.
    pub(crate) fn zero() -> Self {
        Self {
            commits: 0,
            io: Some(acts_store::StoreIo::default()),
        }
    }
}

/// The counters now.
pub(crate) fn commits() -> Mark {
    let counted = COUNTED.lock().unwrap_or_else(|e| e.into_inner());
    Mark {
        commits: counted.as_ref().map_or(0, |c| c.counts().commits),
        io: counted.as_ref().and_then(|c| c.io()),
    }
}

/// The store's traffic since `before` per operation (`n`) and per commit,
/// as the lines' `round_trips_per_op`, `commands_per_op`,
/// `bytes_out_per_op`, `bytes_in_per_op` and `round_trips_per_commit`.
fn traffic(before: &Mark, now: &Mark, n: usize, extra: &mut serde_json::Map<String, Value>) {
    let (Some(b), Some(a)) = (before.io, now.io) else {
        return;
    };
    let io = a.since(&b);
    let per = |x: u64, by: u64| ((x as f64 / by.max(1) as f64) * 100.0).round() / 100.0;
    let n = n as u64;
    extra.insert("round_trips_per_op".into(), json!(per(io.round_trips, n)));
    extra.insert("commands_per_op".into(), json!(per(io.commands, n)));
    extra.insert("bytes_out_per_op".into(), json!(per(io.bytes_out, n)));
    extra.insert("bytes_in_per_op".into(), json!(per(io.bytes_in, n)));
    let commits = now.commits.saturating_sub(before.commits);
    extra.insert(
        "round_trips_per_commit".into(),
        json!(per(io.round_trips, commits)),
    );
}

/// Where the engines' task spans go (`--trace`).
static SPANS: std::sync::OnceLock<acts::SpanExport> = std::sync::OnceLock::new();

/// Exports the engines' spans to an OTLP receiver started here.
pub(crate) async fn trace_to_receiver()
-> Result<(acts_server::Telemetry, acts_testkit::OtlpReceiver), String> {
    let (receiver, endpoint) = acts_testkit::OtlpReceiver::start_counting()
        .await
        .map_err(|e| e.to_string())?;
    let telemetry = acts_server::Telemetry::start(&acts_server::OtlpConfig {
        endpoint,
        protocol: acts_server::OtlpProtocol::Grpc,
    })
    .map_err(|e| e.to_string())?;
    let _ = SPANS.set(telemetry.span_export());
    Ok((telemetry, receiver))
}

pub(crate) async fn engine(url: &str, fresh_ns: &str) -> Result<Engine, String> {
    wipe(url);
    open_engine(url, fresh_ns, None).await
}

/// An engine on the store at `url` as it is (not wiped); `cap` overrides
/// the cache cap.
pub(crate) async fn open_engine(
    url: &str,
    fresh_ns: &str,
    cap: Option<usize>,
) -> Result<Engine, String> {
    let url = if url.starts_with("redis://") {
        format!("{}{fresh_ns}", url.trim_end_matches('/'))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        // A fresh namespace (table) per scenario; the URL's namespace names
        // the run.
        let sep = if url.contains('?') { '&' } else { '?' };
        let ns: String = fresh_ns
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        format!("{url}{sep}namespace=e2e_{ns}")
    } else {
        url.to_owned()
    };
    let store = acts::open_store(&url).await.map_err(|e| e.to_string())?;
    let counted = Arc::new(CountingStore::from_arc(Arc::new(store)));
    *COUNTED.lock().unwrap_or_else(|e| e.into_inner()) = Some(counted.clone());
    let mut b = Engine::builder().store(counted);
    if let Some(spans) = SPANS.get() {
        let mut config = acts::EngineConfig::default();
        config.spans = Some(spans.clone());
        b = b.config(config);
    }
    if let Some(cap) = cap {
        b = b.cache_cap(cap);
    }
    b.start().await.map_err(|e| e.to_string())
}

/// What [`start_waiting`] saw: how many processes started, how many
/// announced their interrupt, and a sample of the announcements (pid, task
/// id), about 1,000 spread over them (the harness keeps no map of a
/// million, so its own memory stays out of the engine's figure).
pub(crate) struct Waiting {
    pub(crate) started: usize,
    pub(crate) announced: usize,
    pub(crate) sample: Vec<(String, String)>,
}

/// How many announcements arrived, and the sampled ones.
type Seen = (usize, Vec<(String, String)>);

/// Starts `n` processes of `model` (id `id`, each waiting in an
/// interrupt), at most 256 at a time, waiting for announcements until the
/// engine is idle.
pub(crate) async fn start_waiting(
    e: &Engine,
    n: usize,
    model: &str,
    id: &str,
) -> Result<Waiting, String> {
    let exec = e.executor();
    exec.model()
        .deploy_yaml(model)
        .await
        .map_err(|e| e.to_string())?;
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
    let started = start_many(&exec, id, n).await?;
    // Announcements of what was admitted arrive as their transitions end.
    let settle = Instant::now();
    while !e.runtime().is_idle() && settle.elapsed() < Duration::from_secs(120) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (announced, sample) = seen.lock().clone();
    Ok(Waiting {
        started,
        announced,
        sample,
    })
}

/// Starts `n` processes of model `id`, at most 256 at a time; how many
/// started.
pub(crate) async fn start_many(exec: &acts::Executor, id: &str, n: usize) -> Result<usize, String> {
    let mut started = 0;
    while started < n {
        let chunk = (n - started).min(256);
        let mut handles = Vec::with_capacity(chunk);
        for _ in 0..chunk {
            let exec = exec.clone();
            let id = id.to_owned();
            handles.push(tokio::spawn(async move {
                exec.proc().start(&id, Vars::new()).await
            }));
        }
        for h in handles {
            h.await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            started += 1;
        }
    }
    Ok(started)
}

/// Completes up to `k` of the sampled interrupts, spread over them;
/// returns each completion's latency (µs).
pub(crate) async fn complete_some(
    e: &Engine,
    sample: &[(String, String)],
    k: usize,
) -> Result<Vec<u64>, String> {
    let exec = e.executor();
    let step = (sample.len() / k.max(1)).max(1);
    let mut lat = Vec::new();
    for (pid, tid) in sample.iter().step_by(step).take(k) {
        let t = Instant::now();
        exec.act()
            .complete(pid, tid, Vars::new())
            .await
            .map_err(|e| e.to_string())?;
        lat.push(t.elapsed().as_micros() as u64);
    }
    Ok(lat)
}

/// Ends a scenario's timing and closes its engine; `commits_before` is the
/// commit count when the timed part began.
pub(crate) async fn finish(
    e: Engine,
    n: usize,
    t0: Instant,
    latencies_us: Vec<u64>,
    before: Mark,
) -> Outcome {
    let secs = t0.elapsed().as_secs_f64();
    e.storage().flush().await.ok();
    let now = commits();
    let commits = now.commits - before.commits;
    // How long the writer spent in its store's commits (since the engine
    // started): next to `secs`, whether a run waited on the store.
    let writer = e.runtime().stats().writer;
    e.close().await;
    let mut extra = serde_json::Map::new();
    extra.insert(
        "writer_busy_ms".into(),
        json!(writer.commit_micros as f64 / 1000.0),
    );
    extra.insert("writer_groups".into(), json!(writer.commits));
    traffic(&before, &now, n, &mut extra);
    Outcome {
        n,
        secs,
        latencies_us,
        commits,
        extra,
    }
}

pub(crate) async fn next<T>(rx: &mut UnboundedReceiver<T>) -> Result<T, String> {
    match tokio::time::timeout(Duration::from_secs(120), rx.recv()).await {
        Ok(Some(m)) => Ok(m),
        Ok(None) => Err("the channel closed".into()),
        Err(_) => Err("no message for 120 s".into()),
    }
}

/// A tiny alias so the harness reads clearly; std's mutex is enough here.
pub(crate) mod parking_mutex {
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
