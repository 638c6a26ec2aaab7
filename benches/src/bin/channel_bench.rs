//! A client of the reference's own gRPC client, `acts-channel` 0.25.0,
//! against any server that speaks its protocol: `acts serve --grpc` or
//! the reference `acts-server` 0.25 itself, so both are measured with the
//! same program.
//!
//! ```sh
//! channel_bench --url http://127.0.0.1:10080 --token T --mode approval --n 500 --callers 16
//! channel_bench --url http://127.0.0.1:10080 --token T --mode starts --n 500 --callers 1
//! channel_bench --url http://127.0.0.1:10080 --token T --mode trips --n 500 --callers 16
//! channel_bench --http http://127.0.0.1:7878 --token T --mode trips --n 500 --callers 16
//! ```
//!
//! - `approval`: subscribes (the client's default auto-ack), deploys a
//!   model of one `acts.core.irq` step then one `acts.core.msg` step,
//!   starts N processes from C concurrent callers, answers each interrupt
//!   with `act:complete` (C answerers), and counts `workflow/completed`:
//!   approval cycles per second, first start to last completion.
//! - `starts`: N `proc:start` calls from C callers: starts per second.
//! - `trips`: the HTTP bench's round trip (start, read the process, complete
//!   its interrupt: three actions) from C callers, over gRPC — or, with
//!   `--http URL`, over acts' HTTP API: actions per second.
//!
//! One JSON line.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use acts_channel::model::Message;
use acts_channel::{ActsChannel, ActsOptions, Vars};
use clap::Parser;
use serde_json::{Value, json};
use tokio::sync::{Mutex, mpsc};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const APPROVAL: &str = "id: bench_approval\nname: approval\nver: '1'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: approve }\n  - id: tell\n    uses: acts.core.msg\n    params: { key: approved }\n";

#[derive(Debug, Parser)]
struct Args {
    /// The gRPC server (`http://HOST:PORT`).
    #[arg(long, default_value = "http://127.0.0.1:10080")]
    url: String,
    /// Run `trips` over acts' HTTP API at this URL instead.
    #[arg(long)]
    http: Option<String>,
    /// The bearer token.
    #[arg(long)]
    token: Option<String>,
    /// `approval`, `starts` or `trips`.
    #[arg(long, default_value = "approval")]
    mode: String,
    /// Processes.
    #[arg(long, default_value_t = 500)]
    n: usize,
    /// Concurrent callers.
    #[arg(long, default_value_t = 1)]
    callers: usize,
    /// `approval` without the client's auto-ack (to see what the serial
    /// ack of every message costs; the messages then stay owed).
    #[arg(long)]
    no_ack: bool,
}

type Failure = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let a = Args::parse();
    let callers = a.callers.max(1);
    let out = match (a.mode.as_str(), &a.http) {
        ("trips", Some(url)) => http_trips(url, a.token.as_deref(), a.n, callers).await?,
        _ => {
            let mut chan = ActsChannel::connect_with_token(&a.url, a.token.clone())
                .await
                .map_err(|e| e.to_string())?;
            chan.deploy(APPROVAL, None).await?;
            match a.mode.as_str() {
                "approval" => approval(&a, chan, callers).await?,
                "starts" => starts(&a, chan, callers).await?,
                "trips" => trips(&a, chan, callers).await?,
                other => return Err(format!("--mode {other}: approval, starts or trips").into()),
            }
        }
    };
    println!("{out}");
    Ok(())
}

/// Splits `n` over `callers`, each running `one(i)` in turn.
async fn fan_out<F, Fut>(n: usize, callers: usize, one: F) -> Result<(), Failure>
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<(), Failure>> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..callers {
        let (next, one) = (next.clone(), one.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<(), Failure>(());
                }
                one(i).await?;
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

async fn approval(a: &Args, mut chan: ActsChannel, callers: usize) -> Result<Value, Failure> {
    let (asks_tx, asks_rx) = mpsc::unbounded_channel::<(String, String)>();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<()>();
    chan.subscribe(
        &format!("bench-{}", std::process::id()),
        move |m: &Message| {
            if m.r#type == "act" && m.state == "created" && m.is_params_key("approve") {
                let _ = asks_tx.send((m.pid.clone(), m.tid.clone()));
            } else if m.r#type == "workflow" && m.state == "completed" {
                let _ = done_tx.send(());
            }
        },
        |e| eprintln!("subscription: {e:?}"),
        &ActsOptions {
            ack: Some(!a.no_ack),
            ..Default::default()
        },
    )
    .await?;
    let began = Instant::now();
    let asks = Arc::new(Mutex::new(asks_rx));
    let mut answerers = Vec::new();
    for _ in 0..callers {
        let (asks, mut chan) = (asks.clone(), chan.clone());
        answerers.push(tokio::spawn(async move {
            loop {
                let next = asks.lock().await.recv().await;
                let Some((pid, tid)) = next else { return };
                if let Err(e) = chan.complete::<Value>(&pid, &tid, Vars::new()).await {
                    eprintln!("complete {pid}: {e}");
                }
            }
        }));
    }
    let starter = chan.clone();
    fan_out(a.n, callers, move |_| {
        let mut chan = starter.clone();
        async move {
            chan.start("bench_approval", Vars::new()).await?;
            Ok(())
        }
    })
    .await?;
    for _ in 0..a.n {
        tokio::time::timeout(Duration::from_secs(120), done_rx.recv())
            .await?
            .ok_or("the subscription ended")?;
    }
    let secs = began.elapsed().as_secs_f64();
    for t in answerers {
        t.abort();
    }
    Ok(
        json!({"mode": "approval", "n": a.n, "callers": callers, "secs": secs,
        "cycles_per_sec": a.n as f64 / secs}),
    )
}

