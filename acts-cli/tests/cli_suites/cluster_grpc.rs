//! `acts serve --cluster --grpc`: the reference's own client (the real
//! `acts-channel` 0.25.0) drives two cluster nodes on a private Redis
//! Cluster, each call through either node. Tokens are checked on both
//! (`Unauthenticated` without one); a model deployed through one node is
//! started through the other; a durable subscription on one node gets
//! the interrupts of processes on every partition — those the other node
//! owns too — and each is answered through the node it was not started
//! on; the listings are merged over every partition (counts, pages that
//! hold every process once); `proc:start_from_model` and `model:rm` go
//! through the catalog every partition follows; snapshots read back
//! whichever node is asked; and the whole action table is answered or
//! refused by name through a node. The REST routes of the reference's web
//! plugin are routed the same way: a model deployed through one node's
//! `/api/model/deploy` starts through the other's `/api/proc/start`, and
//! one node's `/api/msg/sse` streams the messages of every partition,
//! acked through the other node's `/api/msg/ack`.
//!
//! Built with the `redis` feature only (`scripts/test.sh` runs it).
#![cfg(feature = "redis")]

use crate::support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use acts_channel::model::{Message, ModelInfo, PageData, ProcInfo, TaskInfo};
use acts_channel::{ActsChannel, Vars};
use acts_testkit::redis_cluster::RedisCluster;
use serde_json::{Value, json};
use support::grpc::{code, send, subscribe, token_config, walk_the_table};
use support::nodes::{NodeProc, PARTITIONS, settled_as};
use tokio::sync::mpsc;

const TOKEN: &str = "cluster-grpc-token-of-the-app";

/// One irq step, then one msg step.
const APPROVAL: &str = "id: approval\nname: Approval\nver: '1'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n    params: { key: approve }\n  - id: tell\n    uses: acts.core.msg\n    params: { key: approved }\n";

const LATER: &str = "id: later\nname: Later\nver: '1'\nsteps:\n  - id: wait\n    uses: acts.core.irq\n    params: { key: later }\n";

const PROCESSES: usize = 24;
const WAIT: Duration = Duration::from_secs(60);

fn config(dir: &std::path::Path) -> String {
    token_config(dir, TOKEN)
}

async fn connect(node: &NodeProc) -> ActsChannel {
    let at = node.grpc.as_deref().expect("a gRPC address");
    ActsChannel::connect_with_token(&format!("http://{at}"), Some(TOKEN.to_owned()))
        .await
        .expect("the client connects")
}

/// Subscribes as `client_id` (empty: a live stream) with auto-ack.
async fn next(rx: &mut mpsc::UnboundedReceiver<Message>) -> Message {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("a message within a minute")
        .expect("the subscription is open")
}

/// A listing's options: the first `limit` rows whose `key` equals `value`.
fn filtered(limit: usize, key: &str, value: Value) -> Value {
    json!({"query": {"offset": 0, "limit": limit, "order_by": [],
        "filter": {"type": "and", "exprs": [{"key": key, "value": value, "op": "eq"}]}}})
}

/// The node that owns each partition, as `status` says.
fn owners(status: &Value) -> Vec<String> {
    let mut owners = vec![String::new(); PARTITIONS as usize];
    for p in status["owners"].as_array().expect("owners") {
        let i = p["partition"].as_u64().expect("a partition") as usize;
        owners[i] = p["owner"].as_str().unwrap_or_default().to_owned();
    }
    owners
}

/// Two nodes with tokens and gRPC on a private Redis Cluster, settled;
/// the owner of each partition.
struct Cluster {
    n1: NodeProc,
    n2: NodeProc,
    owners: Vec<String>,
    _dir: tempfile::TempDir,
    _redis: RedisCluster,
}

async fn cluster(name: &str) -> Cluster {
    let redis = RedisCluster::start().expect("a private Redis Cluster");
    let store = redis.store_url(name);
    let dir = tempfile::tempdir().expect("a temporary folder");
    let config = config(dir.path());
    let extra = ["--config", config.as_str(), "--grpc", "127.0.0.1:0"];
    let n1 = NodeProc::spawn_with(&store, "n1", &extra);
    let n2 = NodeProc::spawn_with(&store, "n2", &extra);
    let http = reqwest::Client::new();
    let status = settled_as(&http, &n1.url, &["n1", "n2"], Some(TOKEN)).await;
    Cluster {
        n1,
        n2,
        owners: owners(&status),
        _dir: dir,
        _redis: redis,
    }
}

