//! The HTTP API under load: concurrent clients, each on its own keep-alive
//! connection, run start-and-answer round trips through `acts serve`'s API
//! (in process, on a loopback socket), and the same round trips through the
//! library, so the API's own cost is measured against the call it wraps.
//!
//! ```sh
//! cargo run --release -p acts-benches --bin api_load -- --store memory: --clients 16 --trips 2000
//! cargo run --release -p acts-benches --bin api_load -- --store 'redb:/tmp/api.db' --clients 16 --trips 500
//! cargo run --release -p acts-benches --bin api_load -- --store memory: --clients 16 --trips 2000 --token
//! cargo run --release -p acts-benches --bin api_load -- --store redis+cluster://127.0.0.1:7000/b1 --cluster-partitions 16
//! ```
//!
//! A round trip is three API actions: start a one-interrupt process
//! (`POST /api/v1/processes`), read it to find its interrupt (`GET
//! /api/v1/processes/{pid}`), and complete it (`POST .../complete`). One
//! JSON line: actions per second, per-action p50/p99 (µs), and the median
//! of each of the three calls over HTTP and through the library.

use std::time::Instant;

use acts::{Engine, Vars};
use acts_benches::percentile;
use clap::Parser;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ONE_IRQ: &str = "id: one_irq\nver: '1'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: ask, to: [role:bench] }\n";

/// The token of the bench's user (with `--token`).
const BENCH_TOKEN: &str = "bench-user-token";

#[derive(Debug, Parser)]
struct Args {
    /// The store (`memory:`, `redb:PATH`, ...; a file store is wiped first).
    #[arg(long, default_value = "memory:")]
    store: String,
    /// Concurrent clients (one connection each).
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Round trips per client.
    #[arg(long, default_value_t = 1000)]
    trips: usize,
    /// Run the server with access tokens and the clients as a user (role
    /// `bench`, whom the interrupt addresses): every request is
    /// authenticated and every call checked.
    #[arg(long)]
    token: bool,
    /// Serve a one-node cluster of this many partitions on the store
    /// family `--store` names (`redis://HOST:PORT/NAME`,
    /// `redis+cluster://…/NAME`; a fresh NAME each run) instead of one
    /// engine: the same round trips through a cluster node's API (no
    /// library run).
    #[arg(long)]
    cluster_partitions: Option<u32>,
}

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
    host: String,
    /// The Authorization header line, if any.
    auth: String,
}

impl Conn {
    async fn open(addr: &str, token: Option<&str>) -> Result<Self, String> {
        let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (r, w) = stream.into_split();
        Ok(Self {
            reader: BufReader::new(r),
            writer: w,
            host: addr.to_owned(),
            auth: token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n")),
        })
    }

    /// Sends a request; returns the status and the body.
    async fn call(
        &mut self,
        method: &str,
        path: &str,
        body: &str,
    ) -> Result<(u16, String), String> {
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n{}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            self.auth,
            body.len()
        );
        self.writer
            .write_all(req.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut line = String::new();
        self.reader
            .read_line(&mut line)
            .await
            .map_err(|e| e.to_string())?;
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad status line: {line:?}"))?;
        let mut len = 0usize;
        loop {
            line.clear();
            self.reader
                .read_line(&mut line)
                .await
                .map_err(|e| e.to_string())?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().map_err(|_| format!("bad length: {l}"))?;
            }
        }
        let mut buf = vec![0; len];
        self.reader
            .read_exact(&mut buf)
            .await
            .map_err(|e| e.to_string())?;
        Ok((status, String::from_utf8_lossy(&buf).into_owned()))
    }
}

/// The interrupted act of a process, from its JSON.
fn irq_of(process: &Value) -> Option<String> {
    process["tasks"]
        .as_array()?
        .iter()
        .find(|t| t["state"] == "interrupted")?["tid"]
        .as_str()
        .map(str::to_owned)
}

/// Per-call latencies (µs): start, read, complete.
type Lat = [Vec<u64>; 3];