async fn starts(a: &Args, chan: ActsChannel, callers: usize) -> Result<Value, Failure> {
    let began = Instant::now();
    fan_out(a.n, callers, move |_| {
        let mut chan = chan.clone();
        async move {
            chan.start("bench_approval", Vars::new()).await?;
            Ok(())
        }
    })
    .await?;
    let secs = began.elapsed().as_secs_f64();
    Ok(
        json!({"mode": "starts", "n": a.n, "callers": callers, "secs": secs,
        "starts_per_sec": a.n as f64 / secs}),
    )
}

/// The interrupt of process `p` (a `proc:get` answer's tasks).
fn ask_of(p: &Value) -> Option<String> {
    p["tasks"]
        .as_array()?
        .iter()
        .find(|t| t["type"] == "act" && t["state"] == "interrupted")
        .and_then(|t| t["id"].as_str().map(str::to_owned))
}

async fn trips(a: &Args, chan: ActsChannel, callers: usize) -> Result<Value, Failure> {
    let began = Instant::now();
    fan_out(a.n, callers, move |_| {
        let mut chan = chan.clone();
        async move {
            let pid = chan
                .start("bench_approval", Vars::new())
                .await?
                .data
                .ok_or("no pid")?;
            let p: Value = chan
                .send("proc:get", Vars::new().with("pid", pid.clone()))
                .await?
                .data
                .ok_or("no process")?;
            let tid = ask_of(&p).ok_or("no interrupt")?;
            chan.complete::<Value>(&pid, &tid, Vars::new()).await?;
            Ok(())
        }
    })
    .await?;
    let secs = began.elapsed().as_secs_f64();
    Ok(
        json!({"mode": "trips", "transport": "grpc", "n": a.n, "callers": callers,
        "secs": secs, "actions_per_sec": (3 * a.n) as f64 / secs}),
    )
}

/// The same round trip over acts' HTTP API.
async fn http_trips(
    url: &str,
    token: Option<&str>,
    n: usize,
    callers: usize,
) -> Result<Value, Failure> {
    let client = reqwest::Client::new();
    let url = url.trim_end_matches('/').to_owned();
    let auth = token.map(|t| format!("Bearer {t}")).unwrap_or_default();
    let call = {
        let (client, auth) = (client.clone(), auth.clone());
        move |method: reqwest::Method, path: String, body: Option<Value>| {
            let mut r = client.request(method, path);
            if !auth.is_empty() {
                r = r.header("Authorization", auth.clone());
            }
            if let Some(b) = body {
                r = r.json(&b);
            }
            async move {
                let resp = r.send().await?;
                let status = resp.status();
                let v: Value = resp.json().await.unwrap_or(Value::Null);
                if !status.is_success() {
                    return Err(Failure::from(format!("{status}: {v}")));
                }
                Ok(v)
            }
        }
    };
    let deploy = client
        .post(format!("{url}/api/v1/models"))
        .header("Authorization", auth.clone())
        .header("Content-Type", "application/yaml")
        .body(APPROVAL)
        .send()
        .await?;
    if !deploy.status().is_success() {
        return Err(format!("deploy: {}", deploy.status()).into());
    }
    let began = Instant::now();
    fan_out(n, callers, move |_| {
        let (call, url) = (call.clone(), url.clone());
        async move {
            let p = call(
                reqwest::Method::POST,
                format!("{url}/api/v1/processes"),
                Some(json!({"model": "bench_approval"})),
            )
            .await?;
            let pid = p["pid"].as_str().ok_or("no pid")?.to_owned();
            let got = call(
                reqwest::Method::GET,
                format!("{url}/api/v1/processes/{pid}"),
                None,
            )
            .await?;
            let tid = got["tasks"]
                .as_array()
                .and_then(|ts| {
                    ts.iter()
                        .find(|t| t["kind"] == "act" && t["state"] == "interrupted")
                })
                .and_then(|t| t["tid"].as_str())
                .ok_or("no interrupt")?
                .to_owned();
            call(
                reqwest::Method::POST,
                format!("{url}/api/v1/processes/{pid}/tasks/{tid}/complete"),
                Some(json!({})),
            )
            .await?;
            Ok(())
        }
    })
    .await?;
    let secs = began.elapsed().as_secs_f64();
    Ok(
        json!({"mode": "trips", "transport": "http", "n": n, "callers": callers,
        "secs": secs, "actions_per_sec": (3 * n) as f64 / secs}),
    )
}
