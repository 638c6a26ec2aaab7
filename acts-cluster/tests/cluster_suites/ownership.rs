//! The cluster's ownership logic, deterministically: nodes in one
//! process on an in-memory store family, leases and heartbeats on a
//! manual clock, ticks driven by the test (no background work), real HTTP
//! between the nodes on loopback. Proves: partitions spread by rendezvous
//! and move only when their owner hands them over or its lease expires; a
//! dead node's processes go on elsewhere with nothing lost; a frozen node
//! can apply nothing once another took its partitions, steps down, and
//! gets its share back; calls are accepted by any node; models follow the
//! catalog; a node started with another partition count is refused. On
//! PostgreSQL too (`ACTS_TEST_CLUSTER_STORE=postgres`).

use crate::support;

use acts_testkit::models::ASKING as ASK;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use acts::{EngineError, ManualClock, TaskState};
use acts_cluster::{ClusterConfig, ClusterError, ClusterNode};
use serde_json::{Value, json};
use support::*;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_spread_and_a_dead_nodes_processes_go_on_elsewhere() {
    let family = family("t1").await;
    let clock = ManualClock::new(1_000_000);
    let n1 = node(&family, &clock, "n1").await.expect("n1 joins");
    assert_eq!(
        n1.node.held().len(),
        P as usize,
        "a lone node holds everything"
    );
    let n2 = node(&family, &clock, "n2").await.expect("n2 joins");
    let n3 = node(&family, &clock, "n3").await.expect("n3 joins");
    assert!(n2.node.held().is_empty(), "n1's leases still run");
    tick_all(&[&n1, &n2, &n3]).await;
    check_balanced(&[&n1, &n2, &n3]);

    // Models deployed on one node reach every partition.
    deploy(&n1, ASK).await;
    deploy(&n2, PARENT).await;
    deploy(&n3, CHILD).await;
    let pids: Vec<String> = (0..24).map(|i| format!("order{i}")).collect();
    let nodes = [&n1, &n2, &n3];
    for (i, pid) in pids.iter().enumerate() {
        start(nodes[i % 3], "asking", pid).await;
    }
    start(&n2, "parent", "family").await;
    // The child lives in its parent's partition, reached from any node.
    let child_task = {
        let (_, body) = call(
            reqwest::Method::GET,
            format!("{}/api/v1/processes/family", n3.url),
            None,
        )
        .await;
        let call_task = body["tasks"]
            .as_array()
            .and_then(|ts| {
                ts.iter()
                    .find(|t| t["kind"] == "act" && t["uses"] == "acts.core.subflow")
            })
            .map(|t| t["tid"].as_str().expect("tid").to_owned())
            .expect("the subflow task");
        format!("family_{call_task}")
    };
    assert_eq!(
        n1.node.partition_of(&child_task),
        n1.node.partition_of("family")
    );
    let inner = waiting_task(&n1, &child_task, "inner").await;
    for pid in &pids {
        waiting_task(&n1, pid, "ask").await;
    }

    // n3 dies: no hand-over; its heartbeat and leases run out.
    let lost = n3.node.held();
    assert!(!lost.is_empty());
    let old_epochs: Vec<u64> = lost
        .iter()
        .map(|p| {
            n3.node
                .engine(*p)
                .and_then(|e| e.storage().lease_epoch())
                .expect("held")
        })
        .collect();
    n3.node.halt().await;
    clock.advance(TTL - Duration::from_secs(1));
    tick_all(&[&n1, &n2]).await;
    assert_eq!(
        n1.node.held().len() + n2.node.held().len(),
        P as usize - lost.len(),
        "nothing moves before the TTL"
    );
    clock.advance(Duration::from_secs(2));
    tick_all(&[&n1, &n2]).await;
    check_balanced(&[&n1, &n2]);
    for (p, old) in lost.iter().zip(old_epochs) {
        let holder = if n1.node.held().contains(p) { &n1 } else { &n2 };
        let epoch = holder
            .node
            .engine(*p)
            .and_then(|e| e.storage().lease_epoch())
            .expect("held");
        assert!(epoch > old, "partition {p}: epoch {epoch} after {old}");
    }

    // Every process goes on, answered through either node.
    for (i, pid) in pids.iter().enumerate() {
        let via = if i % 2 == 0 { &n1 } else { &n2 };
        let tid = waiting_task(via, pid, "ask").await;
        let (status, body) = complete(via, pid, &tid).await;
        assert_eq!(status, 204, "{pid}: {body}");
        assert_eq!(process_state(&n2, pid).await, "completed", "{pid}");
    }
    let (status, body) = complete(&n2, &child_task, &inner).await;
    assert_eq!(status, 204, "{body}");
    let after = waiting_task(&n1, "family", "after").await;
    assert_eq!(complete(&n1, "family", &after).await.0, 204);
    assert_eq!(process_state(&n1, "family").await, "completed");

    // A pinned call naming no partition of the cluster is refused at once.
    let resp = reqwest::Client::new()
        .get(format!("{}/api/v1/processes/order1", n1.url))
        .header("x-acts-partition", "99")
        .send()
        .await
        .expect("answers");
    assert_eq!(resp.status().as_u16(), 400);

    // A listing over the cluster sees every partition's processes.
    let body = expect_call(
        reqwest::Method::GET,
        format!("{}/api/v1/processes?state=completed&limit=5", n2.url),
        None,
        200,
    )
    .await;
    assert_eq!(body["total"], json!(26), "{body}");
    let mut seen = body["processes"].as_array().expect("a page").len();
    let mut next = body["next"].as_str().map(str::to_owned);
    while let Some(cursor) = next {
        let (status, page) = call(
            reqwest::Method::GET,
            format!(
                "{}/api/v1/processes?state=completed&limit=5&cursor={cursor}",
                n1.url
            ),
            None,
        )
        .await;
        assert_eq!(status, 200, "{page}");
        seen += page["processes"].as_array().expect("a page").len();
        next = page["next"].as_str().map(str::to_owned);
    }
    assert_eq!(seen, 26, "every completed process listed once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_node_applies_nothing_steps_down_and_gets_its_share_back() {
    let family = family("t2").await;
    let clock = ManualClock::new(1_000_000);
    let n1 = node(&family, &clock, "n1").await.expect("n1 joins");
    let n2 = node(&family, &clock, "n2").await.expect("n2 joins");
    tick_all(&[&n1, &n2]).await;
    check_balanced(&[&n1, &n2]);
    deploy(&n1, ASK).await;
    // A process on one of n2's partitions.
    let p2 = n2.node.held()[0];
    let pid = (0..)
        .map(|i| format!("frozen{i}"))
        .find(|pid| n1.node.partition_of(pid) == p2)
        .expect("some pid hashes there");
    start(&n1, "asking", &pid).await;
    let tid = waiting_task(&n1, &pid, "ask").await;
    let stale = n2.node.engine(p2).expect("n2 holds it");
    let stale_epoch = stale.storage().lease_epoch().expect("a leased engine");

    // n2 freezes (renews nothing) past its TTL; n1 takes everything.
    clock.advance(TTL + Duration::from_secs(1));
    tick_all(&[&n1]).await;
    assert_eq!(n1.node.held().len(), P as usize);

    // n2 wakes: what it still believes it owns refuses to write.
    let err = stale
        .executor()
        .act()
        .complete(&pid, &tid, Default::default())
        .await
        .expect_err("fenced");
    assert!(matches!(err, EngineError::Fenced(_)), "{err}");
    assert_eq!(process_state(&n1, &pid).await, "running");
    let fresh = n1.node.engine(p2).expect("n1 holds it");
    let task = fresh
        .executor()
        .task()
        .list(&pid)
        .await
        .expect("tasks")
        .into_iter()
        .find(|t| t.tid == tid)
        .expect("the task");
    assert_eq!(
        task.state,
        TaskState::Interrupt,
        "the frozen node's action was not applied"
    );

    // It steps down, heartbeats again and gets its share back.
    n2.node.tick().await.expect("tick");
    assert!(
        n2.node.engine(p2).is_none() && !n2.node.held().contains(&p2),
        "n2 let go of the partition it was fenced off"
    );
    tick_all(&[&n1, &n2]).await;
    check_balanced(&[&n1, &n2]);
    assert!(n2.node.held().contains(&p2));
    let back = n2.node.engine(p2).expect("n2 holds it again");
    assert!(
        !back.storage().is_fenced(),
        "a live engine, not the stale one"
    );
    assert!(
        back.storage().lease_epoch() > Some(stale_epoch),
        "taken under a new lease ({:?} after {stale_epoch})",
        back.storage().lease_epoch()
    );
    let (status, body) = complete(&n1, &pid, &tid).await;
    assert_eq!(status, 204, "{body}");
    assert_eq!(process_state(&n2, &pid).await, "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_partition_count_is_fixed_and_node_ids_are_checked() {
    let family = family("t3").await;
    let clock = ManualClock::new(1_000_000);
    let _n1 = node(&family, &clock, "n1").await.expect("n1 joins");
    let mut config = ClusterConfig::new("n2", "http://127.0.0.1:1", P * 2);
    config.clock = Arc::new(clock.clone());
    config.background = false;
    let err = ClusterNode::join(config, family.clone(), acts_server::Auth::none())
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(
            err,
            ClusterError::PartitionCount {
                asked: 16,
                cluster: 8
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("--partitions 8"), "{err}");
    for bad in ["", "a b", "n/1"] {
        let config = ClusterConfig::new(bad, "http://127.0.0.1:1", P);
        let err = ClusterNode::join(config, family.clone(), acts_server::Auth::none())
            .await
            .err()
            .expect("refused");
        assert!(matches!(err, ClusterError::Config(_)), "{bad:?}: {err}");
    }
    let mut config = ClusterConfig::new("n1", "http://127.0.0.1:2", P);
    config.clock = Arc::new(clock.clone());
    config.background = false;
    let err = ClusterNode::join(config, family.clone(), acts_server::Auth::none())
        .await
        .err()
        .expect("refused");
    assert!(matches!(err, ClusterError::NodeInUse { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stream_carries_the_messages_of_every_partition_and_follows_a_move() {
    let family = family("t4").await;
    let clock = ManualClock::new(1_000_000);
    let n1 = node(&family, &clock, "n1").await.expect("n1 joins");
    let n2 = node(&family, &clock, "n2").await.expect("n2 joins");
    tick_all(&[&n1, &n2]).await;
    check_balanced(&[&n1, &n2]);
    deploy(&n1, ASK).await;
    let on = |n: &Node, tag: &str| {
        let held = n.node.held();
        (0..)
            .map(|i| format!("{tag}{i}"))
            .find(|pid| held.contains(&n1.node.partition_of(pid)))
            .expect("a pid there")
    };
    let (a, b) = (on(&n1, "here"), on(&n2, "there"));
    let mut stream = reqwest::Client::new()
        .get(format!("{}/api/v1/messages?key=ask", n1.url))
        .send()
        .await
        .expect("the stream opens");
    assert_eq!(stream.status().as_u16(), 200);
    // A live stream carries what happens after it opens: wait until
    // every partition is attached (announced as SSE comments).
    let mut seen = String::new();
    let attached = read_until(&mut stream, &mut seen, all_attached).await;
    assert!(attached, "{seen}");
    start(&n2, "asking", &a).await;
    start(&n1, "asking", &b).await;
    let got_both = read_until(&mut stream, &mut seen, |seen| {
        seen.contains(&format!("\"pid\":\"{a}\"")) && seen.contains(&format!("\"pid\":\"{b}\""))
    })
    .await;
    assert!(got_both, "the stream through n1 carried both: {seen}");

    // n2 leaves: its partitions move to n1, and the stream follows them.
    let was_n2 = n2.node.held();
    n2.node.leave().await;
    tick_all(&[&n1]).await;
    assert_eq!(n1.node.held().len(), P as usize);
    let c = (0..)
        .map(|i| format!("moved{i}"))
        .find(|pid| was_n2.contains(&n1.node.partition_of(pid)))
        .expect("a pid of a moved partition");
    // The stream attaches to the moved partition again, now on n1.
    let from = seen.len();
    let moved = format!(": partition {} attached\n", n1.node.partition_of(&c));
    let again = read_until(&mut stream, &mut seen, |seen| seen[from..].contains(&moved)).await;
    assert!(again, "{seen}");
    start(&n1, "asking", &c).await;
    let got = read_until(&mut stream, &mut seen, |seen| {
        seen.contains(&format!("\"pid\":\"{c}\""))
    })
    .await;
    assert!(
        got,
        "the stream carried a moved partition's message: {seen}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_channel_spans_the_partitions_and_acks_find_their_delivery() {
    let family = family("t5").await;
    let clock = ManualClock::new(1_000_000);
    let n1 = node(&family, &clock, "n1").await.expect("n1 joins");
    let n2 = node(&family, &clock, "n2").await.expect("n2 joins");
    tick_all(&[&n1, &n2]).await;
    deploy(&n2, ASK).await;
    let held2 = n2.node.held();
    let pid = (0..)
        .map(|i| format!("durable{i}"))
        .find(|pid| held2.contains(&n1.node.partition_of(pid)))
        .expect("a pid on n2");
    let mut stream = reqwest::Client::new()
        .get(format!("{}/api/v1/channels/c1/stream?key=ask", n1.url))
        .send()
        .await
        .expect("the stream opens");
    assert_eq!(stream.status().as_u16(), 200);
    let mut seen = String::new();
    let attached = read_until(&mut stream, &mut seen, all_attached).await;
    assert!(attached, "{seen}");
    start(&n1, "asking", &pid).await;
    let mark = format!("\"pid\":\"{pid}\"");
    let came = read_until(&mut stream, &mut seen, |seen| seen.contains(&mark)).await;
    assert!(
        came,
        "the message of n2's partition came through n1: {seen}"
    );
    let event = seen
        .split("\n\n")
        .find(|e| e.contains(&mark))
        .expect("the event")
        .to_owned();
    let id = event
        .lines()
        .find_map(|l| l.strip_prefix("id: ").or_else(|| l.strip_prefix("id:")))
        .expect("an event id")
        .trim()
        .to_owned();
    // The delivery is n2's partition's; the ack through n1 finds it.
    expect_call(
        reqwest::Method::POST,
        format!("{}/api/v1/channels/c1/ack/{id}", n1.url),
        None,
        204,
    )
    .await;
    expect_call(
        reqwest::Method::POST,
        format!("{}/api/v1/channels/c1/ack/nosuchmessage", n2.url),
        None,
        404,
    )
    .await;
    expect_call(
        reqwest::Method::DELETE,
        format!("{}/api/v1/channels/c1", n2.url),
        None,
        204,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_moves_the_processes_of_every_partition() {
    let family = family("t6").await;
    let clock = ManualClock::new(1_000_000);
    let n1 = node(&family, &clock, "n1").await.expect("n1 joins");
    let n2 = node(&family, &clock, "n2").await.expect("n2 joins");
    tick_all(&[&n1, &n2]).await;
    deploy(&n1, ASK).await;
    let pids: Vec<String> = (0..12).map(|i| format!("mig{i}")).collect();
    for pid in &pids {
        start(&n2, "asking", pid).await;
    }
    let on_n1 = pids
        .iter()
        .filter(|p| n1.node.held().contains(&n1.node.partition_of(p)))
        .count();
    assert!(on_n1 > 0 && on_n1 < pids.len(), "both nodes hold some");
    let v2 =
        format!("{ASK}  - id: after\n    uses: acts.transform.set\n    params: {{ v2: true }}\n");
    deploy(&n2, &v2).await;
    let (status, report) = call(
        reqwest::Method::POST,
        format!("{}/api/v1/models/asking/migrate", n1.url),
        Some(json!({"from": 1, "to": 2})),
    )
    .await;
    assert_eq!(status, 200, "{report}");
    let moved: BTreeSet<String> = report["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .map(|p| p["pid"].as_str().expect("pid").to_owned())
        .collect();
    assert_eq!(moved, pids.iter().cloned().collect(), "{report}");
    for pid in &pids {
        let (_, body) = call(
            reqwest::Method::GET,
            format!("{}/api/v1/processes/{pid}", n2.url),
            None,
        )
        .await;
        assert_eq!(body["process"]["model_rev"], json!(2), "{pid}: {body}");
    }
    // A node's metrics add up its partitions.
    let text = reqwest::get(format!("{}/metrics", n1.url))
        .await
        .expect("metrics answer")
        .text()
        .await
        .expect("text");
    assert!(
        text.contains(&format!("\nacts_processes_admitted {on_n1}\n")),
        "{text}"
    );
    let held = n1.node.held().len();
    assert!(
        text.contains(&format!("\nacts_cluster_partitions_held {held}\n")),
        "{text}"
    );
    assert!(
        text.contains(&format!("\nacts_cluster_partitions {P}\n")),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_fires_once_per_cluster_not_once_per_partition() {
    let family = family("t7").await;
    // Midnight UTC, 2026-12-04: the schedule below fires every minute.
    let clock = ManualClock::new(1_796_342_400_000);
    let n1 = node(&family, &clock, "n1").await.expect("n1 joins");
    let n2 = node(&family, &clock, "n2").await.expect("n2 joins");
    tick_all(&[&n1, &n2]).await;
    deploy(
        &n1,
        r#"
id: minutely
ver: "1"
on:
  - id: every_minute
    kind: schedule
    schedule: "0 * * * * *"
steps:
  - id: wait
    uses: acts.core.irq
    params: { key: tick }
"#,
    )
    .await;
    clock.advance(Duration::from_secs(61));
    let total = count_moved_from(&n2, "minutely", 0).await;
    assert_eq!(
        total,
        json!(1),
        "one start for one firing, on {P} partitions"
    );
    // And it stays one: a firing on another partition, later than the
    // first, would show here (each partition's engine fires on its own).
    for _ in 0..40 {
        let (_, body) = call(
            reqwest::Method::GET,
            format!("{}/api/v1/processes?model=minutely", n1.url),
            None,
        )
        .await;
        assert_eq!(
            body["total"],
            json!(1),
            "a second start for the same firing"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let (_, body) = call(
        reqwest::Method::GET,
        format!("{}/api/v1/processes?model=minutely", n1.url),
        None,
    )
    .await;
    let pid = body["processes"][0]["pid"]
        .as_str()
        .expect("pid")
        .to_owned();
    assert_eq!(
        n1.node.partition_of(&pid),
        0,
        "the schedule's processes live on partition 0"
    );
}

/// The `total` of `model`'s processes once it is no longer `from` (a
/// minute's hang guard).
async fn count_moved_from(n: &Node, model: &str, from: u64) -> Value {
    let mut total = Value::Null;
    for _ in 0..2400 {
        let body = expect_call(
            reqwest::Method::GET,
            format!("{}/api/v1/processes?model={model}", n.url),
            None,
            200,
        )
        .await;
        total = body["total"].clone();
        if total != json!(from) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    total
}

/// The cluster's front is as local as `acts serve` without tokens: a page
/// on another origin can neither deploy nor start, and a request for a
/// name that is not loopback (DNS rebinding) is not answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_front_refuses_other_pages_and_foreign_hosts() {
    let family = family("guard").await;
    let clock = ManualClock::new(1_000_000);
    let a = node(&family, &clock, "a").await.expect("a joins");
    tick_all(&[&a]).await;
    deploy(&a, ASK).await;
    let http = reqwest::Client::new();
    let port = a.url.rsplit(':').next().expect("a port").to_owned();
    // A page's "simple" text/plain POST of a model: 415, nothing deployed.
    let r = http
        .post(format!("{}/api/v1/models", a.url))
        .header("content-type", "text/plain")
        .body(CHILD.to_owned())
        .send()
        .await
        .expect("answers");
    assert_eq!(r.status().as_u16(), 415);
    // The same with the page's origin, as YAML: 403.
    let r = http
        .post(format!("{}/api/v1/models", a.url))
        .header("content-type", "application/yaml")
        .header("origin", "https://evil.example")
        .body(CHILD.to_owned())
        .send()
        .await
        .expect("answers");
    assert_eq!(r.status().as_u16(), 403);
    let (_, models) = call(
        reqwest::Method::GET,
        format!("{}/api/v1/models", a.url),
        None,
    )
    .await;
    assert!(
        !models.to_string().contains("\"child\""),
        "nothing was deployed: {models}"
    );
    // A start as text/plain from a page: refused, no process.
    let r = http
        .post(format!("{}/api/v1/processes", a.url))
        .header("content-type", "text/plain")
        .header("origin", "https://evil.example")
        .body(r#"{"model": "asking", "vars": {"pid": "fromapage"}}"#)
        .send()
        .await
        .expect("answers");
    assert_eq!(r.status().as_u16(), 403);
    let (status, _) = call(
        reqwest::Method::GET,
        format!("{}/api/v1/processes/fromapage", a.url),
        None,
    )
    .await;
    assert_eq!(status, 404, "no process was started");
    // A rebinding page reads with its own name as the Host: 403.
    let r = http
        .get(format!("{}/api/v1/processes", a.url))
        .header("host", format!("evil.example:{port}"))
        .send()
        .await
        .expect("answers");
    assert_eq!(r.status().as_u16(), 403);
    let body: Value = r.json().await.expect("an error body");
    assert_eq!(body["error"]["code"], "forbidden_host", "{body}");
    a.node.leave().await;
}
