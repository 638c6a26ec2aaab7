//! Keys and rates on steps and acts across a cluster: each key is kept
//! by the partition it hashes to, whichever partitions its processes
//! live in. Two nodes, processes on every partition, one step key with
//! limit 1 (and a rate key kept elsewhere): never two of its tasks run
//! at once, each waiter runs when the one before ends — also after the
//! node keeping the key dies and its partitions move.

use crate::support;

use std::time::Duration;

use acts::ManualClock;
use acts_cluster::placement::key_partition;
use serde_json::Value;
use support::*;

const DESK: &str = r#"
id: desk
ver: "1"
steps:
  - id: approve
    uses: acts.core.irq
    params: { key: approve }
    concurrency: { key: the-desk, limit: 1 }
    rate: { key: the-clerks, per_second: 1000, burst: 100 }
"#;

const PROCESSES: usize = 12;

/// The state of each process's `approve` task (absent: not there yet).
async fn approve_states(n: &Node, pids: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for pid in pids {
        let body = expect_call(
            reqwest::Method::GET,
            format!("{}/api/v1/processes/{pid}", n.url),
            None,
            200,
        )
        .await;
        let state = body["tasks"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["nid"] == "approve"))
            .and_then(|t| t["state"].as_str())
            .unwrap_or("absent")
            .to_owned();
        out.push((pid.clone(), state));
    }
    out
}

/// Waits (hang guard: a minute) until exactly one of `pids` waits for
/// its answer — asserting at every look that never two do — and
/// returns it with its task.
async fn the_one_running(n: &Node, pids: &[String]) -> (String, String) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let states = approve_states(n, pids).await;
        let running: Vec<&String> = states
            .iter()
            // (the step runs; its interrupt is its act)
            .filter(|(_, s)| s == "running" || s == "interrupted")
            .map(|(p, _)| p)
            .collect();
        assert!(
            running.len() <= 1,
            "two tasks of a limit-1 key run: {states:?}"
        );
        if let Some(pid) = running.first() {
            let tid = waiting_task(n, pid, "approve").await;
            return ((*pid).clone(), tid);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no task of the key runs: {states:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_key_lets_one_task_run_at_a_time_across_nodes_and_a_dead_home() {
    let family = family("gates").await;
    let clock = ManualClock::new(1_700_000_000_000);
    let n1 = node(&family, &clock, "n1").await.expect("n1 joins");
    let n2 = node(&family, &clock, "n2").await.expect("n2 joins");
    tick_all(&[&n1, &n2]).await;
    check_balanced(&[&n1, &n2]);
    deploy(&n1, DESK).await;
    // A new bucket fills from its engine's start: a second fills it.
    clock.advance(Duration::from_secs(1));

    // Processes on partitions of both nodes, started through both.
    let pids: Vec<String> = (0..PROCESSES).map(|i| format!("desk{i}")).collect();
    let parts: std::collections::BTreeSet<u32> =
        pids.iter().map(|p| n1.node.partition_of(p)).collect();
    assert!(parts.len() > 2, "spread over partitions: {parts:?}");
    let nodes = [&n1, &n2];
    for (i, pid) in pids.iter().enumerate() {
        start(nodes[i % 2], "desk", pid).await;
    }
    // Only a node of the cluster may make a gate call: a client's is
    // refused, whatever it names.
    let forged = serde_json::json!({"op": "end", "pid": "desk0", "part": "x#0"});
    for secret in [None, Some("guess")] {
        let mut req = reqwest::Client::new()
            .post(format!("{}/api/v1/cluster/gates", n1.url))
            .header("x-acts-partition", "0")
            .json(&forged);
        if let Some(s) = secret {
            req = req.header("x-acts-node-secret", s);
        }
        let resp = req.send().await.expect("the node answers");
        assert_eq!(resp.status().as_u16(), 403, "secret {secret:?}");
    }
    // A node's call this engine cannot read (another version's, a bug's)
    // is refused as such (400), not answered "unavailable" for its sender
    // to try again.
    let meta = family.member("meta").await.expect("the metadata");
    let stored = meta
        .get(b"node-secret")
        .await
        .expect("a read")
        .expect("the secret");
    let secret: String = serde_json::from_slice(&stored).expect("the secret is text");
    let held = n1.node.held()[0];
    let resp = reqwest::Client::new()
        .post(format!("{}/api/v1/cluster/gates", n1.url))
        .header("x-acts-partition", held.to_string())
        .header("x-acts-node-secret", secret)
        .json(&serde_json::json!({"op": "no-such-call"}))
        .send()
        .await
        .expect("the node answers");
    assert_eq!(resp.status().as_u16(), 400);
    // The key's home: the node holding its partition.
    let home = key_partition("the-desk", P);
    let (home_node, other) = if n1.node.held().contains(&home) {
        (&n1, &n2)
    } else {
        (&n2, &n1)
    };

    let mut left = pids.clone();
    let mut done = 0;
    while !left.is_empty() {
        let via = if done < 4 { nodes[done % 2] } else { other };
        let (pid, tid) = the_one_running(via, &left).await;
        let (status, body) = complete(via, &pid, &tid).await;
        assert!(status == 200 || status == 204, "{status} {body}");
        left.retain(|p| *p != pid);
        done += 1;
        if done == 4 {
            // The node keeping the key dies while one task holds the
            // slot and the rest wait: its partitions (the key's among
            // them) move; the seats are read back there.
            home_node.node.halt().await;
            clock.advance(TTL + Duration::from_secs(1));
            tick_all(&[other]).await;
            assert_eq!(other.node.held().len(), P as usize);
        }
    }
    for pid in &pids {
        assert_eq!(process_state(other, pid).await, "completed", "{pid}");
    }
    // Nothing is held or queued any more.
    let engine = other.node.engine(home).expect("the key's home");
    let keys: Vec<Value> = engine
        .runtime()
        .gate_keys()
        .into_iter()
        .filter(|k| k.holders > 0 || k.waiting > 0)
        .map(|k| Value::String(format!("{}:{} {}/{}", k.kind, k.key, k.holders, k.waiting)))
        .collect();
    assert!(keys.is_empty(), "{keys:?}");
}