async fn http_client(addr: String, trips: usize, token: bool) -> Result<Lat, String> {
    let mut conn = Conn::open(&addr, token.then_some(BENCH_TOKEN)).await?;
    let mut lat: Lat = Default::default();
    let start_body = json!({"model": "one_irq"}).to_string();
    for _ in 0..trips {
        let t = Instant::now();
        let (s, body) = conn.call("POST", "/api/v1/processes", &start_body).await?;
        lat[0].push(t.elapsed().as_micros() as u64);
        if s != 201 {
            return Err(format!("start: {s} {body}"));
        }
        let pid = serde_json::from_str::<Value>(&body).map_err(|e| e.to_string())?["pid"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let t = Instant::now();
        let (s, body) = conn
            .call("GET", &format!("/api/v1/processes/{pid}"), "")
            .await?;
        lat[1].push(t.elapsed().as_micros() as u64);
        if s != 200 {
            return Err(format!("read: {s} {body}"));
        }
        let v: Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
        let tid = irq_of(&v).ok_or("no interrupt")?;
        let t = Instant::now();
        let (s, body) = conn
            .call(
                "POST",
                &format!("/api/v1/processes/{pid}/tasks/{tid}/complete"),
                "",
            )
            .await?;
        lat[2].push(t.elapsed().as_micros() as u64);
        if s != 204 {
            return Err(format!("complete: {s} {body}"));
        }
    }
    Ok(lat)
}

async fn library_client(engine: Engine, trips: usize) -> Result<Lat, String> {
    let exec = engine.executor();
    let mut lat: Lat = Default::default();
    for _ in 0..trips {
        let t = Instant::now();
        let p = exec
            .proc()
            .start("one_irq", Vars::new())
            .await
            .map_err(|e| e.to_string())?;
        lat[0].push(t.elapsed().as_micros() as u64);
        let t = Instant::now();
        let process = exec.proc().get(&p.pid).await.map_err(|e| e.to_string())?;
        let tasks = exec.task().list(&p.pid).await.map_err(|e| e.to_string())?;
        lat[1].push(t.elapsed().as_micros() as u64);
        let v = json!({"process": process, "tasks": tasks});
        let tid = irq_of(&v).ok_or("no interrupt")?;
        let t = Instant::now();
        exec.act()
            .complete(&p.pid, &tid, Vars::new())
            .await
            .map_err(|e| e.to_string())?;
        lat[2].push(t.elapsed().as_micros() as u64);
    }
    Ok(lat)
}

/// Runs `clients` concurrent clients; returns actions/s, all latencies
/// sorted, and each call's median.
async fn measure<F, Fut>(clients: usize, client: F) -> Result<(f64, Vec<u64>, [u64; 3]), String>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<Lat, String>> + Send + 'static,
{
    let t0 = Instant::now();
    let handles: Vec<_> = (0..clients).map(|_| tokio::spawn(client())).collect();
    let mut per: Lat = Default::default();
    for h in handles {
        let lat = h.await.map_err(|e| e.to_string())??;
        for (all, one) in per.iter_mut().zip(lat) {
            all.extend(one);
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let mut all: Vec<u64> = per.iter().flatten().copied().collect();
    all.sort_unstable();
    let mut medians = [0; 3];
    for (m, v) in medians.iter_mut().zip(per.iter_mut()) {
        v.sort_unstable();
        *m = percentile(v, 0.5);
    }
    Ok((all.len() as f64 / secs, all, medians))
}

async fn open(url: &str) -> Result<Engine, String> {
    if let Some(path) = url.strip_prefix("redb:") {
        let path = path.split_once('?').map_or(path, |(p, _)| p);
        let _ = std::fs::remove_file(path);
    }
    let store = acts::open_store(url).await.map_err(|e| e.to_string())?;
    let engine = Engine::builder()
        .store(store)
        .start()
        .await
        .map_err(|e| e.to_string())?;
    engine
        .executor()
        .model()
        .deploy_yaml(ONE_IRQ)
        .await
        .map_err(|e| e.to_string())?;
    Ok(engine)
}

/// A listener on a free loopback port, and its address.
async fn loopback_listener() -> Result<(tokio::net::TcpListener, String), String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    Ok((listener, addr.to_string()))
}

/// The round trips of `args` through the API served at `addr`, then the
/// server stopped.
async fn measure_api(
    addr: &str,
    args: &Args,
    token: bool,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
) -> Result<(f64, Vec<u64>, [u64; 3]), String> {
    let (addr, trips) = (addr.to_owned(), args.trips);
    let measured = measure(args.clients, move || {
        http_client(addr.clone(), trips, token)
    })
    .await?;
    let _ = stop.send(());
    server
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    Ok(measured)
}

/// The round trips through a one-node cluster's API (`--cluster-partitions`).
async fn run_cluster(args: Args, partitions: u32) -> Result<Value, String> {
    let family = acts::open_store_family(&args.store)
        .await
        .map_err(|e| e.to_string())?;
    let (listener, addr) = loopback_listener().await?;
    let config = acts_cluster::ClusterConfig::new("n1", &format!("http://{addr}"), partitions);
    let node = acts_cluster::ClusterNode::join(config, family, acts_server::Auth::none())
        .await
        .map_err(|e| e.to_string())?;
    if node.held().len() != partitions as usize {
        return Err(format!(
            "the node holds {} of {partitions} partitions: use a fresh cluster name",
            node.held().len()
        ));
    }
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(acts_cluster::serve(node, listener, async move {
        let _ = stopped.await;
    }));
    let deployed = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/models"))
        .header("content-type", "application/yaml")
        .body(ONE_IRQ)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !deployed.status().is_success() {
        return Err(format!("the deploy answered {}", deployed.status()));
    }
    let (api_ops, api_all, api_med) = measure_api(&addr, &args, false, stop, server).await?;
    Ok(json!({
        "store": args.store,
        "cluster_partitions": partitions,
        "clients": args.clients,
        "round_trips": args.clients * args.trips,
        "api_actions_per_sec": api_ops.round(),
        "api_p50_us": percentile(&api_all, 0.5),
        "api_p99_us": percentile(&api_all, 0.99),
        "api_median_us": {"start": api_med[0], "read": api_med[1], "complete": api_med[2]},
    }))
}

async fn run(args: Args) -> Result<Value, String> {
    if let Some(partitions) = args.cluster_partitions {
        return run_cluster(args, partitions).await;
    }
    // Through the library.
    let engine = open(&args.store).await?;
    let trips = args.trips;
    let (lib_ops, lib_all, lib_med) = {
        let e = engine.clone();
        measure(args.clients, move || library_client(e.clone(), trips)).await?
    };
    engine.close().await;
    drop(engine);
    // Through the API, on a fresh store.
    let engine = open(&args.store).await?;
    let (listener, addr) = loopback_listener().await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(acts_server::serve(
        engine,
        if args.token {
            acts_server::Auth::from_tokens(&[acts_server::TokenConfig {
                principal: "bench".into(),
                roles: vec!["bench".into()],
                sha256: acts_server::hash_token(BENCH_TOKEN),
            }])?
        } else {
            acts_server::Auth::none()
        },
        listener,
        async move {
            let _ = stopped.await;
        },
    ));
    let (api_ops, api_all, api_med) = measure_api(&addr, &args, args.token, stop, server).await?;
    Ok(json!({
        "store": args.store,
        "clients": args.clients,
        "token": args.token,
        "round_trips": args.clients * args.trips,
        "api_actions_per_sec": api_ops.round(),
        "api_p50_us": percentile(&api_all, 0.5),
        "api_p99_us": percentile(&api_all, 0.99),
        "api_median_us": {"start": api_med[0], "read": api_med[1], "complete": api_med[2]},
        "lib_actions_per_sec": lib_ops.round(),
        "lib_p50_us": percentile(&lib_all, 0.5),
        "lib_p99_us": percentile(&lib_all, 0.99),
        "lib_median_us": {"start": lib_med[0], "read": lib_med[1], "complete": lib_med[2]},
    }))
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("api_load: cannot start the runtime: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    match rt.block_on(async move { tokio::spawn(run(args)).await }) {
        Ok(Ok(line)) => {
            println!("{line}");
            std::process::ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            eprintln!("api_load: {e}");
            std::process::ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("api_load: {e}");
            std::process::ExitCode::from(1)
        }
    }
}
