//! A cluster of 1, 2 and 3 engine nodes (in this process, each with its
//! own HTTP listener) on a private Redis Cluster (3 masters + 3 replicas,
//! loopback): bursts of 3-step processes and interrupt round trips through
//! the nodes' API, and what the cluster costs by itself.
//!
//! ```sh
//! cargo run --release -p acts-benches --bin cluster_load -- --processes 2000 --clients 16
//! ```
//!
//! Per node count, one JSON line:
//! - `burst_per_s`, `start_p50_us`/`start_p99_us`: starts of a 3-step
//!   automatic model (it runs to its end in the start's transition),
//!   spread over every node (so most calls are forwarded once);
//! - `irq_per_s`, `complete_p50_us`/`complete_p99_us`: completes of
//!   waiting one-interrupt processes, through any node;
//! - `owner_p50_us` / `forwarded_p50_us`: the same complete sent to the
//!   partition's owner, and to another node (the forwarding hop);
//! - `idle_redis_cmds_per_s`: Redis commands the idle cluster sends
//!   (heartbeats, member reads, lease renewals, catalog checks).

use std::sync::Arc;
use std::time::{Duration, Instant};

use acts::StoreFamily;
use acts_benches::percentile;
use acts_cluster::{ClusterConfig, ClusterNode};
use acts_testkit::redis_cluster::RedisCluster;
use clap::Parser;
use serde_json::{Value, json};
use tokio::task::JoinSet;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const AUTO3: &str = "id: auto3\nver: '1'\nsteps:\n  - id: a\n    uses: acts.transform.set\n    params: { a: 1 }\n  - id: b\n    uses: acts.transform.set\n    params: { b: 2 }\n  - id: c\n    uses: acts.transform.set\n    params: { c: 3 }\n";
const ONE_IRQ: &str = "id: one_irq\nver: '1'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: ask }\n";

#[derive(Debug, Parser)]
struct Args {
    /// Processes per burst and round trips per node count.
    #[arg(long, default_value_t = 2000)]
    processes: usize,
    /// Concurrent clients.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Partitions of the cluster.
    #[arg(long, default_value_t = 16)]
    partitions: u32,
    /// The node counts to run (each on a fresh cluster namespace).
    #[arg(long, default_value = "1,2,3")]
    nodes: String,
}

struct Node {
    node: ClusterNode,
    url: String,
}

async fn start_node(family: &StoreFamily, id: &str, partitions: u32) -> Result<Node, String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let url = format!(
        "http://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    let config = ClusterConfig::new(id, &url, partitions);
    let node = ClusterNode::join(config, family.clone(), acts_server::Auth::none())
        .await
        .map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let router = node.router(Some(port));
    tokio::spawn(async move {
        let _ = axum_serve(listener, router).await;
    });
    Ok(Node { node, url })
}

async fn axum_serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
) -> std::io::Result<()> {
    axum::serve(listener, router).await
}

/// Waits until the nodes hold every partition between them, each the
/// one its rendezvous owner.
async fn settle(nodes: &[Node], partitions: u32) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for n in nodes {
            n.node.tick().await.map_err(|e| e.to_string())?;
        }
        let held: usize = nodes.iter().map(|n| n.node.held().len()).sum();
        if held == partitions as usize {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "only {held} of {partitions} partitions held after 60 s"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The id of `pid`'s waiting interrupt task, read from `node`.
async fn waiting_task(http: &reqwest::Client, node: &str, pid: &str) -> Result<String, String> {
    let resp: Value = http
        .get(format!("{node}/api/v1/processes/{pid}"))
        .send()
        .await
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())?;
    resp["tasks"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["key"] == "ask"))
        .and_then(|t| t["tid"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| format!("{pid} has no interrupt"))
}

