//! The scenarios of the harness, by name (see `main.rs` for what each
//! measures).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use acts::{ChannelOptions, Vars, Workflow};
use acts_testkit::models::{LinearStep, THREE_STEPS, linear_model};
use serde_json::{Value, json};

use super::support::*;

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

pub(crate) const SCENARIOS: [&str; 10] = [
    "yaml_load",
    "deploy",
    "run_auto_burst",
    "run_auto_burst_keyed",
    "run_auto_seq",
    "irq_roundtrip",
    "irq_roundtrip_durable",
    "wide",
    "long_linear",
    "long_linear_irq",
];

/// Scenarios `all` leaves out (minutes and gigabytes at their default
/// size): run each alone.
pub(crate) const HEAVY: [&str; 5] = [
    "restart",
    "waiting_million",
    "idle",
    "bulk_retry",
    "bulk_retry_fast",
];

pub(crate) async fn scenario(name: &str, url: &str, n: Option<usize>) -> Result<Outcome, String> {
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
                exec.model().deploy(&w).await.map_err(|e| e.to_string())?;
                lat.push(t.elapsed().as_micros() as u64);
            }
            Ok(finish(e, n, t0, lat, c0).await)
        }
        "run_auto_burst" | "run_auto_burst_keyed" | "run_auto_seq" => {
            let n = n.unwrap_or(2_000);
            let e = engine(url, &ns).await?;
            let exec = e.executor();
            // Keyed: the same model with a concurrency key per process
            // (what a key costs when it never makes anyone wait).
            let model = if name == "run_auto_burst_keyed" {
                THREE_STEPS.replace(
                    "ver: \"1\"\n",
                    "ver: \"1\"\nconcurrency: { key: \"k-${{ pid }}\", limit: 1 }\n",
                )
            } else {
                THREE_STEPS.to_owned()
            };
            if !model.contains("concurrency") && name == "run_auto_burst_keyed" {
                return Err("the keyed model has no concurrency key".into());
            }
            exec.model()
                .deploy_yaml(&model)
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
            if name != "run_auto_seq" {
                let mut handles = Vec::with_capacity(n);
                for i in 0..n {
                    let exec = exec.clone();
                    let started = started.clone();
                    handles.push(tokio::spawn(async move {
                        let pid = format!("b{i}");
                        started.lock().insert(pid.clone(), Instant::now());
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
                    exec.proc()
                        .start("three", v)
                        .await
                        .map_err(|e| e.to_string())?;
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
            exec.model()
                .deploy_yaml(ONE_IRQ)
                .await
                .map_err(|e| e.to_string())?;
            let mut rx = e.channel(ChannelOptions::default()).subscribe();
            let app = if durable {
                Some(
                    e.channels()
                        .durable(
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
                    .proc()
                    .start("one_irq", Vars::new())
                    .await
                    .map_err(|e| e.to_string())?;
                let irq = loop {
                    let m = next(&mut rx).await?;
                    if m.pid == p.pid && m.r#type == "act" && m.state == "created" {
                        break m;
                    }
                };
                exec.act()
                    .complete(&p.pid, &irq.tid, Vars::new())
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
            exec.model()
                .deploy_yaml(WIDE)
                .await
                .map_err(|e| e.to_string())?;
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
                exec.proc()
                    .start("wide", v)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            for _ in 0..procs * width {
                let m = next(&mut rx).await?;
                let t = Instant::now();
                exec.act()
                    .complete(&m.pid, &m.tid, Vars::new())
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
            exec.model()
                .deploy_yaml(&model)
                .await
                .map_err(|e| e.to_string())?;
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
                .proc()
                .start("linear", Vars::new())
                .await
                .map_err(|e| e.to_string())?;
            let mut lat = Vec::new();
            if let Some(asks) = asks.as_mut() {
                for _ in 0..n {
                    let m = next(asks).await?;
                    let t = Instant::now();
                    exec.act()
                        .complete(&p.pid, &m.tid, Vars::new())
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
            let (t0, c0) = (Instant::now(), Mark::zero());
            let e = open_engine(url, &ns, None).await?;
            let ready = t0.elapsed();
            // The first action, then 99 more spread over the processes,
            // while the background resume arms their timers.
            let first = complete_some(&e, &w.sample, 100).await?;
            let resumed = Instant::now();
            while !e.runtime().is_idle() && resumed.elapsed() < Duration::from_secs(600) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let resumed_secs = t0.elapsed().as_secs_f64();
            let resident = e.runtime().cache().resident_count();
            let timers = w
                .sample
                .iter()
                .skip(1)
                .filter(|(pid, _)| e.runtime().next_timer_of(pid).is_some())
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
        "idle" => {
            // An engine with nothing to do for n seconds (default 10): what
            // its store's traffic costs per idle second (settings checks,
            // housekeeping). `round_trips_per_op` is per second here.
            let n = n.unwrap_or(10);
            let e = engine(url, &ns).await?;
            let (t0, c0) = (Instant::now(), commits());
            tokio::time::sleep(Duration::from_secs(n as u64)).await;
            Ok(finish(e, n, t0, Vec::new(), c0).await)
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
            let resident = e.runtime().cache().resident_count();
            let lat = complete_some(&e, &w.sample, 1_000).await?;
            let mut o = finish(e, w.started, t0, lat, c0).await;
            o.extra.insert("announced".into(), json!(w.announced));
            o.extra.insert("start_secs".into(), json!(start_secs));
            o.extra.insert("rss_kib_waiting".into(), json!(rss_waiting));
            o.extra.insert("resident_waiting".into(), json!(resident));
            Ok(o)
        }
        "bulk_retry" | "bulk_retry_fast" => {
            super::bulk::bulk_retry(url, &ns, n, name == "bulk_retry_fast").await
        }
        other => Err(format!(
            "unknown scenario '{other}' (one of: {}, {}, all)",
            SCENARIOS.join(", "),
            HEAVY.join(", ")
        )),
    }
}
