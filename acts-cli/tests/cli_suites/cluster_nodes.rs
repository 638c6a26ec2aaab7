//! A cluster of real `acts serve --cluster` processes on a real Redis
//! Cluster (3 masters + 3 replicas, private, on loopback ports): processes
//! with interrupts, subflows and timers, answered through any node, while
//! a node is killed (-9), a fourth joins, and a node is frozen (SIGSTOP)
//! past its lease and resumed; then a Redis master is shut down. Every
//! process must reach the outcome it reaches without faults; an action a
//! frozen node takes is never applied.
//!
//! Built with the `redis` feature only (`scripts/test.sh` runs it:
//! `cargo test -p acts-cli --features redis --test cli_suites -- cluster_nodes::`).
//! `ACTS_CLUSTER_PROCESSES` sets how many processes the node test runs
//! (default 10,000: ~100 s in a debug build on 2 cores),
//! `ACTS_FAILOVER_ANSWERS` how many answers each master-crash run makes
//! (default 120).
#![cfg(feature = "redis")]

use crate::support;

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use acts_testkit::redis_cluster::RedisCluster;
use serde_json::{Value, json};
use support::nodes::{
    ASK, Acked, FailoverReport, NodeProc, PARTITIONS, TTL_SECS, answer_all, api, deploy, env_count,
    lost_answers, process, settled, start_all, try_api,
};
use tokio::task::JoinSet;

const PARENT: &str = r#"
id: parent
ver: "1"
steps:
  - id: call
    uses: acts.core.subflow
    params: { to: child }
  - id: after
    uses: acts.core.irq
    params: { key: after }
"#;

const CHILD: &str = r#"
id: child
ver: "1"
steps:
  - id: inner
    uses: acts.core.irq
    params: { key: inner }
"#;

const TIMED: &str = r#"
id: timed
ver: "1"
steps:
  - id: wait
    uses: acts.core.irq
    params: { key: never }
    timeouts:
      - id: give_up
        if: $cost_in("3s")
        uses: acts.core.action
        params: { action: abort }
"#;