async fn post(http: &reqwest::Client, url: String, body: Value) -> Result<(u16, Value), String> {
    let resp = http
        .post(url)
        .json(&body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let v = resp.json().await.unwrap_or(Value::Null);
    Ok((status, v))
}

/// Runs `calls` (URL, body) with `clients` at once; the latency of each
/// (µs) and the wall time.
async fn run_calls(
    http: &reqwest::Client,
    calls: Vec<(String, Value)>,
    clients: usize,
    want: u16,
) -> Result<(Vec<u64>, Duration), String> {
    let started = Instant::now();
    let calls = Arc::new(std::sync::Mutex::new(calls));
    let mut set = JoinSet::new();
    for _ in 0..clients {
        let (http, calls) = (http.clone(), calls.clone());
        set.spawn(async move {
            let mut lat = Vec::new();
            loop {
                let next = calls.lock().map_err(|e| e.to_string())?.pop();
                let Some((url, body)) = next else { break };
                let t = Instant::now();
                let (status, v) = post(&http, url, body).await?;
                if status != want {
                    return Err(format!("answered {status}: {v}"));
                }
                lat.push(t.elapsed().as_micros() as u64);
            }
            Ok::<_, String>(lat)
        });
    }
    let mut all = Vec::new();
    while let Some(r) = set.join_next().await {
        all.extend(r.map_err(|e| e.to_string())??);
    }
    Ok((all, started.elapsed()))
}

/// Redis commands processed so far, summed over every node.
fn redis_commands(redis: &RedisCluster) -> u64 {
    redis
        .nodes()
        .iter()
        .filter_map(|a| {
            let port = a.rsplit(':').next()?;
            let out = std::process::Command::new("redis-cli")
                .args(["-p", port, "info", "stats"])
                .output()
                .ok()?;
            String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
                l.strip_prefix("total_commands_processed:")?
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
        })
        .sum()
}

async fn one(redis: &RedisCluster, count: usize, args: &Args) -> Result<Value, String> {
    let family = acts::open_store_family(&redis.store_url(&format!("bench{count}")))
        .await
        .map_err(|e| e.to_string())?;
    let mut nodes = Vec::new();
    for i in 0..count {
        nodes.push(start_node(&family, &format!("n{i}"), args.partitions).await?);
    }
    settle(&nodes, args.partitions).await?;
    let http = reqwest::Client::new();
    for text in [AUTO3, ONE_IRQ] {
        let resp = http
            .post(format!("{}/api/v1/models", nodes[0].url))
            .header("content-type", "application/yaml")
            .body(text)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if resp.status().as_u16() != 201 {
            return Err(format!("deploy: {}", resp.text().await.unwrap_or_default()));
        }
    }
    // Idle: what the cluster itself sends.
    let before = redis_commands(redis);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let idle = (redis_commands(redis) - before) as f64 / 10.0;

    let n = args.processes;
    let burst: Vec<(String, Value)> = (0..n)
        .map(|i| {
            (
                format!("{}/api/v1/processes", nodes[i % count].url),
                json!({"model": "auto3", "vars": {"pid": format!("b{count}x{i}")}}),
            )
        })
        .collect();
    let (mut start_lat, wall) = run_calls(&http, burst, args.clients, 201).await?;
    let burst_per_s = n as f64 / wall.as_secs_f64();

    let irq: Vec<(String, Value)> = (0..n)
        .map(|i| {
            (
                format!("{}/api/v1/processes", nodes[i % count].url),
                json!({"model": "one_irq", "vars": {"pid": format!("q{count}x{i}")}}),
            )
        })
        .collect();
    run_calls(&http, irq, args.clients, 201).await?;
    // The waiting task of each: read through its owner.
    let mut completes = Vec::new();
    for i in 0..n {
        let pid = format!("q{count}x{i}");
        let p = nodes[0].node.partition_of(&pid);
        let owner = nodes
            .iter()
            .position(|x| x.node.held().contains(&p))
            .unwrap_or(0);
        let tid = waiting_task(&http, &nodes[owner].url, &pid).await?;
        let path = format!("/api/v1/processes/{pid}/tasks/{tid}/complete");
        // Through any node: with N nodes, (N-1)/N of the calls are
        // forwarded once.
        let via = (owner + i) % count;
        completes.push((format!("{}{path}", nodes[via].url), json!({})));
    }
    let (complete_lat, wall) = run_calls(&http, completes, args.clients, 204).await?;
    let irq_per_s = n as f64 / wall.as_secs_f64();
    // The forwarding hop alone: one client, the same complete sent to
    // the owner and to another node.
    let mut owner_lat = Vec::new();
    let mut fwd_lat = Vec::new();
    for j in 0..400.min(2 * n) {
        let pid = format!("s{count}x{j}");
        let (status, _) = post(
            &http,
            format!("{}/api/v1/processes", nodes[0].url),
            json!({"model": "one_irq", "vars": {"pid": pid}}),
        )
        .await?;
        if status != 201 {
            return Err("start".into());
        }
        let p = nodes[0].node.partition_of(&pid);
        let owner = nodes
            .iter()
            .position(|x| x.node.held().contains(&p))
            .unwrap_or(0);
        // Alternately to the owner and (with more than one node) to
        // another node, so both see the same conditions.
        let forwarded = count > 1 && j % 2 == 1;
        let via = if forwarded {
            (owner + 1) % count
        } else {
            owner
        };
        let tid = waiting_task(&http, &nodes[owner].url, &pid).await?;
        let t = Instant::now();
        let (status, _) = post(
            &http,
            format!(
                "{}/api/v1/processes/{pid}/tasks/{tid}/complete",
                nodes[via].url
            ),
            json!({}),
        )
        .await?;
        if status != 204 {
            return Err("complete".into());
        }
        let us = t.elapsed().as_micros() as u64;
        if forwarded {
            fwd_lat.push(us);
        } else {
            owner_lat.push(us);
        }
    }
    for n in &nodes {
        n.node.leave().await;
    }
    start_lat.sort_unstable();
    let mut complete_lat = complete_lat;
    complete_lat.sort_unstable();
    owner_lat.sort_unstable();
    fwd_lat.sort_unstable();
    Ok(json!({
        "nodes": count,
        "partitions": args.partitions,
        "processes": n,
        "clients": args.clients,
        "burst_per_s": burst_per_s.round(),
        "start_p50_us": percentile(&start_lat, 0.5),
        "start_p99_us": percentile(&start_lat, 0.99),
        "irq_per_s": irq_per_s.round(),
        "complete_p50_us": percentile(&complete_lat, 0.5),
        "complete_p99_us": percentile(&complete_lat, 0.99),
        "owner_p50_us": percentile(&owner_lat, 0.5),
        "forwarded_p50_us": if fwd_lat.is_empty() { Value::Null } else { json!(percentile(&fwd_lat, 0.5)) },
        "idle_redis_cmds_per_s": idle.round(),
    }))
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cluster_load: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let redis = match RedisCluster::start() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cluster_load: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let counts: Vec<usize> = args
        .nodes
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    for count in counts {
        match runtime.block_on(one(&redis, count, &args)) {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("cluster_load: {count} node(s): {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    std::process::ExitCode::SUCCESS
}
