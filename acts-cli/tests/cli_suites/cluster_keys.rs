//! A concurrency key in a cluster: two `acts serve --cluster` nodes on a
//! private Redis Cluster, a model whose processes share one key with limit
//! 1 and wait for an answer, 200 processes started through both nodes at
//! once, then answered one at a time through either node. A key's slots
//! are kept by the one partition its starts are routed to, so no two of
//! them are ever in flight together — never two waiting for an answer at
//! once, and no two runs overlapping in their start and end times (taken
//! on that partition's engine clock) — and every one completes.
//!
//! Built with the `redis` feature only (`scripts/test.sh` runs it).
#![cfg(feature = "redis")]

use crate::support;

use acts_testkit::models::ONE_DESK as DESK;
use acts_testkit::redis_cluster::RedisCluster;
use serde_json::{Value, json};
use support::nodes::{NodeProc, api, deploy, process, settled};
use tokio::task::JoinSet;

const SERIAL: &str = r#"
id: serial
ver: "1"
concurrency: { key: the-one, limit: 1 }
steps:
  - id: work
    uses: acts.core.irq
    params: { key: work }
"#;

const PROCESSES: usize = 200;

/// Starts [`PROCESSES`] processes of `model` at once, through the nodes
/// in turn.
async fn start_many(http: &reqwest::Client, nodes: &[String; 2], model: &str) {
    let mut set = JoinSet::new();
    for i in 0..PROCESSES {
        let http = http.clone();
        let via = vec![nodes[i % 2].clone()];
        let model = model.to_owned();
        set.spawn(async move {
            let body = json!({"model": model, "vars": {}});
            api(
                &http,
                &via,
                reqwest::Method::POST,
                "/api/v1/processes",
                Some(body),
            )
            .await
        });
    }
    while let Some(done) = set.join_next().await {
        let (status, body) = done.expect("a start");
        assert_eq!(status, 201, "{body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_with_limit_one_never_runs_twice_at_once_across_nodes() {
    let redis = RedisCluster::start().expect("a private Redis Cluster");
    let store = redis.store_url("keys");
    let http = reqwest::Client::new();
    let n1 = NodeProc::spawn(&store, "n1");
    let n2 = NodeProc::spawn(&store, "n2");
    settled(&http, &n1.url, &["n1", "n2"]).await;
    deploy(&http, &n1.url, SERIAL).await;
    let nodes = [n1.url.clone(), n2.url.clone()];

    start_many(&http, &nodes, "serial").await;

    // Answer whichever runs, through either node, until all have ended:
    // at no point may two be in flight.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let mut answered = 0;
    let processes = loop {
        let (status, page) = api(
            &http,
            &nodes,
            reqwest::Method::GET,
            "/api/v1/processes?model=serial&limit=1000",
            None,
        )
        .await;
        assert_eq!(status, 200, "{page}");
        let list = page["processes"].as_array().cloned().unwrap_or_default();
        let running: Vec<&str> = list
            .iter()
            .filter(|p| p["state"] == "running")
            .filter_map(|p| p["pid"].as_str())
            .collect();
        assert!(running.len() <= 1, "two of one key in flight: {running:?}");
        let done = list.iter().filter(|p| p["state"] == "completed").count();
        if list.len() == PROCESSES && done == PROCESSES {
            break list;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{done} of {} completed (hang guard)",
            list.len()
        );
        for pid in running {
            let via = [nodes[answered % 2].clone()];
            let (_, detail) = api(
                &http,
                &via,
                reqwest::Method::GET,
                &format!("/api/v1/processes/{pid}"),
                None,
            )
            .await;
            let Some(tid) = detail["tasks"].as_array().and_then(|ts| {
                ts.iter()
                    .find(|t| t["state"] == "interrupted")
                    .and_then(|t| t["tid"].as_str())
            }) else {
                continue; // not asking yet
            };
            let path = format!("/api/v1/processes/{pid}/tasks/{tid}/complete");
            let (status, body) = api(&http, &via, reqwest::Method::POST, &path, None).await;
            assert_eq!(status, 204, "{body}");
            answered += 1;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(answered, PROCESSES);
    let mut spans: Vec<(i64, i64, &str)> = processes
        .iter()
        .map(|p| {
            let at = |k: &str| p[k].as_i64().unwrap_or_else(|| panic!("{k}: {p}"));
            (
                at("start_time"),
                at("end_time"),
                p["pid"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    spans.sort();
    for pair in spans.windows(2) {
        let ((_, end, a), (start, _, b)) = (pair[0], pair[1]);
        assert!(
            start >= end,
            "{b} started at {start} while {a} ran (until {end}): two of one key in flight"
        );
    }
    let keys: Vec<&Value> = processes.iter().map(|p| &p["concurrency_key"]).collect();
    assert!(keys.iter().all(|k| *k == "the-one"), "{keys:?}");
}

/// The same with a step's key: 200 processes on every partition, started
/// through both nodes at once; never two of their interrupts open at once
/// (nor overlapping in their start and end times), and all complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_key_with_limit_one_never_runs_two_tasks_at_once_across_nodes() {
    let redis = RedisCluster::start().expect("a private Redis Cluster");
    let store = redis.store_url("desk");
    let http = reqwest::Client::new();
    let n1 = NodeProc::spawn(&store, "n1");
    let n2 = NodeProc::spawn(&store, "n2");
    settled(&http, &n1.url, &["n1", "n2"]).await;
    deploy(&http, &n1.url, DESK).await;
    let nodes = [n1.url.clone(), n2.url.clone()];
    start_many(&http, &nodes, "desk").await;

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let mut answered = 0;
    let acts = loop {
        let query = json!({"uses": "acts.core.irq", "kind": "act", "limit": 1000});
        let (status, page) = api(
            &http,
            &nodes,
            reqwest::Method::POST,
            "/api/v1/tasks/query",
            Some(query),
        )
        .await;
        assert_eq!(status, 200, "{page}");
        let list = page["tasks"].as_array().cloned().unwrap_or_default();
        let open: Vec<(String, String)> = list
            .iter()
            .filter(|t| t["state"] == "interrupted")
            .map(|t| (t["pid"].to_string(), t["tid"].to_string()))
            .collect();
        assert!(open.len() <= 1, "two of one key in flight: {open:?}");
        let done = list.iter().filter(|t| t["state"] == "completed").count();
        if done == PROCESSES {
            break list;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{done} of {PROCESSES} answered (hang guard)"
        );
        for (pid, tid) in open {
            let (pid, tid) = (pid.trim_matches('"'), tid.trim_matches('"'));
            let via = [nodes[answered % 2].clone()];
            let path = format!("/api/v1/processes/{pid}/tasks/{tid}/complete");
            let (status, body) = api(&http, &via, reqwest::Method::POST, &path, None).await;
            assert_eq!(status, 204, "{body}");
            answered += 1;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(answered, PROCESSES);
    let mut spans: Vec<(i64, i64)> = acts
        .iter()
        .map(|t| {
            let at = |k: &str| t[k].as_i64().unwrap_or_else(|| panic!("{k}: {t}"));
            (at("start_time"), at("end_time"))
        })
        .collect();
    spans.sort();
    for pair in spans.windows(2) {
        assert!(
            pair[1].0 >= pair[0].1,
            "an interrupt opened at {} while another was open until {}",
            pair[1].0,
            pair[0].1
        );
    }
    let pids: std::collections::BTreeSet<&str> =
        acts.iter().filter_map(|t| t["pid"].as_str()).collect();
    assert_eq!(pids.len(), PROCESSES);
    for pid in pids {
        let (status, detail) = process(&http, &nodes, pid).await;
        assert_eq!(status, 200, "{detail}");
        assert_eq!(detail["process"]["state"], "completed", "{detail}");
    }
}