/// The waiting task of `pid` with interrupt key `key`.
async fn waiting(http: &reqwest::Client, nodes: &[String], pid: &str, key: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = process(http, nodes, pid).await;
        if status == 200
            && let Some(t) = body["tasks"].as_array().and_then(|ts| {
                ts.iter()
                    .find(|t| t["key"] == key && t["state"] == "interrupted")
            })
        {
            return t["tid"].as_str().expect("tid").to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "{pid} never waited at '{key}': {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Completes `pid`'s waiting `key` task with `vars` (an acknowledged
/// action: 204); a 409 after a retried call whose first try was applied
/// is checked against the task's state.
async fn answer(http: &reqwest::Client, nodes: &[String], pid: &str, key: &str, vars: Value) {
    let tid = waiting(http, nodes, pid, key).await;
    let (status, body) = api(
        http,
        nodes,
        reqwest::Method::POST,
        &format!("/api/v1/processes/{pid}/tasks/{tid}/complete"),
        Some(vars),
    )
    .await;
    assert_eq!(status, 204, "{pid}: {body}");
}

/// Which processes to run: `(pid, model)`.
fn plan(n: usize) -> Vec<(String, &'static str)> {
    (0..n)
        .map(|i| match i % 4 {
            0 | 1 => (format!("ask{i}"), "ask"),
            2 => (format!("fam{i}"), "parent"),
            _ => (format!("timed{i}"), "timed"),
        })
        .collect()
}

/// Answers what `pid` asks, through `nodes`.
async fn drive(http: reqwest::Client, nodes: Vec<String>, pid: String, model: &'static str) {
    match model {
        "ask" => {
            let n: u64 = pid.trim_start_matches("ask").parse().expect("number");
            answer(&http, &nodes, &pid, "ask", json!({"answer": n})).await;
        }
        "parent" => {
            let (_, body) = process(&http, &nodes, &pid).await;
            let tid = body["tasks"]
                .as_array()
                .and_then(|ts| {
                    ts.iter()
                        .find(|t| t["kind"] == "act" && t["uses"] == "acts.core.subflow")
                })
                .and_then(|t| t["tid"].as_str())
                .expect("the subflow act")
                .to_owned();
            let child = format!("{pid}_{tid}");
            answer(&http, &nodes, &child, "inner", json!({})).await;
            answer(&http, &nodes, &pid, "after", json!({})).await;
        }
        _ => {}
    }
}

async fn drive_all(http: &reqwest::Client, nodes: &[String], work: &[(String, &'static str)]) {
    let mut set = JoinSet::new();
    for (pid, model) in work {
        while set.len() >= 16 {
            set.join_next()
                .await
                .expect("a task")
                .expect("driving a process");
        }
        set.spawn(drive(http.clone(), nodes.to_vec(), pid.clone(), model));
    }
    while let Some(r) = set.join_next().await {
        r.expect("driving a process");
    }
}

/// Every process's final state and outputs are what they are without
/// faults.
async fn check_outcomes(http: &reqwest::Client, nodes: &[String], work: &[(String, &'static str)]) {
    let deadline = Instant::now() + Duration::from_secs(120);
    for (pid, model) in work {
        loop {
            let (status, body) = process(http, nodes, pid).await;
            assert_eq!(status, 200, "{pid}: {body}");
            let state = body["process"]["state"].as_str().unwrap_or("").to_owned();
            let want = if *model == "timed" {
                "aborted"
            } else {
                "completed"
            };
            if state == want {
                if *model == "ask" {
                    let n: u64 = pid.trim_start_matches("ask").parse().expect("number");
                    assert_eq!(
                        body["process"]["outputs"]["answer"],
                        json!(n),
                        "{pid}: {body}"
                    );
                    assert_eq!(body["process"]["outputs"]["done"], json!(true), "{pid}");
                }
                break;
            }
            assert!(
                Instant::now() < deadline && state == "running",
                "{pid} ended {state}, not {want}: {body}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn process_count() -> usize {
    env_count("ACTS_CLUSTER_PROCESSES", 10_000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_die_join_and_freeze_and_every_process_ends_as_without_faults() {
    let redis = RedisCluster::start().expect("a private Redis Cluster");
    let store = redis.store_url("nodes");
    let http = reqwest::Client::new();
    let n1 = NodeProc::spawn(&store, "n1");
    let n2 = NodeProc::spawn(&store, "n2");
    let n3 = NodeProc::spawn(&store, "n3");
    settled(&http, &n1.url, &["n1", "n2", "n3"]).await;
    // `acts cluster status` through any node.
    let out = Command::new(assert_cmd::cargo::cargo_bin("acts"))
        .args(["--server", &n3.url, "cluster", "status"])
        .output()
        .expect("acts cluster status runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("3 live node(s), 16 partitions"), "{text}");
    for id in ["n1", "n2", "n3"] {
        assert!(text.contains(&format!("\n{id} ")), "{id} listed: {text}");
    }
    let out = Command::new(assert_cmd::cargo::cargo_bin("acts"))
        .args(["--server", &n1.url, "cluster", "status", "--json"])
        .output()
        .expect("acts cluster status --json runs");
    let status: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(status["owners"].as_array().map(Vec::len), Some(16));
    assert_eq!(status["node"], "n1");
    for text in [ASK, PARENT, CHILD, TIMED] {
        deploy(&http, &n2.url, text).await;
    }
    let all = vec![n1.url.clone(), n2.url.clone(), n3.url.clone()];
    let work = plan(process_count());
    // A durable channel through n1 for the whole run: every question must
    // reach it at least once, whichever node held its partition when.
    let received = Arc::new(Mutex::new(String::new()));
    {
        let mut stream = http
            .get(format!(
                "{}/api/v1/channels/questions/stream?key=ask",
                n1.url
            ))
            .send()
            .await
            .expect("the durable stream opens");
        assert_eq!(stream.status().as_u16(), 200);
        let sink = received.clone();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let mut ready = Some(ready_tx);
            while let Ok(Some(chunk)) = stream.chunk().await {
                let mut text = sink.lock().expect("received");
                text.push_str(&String::from_utf8_lossy(&chunk));
                if ready.is_some()
                    && (0..PARTITIONS)
                        .all(|p| text.contains(&format!(": partition {p} attached\n")))
                    && let Some(tx) = ready.take()
                {
                    let _ = tx.send(());
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(60), ready_rx)
            .await
            .expect("hang guard")
            .expect("every partition attached");
    }
    let started = Instant::now();
    start_all(&http, &all, &work).await;
    let (first, rest) = work.split_at(work.len() / 2);
    drive_all(&http, &all, first).await;

    // kill -9 a node mid-run: its partitions move within the TTL.
    let before = settled(&http, &n1.url, &["n1", "n2", "n3"]).await;
    n3.signal("-KILL");
    let after = settled(&http, &n1.url, &["n1", "n2"]).await;
    for (b, a) in before["owners"]
        .as_array()
        .expect("owners")
        .iter()
        .zip(after["owners"].as_array().expect("owners"))
    {
        if b["owner"] == "n3" {
            assert!(
                a["epoch"].as_u64() > b["epoch"].as_u64(),
                "a moved partition's epoch rises: {b} -> {a}"
            );
        }
    }
    // A fourth node joins mid-run.
    let n4 = NodeProc::spawn(&store, "n4");
    let live = vec![n1.url.clone(), n2.url.clone(), n4.url.clone()];
    let (second, third) = rest.split_at(rest.len() / 2);
    let driving = {
        let (http, live, second) = (http.clone(), live.clone(), second.to_vec());
        tokio::spawn(async move { drive_all(&http, &live, &second).await })
    };
    settled(&http, &n4.url, &["n1", "n2", "n4"]).await;
    driving.await.expect("driving during the join");

    // Freeze n2 past its lease: the others take its partitions; what it
    // does once it wakes is refused by the fence, and it steps down.
    let status = settled(&http, &n1.url, &["n1", "n2", "n4"]).await;
    let p2 = status["owners"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["owner"] == "n2"))
        .and_then(|p| p["partition"].as_u64())
        .expect("n2 holds a partition");
    // A process waiting on one of n2's partitions.
    let victim = (0..)
        .map(|k| format!("frozen{k}"))
        .find(|pid| acts_cluster::placement::partition_of(pid, PARTITIONS) == p2 as u32)
        .expect("some pid hashes there");
    let body = json!({"model": "ask", "vars": {"pid": victim}});
    let (status, out) = api(
        &http,
        &live,
        reqwest::Method::POST,
        "/api/v1/processes",
        Some(body),
    )
    .await;
    assert_eq!(status, 201, "{out}");
    let victim_task = waiting(&http, &live, &victim, "ask").await;
    n2.signal("-STOP");
    settled(&http, &n1.url, &["n1", "n4"]).await;
    // Sent to the frozen node, pinned to its old partition, not to be
    // forwarded: it runs when n2 wakes, on an engine that lost the lease.
    let stale = {
        let (http, url) = (http.clone(), n2.url.clone());
        let path = format!("/api/v1/processes/{victim}/tasks/{victim_task}/complete");
        tokio::spawn(async move {
            try_api(
                &http,
                reqwest::Method::POST,
                format!("{url}{path}"),
                Some(json!({"answer": "stale"})),
                &[
                    ("x-acts-forwarded", "test".into()),
                    ("x-acts-partition", p2.to_string()),
                ],
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_secs(TTL_SECS)).await;
    n2.signal("-CONT");
    let (status, body) = stale.await.expect("the stale call").expect("n2 answers");
    // Refused because n2 no longer owns the partition: fenced at its write
    // (`not_owner`), or let go of before the call ran (`moving`) — never a
    // store failure or anything else.
    assert_eq!(status, 503, "the frozen node's action is refused: {body}");
    assert!(
        matches!(body["error"]["code"].as_str(), Some("not_owner" | "moving")),
        "refused for ownership: {body}"
    );
    assert_eq!(
        waiting(&http, &live, &victim, "ask").await,
        victim_task,
        "and not applied"
    );
    settled(&http, &n1.url, &["n1", "n2", "n4"]).await;
    drive_all(&http, &live, third).await;
    answer(&http, &live, &victim, "ask", json!({"answer": 7})).await;
    check_outcomes(&http, &live, &work).await;
    let elapsed = started.elapsed();
    // At least once through the durable channel, across the kill, the
    // join and the freeze (re-sent by a partition's new owner until
    // acknowledged).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let missing: Vec<&String> = {
            let text = received.lock().expect("received");
            work.iter()
                .filter(|(_, m)| *m == "ask")
                .map(|(pid, _)| pid)
                .filter(|pid| !text.contains(&format!("\"pid\":\"{pid}\"")))
                .collect()
        };
        if missing.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "never delivered: {missing:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "{} processes ({} ask, {} parent+child, {} timed) on 3→4 nodes with a kill -9, a join and a freeze: {:.1} s",
        work.len(),
        work.iter().filter(|w| w.1 == "ask").count(),
        work.iter().filter(|w| w.1 == "parent").count(),
        work.iter().filter(|w| w.1 == "timed").count(),
        elapsed.as_secs_f64()
    );
    let frozen_log = n2.log.lock().expect("log").join("\n");
    assert!(
        frozen_log.contains("stepping down") || frozen_log.contains("fenced"),
        "n2 noticed it lost its partitions:\n{frozen_log}"
    );
    drop((n1, n2, n4));
}

/// Runs `asks` processes on 3 nodes, crashes the Redis master serving the
/// most partitions while they are being answered — after a window in
/// which its replicas were stopped (answers on it acknowledged without
/// WAIT, none with it) — brings it back as a replica, and reports which
/// acknowledged answers the processes lost.
async fn through_a_master_crash(options: &str, asks: usize) -> FailoverReport {
    let wait = options.contains("wait_replicas");
    let mut redis = RedisCluster::start().expect("a private Redis Cluster");
    let store = format!("{}{options}", redis.store_url("failover"));
    let http = reqwest::Client::new();
    let n1 = NodeProc::spawn(&store, "n1");
    let n2 = NodeProc::spawn(&store, "n2");
    let n3 = NodeProc::spawn(&store, "n3");
    settled(&http, &n1.url, &["n1", "n2", "n3"]).await;
    deploy(&http, &n1.url, ASK).await;
    let nodes = vec![n1.url.clone(), n2.url.clone(), n3.url.clone()];
    let work: Vec<(String, &'static str)> = (0..asks).map(|i| (format!("ask{i}"), "ask")).collect();
    start_all(&http, &nodes, &work).await;
    // The master that serves the most partitions (each partition is one
    // namespace, `failover:pN`, whose keys share one hash tag).
    let masters = redis.masters().expect("the masters");
    let master_of: Vec<u16> = (0..PARTITIONS)
        .map(|p| {
            redis
                .master_of(&format!("{{failover:p{p}}}"))
                .expect("the partition's master")
        })
        .collect();
    let mut served = std::collections::BTreeMap::<u16, usize>::new();
    for port in &master_of {
        *served.entry(*port).or_default() += 1;
    }
    let (&victim, &partitions) = served
        .iter()
        .max_by_key(|(port, n)| (**n, std::cmp::Reverse(**port)))
        .expect("some master serves the partitions");
    let on_victim = |pid: &str| {
        master_of[acts_cluster::placement::partition_of(pid, PARTITIONS) as usize] == victim
    };
    eprintln!(
        "master crash: the master on port {victim} serves {partitions} of {PARTITIONS} partitions"
    );
    // Its replicas (a cluster just made may still be attaching one).
    let deadline = Instant::now() + Duration::from_secs(60);
    let replicas = loop {
        let r = redis.replicas_of(victim).expect("the victim's replicas");
        if !r.is_empty() {
            break r;
        }
        assert!(
            Instant::now() < deadline,
            "the master on port {victim} has no replica"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let started = Instant::now();
    let acked: Acked = Arc::default();
    // A quarter answered before the window, the rest during and after it.
    answer_all(&http, &nodes, &acked, 0..asks / 4)
        .await
        .expect("answering before the window");
    // The window: its replicas are stopped. Without WAIT, answers on its
    // partitions are acknowledged all the same (at least three, before the
    // crash); with WAIT none can be (each waits for a replica, times out
    // and is tried again) for the 5 s the window lasts.
    for r in &replicas {
        redis.freeze(*r, true).expect("stop a replica");
    }
    if !wait {
        // 32 MiB in the victim's slots first: more than the socket buffers
        // between it and its stopped replicas hold, so the answers it
        // acknowledges next stay in its own output buffer, and die with it.
        let p = (0..PARTITIONS)
            .find(|p| master_of[*p as usize] == victim)
            .expect("a partition on the victim");
        redis
            .fill(victim, &format!("junk:{{failover:p{p}}}"), 32 << 20)
            .expect("a large write to the victim");
    }
    // Calls sent from now on are in the window (one sent before may be
    // acknowledged after: it reached the replicas in time).
    let stopped = Instant::now();
    let driving = tokio::spawn({
        let (http, nodes, acked) = (http.clone(), nodes.clone(), acked.clone());
        async move { answer_all(&http, &nodes, &acked, asks / 4..asks).await }
    });
    loop {
        let (mine, others) = {
            let acked = acked.lock().expect("acked");
            acked.iter().filter(|(_, _, sent)| *sent >= stopped).fold(
                (0, 0),
                |(m, o), (pid, _, _)| {
                    if on_victim(pid) {
                        (m + 1, o)
                    } else {
                        (m, o + 1)
                    }
                },
            )
        };
        let done = if wait {
            assert_eq!(
                mine, 0,
                "acknowledged on a master whose replicas are stopped, with WAIT"
            );
            stopped.elapsed() >= Duration::from_secs(5)
        } else {
            mine >= 3
        };
        if done {
            break;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(90),
            "no answers were acknowledged while the replicas were stopped ({mine} on the victim, {others} elsewhere)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    redis.kill(victim).expect("kill a master");
    for r in &replicas {
        redis.freeze(*r, false).expect("continue a replica");
    }
    // The replica is promoted; the crashed node comes back as a replica.
    tokio::task::block_in_place(|| {
        redis
            .wait_failover(victim, masters.len())
            .expect("a replica takes over");
        redis.restart(victim).expect("the crashed node rejoins")
    });
    driving
        .await
        .expect("the answering task")
        .expect("answering through the failover");
    let acked = acked.lock().expect("acked").clone();
    let lost = lost_answers(&http, &nodes, &acked).await;
    let seconds = started.elapsed().as_secs_f64();
    drop((n1, n2, n3));
    FailoverReport {
        acknowledged: acked.len(),
        lost,
        seconds,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_master_crash_loses_no_acknowledged_answer_with_wait_replicas() {
    let asks = env_count("ACTS_FAILOVER_ANSWERS", 120);
    let default = through_a_master_crash("", asks).await;
    eprintln!(
        "master crash, default settings (no WAIT, appendonly no): {} of {} answers acknowledged, {} lost ({:.1} s): {:?}",
        default.acknowledged,
        asks,
        default.lost.len(),
        default.seconds,
        default.lost
    );
    let safe = through_a_master_crash("?wait_replicas=1&wait_ms=2000", asks).await;
    eprintln!(
        "master crash, wait_replicas=1: {} of {} answers acknowledged, {} lost ({:.1} s)",
        safe.acknowledged,
        asks,
        safe.lost.len(),
        safe.seconds
    );
    assert!(
        !default.lost.is_empty(),
        "without WAIT, the answers only the crashed master had are lost"
    );
    assert!(safe.acknowledged > 0, "answers were acknowledged");
    assert!(
        safe.lost.is_empty(),
        "lost with wait_replicas=1: {:?}",
        safe.lost
    );
}