/// The nodes that own the partitions of `pids`.
fn nodes_of<'a>(owners: &'a [String], pids: &BTreeSet<String>) -> BTreeSet<&'a str> {
    pids.iter()
        .map(|pid| owners[acts_cluster::placement::partition_of(pid, PARTITIONS) as usize].as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_client_drives_a_cluster_through_either_node() {
    // (the store and the config live as long as the bindings)
    let Cluster {
        n1,
        n2,
        owners,
        _dir,
        _redis,
    } = cluster("grpc").await;
    let mut c1 = connect(&n1).await;
    let mut c2 = connect(&n2).await;

    // the token is checked on every node's gRPC server
    for node in [&n1, &n2] {
        let me: Value = send(&mut connect(node).await, "acl:whoami", json!({})).await;
        assert_eq!(me["subject"], "app", "{me}");
        let at = node.grpc.as_deref().expect("gRPC");
        let mut anonymous = ActsChannel::connect(&format!("http://{at}"))
            .await
            .expect("connects");
        let err = anonymous
            .send::<Value>("proc:ls", Vars::new())
            .await
            .expect_err("no token, no listing");
        assert_eq!(code(&err), "Unauthenticated", "{err}");
    }

    // deployed through n1 (the catalog), started through both
    assert_eq!(
        c1.deploy(APPROVAL, None).await.expect("deploys").data,
        Some(true)
    );
    let mut rx = subscribe(&mut c1, "approvals", true).await;
    let mut live = subscribe(&mut c2, "", true).await;
    let mut pids = BTreeSet::new();
    for i in 0..PROCESSES {
        let chan = if i % 2 == 0 { &mut c1 } else { &mut c2 };
        let pid = chan
            .start("approval", Vars::new().with("n", i))
            .await
            .unwrap_or_else(|e| panic!("start {i}: {e}"))
            .data
            .expect("a pid");
        pids.insert(pid);
    }
    assert_eq!(
        nodes_of(&owners, &pids),
        BTreeSet::from(["n1", "n2"]),
        "the processes live on both nodes' partitions"
    );

    // every interrupt reaches n1's durable subscription; each answered
    // through n2
    let mut asked = BTreeSet::new();
    let mut completed = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    while completed.len() < PROCESSES {
        assert!(Instant::now() < deadline, "{} completed", completed.len());
        let m = next(&mut rx).await;
        // the id the client acks names the partition the message came from
        assert!(m.id.contains('~'), "{}", m.id);
        if m.r#type == "act" && m.state == "created" && m.is_params_key("approve") {
            assert!(asked.insert(m.pid.clone()), "each asked once: {}", m.pid);
            c2.complete::<Value>(&m.pid, &m.tid, Vars::new().with("ok", true))
                .await
                .unwrap_or_else(|e| panic!("complete {}: {e}", m.pid));
        } else if m.r#type == "workflow" && m.state == "completed" {
            completed.insert(m.pid.clone());
        }
    }
    assert_eq!(completed, pids);
    // n2's live stream saw every process end too (those n1 owns as well)
    let mut ended = BTreeSet::new();
    while ended.len() < PROCESSES {
        let m = next(&mut live).await;
        if m.r#type == "workflow" && m.state == "completed" {
            ended.insert(m.pid);
        }
    }
    assert_eq!(ended, pids);

    // the listings, merged over every partition
    let all: PageData<ProcInfo> = send(&mut c2, "proc:ls", json!({})).await;
    assert_eq!(all.count, PROCESSES);
    assert!(
        all.rows
            .iter()
            .all(|p| p.state == "completed" && p.name == "Approval")
    );
    let mut paged = BTreeSet::new();
    for page_no in 0..3 {
        let page: PageData<ProcInfo> = send(
            &mut c1,
            "proc:ls",
            json!({"query": {"offset": page_no * 10, "limit": 10, "order_by": []}}),
        )
        .await;
        assert_eq!((page.page_num, page.page_count), (page_no + 1, 3));
        for p in page.rows {
            assert!(paged.insert(p.id.clone()), "{} on two pages", p.id);
        }
    }
    assert_eq!(paged, pids, "the pages hold every process once");
    let pid = pids.iter().next().expect("a pid").clone();
    let one: ProcInfo = send(&mut c1, "proc:get", json!({"pid": pid})).await;
    assert_eq!(
        (one.mid.as_str(), one.state.as_str()),
        ("approval", "completed")
    );
    let tasks: PageData<TaskInfo> =
        send(&mut c2, "task:ls", filtered(100, "pid", json!(pid))).await;
    assert!(
        tasks.count >= 3 && tasks.rows.iter().all(|t| t.pid == pid),
        "{tasks:?}"
    );
    let acts: PageData<TaskInfo> =
        send(&mut c1, "task:ls", filtered(1000, "type", json!("act"))).await;
    assert_eq!(acts.count, 2 * PROCESSES, "an ask and a tell each");

    // a model started from its text through n2: in n1's catalog, running
    let pid: String = send(
        &mut c2,
        "proc:start_from_model",
        json!({"fmt": "yaml", "model": LATER}),
    )
    .await;
    let models: PageData<ModelInfo> = send(&mut c1, "model:ls", json!({})).await;
    let ids: BTreeSet<&str> = models.rows.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, BTreeSet::from(["approval", "later"]));
    let p: ProcInfo = send(&mut c1, "proc:get", json!({"pid": pid})).await;
    assert_eq!(p.mid, "later");
    // removed through n1: gone from every partition n2 lists
    let removed: bool = send(&mut c1, "model:rm", json!({"id": "later"})).await;
    assert!(removed);
    let deadline = Instant::now() + WAIT;
    loop {
        let models: PageData<ModelInfo> = send(&mut c2, "model:ls", json!({})).await;
        if models.rows.iter().all(|m| m.id != "later") {
            break;
        }
        assert!(Instant::now() < deadline, "the removal reached n2");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // snapshots: written through one node, read through the other
    let ok: bool = send(
        &mut c1,
        "snap:upsert",
        json!({"name": "profile", "scope": "u1", "rev": 3, "data": {"tier": "gold"}}),
    )
    .await;
    assert!(ok);
    let got: Value = send(
        &mut c2,
        "snap:get",
        json!({"name": "profile", "scope": "u1"}),
    )
    .await;
    assert_eq!(got["data"]["tier"], "gold", "{got}");

    // the durable subscription's deliveries: listed, and every one acked
    // by the client's auto-ack (each ack sent to the partition its id
    // names; the last may still be on its way)
    let delivered: PageData<Value> = send(
        &mut c2,
        "msg:ls",
        json!({"query": {"offset": 0, "limit": 1000, "order_by": []}}),
    )
    .await;
    assert!(delivered.count >= PROCESSES, "{}", delivered.count);
    // each listed id names its partition: an action on it goes there alone
    for row in &delivered.rows {
        let id = row["id"].as_str().expect("an id");
        assert!(
            acts_server::ack_partition(id).is_some_and(|p| p < PARTITIONS),
            "{id} names no partition"
        );
    }
    let first = &delivered.rows[0];
    let got: Value = send(&mut c1, "msg:get", json!({"id": first["id"]})).await;
    assert_eq!(got["tid"], first["tid"], "{got}");
    let deadline = Instant::now() + WAIT;
    loop {
        let pending: PageData<Value> = send(
            &mut c2,
            "msg:ls",
            filtered(1000, "status", json!("pending")),
        )
        .await;
        if pending.count == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still pending: {:?}",
            pending.rows
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    walk_the_table(&mut c2).await;
    let err = c1
        .send::<Value>("act:set_varz", Vars::new())
        .await
        .expect_err("an unknown name");
    assert_eq!(code(&err), "NotFound", "{err}");
}

/// A POST of the plugin's REST routes through `node`, with the token; its
/// envelope's `data` (asserting `code: ok`).
async fn rest(http: &reqwest::Client, node: &NodeProc, path: &str, body: Value) -> Value {
    let resp = http
        .post(format!("{}{path}", node.url))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let status = resp.status();
    let v: Value = resp.json().await.expect("a JSON envelope");
    assert!(
        status.is_success() && v["code"] == "ok",
        "{path}: {status} {v}"
    );
    v["data"].clone()
}

/// The plugin's SSE stream: its events' data, as they come.
fn sse(resp: reqwest::Response) -> mpsc::UnboundedReceiver<Value> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut resp = resp;
        let mut pending = String::new();
        while let Ok(Some(chunk)) = resp.chunk().await {
            pending.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = pending.find("\n\n") {
                let event: String = pending.drain(..end + 2).collect();
                let data: String = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if let Ok(v) = serde_json::from_str::<Value>(&data) {
                    let _ = tx.send(v);
                }
            }
        }
    });
    rx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_plugins_routes_are_routed_over_the_cluster() {
    // (the store and the config live as long as the bindings)
    let Cluster {
        n1,
        n2,
        owners,
        _dir,
        _redis,
    } = cluster("rest").await;
    let http = reqwest::Client::new();
    // a model through n2's REST route: in every partition's catalog
    let deployed = rest(
        &http,
        &n2,
        "/api/model/deploy",
        json!({"fmt": "yml", "model": APPROVAL}),
    )
    .await;
    assert_eq!(deployed, json!(true));
    let mut c1 = connect(&n1).await;
    let models: PageData<ModelInfo> = send(&mut c1, "model:ls", json!({})).await;
    assert!(models.rows.iter().any(|m| m.id == "approval"), "{models:?}");

    // n2's stream of the plugin: the messages of every partition
    let resp = http
        .get(format!(
            "{}/api/msg/sse?id=web&type=act&state=created",
            n2.url
        ))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("the stream opens");
    assert!(resp.status().is_success(), "{}", resp.status());
    let mut events = sse(resp);
    let mut pids = BTreeSet::new();
    for i in 0..PROCESSES {
        let pid = rest(
            &http,
            &n1,
            "/api/proc/start",
            json!({"mode": "id", "id": "approval", "options": {"n": i}}),
        )
        .await;
        pids.insert(pid.as_str().expect("a pid").to_owned());
    }
    assert_eq!(nodes_of(&owners, &pids), BTreeSet::from(["n1", "n2"]));
    let mut asked = BTreeSet::new();
    while asked.len() < PROCESSES {
        let m = tokio::time::timeout(WAIT, events.recv())
            .await
            .expect("an event within a minute")
            .expect("the stream is open");
        if m["type"] == "act" && pids.contains(m["pid"].as_str().unwrap_or_default()) {
            // acked through the other node: the partition that has it
            let acked = rest(&http, &n1, "/api/msg/ack", json!({"id": m["id"]})).await;
            assert_eq!(acked, Value::Null);
            asked.insert(m["pid"].as_str().unwrap_or_default().to_owned());
        }
    }
    assert_eq!(asked, pids);
    // an unknown message is not acked anywhere
    let resp = http
        .post(format!("{}/api/msg/ack", n2.url))
        .bearer_auth(TOKEN)
        .json(&json!({"id": "nothing:grpc:app:acts-flow-client-web"}))
        .send()
        .await
        .expect("answers");
    assert_eq!(resp.status().as_u16(), 404);
    let v: Value = resp.json().await.expect("an envelope");
    assert_eq!(v["code"], "error", "{v}");

    // a start from a model's text through n2: deployed everywhere, started
    let pid = rest(
        &http,
        &n2,
        "/api/proc/start",
        json!({"mode": "model", "fmt": "yml", "model": LATER, "options": {}}),
    )
    .await;
    let p: ProcInfo = send(&mut c1, "proc:get", json!({"pid": pid})).await;
    assert_eq!(p.mid, "later");
    // sealed data through the plugin's routes of either node
    let ok = rest(
        &http,
        &n1,
        "/api/snap/upsert",
        json!({"name": "profile", "scope": "u2", "rev": 1, "data": {"tier": "silver"}}),
    )
    .await;
    assert_eq!(ok, json!(true));
    let got = rest(
        &http,
        &n2,
        "/api/snap/get",
        json!({"name": "profile", "scope": "u2"}),
    )
    .await;
    assert_eq!(got["data"]["tier"], "silver", "{got}");
}
